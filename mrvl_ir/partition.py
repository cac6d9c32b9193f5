"""Partition a Relax module into MLIP regions (functions with `Codegen="mrvl"`).

The pattern table says what the MLIP compiler accepts; each pattern's check rejects what the
compiler's Relax importer would not handle, so that an unsupported op stays on the host
instead of failing the build. The composite names and what each composite may contain are a
contract with `relax_import.py`:

    mrvl.conv2d            [pad] conv2d [[+bias] batch_norm] [steps] [activation]
    mrvl.conv_transpose    conv2d_transpose [+bias] [activation] (zero insertion + conv2d)
    mrvl.resize            resize2d, linear (bilinear) or a nearest that is no strided copy
    mrvl.fc                [*alpha] matmul [steps] [activation], [N, K] or [N, T, K] rows
    mrvl.add               add(a, b) of two same-shape tensors [activation]
    mrvl.mul               multiply(a, b) of two same-shape tensors, or of x and a gate
                           [N, C, 1, 1] (either side) [activation]
    mrvl.scale_shift       x steps [activation] | activation(x)
    mrvl.maxpool2d, mrvl.avgpool2d, mrvl.global_avgpool2d (mean), mrvl.global_maxpool2d (max)
    mrvl.concat            concat on any axis, ranks 2 to 4
    mrvl.reshape           reshape / squeeze / flatten between rank 4 and rank 2
    mrvl.transpose         permute_dims NCHW <-> NHWC
    mrvl.copy              a chain of 1 to 3 data-movement ops (reshape, squeeze, expand_dims,
                           flatten, permute_dims, strided_slice, nearest resize2d) that is a
                           strided copy (`strided.py`): slices, split outputs, transposes,
                           channel shuffles, integer nearest upsampling
    steps                  up to 3 of +c, -c, c-, *c, /c, with c per channel or scalar, on
                           either side where the op commutes (folded into scale and shift)
    activation             relu | clip(min, max) | leakyrelu | prelu | sigmoid | tanh |
                           SiLU, HardSwish and Mish as TVM writes them (activation_forms.py)

Optional trailing parts are alternatives inside one pattern: FuseOpsByPattern grows a match
binding by binding, so a trailing part that fails its check is simply left out. An optional
*leading* part (the pad before a conv, Gemm's alpha before a matmul) cannot be left out that
way, so those layers are registered twice under the same composite name, with the leading
part first: a conv whose pad is unsupported is still offloaded, without its pad.

While `partition_for_mrvl` runs, every check that rejects a match records why, keyed by the
ONNX node it blames (from the span `mrvl.from_onnx` put on each call). The reasons of the
nodes left on the CPU are stored on the result as the module attribute
`mrvl.partition_reasons` (node name → reason), which `mrvl.partition_report` reads.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
import tvm
from tvm import relax
from tvm.ir.expr import GenericConst
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix, register_patterns
from tvm.relax.backend.utils import has_leaking_intermediate_variables
from tvm.relax.dpl import DFPattern, is_const, is_op, is_tuple_get_item, wildcard
from tvm.relax.transform import PatternCheckContext

from .activation_forms import ActivationFormError, split_activation
from . import strided
from .frontend import fold_constants, node_name_of, onnx_nodes_of
from .placement import CPU, node_targets
from .target import Target, get_target

__all__ = [
    "LAYER_OPS",
    "MAC_COMPOSITES",
    "MAX_BATCH",
    "REASONS_ATTR",
    "REGION_PREFIX",
    "TILE_COUNTS",
    "partition_for_mrvl",
    "partition_reasons",
    "validate_target_options",
]

MAX_BATCH = 8
"""Largest batch (N) a region accepts: the MLIP processes batches of up to 8."""

TILE_COUNTS = (1, 2, 4, 8)
"""Tile counts the compiler can split a layer across."""

REGION_PREFIX = "mrvl_region_"
"""Regions are named mrvl_region_0, _1, ... in the order `main` calls them."""

REASONS_ATTR = "mrvl.partition_reasons"
"""Module attribute: ONNX node name → why that node stayed on the CPU."""

LAYER_OPS = frozenset(
    {
        "relax.nn.pad", "relax.nn.conv2d", "relax.add", "relax.multiply", "relax.nn.batch_norm",
        "relax.nn.relu", "relax.clip", "relax.nn.leakyrelu", "relax.matmul",
        "relax.nn.max_pool2d", "relax.nn.avg_pool2d", "relax.mean", "relax.max", "relax.concat",
        "relax.reshape", "relax.squeeze", "relax.flatten", "relax.permute_dims",
        "relax.subtract", "relax.divide", "relax.sigmoid", "relax.tanh", "relax.nn.prelu",
        "relax.exp", "relax.log",
        "relax.expand_dims", "relax.strided_slice", "relax.image.resize2d",
        "relax.nn.conv2d_transpose",
    }
)  # fmt: skip
"""Every Relax op some pattern contains; a node with any other op cannot be offloaded."""

MAC_COMPOSITES = ("mrvl.conv2d", "mrvl.conv_transpose", "mrvl.fc")
"""The layers that use the MAC arrays; `require_mac_layer` wants one in every region."""

DENIED_NODE = "denied by user (deny_nodes)"
DENIED_OP = "denied by user (deny_ops)"
NO_MAC_LAYER = "region without conv/fc (require_mac_layer)"
FORCED_REASONS = (DENIED_NODE, DENIED_OP, NO_MAC_LAYER)

_CODEGEN = "mrvl"


def validate_target_options(mcpu: str, num_tiles: int) -> Target:
    """Check an (mcpu, num_tiles) pair and return the target; ValueError with the reason."""
    target = get_target(mcpu)  # UnknownTargetError (a ValueError) lists the known ones
    if isinstance(num_tiles, bool) or not isinstance(num_tiles, int):
        raise ValueError(f"num_tiles must be an int, got {num_tiles!r}")
    if num_tiles not in TILE_COUNTS:
        raise ValueError(f"num_tiles must be one of {TILE_COUNTS}, got {num_tiles}")
    if num_tiles > target.max_tiles:
        raise ValueError(
            f"num_tiles={num_tiles} exceeds the {target.max_tiles} tiles of mcpu '{mcpu}'"
        )
    return target


def partition_for_mrvl(
    mod: tvm.IRModule,
    *,
    mcpu: str = "cn10ka",
    num_tiles: int = 8,
    deny_nodes: Iterable[str] = (),
    deny_ops: Iterable[str] = (),
    require_mac_layer: bool = False,
) -> tvm.IRModule:
    """Group the MLIP-supported parts of `mod` into region functions for `relax.ext.mrvl`.

    Each region gets `Codegen="mrvl"`, a `global_symbol` `mrvl_region_<i>`, and the attrs
    `mrvl.mcpu` and `mrvl.num_tiles` that the codegen hook compiles it for.

    - `deny_nodes`: ONNX node names, `deny_ops`: ONNX op types ("Conv", "MaxPool") to keep
      on the CPU, each node whole: no layer that contains any call of theirs is formed, so a
      denied Conv's bias add is not offloaded on its own either. `deny_ops` needs the op types
      `mrvl.from_onnx` records on the module.
    - `require_mac_layer`: a region without a conv or fc layer goes back to the CPU (the
      upstream backend's behaviour): its nodes are denied and the module partitioned again,
      until every region has one.

    Why each node stayed on the CPU is stored as the module attribute `mrvl.partition_reasons`.
    """
    validate_target_options(mcpu, num_tiles)
    forced = _denied_nodes(mod, deny_nodes, deny_ops)
    # The patterns want folded constants (TVM's importer leaves reshape(bias), permute_dims(W)
    # on them). A module from mrvl.from_onnx is folded already.
    mod = fold_constants(mod)
    bound = _bound_values(mod)
    op_types = onnx_nodes_of(mod) or {}
    while True:
        collector = _Collector(forced, bound, op_types=op_types, users=_users(bound))
        token = _COLLECTOR.set(collector)
        try:
            partitioned = _fuse(mod)
        finally:
            _COLLECTOR.reset(token)
        without_mac = _nodes_of_regions_without_mac(partitioned) if require_mac_layer else []
        if not without_mac:
            break
        forced = {**forced, **{name: NO_MAC_LAYER for name in without_mac}}

    for index, gvar in enumerate(_regions_in_call_order(partitioned)):
        partitioned[gvar] = (
            partitioned[gvar]
            .with_attr("global_symbol", f"{REGION_PREFIX}{index}")
            .with_attr("mrvl.mcpu", mcpu)
            .with_attr("mrvl.num_tiles", num_tiles)
        )
    # TVM names a merged region after every op in it (hundreds of characters on VGG-19);
    # NormalizeGlobalVar renames each region to its short global_symbol, calls included.
    partitioned = relax.transform.NormalizeGlobalVar()(partitioned)
    targets = node_targets(partitioned)
    reasons = {
        name: reason
        for name, reason in collector.reasons().items()
        if targets.get(name, CPU) == CPU
    }
    return partitioned.with_attr(REASONS_ATTR, reasons)


def partition_reasons(mod: tvm.IRModule) -> dict[str, str]:
    """The `mrvl.partition_reasons` of a partitioned module (empty if it has none)."""
    if mod.attrs is None or REASONS_ATTR not in mod.attrs:
        return {}
    return {str(k): str(v) for k, v in mod.attrs[REASONS_ATTR].items()}


def _fuse(mod: tvm.IRModule) -> tvm.IRModule:
    """Fuse the patterns and merge neighbouring layers into regions.

    TVM 0.27's MergeCompositeFunctions rejects a module holding a MatchCast binding (the
    ONNX importer emits one for shapes computed at run time, e.g. Squeeze with run-time
    axes). Such a module gets one region per layer instead: FuseOpsByPattern's own
    codegen annotation.
    """
    patterns = get_patterns_with_prefix(_CODEGEN + ".")
    if _has_match_cast(mod):
        return relax.transform.FuseOpsByPattern(
            patterns, bind_constants=True, annotate_codegen=True
        )(mod)
    seq = tvm.transform.Sequential(
        [
            relax.transform.FuseOpsByPattern(patterns, bind_constants=True, annotate_codegen=False),
            relax.transform.MergeCompositeFunctions(),
        ]
    )
    return seq(mod)


def _has_match_cast(mod: tvm.IRModule) -> bool:
    return any(
        isinstance(binding, relax.MatchCast)
        for func in mod.functions.values()
        if isinstance(func, relax.Function)
        for block in func.body.blocks
        for binding in block.bindings
    )


def _names(values: Iterable[str] | str, what: str) -> list[str]:
    if isinstance(values, str):
        return [values]
    names = list(values)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"{what} must be strings, got {names!r}")
    return names


def _denied_nodes(mod: tvm.IRModule, deny_nodes, deny_ops) -> dict[str, str]:
    """Node name → reason for every node the user keeps on the CPU."""
    nodes, ops = _names(deny_nodes, "deny_nodes"), _names(deny_ops, "deny_ops")
    if not nodes and not ops:
        return {}
    op_types = onnx_nodes_of(mod)
    known = set(op_types) if op_types is not None else set(_span_names(mod))
    unknown = [n for n in nodes if n not in known]
    if unknown:
        raise ValueError(f"deny_nodes: no ONNX node named {', '.join(map(repr, unknown))}")
    forced = dict.fromkeys(nodes, DENIED_NODE)
    if ops:
        if op_types is None:
            raise ValueError(
                "deny_ops needs the op type of every node: import the model with mrvl.from_onnx"
            )
        present = set(op_types.values())
        bad = [op for op in ops if op not in present and not onnx.defs.has(op)]
        if bad:
            raise ValueError(f"deny_ops: {', '.join(map(repr, bad))} is not an ONNX operator")
        for name, op_type in op_types.items():
            if op_type in ops:
                forced.setdefault(name, DENIED_OP)
    return forced


def _span_names(mod_or_func: tvm.IRModule | relax.Function) -> list[str]:
    """The ONNX node names on the calls of a module or function, in visiting order."""
    names: list[str] = []

    def visit(expr) -> None:
        if isinstance(expr, relax.Call) and (name := node_name_of(expr)):
            names.append(name)

    if isinstance(mod_or_func, tvm.IRModule):
        funcs = list(mod_or_func.functions.values())
    else:
        funcs = [mod_or_func]
    for func in funcs:
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return names


def _is_region(func) -> bool:
    return (
        isinstance(func, relax.Function)
        and func.attrs is not None
        and func.attrs.get("Codegen") == _CODEGEN
    )


def _regions_in_call_order(mod: tvm.IRModule) -> list[tvm.ir.GlobalVar]:
    regions = {gv for gv, func in mod.functions_items() if _is_region(func)}
    ordered: list[tvm.ir.GlobalVar] = []

    def visit(expr) -> None:
        if isinstance(expr, relax.Call) and expr.op in regions and expr.op not in ordered:
            ordered.append(expr.op)

    relax.analysis.post_order_visit(mod["main"], visit)
    return ordered + sorted(regions - set(ordered), key=lambda gv: gv.name_hint)


def _composites(region: relax.Function) -> list[relax.Function]:
    return [
        b.value
        for block in region.body.blocks
        for b in block.bindings
        if isinstance(b.value, relax.Function)
    ]


def _nodes_of_regions_without_mac(mod: tvm.IRModule) -> list[str]:
    names: list[str] = []
    for _, func in mod.functions_items():
        if not _is_region(func):
            continue
        kinds = {str(c.attrs["Composite"]) for c in _composites(func) if c.attrs is not None}
        if kinds.isdisjoint(MAC_COMPOSITES):
            names += _span_names(func)
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------------------------------------
# Why a match was rejected: a collector active while partition_for_mrvl runs.


@dataclass
class _Collector:
    """Reasons recorded by the checks during one partitioning.

    A rejection blames one node (the culprit: the conv whose batch is too large, the clip
    whose bounds are bad) and involves every node of the match. The culprit's reason wins
    over one a node got as a bystander ("... (at <culprit>)"); the first reason recorded wins
    over later ones; a user's deny wins over everything.
    """

    forced: dict[str, str]
    bound: dict[relax.Var, relax.Expr] = field(default_factory=dict)
    users: dict[relax.Var, list[relax.Call]] = field(default_factory=dict)
    """Each variable of the module's functions and the calls that read it."""
    op_types: dict[str, str] = field(default_factory=dict)
    """ONNX node name -> op type (`mrvl.onnx_nodes`), empty for a module without it."""
    """Each variable of the module's functions and the value bound to it (a check sees only
    its match; the scale_shift check asks what produced its input)."""
    culprits: dict[str, str] = field(default_factory=dict)
    bystanders: dict[str, str] = field(default_factory=dict)

    def reject(self, culprit: str | None, reason: str, involved: Sequence[str]) -> None:
        if culprit is not None:
            self.culprits.setdefault(culprit, reason)
        for name in involved:
            if name != culprit:
                self.bystanders.setdefault(name, f"{reason} (at {culprit})" if culprit else reason)

    def reasons(self) -> dict[str, str]:
        return {**self.bystanders, **self.culprits, **self.forced}


