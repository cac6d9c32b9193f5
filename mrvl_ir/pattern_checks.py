"""The check of each partition pattern: what a match must satisfy to become an MLIP layer.

Each `check_*` raises `_Reject` with a reason a user can act on, blaming one call; `checked`
turns it into the boolean check `FuseOpsByPattern` calls, and records the reason with the
ONNX node it blames in the `Collector` that `partition_for_mrvl` makes current
(`collecting`). The checks reject what `relax_import.py` would not read (they call the same
`split_activation`), and run the scheduler's tiling plan for the target, so that an
unsupported or too large layer stays on the host instead of failing the build.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import GenericConst
from tvm.relax.backend.utils import has_leaking_intermediate_variables
from tvm.relax.transform import PatternCheckContext

from . import qdq, strided
from .activation_forms import (
    ONNX_ACTIVATION_OPS,
    UNARY_TABLES,
    ActivationFormError,
    split_activation,
)
from .frontend import constant_view, node_name_of
from .high_rank_prelu import prelu_channel_axis
from .passes.graph.split_batch import BATCH_GROUP
from .passes.sched.tiling import (
    DoesNotFit,
    WindowLayer,
    conv_weight_bytes_per_oc,
    plan_fc_layer,
    plan_window_layer,
)
from .target import Target

MAX_BATCH = BATCH_GROUP
"""Images a conv, transposed conv, pool or resize layer computes at once. No ISA field bounds
the batch (`in_shape[0] >= 1`); their window tiling cuts rows, columns and channels but every
piece holds all N images, so `mrvl-split-batch` cuts a larger batch into groups of this many
(a layer per group) and these layers take any batch, planned here for one group. A global
pool keeps the bound: over more images it is a reduction (`reductions.py`). Every other layer
cuts the batch in its own lowering (`any_batch`)."""

FC_RANKS = (2, 3, 4, 5)
"""Ranks of an fc's activation [..., K]: its rows are the leading axes flattened (a batch of
vectors, a sequence, a channels-last plane or window), the same bytes in Relax's order."""

MAX_AFFINE_STEPS = 3
"""A layer's affine steps (see `_check_tail`): up to this many."""


# ---------------------------------------------------------------------------------------------
# Why a match was rejected: a collector active while `partition_for_mrvl` runs.


@dataclass
class Collector:
    """Reasons recorded by the checks during one partitioning.

    A rejection blames one node (the culprit: the conv whose batch is too large, the clip
    whose bounds are bad) and involves every node of the match. The culprit's reason wins
    over one a node got as a bystander ("... (at <culprit>)"); the first reason recorded wins
    over later ones; a user's deny wins over everything.
    """

    forced: dict[str, str]
    bound: dict[relax.Var, relax.Expr] = field(default_factory=dict)
    """Each variable of the module's functions and the value bound to it (a check sees only
    its match; the scale_shift check asks what produced its input)."""
    users: dict[relax.Var, list[relax.Call]] = field(default_factory=dict)
    """Each variable of the module's functions and the calls that read it."""
    op_types: dict[str, str] = field(default_factory=dict)
    """ONNX node name -> op type (`mrvl.onnx_nodes`), empty for a module without it."""
    culprits: dict[str, str] = field(default_factory=dict)
    bystanders: dict[str, str] = field(default_factory=dict)
    target: Target | None = None
    num_tiles: int = 1
    """What the regions are partitioned for: layers are planned for it (`_check_fits`)."""
    sites: itertools.count = field(default_factory=itertools.count)
    """Numbers the accepted matches (see `patterns.site_attrs`)."""
    quantized: dict = field(default_factory=dict)
    """The integer origin of each dequantized constant (`qdq.quantized_constants`)."""
    int8_nodes: set = field(default_factory=set)
    """The ONNX nodes of the accepted matches that are int8 layers (`qdq_match`)."""
    int8_edges: dict = field(default_factory=dict)
    """An int8 layer's node -> (whether it only moves values, its QDQ edges' nodes)."""

    def reject(self, culprit: str | None, reason: str, involved: Sequence[str]) -> None:
        if culprit is not None:
            self.culprits.setdefault(culprit, reason)
        for name in involved:
            if name != culprit:
                self.bystanders.setdefault(name, f"{reason} (at {culprit})" if culprit else reason)

    def reasons(self) -> dict[str, str]:
        return {**self.bystanders, **self.culprits, **self.forced}