_COLLECTOR: contextvars.ContextVar[_Collector | None] = contextvars.ContextVar(
    "mrvl_partition_collector", default=None
)


class _Reject(Exception):
    """Raised by a check: `reason` why the match cannot be a layer, blaming the call `at`."""

    def __init__(self, reason: str, at: relax.Expr | None = None):
        super().__init__(reason)
        self.reason = reason
        self.at = at


def _checked(check: Callable[[PatternCheckContext], None]) -> Callable[[PatternCheckContext], bool]:
    """A FusionPattern check from `check`, which raises `_Reject` for an unsupported match.

    A match that contains any call of a denied node is rejected first, so a denied node stays
    on the CPU whole.
    """

    def run(ctx: PatternCheckContext) -> bool:
        collector = _COLLECTOR.get()
        involved = list(
            dict.fromkeys(
                name
                for expr in ctx.matched_bindings.values()
                if (name := node_name_of(expr)) is not None
            )
        )
        if collector is not None:
            for name in involved:
                if name in collector.forced:
                    collector.reject(name, collector.forced[name], involved)
                    return False
        try:
            check(ctx)
        except _Reject as rejection:
            if collector is not None:
                at = rejection.at if rejection.at is not None else ctx.matched_expr
                collector.reject(node_name_of(at), rejection.reason, involved)
            return False
        return True

    run.__name__ = run.__qualname__ = check.__name__
    run.__doc__ = check.__doc__
    return run