_COLLECTOR: contextvars.ContextVar[Collector | None] = contextvars.ContextVar(
    "mrvl_partition_collector", default=None
)


@contextlib.contextmanager
def collecting(collector: Collector) -> Iterator[Collector]:
    """Make `collector` the one the checks record into while the block runs."""
    token = _COLLECTOR.set(collector)
    try:
        yield collector
    finally:
        _COLLECTOR.reset(token)


def current_collector() -> Collector | None:
    """The collector of the partitioning under way, None outside `partition_for_mrvl`."""
    return _COLLECTOR.get()


class _Reject(Exception):
    """Raised by a check: `reason` why the match cannot be a layer, blaming the call `at`."""

    def __init__(self, reason: str, at: relax.Expr | None = None, *, partial: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.at = at
        self.partial = partial
        """A part of a layer that a longer match may complete: the reason blames no node,
        so the longer match's reason wins."""


class _Defer(_Reject):
    """Raised by a check that leaves the match to a later pattern (a global pool the window
    pool cannot take is a reduction's): not recorded, the later pattern's check says why."""


def checked(check: Callable[[PatternCheckContext], None]) -> Callable[[PatternCheckContext], bool]:
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
            _check_quantized(ctx, check.__name__.removeprefix("check_"), collector)
        except _Reject as rejection:
            if collector is not None and not isinstance(rejection, _Defer):
                at = rejection.at if rejection.at is not None else ctx.matched_expr
                culprit = None if rejection.partial else node_name_of(at)
                collector.reject(culprit, rejection.reason, involved)
            return False
        return True

    run.__name__ = run.__qualname__ = check.__name__
    run.__doc__ = check.__doc__
    return run


def _check_quantized(ctx: PatternCheckContext, kind: str, collector: Collector | None) -> None:
    """A match in QDQ form (dequantized inputs, quantized result) must be an int8 layer the
    MLIP runs exactly (`qdq_match.check_match`); a float layer passes."""
    if collector is None:
        return
    from .qdq_layers import kept_in_fp16
    from .qdq_match import MOVE_KINDS, check_match, module_index

    calls = [c for c in ctx.matched_bindings.values() if isinstance(c, relax.Call)]
    try:
        layer = check_match(
            kind,
            calls,
            ctx.matched_expr,
            module_index(collector.bound),
            collector.users,
            collector.quantized,
        )
    except qdq.NotInt8 as err:
        raise _Reject(err.reason, err.at, partial=err.partial) from None
    if layer is not None and kept_in_fp16(kind, ctx):
        return  # dequantize -> the fp16 layer -> quantize, reported fp16
    if layer is not None or kind in ("quantize", "dequantize"):
        names = [n for c in calls if (n := node_name_of(c)) is not None]
        collector.int8_nodes.update(names)
        if layer is not None:
            collector.int8_edges.update((n, (kind in MOVE_KINDS, layer.edges)) for n in names)


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
    batch if `any_batch`: a layer whose lowering cuts the batch, see `MAX_BATCH`)."""
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
    return constant_view(expr)


def _f32_result(call: relax.Call) -> None:
    out_dtype = str(getattr(call.attrs, "out_dtype", "") or "")
    if out_dtype not in ("", "float32", "void", "None"):
        raise _Reject(f"dtype {out_dtype}", call)


def _no_leaks(ctx: PatternCheckContext) -> None:
    if has_leaking_intermediate_variables(ctx):
        raise _Reject("an intermediate result is also used outside the layer", ctx.matched_expr)


_STEP_OPS = frozenset({"relax.add", "relax.subtract", "relax.multiply", "relax.divide"})
"""A layer's affine steps: x+c, c+x, x-c, c-x, x*c, c*x, x/c with c per channel or scalar."""


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
            axis = prelu_channel_axis(form, rank)  # rank 5: slopes along their own axis
            at = form.calls[-1]
            slopes = channels if axis is None else _tensor_shape(at, at)[axis]
            if form.params["slopes"].size not in (1, slopes):
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