# ---------------------------------------------------------------------------------------------
# Check helpers. Each raises _Reject with a reason a user can act on.


def _tensor_shape(expr: relax.Expr, at: relax.Expr) -> tuple[int, ...]:
    """The static shape of a float32 tensor."""
    ty = expr.ty
    if not isinstance(ty, relax.TensorType):
        raise _Reject(f"not a tensor ({type(ty).__name__})", at)
    if str(ty.dtype) != "float32":
        raise _Reject(f"dtype {ty.dtype}", at)
    dims = getattr(ty.shape, "values", None)
    if dims is None or not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        raise _Reject("dynamic shape", at)
    return tuple(int(d) for d in dims)


def _activation(
    expr: relax.Expr, ranks: Sequence[int], at: relax.Expr, *, any_batch: bool = False
) -> tuple[int, ...]:
    """The shape of a runtime float32 tensor of one of `ranks` with batch ≤ MAX_BATCH (any
    batch if `any_batch`: an FC's rows, a strided copy's outer dimension)."""
    if isinstance(expr, GenericConst):
        raise _Reject("constant input", at)
    shape = _tensor_shape(expr, at)
    if len(shape) not in ranks:
        raise _Reject(f"rank {len(shape)}", at)
    if shape[0] < 1 or (not any_batch and shape[0] > MAX_BATCH):
        raise _Reject(f"batch {shape[0]} > {MAX_BATCH}" if shape[0] else "batch 0", at)
    return shape