def _conv_weight(conv: relax.Call, weight_expr, layouts: tuple[str, str, str]):
    """What a conv and a transposed conv both check: their data, kernel and output `layouts`,
    an f32 result, and constant weights of the layout's rank. Returns the weights and the
    input's channels."""
    attrs = conv.attrs
    if (attrs.data_layout, attrs.kernel_layout, attrs.out_layout) != layouts:
        raise _Reject(f"layout {attrs.data_layout}/{attrs.kernel_layout}", conv)
    _f32_result(conv)
    weight = _constant(weight_expr, "weights", conv)
    if weight.ndim != len(layouts[0]):
        raise _Reject(f"weight rank {weight.ndim}", conv)
    return weight, _tensor_shape(conv.args[0], conv)[1]


# ---------------------------------------------------------------------------------------------
# Checks, one per layer.


def check_conv2d(ctx: PatternCheckContext) -> None:
    ann = ctx.annotated_expr
    conv = ann["conv"]
    _no_leaks(ctx)
    attrs = conv.attrs
    one_d = _op_name(conv) == "relax.nn.conv1d"  # a conv2d of H = 1 (conv_as_2d)
    rank = 3 if one_d else 4
    _activation(ann["data"], (rank,), conv, any_batch=True)  # groups of MAX_BATCH images
    if "pad" in ann:
        _check_pad(ann["pad"])
    layouts = ("NCW", "OIW", "NCW") if one_d else ("NCHW", "OIHW", "NCHW")
    weight, channels = _conv_weight(conv, ann["weight"], layouts)
    out_ch, groups = weight.shape[0], int(attrs.groups)
    if channels % groups or out_ch % groups or weight.shape[1] * groups != channels:
        raise _Reject(f"attribute group={groups}", conv)
    core = [conv] + [ann[k] for k in ("pad", "bn") if k in ann]
    if "bn" in ann:
        bn = ann["bn"]
        if bool(bn.attrs.training) or int(bn.attrs.axis) not in (1, 1 - rank):
            raise _Reject("batch norm in training mode or not on channels", bn)
        for param in bn.args[1:]:
            if _constant(param, "batch-norm parameters", bn).shape != (out_ch,):
                raise _Reject("batch-norm parameter shape", bn)
    _check_tail(ctx, core, out_ch, rank, prelu=True)
    n, c, h, w = conv_as_2d(_tensor_shape(ann["data"], conv))
    _, _, oh, ow = conv_as_2d(_tensor_shape(conv, conv))
    _, cg, kh, kw = conv_as_2d(weight.shape)
    pt, pl, _, pr = conv_as_2d(_int_list(attrs.padding), padding=True)
    if "pad" in ann:
        widths = conv_as_2d(_int_list(ann["pad"].attrs.pad_width), padding=True)
        pt, pl, pr = pt + widths[4], pl + widths[6], pr + widths[7]
    (sh, sw) = conv_as_2d(_int_list(attrs.strides), fill=1)
    (dh, dw) = conv_as_2d(_int_list(attrs.dilation), fill=1)
    extent = (kw - 1) * dw + 1
    if max(pl, pr) > 2 * (extent + w):
        # the ISA bounds a conv's column padding by twice the kernel's extent and the
        # input's width (docs/isa.md, `conv`), which keeps a padded window's memory in
        # proportion to the window
        raise _Reject(f"column padding {[pl, pr]} beyond twice the kernel and the input", conv)
    prelu = _has_prelu(ctx)
    # counts a bias whether or not the conv has one (the lowering loads one only if it has)
    per_oc = conv_weight_bytes_per_oc(kh, kw, cg, bias=True, slopes=prelu)
    layer = WindowLayer(
        min(n, MAX_BATCH), h, w, c, oh, ow, out_ch, kh, kw, sh, pt, dh, per_oc, False,
        sw=sw, pad_left=pl, dw=dw, groups=groups,
    )  # fmt: skip
    _check_fits(lambda target, tiles: _plan_window(layer, target, tiles, True), conv)


def conv_as_2d(values: Sequence[int], *, padding: bool = False, fill: int = 0) -> list[int]:
    """A 1-D conv's shape, padding, pad widths, strides or dilation as the 2-D conv's over
    H = 1: [N, C, L] -> [N, C, 1, L]; [l, r] -> [0, l, 0, r]; pad widths get a zero pair for
    H; [s] -> [fill, s]. 2-D values pass."""
    values = list(values)
    if padding:
        if len(values) == 2:  # a conv's [left, right]
            return [0, values[0], 0, values[1]]
        return values[:4] + [0, 0] + values[4:] if len(values) == 6 else values
    if len(values) == 1:
        return [fill, values[0]]
    return values if len(values) != 3 else [*values[:2], 1, values[2]]


def _has_prelu(ctx: PatternCheckContext) -> bool:
    """Whether the match fuses a PRelu, whose f32 slopes take OCM next to the layer's."""
    return any(
        isinstance(c, relax.Call) and _op_name(c) == "relax.nn.prelu"
        for c in ctx.matched_bindings.values()
    )


def _plan_window(layer: WindowLayer, target: Target, num_tiles: int, split_columns: bool):
    return plan_window_layer(
        layer,
        target.ocm_bytes_per_tile,
        num_tiles,
        target.ocm_alignment,
        "layer",
        split_columns=split_columns,
    )


def _check_fits(plan: Callable[[Target, int], object], at: relax.Call) -> None:
    """Ask the scheduler's tiler whether the layer can be placed on the target the module is
    partitioned for; a layer that cannot stays on the CPU, with the bytes it would need."""
    collector = _COLLECTOR.get()
    if collector is None or collector.target is None:
        return
    try:
        plan(collector.target, collector.num_tiles)
    except DoesNotFit as err:
        raise _Reject(
            f"does not fit on chip: one {err.unit} needs {err.needed} bytes of OCM, a tile of "
            f"{collector.target.name} has {err.available}",
            at,
        ) from None


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


def check_pool2d(ctx: PatternCheckContext) -> None:
    pool = ctx.annotated_expr["root"]
    attrs = pool.attrs
    _activation(ctx.annotated_expr["data"], (4,), pool, any_batch=True)
    if (attrs.layout, attrs.out_layout) != ("NCHW", "NCHW"):
        raise _Reject(f"layout {attrs.layout}", pool)
    dilation = _int_list(attrs.dilation)
    if any(d != 1 for d in dilation):
        raise _Reject(f"attribute dilations={dilation}", pool)
    n, c, h, w = _tensor_shape(ctx.annotated_expr["data"], pool)
    _, _, oh, ow = _tensor_shape(pool, pool)
    (kh, kw), (sh, sw) = _int_list(attrs.pool_size), _int_list(attrs.strides)
    pads = _int_list(attrs.padding)
    pt, pl = pads[:2]
    if any(p > extent for p, extent in zip(pads, (h, w, h, w))):
        # the ISA's pool pads at most the input's extent (docs/isa.md, `pool`): a window
        # that is mostly padding stays on the CPU
        raise _Reject(f"padding {pads} beyond the {h}x{w} input", pool)
    n = min(n, MAX_BATCH)  # planned for one group of images (mrvl-split-batch)
    layer = WindowLayer(n, h, w, c, oh, ow, c, kh, kw, sh, pt, 1, 0, True, sw=sw, pad_left=pl)
    _check_fits(lambda target, tiles: _plan_window(layer, target, tiles, False), pool)


def check_global_pool2d(ctx: PatternCheckContext) -> None:
    """mean / max over H and W of a rank-4 tensor, batch <= 8, whose plane fits a tile as the
    window of one pool; anything else is left to `mrvl.reduce` (`reductions.py`), which
    splits a plane larger than a tile into bands and takes any batch."""
    try:
        _check_global_pool2d(ctx)
    except _Reject as rejection:
        raise _Defer(rejection.reason, rejection.at) from None