def _constant(expr: relax.Expr, what: str, at: relax.Expr) -> np.ndarray:
    if not isinstance(expr, GenericConst):
        raise _Reject(f"non-constant {what}", at)
    _tensor_shape(expr, at)
    return expr.value.numpy()


def _f32_result(call: relax.Call) -> None:
    out_dtype = str(getattr(call.attrs, "out_dtype", "") or "")
    if out_dtype not in ("", "float32", "void", "None"):
        raise _Reject(f"dtype {out_dtype}", call)


def _no_leaks(ctx: PatternCheckContext) -> None:
    if has_leaking_intermediate_variables(ctx):
        raise _Reject("an intermediate result is also used outside the layer", ctx.matched_expr)


def _prim_float(expr) -> float | None:
    value = getattr(expr, "value", expr)
    value = getattr(value, "value", value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


_STEP_OPS = frozenset({"relax.add", "relax.subtract", "relax.multiply", "relax.divide"})
"""A layer's affine steps: x+c, c+x, x-c, c-x, x*c, c*x, x/c with c per channel or scalar."""

_MAX_AFFINE_STEPS = 3


def _check_tail(
    ctx: PatternCheckContext,
    core: Sequence[relax.Expr],
    channels: int,
    rank: int,
    *,
    prelu: bool,
) -> None:
    """Everything a match holds besides its `core` calls must be an affine step or the fused
    activation, exactly as `relax_import` reads them (both use `split_activation`)."""
    bindings = ctx.matched_bindings
    outer = _enclosing_activation(ctx, ctx.matched_expr)
    if outer is not None:
        raise _Reject(f"part of the activation {outer.kind} that follows", ctx.matched_expr)
    try:
        form, _ = split_activation(ctx.matched_expr, lambda e: bindings.get(e, e))
    except ActivationFormError as e:
        raise _Reject(e.reason, e.at) from None
    explained = list(core)
    if form is not None:
        explained += form.calls
        if form.kind == "prelu":
            if not prelu:
                raise _Reject("PRelu after this layer (no per-channel slopes here)", form.calls[-1])
            if form.params["slopes"].size not in (1, channels):
                raise _Reject(f"{form.params['slopes'].size} PRelu slopes", form.calls[-1])
    for call in bindings.values():
        if not isinstance(call, relax.Call) or any(call.same_as(c) for c in explained):
            continue
        name = _op_name(call)
        if name not in _STEP_OPS:
            raise _Reject(f"{name} is not part of a layer the MLIP computes", call)
        consts = [a for a in call.args if isinstance(a, GenericConst)]
        if len(consts) != 1:
            raise _Reject(f"{name.split('.')[-1]} of two tensors inside a layer", call)
        if name == "relax.divide" and not isinstance(call.args[1], GenericConst):
            raise _Reject("division of a constant by a tensor", call)
        _channel_const(consts[0], channels, rank, name.split(".")[-1] + " constant", call)


def _channel_const(expr, channels: int, rank: int, what: str, at) -> None:
    """A constant broadcast per channel (axis 1) or as a scalar onto a rank-`rank` tensor."""
    shape = _constant(expr, what, at).shape
    per_channel = (1, channels) + (1,) * (rank - 2)
    scalar = len(shape) <= rank and all(d == 1 for d in shape)
    if not (scalar or shape == per_channel or shape == per_channel[1:]):
        raise _Reject(f"{what} shape {shape}", at)


def _int_list(values) -> list[int] | None:
    return None if values is None else [int(v) for v in values]


# ---------------------------------------------------------------------------------------------
# Checks, one per layer.


def _check_conv2d(ctx: PatternCheckContext) -> None:
    ann = ctx.annotated_expr
    conv = ann["conv"]
    _no_leaks(ctx)
    attrs = conv.attrs
    _activation(ann["data"], (4,), conv)
    if "pad" in ann:
        _check_pad(ann["pad"])
    if (attrs.data_layout, attrs.kernel_layout, attrs.out_layout) != ("NCHW", "OIHW", "NCHW"):
        raise _Reject(f"layout {attrs.data_layout}/{attrs.kernel_layout}", conv)
    _f32_result(conv)
    weight = _constant(ann["weight"], "weights", conv)
    if weight.ndim != 4:
        raise _Reject(f"weight rank {weight.ndim}", conv)
    channels = _tensor_shape(conv.args[0], conv)[1]
    out_ch, groups = weight.shape[0], int(attrs.groups)
    if channels % groups or out_ch % groups or weight.shape[1] * groups != channels:
        raise _Reject(f"attribute group={groups}", conv)
    core = [conv] + [ann[k] for k in ("pad", "bn") if k in ann]
    if "bn" in ann:
        bn = ann["bn"]
        if bool(bn.attrs.training) or int(bn.attrs.axis) not in (1, -3):
            raise _Reject("batch norm in training mode or not on channels", bn)
        for param in bn.args[1:]:
            if _constant(param, "batch-norm parameters", bn).shape != (out_ch,):
                raise _Reject("batch-norm parameter shape", bn)
    _check_tail(ctx, core, out_ch, 4, prelu=True)


def _check_conv_transpose(ctx: PatternCheckContext) -> None:
    """A transposed conv the importer lowers to zero insertion plus an ordinary conv: its
    pads become the conv's padding `dilation * (k - 1) - pad`, which must not be negative."""
    ann = ctx.annotated_expr
    conv = ann["conv"]
    _no_leaks(ctx)
    attrs = conv.attrs
    _activation(ann["data"], (4,), conv)
    if (attrs.data_layout, attrs.kernel_layout, attrs.out_layout) != ("NCHW", "IOHW", "NCHW"):
        raise _Reject(f"layout {attrs.data_layout}/{attrs.kernel_layout}", conv)
    _f32_result(conv)
    weight = _constant(ann["weight"], "weights", conv)
    if weight.ndim != 4:
        raise _Reject(f"weight rank {weight.ndim}", conv)
    channels = _tensor_shape(conv.args[0], conv)[1]
    groups = int(attrs.groups)
    if weight.shape[0] != channels or channels % groups:
        raise _Reject(f"attribute group={groups}", conv)
    kernel = weight.shape[2:]
    dilation, pads = _int_list(attrs.dilation), _int_list(attrs.padding)
    for axis, (k, d) in enumerate(zip(kernel, dilation)):
        extent = d * (k - 1)
        if pads[axis] > extent or pads[axis + 2] > extent:
            raise _Reject(f"pads {pads} beyond the kernel's extent {extent}", conv)
    _check_tail(ctx, [conv], weight.shape[1] * groups, 4, prelu=True)


def _check_pad(pad: relax.Call) -> None:
    attrs = pad.attrs
    if str(attrs.pad_mode) != "constant":
        raise _Reject(f"attribute mode={attrs.pad_mode}", pad)
    if float(attrs.pad_value) != 0.0:
        raise _Reject(f"attribute constant_value={float(attrs.pad_value):g}", pad)
    widths = _int_list(attrs.pad_width)
    if any(w < 0 for w in widths):
        raise _Reject("negative pads", pad)
    if any(widths[:4]):
        raise _Reject("pads on the batch or channel axis", pad)


def _check_pool2d(ctx: PatternCheckContext) -> None:
    pool = ctx.annotated_expr["root"]
    attrs = pool.attrs
    _activation(ctx.annotated_expr["data"], (4,), pool)
    if (attrs.layout, attrs.out_layout) != ("NCHW", "NCHW"):
        raise _Reject(f"layout {attrs.layout}", pool)
    dilation = _int_list(attrs.dilation)
    if any(d != 1 for d in dilation):
        raise _Reject(f"attribute dilations={dilation}", pool)


def _check_global_pool2d(ctx: PatternCheckContext) -> None:
    reduce = ctx.annotated_expr["root"]
    _activation(ctx.annotated_expr["data"], (4,), reduce)
    axes = _int_list(reduce.attrs.axis)
    if axes is None or sorted(a % 4 for a in axes) != [2, 3]:
        raise _Reject(f"attribute axes={axes if axes is not None else 'all'}", reduce)
    if not bool(reduce.attrs.keepdims):
        raise _Reject("attribute keepdims=0", reduce)


def _check_fc(ctx: PatternCheckContext) -> None:
    ann = ctx.annotated_expr
    matmul = ann["matmul"]
    _no_leaks(ctx)
    # rows are tiled: any number, also a sequence [N, T, K] (its rows are N * T)
    data_shape = _activation(ann["data"], (2, 3), matmul, any_batch=True)
    k = data_shape[-1]
    _f32_result(matmul)
    weight = _constant(ann["weight"], "weights (right operand)", matmul)
    if weight.ndim != 2 or weight.shape[0] != k:
        raise _Reject(f"weight shape {weight.shape}", matmul)
    core = [matmul]
    if "scale" in ann:
        if _constant(ann["alpha"], "alpha", ann["scale"]).size != 1:
            raise _Reject("alpha is not a scalar", ann["scale"])
        core.append(ann["scale"])
    # the FC's channels are its last axis: constants broadcast as [O], [1, O] or a scalar
    _check_tail(ctx, core, weight.shape[1], 2, prelu=False)


def _check_add(ctx: PatternCheckContext) -> None:
    ann = ctx.annotated_expr
    add = ann["add"]
    _no_leaks(ctx)
    lhs = _activation(add.args[0], (2, 4), add)
    rhs = _activation(add.args[1], (2, 4), add)
    if lhs != rhs:
        raise _Reject(f"broadcast add {lhs} + {rhs}", add)
    _check_tail(ctx, [add], lhs[1], len(lhs), prelu=False)


def _check_mul(ctx: PatternCheckContext) -> None:
    """A product of two tensors of one shape, or of x [N, C, H, W] and a gate s [N, C, 1, 1]
    (either way round): the squeeze-excitation gate."""
    ann = ctx.annotated_expr
    mul = ann["mul"]
    _no_leaks(ctx)
    _whole_onnx_ops(ctx, _AFFINE_ONNX_OPS)
    lhs = _activation(mul.args[0], (2, 4), mul)
    rhs = _activation(mul.args[1], (2, 4), mul)
    form, _ = split_activation(mul, lambda e: _bound(ctx, e))
    if form is not None:
        raise _Reject(f"the product is the activation {form.kind} of a layer", mul)
    if lhs != rhs:
        small, big = sorted((lhs, rhs), key=lambda shape: np.prod(shape))
        if len(big) != 4 or len(small) != 4 or small != (big[0], big[1], 1, 1):
            raise _Reject(f"broadcast multiply {lhs} * {rhs}", mul)
    big = max(lhs, rhs, key=lambda shape: np.prod(shape))
    _check_tail(ctx, [mul], big[1], len(big), prelu=False)


def _enclosing_activation(ctx: PatternCheckContext, call: relax.Call):
    """The activation form that `call` is an inner part of (the `add` and `clip` of
    `x * relu6(x + 3) / 6`), found among the calls that use it, up to 4 levels out; None if
    there is none. A layer must not end inside an activation: the activation's root would be
    left with a form no layer can read."""
    collector = _COLLECTOR.get()
    if collector is None:
        return None
    var_of = {value: var for var, value in collector.bound.items()}
    frontier = [call]
    for _ in range(4):
        users = []
        for expr in frontier:
            var = var_of.get(_bound(ctx, expr))
            users += collector.users.get(var, []) if var is not None else []
        for user in users:
            try:
                form, _ = split_activation(user, lambda e: _bound(ctx, e))
            except ActivationFormError:
                continue
            if form is not None and any(call.same_as(c) for c in form.calls):
                return form
        frontier = users
    return None


def _bound(ctx: PatternCheckContext, expr: relax.Expr) -> relax.Expr:
    """The value bound to a variable of the matched function (the expression itself if none)."""
    if expr in ctx.matched_bindings:
        return ctx.matched_bindings[expr]
    collector = _COLLECTOR.get()
    if collector is not None and isinstance(expr, relax.Var):
        return collector.bound.get(expr, expr)
    return expr


_LAYER_CORES = frozenset({"relax.nn.conv2d", "relax.matmul"})
_AFFINE_ONNX_OPS = frozenset(
    {
        "BatchNormalization",
        "Relu",
        "Clip",
        "LeakyRelu",
        "Mul",
        "Add",
        "Sum",
        "Sub",
        "Div",
        "Sigmoid",
        "Tanh",
        "HardSigmoid",
        "HardSwish",
        "PRelu",
        "Mish",
    }
)
"""ONNX ops a scale_shift can be the whole of; a multiply or add inside another op (LRN's
bias + alpha * x) stays with the rest of that op, so no node is split between MLIP and CPU."""
_AFFINE_OPS = frozenset(
    {
        "relax.multiply",
        "relax.add",
        "relax.subtract",
        "relax.divide",
        "relax.nn.relu",
        "relax.clip",
        "relax.nn.leakyrelu",
        "relax.nn.prelu",
    }
)


def _check_scale_shift(ctx: PatternCheckContext) -> None:
    """A per-channel multiply / add / activation that no conv or fc absorbed.

    One that follows a conv or fc the user denied belongs to that layer and stays on the CPU
    with it (its bias add carries the conv's own node name and is caught by the deny check).
    """
    ann = ctx.annotated_expr
    _no_leaks(ctx)
    first = ctx.matched_expr
    data = ann["data"]
    collector = _COLLECTOR.get()
    _whole_onnx_ops(ctx, _AFFINE_ONNX_OPS)
    origin = _layer_origin(ctx, data)
    if origin is not None and collector is not None:
        owner = node_name_of(origin)
        if owner in collector.forced:
            raise _Reject(f"{collector.forced[owner]} (at {owner})", first)
    shape = _activation(data, (2, 4), first)
    _check_tail(ctx, [], shape[1], len(shape), prelu=True)


def _whole_onnx_ops(ctx: PatternCheckContext, allowed: frozenset[str]) -> None:
    """Reject a match holding part of an ONNX op of another type (the reshapes TVM wraps
    around an opset-11 Softmax), so that no node is split between the MLIP and the CPU."""
    collector = _COLLECTOR.get()
    if collector is None or not collector.op_types:
        return
    for expr in ctx.matched_bindings.values():
        name = node_name_of(expr)
        op_type = collector.op_types.get(name) if name is not None else None
        if op_type is not None and op_type not in allowed:
            raise _Reject(f"part of {op_type} (the rest of it runs on the CPU)", expr)


def _op_name(call: relax.Call) -> str:
    return getattr(call.op, "name", "")


def _producer_call(ctx: PatternCheckContext, value: relax.Expr) -> relax.Call | None:
    """The call that computes `value` (a variable bound in the function), if any."""
    collector = _COLLECTOR.get()
    bound = collector.bound if collector is not None else {}
    producer = bound.get(value) if isinstance(value, relax.Var) else value
    return producer if isinstance(producer, relax.Call) else None


def _layer_origin(ctx: PatternCheckContext, value: relax.Expr) -> relax.Call | None:
    """The conv or matmul that `value` comes from through constant multiplies / adds and
    activations (the parts that would fuse into that layer), if any."""
    call = _producer_call(ctx, value)
    while call is not None and _op_name(call) in _AFFINE_OPS:
        operands = [a for a in call.args if isinstance(a, relax.Call | relax.Var)]
        if len(operands) != 1:
            return None
        call = _producer_call(ctx, operands[0])
    return call if call is not None and _op_name(call) in _LAYER_CORES else None


def _users(bound: dict[relax.Var, relax.Expr]) -> dict[relax.Var, list[relax.Call]]:
    users: dict[relax.Var, list[relax.Call]] = {}
    for value in bound.values():
        if isinstance(value, relax.Call):
            for arg in value.args:
                if isinstance(arg, relax.Var):
                    users.setdefault(arg, []).append(value)
    return users


def _bound_values(mod: tvm.IRModule) -> dict[relax.Var, relax.Expr]:
    return {
        binding.var: binding.value
        for func in mod.functions.values()
        if isinstance(func, relax.Function) and isinstance(func.body, relax.SeqExpr)
        for block in func.body.blocks
        for binding in block.bindings
        if isinstance(binding, relax.VarBinding)
    }


def _check_concat(ctx: PatternCheckContext) -> None:
    concat = ctx.annotated_expr["root"]
    _whole_onnx_ops(ctx, frozenset({"Concat"}))
    parts = concat.args[0]
    if not isinstance(parts, relax.Tuple):
        raise _Reject("concat of a tuple variable", concat)
    shapes = [_activation(part, (2, 3, 4), concat, any_batch=True) for part in parts.fields]
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        raise _Reject("inputs of different ranks", concat)
    axis = int(concat.attrs.axis) if concat.attrs.axis is not None else None
    if axis is None or not -rank <= axis < rank:
        raise _Reject(f"attribute axis={axis}", concat)


def _check_resize(ctx: PatternCheckContext) -> None:
    """Bilinear (or nearest) resize of an NCHW tensor by the `resize` instruction's tables."""
    resize = ctx.annotated_expr["root"]
    _whole_onnx_ops(ctx, frozenset({"Resize", "Upsample"}))
    attrs = resize.attrs
    _activation(ctx.annotated_expr["data"], (4,), resize)
    _tensor_shape(resize, resize)
    if str(attrs.layout) != "NCHW":
        raise _Reject(f"layout {attrs.layout}", resize)
    method, mode = str(attrs.method), str(attrs.coordinate_transformation_mode)
    if method not in ("linear", "nearest_neighbor"):
        raise _Reject(f"attribute mode={method}", resize)
    if mode not in strided.RESIZE_MODES:
        raise _Reject(f"attribute coordinate_transformation_mode={mode}", resize)
    if method == "nearest_neighbor" and str(attrs.rounding_method) not in strided.ROUNDINGS:
        raise _Reject(f"attribute nearest_mode={attrs.rounding_method}", resize)


_MOVE_ONNX_OPS = frozenset(
    {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Split", "Resize",
     "Upsample", "Identity"}
)  # fmt: skip
"""ONNX ops a strided copy can be made of."""


def _check_copy(ctx: PatternCheckContext) -> None:
    """A chain of data-movement ops whose composition is a strided copy (`strided.py`)."""
    ann = ctx.annotated_expr
    calls = [ann[key] for key in ("op0", "op1", "op2") if key in ann]
    _no_leaks(ctx)
    _whole_onnx_ops(ctx, _MOVE_ONNX_OPS)
    in_shape = _activation(ann["data"], (2, 3, 4), calls[0], any_batch=True)
    for call in calls:
        _tensor_shape(call, call)
    if len(_tensor_shape(calls[-1], calls[-1])) not in (2, 3, 4):
        raise _Reject(f"result rank {len(_tensor_shape(calls[-1], calls[-1]))}", calls[-1])
    try:
        strided.chain_form(calls, in_shape)
    except strided.NotACopy as err:
        raise _Reject(err.reason, err.call if err.call is not None else calls[-1]) from None


def _check_reshape(ctx: PatternCheckContext) -> None:
    reshape = ctx.annotated_expr["root"]
    in_shape = _activation(ctx.annotated_expr["data"], (2, 4), reshape)
    out_shape = _tensor_shape(reshape, reshape)
    if len(out_shape) not in (2, 4):
        raise _Reject(f"rank {len(out_shape)}", reshape)
    if len(out_shape) == len(in_shape):
        raise _Reject(f"reshape rank {len(in_shape)} to rank {len(out_shape)}", reshape)
    if out_shape[0] != in_shape[0]:
        raise _Reject("reshape changes the batch", reshape)


def _check_transpose(ctx: PatternCheckContext) -> None:
    transpose = ctx.annotated_expr["root"]
    _activation(ctx.annotated_expr["data"], (4,), transpose)
    axes = _int_list(transpose.attrs.axes)
    if axes not in ([0, 2, 3, 1], [0, 3, 1, 2]):
        raise _Reject(f"attribute perm={axes if axes is not None else 'reversed'}", transpose)


# ---------------------------------------------------------------------------------------------
# Patterns. Each builder returns (name, pattern, annotations, check).


def _activations(x: DFPattern) -> DFPattern:
    """Every activation form `split_activation` reads, applied to x."""
    relu6 = [
        is_op("relax.clip")(is_op("relax.add")(x, is_const()), wildcard(), wildcard())
        for _ in range(2)
    ]
    hard_sigmoid = is_op("relax.clip")(
        is_op("relax.add")(is_op("relax.multiply")(x, is_const()), is_const()),
        wildcard(),
        wildcard(),
    )
    softplus = is_op("relax.log")(is_op("relax.add")(is_const(), is_op("relax.exp")(x)))
    forms = [
        is_op("relax.nn.relu")(x),
        is_op("relax.clip")(x, wildcard(), wildcard()),
        is_op("relax.nn.leakyrelu")(x),
        is_op("relax.nn.prelu")(x, is_const()),
        is_op("relax.sigmoid")(x),
        is_op("relax.tanh")(x),
        is_op("relax.multiply")(x, is_op("relax.sigmoid")(x)),
        is_op("relax.multiply")(x, is_op("relax.divide")(relu6[0], is_const())),
        is_op("relax.divide")(is_op("relax.multiply")(x, relu6[1]), is_const()),
        is_op("relax.multiply")(x, hard_sigmoid),
        is_op("relax.multiply")(x, is_op("relax.tanh")(softplus)),
    ]
    root = forms[0]
    for form in forms[1:]:
        root = root | form
    return root


def _with_activation(core: DFPattern) -> DFPattern:
    """An activation of core, or core. The longer alternative comes first: an OrPattern takes
    its first alternative that matches, and a wildcard-led core would match a shorter part."""
    return _activations(core) | core


def _affine_step(x: DFPattern) -> DFPattern:
    """x+c, c+x, x-c, c-x, x*c, c*x or x/c (multiply and add match either way round)."""
    return (
        is_op("relax.add")(x, is_const())
        | is_op("relax.subtract")(x, is_const())
        | is_op("relax.subtract")(is_const(), x)
        | is_op("relax.multiply")(x, is_const())
        | is_op("relax.divide")(x, is_const())
    )


def _affine(core: DFPattern, at_least_one: bool = False) -> DFPattern:
    """core followed by up to _MAX_AFFINE_STEPS affine steps (at least one if asked)."""
    level = _affine_step(core) if at_least_one else core
    for _ in range(_MAX_AFFINE_STEPS - (1 if at_least_one else 0)):
        level = _affine_step(level) | level  # the longest match first
    return level


def _conv2d_pattern(with_pad: bool):
    data, weight = wildcard(), wildcard()
    ann: dict[str, DFPattern] = {"data": data, "weight": weight}
    conv_input = data
    if with_pad:
        conv_input = ann["pad"] = is_op("relax.nn.pad")(data)
    conv = ann["conv"] = is_op("relax.nn.conv2d")(conv_input, weight)
    biased = conv | is_op("relax.add")(conv, is_const())
    ann["bn"] = is_op("relax.nn.batch_norm")(biased, is_const(), is_const(), is_const(), is_const())
    root = _with_activation(_affine(conv | is_tuple_get_item(ann["bn"], 0)))
    return ("mrvl.conv2d", root, ann, _checked(_check_conv2d))


def _conv_transpose_pattern():
    data, weight = wildcard(), wildcard()
    ann: dict[str, DFPattern] = {"data": data, "weight": weight}
    conv = ann["conv"] = is_op("relax.nn.conv2d_transpose")(data, weight)
    root = _with_activation(_affine(conv))  # a bias add is the first affine step
    return ("mrvl.conv_transpose", root, ann, _checked(_check_conv_transpose))


def _fc_pattern(with_alpha: bool):
    data, weight = wildcard(), wildcard()
    ann: dict[str, DFPattern] = {"data": data, "weight": weight}
    fc_input = data
    if with_alpha:
        ann["alpha"] = is_const()
        fc_input = ann["scale"] = is_op("relax.multiply")(data, ann["alpha"])
    matmul = ann["matmul"] = is_op("relax.matmul")(fc_input, weight)
    root = _with_activation(_affine(matmul))
    return ("mrvl.fc", root, ann, _checked(_check_fc))


def _add_pattern():
    ann: dict[str, DFPattern] = {}
    add = ann["add"] = is_op("relax.add")(~is_const(), ~is_const())
    return ("mrvl.add", _with_activation(add), ann, _checked(_check_add))


def _mul_pattern():
    ann: dict[str, DFPattern] = {}
    mul = ann["mul"] = is_op("relax.multiply")(~is_const(), ~is_const())
    return ("mrvl.mul", _with_activation(mul), ann, _checked(_check_mul))


def _scale_shift_pattern():
    """mrvl.scale_shift: affine steps of a tensor with an optional activation, or a lone
    activation."""
    data = wildcard()
    ann: dict[str, DFPattern] = {"data": data}
    steps = _affine(data, at_least_one=True)
    root = _activations(steps) | _activations(data) | steps  # the longest match first
    return ("mrvl.scale_shift", root, ann, _checked(_check_scale_shift))


def _single_op_pattern(name: str, ops: Sequence[str], check, *extra_args: Callable[[], DFPattern]):
    data = wildcard()
    root = None
    for op in ops:
        alternative = is_op(op)(data, *(make() for make in extra_args))
        root = alternative if root is None else root | alternative
    return (name, root, {"data": data, "root": root}, _checked(check))


def _copy_pattern(length: int):
    """mrvl.copy: a chain of `length` data-movement ops, innermost annotated `op0`."""
    data = wildcard()
    ann: dict[str, DFPattern] = {"data": data}
    current: DFPattern = data
    for level in range(length):
        step = None
        for op in strided.MOVE_OPS:
            alternative = is_op(op)(current, varg_default_wildcard=True)
            step = alternative if step is None else step | alternative
        current = ann[f"op{level}"] = step
    ann["root"] = current
    return ("mrvl.copy", current, ann, _checked(_check_copy))


def _reshape_pattern():
    data = wildcard()
    root = (
        is_op("relax.reshape")(data, wildcard())
        | is_op("relax.squeeze")(data)
        | is_op("relax.flatten")(data)
    )
    return ("mrvl.reshape", root, {"data": data, "root": root}, _checked(_check_reshape))


def _pattern_table() -> list[tuple]:
    """All patterns, highest priority first: larger layers before their parts."""
    return [
        _conv2d_pattern(with_pad=True),
        _conv2d_pattern(with_pad=False),
        _conv_transpose_pattern(),
        _fc_pattern(with_alpha=True),
        _fc_pattern(with_alpha=False),
        _add_pattern(),
        _mul_pattern(),
        _single_op_pattern("mrvl.maxpool2d", ["relax.nn.max_pool2d"], _check_pool2d),
        _single_op_pattern("mrvl.avgpool2d", ["relax.nn.avg_pool2d"], _check_pool2d),
        _single_op_pattern("mrvl.global_avgpool2d", ["relax.mean"], _check_global_pool2d),
        _single_op_pattern("mrvl.global_maxpool2d", ["relax.max"], _check_global_pool2d),
        _single_op_pattern("mrvl.concat", ["relax.concat"], _check_concat),
        # a chain of moves is one copy (a channel shuffle's reshape-transpose-reshape)...
        _copy_pattern(3),
        _copy_pattern(2),
        # ...but a lone layout change or reshape stays a relabelling where it is one
        _single_op_pattern("mrvl.transpose", ["relax.permute_dims"], _check_transpose),
        _reshape_pattern(),
        _copy_pattern(1),
        _single_op_pattern("mrvl.resize", ["relax.image.resize2d"], _check_resize, wildcard),
        # last: only what no conv / fc / add absorbed
        _scale_shift_pattern(),
    ]


def _register() -> None:
    """Register the table once (re-registering would add duplicate entries).

    `register_patterns` gives later entries higher priority, hence the reversal.
    """
    if get_patterns_with_prefix(_CODEGEN + "."):
        return
    register_patterns(list(reversed(_pattern_table())))


_register()