def _check_global_pool2d(ctx: PatternCheckContext) -> None:
    reduce = ctx.annotated_expr["root"]
    _activation(ctx.annotated_expr["data"], (4,), reduce)
    axes = _int_list(reduce.attrs.axis)
    if axes is None or sorted(a % 4 for a in axes) != [2, 3]:
        raise _Reject(f"attribute axes={axes if axes is not None else 'all'}", reduce)
    # keepdims=0 ([N, C], as torchvision's ShuffleNetV2 and MNASNet write x.mean([2, 3])):
    # the same bytes as [N, C, 1, 1], relabelled by the importer
    n, c, h, w = _tensor_shape(ctx.annotated_expr["data"], reduce)
    # a pool whose window is the whole plane (the importer's form)
    layer = WindowLayer(n, h, w, c, 1, 1, c, h, w, 1, 0, 1, 0, True, sw=1, pad_left=0)
    _check_fits(lambda target, tiles: _plan_window(layer, target, tiles, False), reduce)


def check_fc(ctx: PatternCheckContext) -> None:
    ann = ctx.annotated_expr
    matmul = ann["matmul"]
    _no_leaks(ctx)
    # rows are tiled: any number, also a sequence [N, T, K] or a channels-last plane or
    # window [N, H, W, K] / [N, G, H, W, K] (a Linear of ConvNeXt or Swin): the leading axes
    data_shape = _activation(ann["data"], FC_RANKS, matmul, any_batch=True)
    k = data_shape[-1]
    _f32_result(matmul)
    weight = _constant(ann["weight"], "weights (right operand)", matmul)
    if weight.ndim != 2 or weight.shape[0] != k:
        raise _Reject(f"weight shape {weight.shape}", matmul)
    rows = int(np.prod(data_shape[:-1]))  # a sequence [N, T, K] is N * T rows
    prelu = _has_prelu(ctx)
    _check_fits(
        lambda target, tiles: plan_fc_layer(
            rows,
            k,
            weight.shape[1],
            target.ocm_bytes_per_tile,
            tiles,
            target.ocm_alignment,
            "fc",
            slopes=prelu,
        ),
        matmul,
    )
    core = [matmul]
    if "scale" in ann:
        if _constant(ann["alpha"], "alpha", ann["scale"]).size != 1:
            raise _Reject("alpha is not a scalar", ann["scale"])
        form, _ = split_activation(ann["scale"], lambda e: _bound(ctx, e))
        if form is not None:  # the `* 0.5` that ends a written-out GELU
            raise _Reject(f"alpha is the end of the activation {form.kind}", ann["scale"])
        core.append(ann["scale"])
    # the FC's channels are its last axis: constants broadcast as [O], [1, O] or a scalar
    _check_tail(ctx, core, weight.shape[1], 2, prelu=True)


def check_add(ctx: PatternCheckContext) -> None:
    ann = ctx.annotated_expr
    add = ann["add"]
    _no_leaks(ctx)
    lhs = _activation(add.args[0], (2, 3, 4), add, any_batch=True)
    rhs = _activation(add.args[1], (2, 3, 4), add, any_batch=True)
    if lhs != rhs:
        raise _Reject(f"broadcast add {lhs} + {rhs}", add)
    _check_tail(ctx, [add], _elementwise_channels(lhs), len(lhs), prelu=True)


def _elementwise_channels(shape: tuple[int, ...]) -> int:
    """The channels an elementwise layer's constants may vary over: axis 1 at rank 2 and 4;
    none at rank 3 and 5, which the importer computes as a 1-channel NHWC view [N, C, L, 1]
    (at rank 5 [N, A·B·C, D, 1]) of the same bytes (a per-channel constant would vary along H
    there), so only scalar constants and parameters are allowed."""
    return 1 if len(shape) in (3, 5) else shape[1]


def check_mul(ctx: PatternCheckContext) -> None:
    """A product of two tensors of one shape (rank 2 to 4), or of x [N, C, H, W] and a gate
    s [N, C, 1, 1] (either way round): the squeeze-excitation gate."""
    ann = ctx.annotated_expr
    mul = ann["mul"]
    _no_leaks(ctx)
    _whole_onnx_ops(ctx, _AFFINE_ONNX_OPS)
    lhs = _activation(mul.args[0], (2, 3, 4), mul, any_batch=True)
    rhs = _activation(mul.args[1], (2, 3, 4), mul, any_batch=True)
    form, _ = split_activation(mul, lambda e: _bound(ctx, e))
    if form is not None:
        raise _Reject(f"the product is the activation {form.kind} of a layer", mul)
    if lhs != rhs:
        small, big = sorted((lhs, rhs), key=lambda shape: np.prod(shape))
        if len(big) != 4 or len(small) != 4 or small != (big[0], big[1], 1, 1):
            raise _Reject(f"broadcast multiply {lhs} * {rhs}", mul)
    big = max(lhs, rhs, key=lambda shape: np.prod(shape))
    _check_tail(ctx, [mul], _elementwise_channels(big), len(big), prelu=False)


def _enclosing_activation(ctx: PatternCheckContext, call: relax.Call):
    """The activation form that `call` is an inner part of (the `add` and `clip` of
    `x * relu6(x + 3) / 6`), found among the calls that use it, up to 8 levels out (the x^3
    of a written-out tanh GELU is 7 below its root); None if
    there is none. A layer must not end inside an activation: the activation's root would be
    left with a form no layer can read."""
    collector = _COLLECTOR.get()
    if collector is None:
        return None
    var_of = {value: var for var, value in collector.bound.items()}
    frontier = [call]
    for _ in range(8):
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
        "Einsum",  # an elementwise product (einsum.py)
        *ONNX_ACTIVATION_OPS,
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
        "relax.power",
        *UNARY_TABLES,
    }
)


def check_scale_shift(ctx: PatternCheckContext) -> None:
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
    shape = _activation(data, (2, 3, 4, 5), first, any_batch=True)
    _check_tail(ctx, [], _elementwise_channels(shape), len(shape), prelu=True)


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


def check_concat(ctx: PatternCheckContext) -> None:
    concat = ctx.annotated_expr["root"]
    _whole_onnx_ops(ctx, frozenset({"Concat"}))
    parts = concat.args[0]
    if not isinstance(parts, relax.Tuple):
        raise _Reject("concat of a tuple variable", concat)
    if all(isinstance(part, GenericConst) for part in parts.fields):
        raise _Reject("every input is a constant", concat)
    shapes = [  # a constant input is copied into place from DDR (`constant_operands`)
        _tensor_shape(part, concat)
        if isinstance(part, GenericConst)
        else _activation(part, (2, 3, 4, 5), concat, any_batch=True)
        for part in parts.fields
    ]
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        raise _Reject("inputs of different ranks", concat)
    axis = int(concat.attrs.axis) if concat.attrs.axis is not None else None
    if axis is None or not -rank <= axis < rank:
        raise _Reject(f"attribute axis={axis}", concat)


def check_resize(ctx: PatternCheckContext) -> None:
    """Bilinear (or nearest) resize of an NCHW tensor by the `resize` instruction's tables."""
    resize = ctx.annotated_expr["root"]
    _whole_onnx_ops(ctx, frozenset({"Resize", "Upsample"}))
    attrs = resize.attrs
    _activation(ctx.annotated_expr["data"], (4,), resize, any_batch=True)
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


# ---------------------------------------------------------------------------------------------
# The module's bindings, which the collector gives the checks.


def users_of(bound: dict[relax.Var, relax.Expr]) -> dict[relax.Var, list[relax.Call]]:
    """Each variable of `bound` and the calls that read it (`Collector.users`)."""
    users: dict[relax.Var, list[relax.Call]] = {}
    for value in bound.values():
        if isinstance(value, relax.Call):
            for arg in value.args:
                if isinstance(arg, relax.Var):
                    users.setdefault(arg, []).append(value)
    return users


def bound_values(mod: tvm.IRModule) -> dict[relax.Var, relax.Expr]:
    """Each variable of the module's functions and the value bound to it (`Collector.bound`)."""
    return {
        binding.var: binding.value
        for func in mod.functions.values()
        if isinstance(func, relax.Function) and isinstance(func.body, relax.SeqExpr)
        for block in func.body.blocks
        for binding in block.bindings
        if isinstance(binding, relax.VarBinding)
    }
