"""Partition a Relax module into MLIP regions (functions with `Codegen="mrvl"`).

The pattern table says what the MLIP compiler accepts; each pattern's check rejects what its
importer would not handle, so that an unsupported op stays on the host instead of failing
the build. The composite names (`mrvl.conv2d`, `mrvl.maxpool2d`, `mrvl.fc`, `mrvl.reshape`)
are a contract with the compiler's Relax importer.

Each optional part of a layer (bias, relu) is an alternative inside one pattern rather than a
separate pattern, so that every composite name is registered exactly once.
"""

from __future__ import annotations

import tvm
from tvm import relax
from tvm.ir.expr import GenericConst
from tvm.relax.backend.pattern_registry import (
    get_pattern,
    get_patterns_with_prefix,
    register_patterns,
)
from tvm.relax.backend.utils import has_leaking_intermediate_variables
from tvm.relax.dpl import DFPattern, is_const, is_op, wildcard
from tvm.relax.transform import PatternCheckContext

from .target import Target, get_target

__all__ = ["partition_for_mrvl", "validate_target_options", "MAX_BATCH", "TILE_COUNTS"]

MAX_BATCH = 8
"""Largest batch (N) a region accepts: the MLIP processes batches of up to 8."""

TILE_COUNTS = (1, 2, 4, 8)
"""Tile counts the compiler can split a layer across."""

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
    mod: tvm.IRModule, *, mcpu: str = "cn10ka", num_tiles: int = 8
) -> tvm.IRModule:
    """Group the MLIP-supported parts of `mod` into region functions for `relax.ext.mrvl`.

    Each region gets `Codegen="mrvl"`, a `global_symbol`, and the attrs `mrvl.mcpu` and
    `mrvl.num_tiles` that the codegen hook compiles it for.
    """
    validate_target_options(mcpu, num_tiles)
    seq = tvm.transform.Sequential(
        [
            # The ONNX importer leaves reshape(bias) / permute_dims(W) on constants; the
            # patterns want the folded constants.
            relax.transform.FoldConstant(),
            relax.transform.FuseOpsByPattern(
                get_patterns_with_prefix(_CODEGEN + "."),
                bind_constants=True,
                annotate_codegen=False,
            ),
            relax.transform.MergeCompositeFunctions(),
        ]
    )
    mod = seq(mod)
    for index, gvar in enumerate(_regions_in_call_order(mod)):
        mod[gvar] = (
            mod[gvar]
            .with_attr("global_symbol", f"{REGION_PREFIX}{index}")
            .with_attr("mrvl.mcpu", mcpu)
            .with_attr("mrvl.num_tiles", num_tiles)
        )
    # TVM names a merged region after every op in it (hundreds of characters on VGG-19);
    # NormalizeGlobalVar renames each region to its short global_symbol, calls included.
    return relax.transform.NormalizeGlobalVar()(mod)


REGION_PREFIX = "mrvl_region_"
"""Regions are named mrvl_region_0, _1, ... in the order `main` calls them."""


def _regions_in_call_order(mod: tvm.IRModule) -> list[tvm.ir.GlobalVar]:
    regions = {gv for gv, func in mod.functions_items() if _is_region(func)}
    ordered: list[tvm.ir.GlobalVar] = []

    def visit(expr) -> None:
        if isinstance(expr, relax.Call) and expr.op in regions and expr.op not in ordered:
            ordered.append(expr.op)

    relax.analysis.post_order_visit(mod["main"], visit)
    return ordered + sorted(regions - set(ordered), key=lambda gv: gv.name_hint)


def _is_region(func) -> bool:
    return (
        isinstance(func, relax.Function)
        and func.attrs is not None
        and func.attrs.get("Codegen") == _CODEGEN
    )


# ---------------------------------------------------------------------------------------------
# Checks. Each returns False for anything the compiler's importer would not handle.


def _static_shape(expr: relax.Expr) -> tuple[int, ...] | None:
    """The shape of a float32 tensor with a fully static shape, else None."""
    ty = expr.ty
    if not isinstance(ty, relax.TensorType) or ty.dtype != "float32" or ty.shape is None:
        return None
    dims = getattr(ty.shape, "values", None)
    if dims is None or not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        return None
    return tuple(int(d) for d in dims)


def _is_activation(expr: relax.Expr, rank: int) -> bool:
    """A runtime float32 tensor of `rank` dims with batch <= MAX_BATCH."""
    shape = _static_shape(expr)
    return (
        not isinstance(expr, GenericConst)
        and shape is not None
        and len(shape) == rank
        and 1 <= shape[0] <= MAX_BATCH
    )


def _f32_result(call: relax.Call) -> bool:
    out_dtype = getattr(call.attrs, "out_dtype", None)
    return out_dtype is None or str(out_dtype) in ("", "float32", "void")


def _check_conv2d(ctx: PatternCheckContext) -> bool:
    ann = ctx.annotated_expr
    conv, data, weight = ann["conv"], ann["data"], ann["weight"]
    attrs = conv.attrs
    if has_leaking_intermediate_variables(ctx) or not _is_activation(data, 4):
        return False
    if (attrs.data_layout, attrs.kernel_layout, attrs.out_layout) != ("NCHW", "OIHW", "NCHW"):
        return False
    w_shape = _static_shape(weight)
    if not _f32_result(conv) or w_shape is None or len(w_shape) != 4:
        return False
    out_ch, in_ch = w_shape[0], _static_shape(data)[1]
    groups = int(attrs.groups)
    depthwise = groups == in_ch == out_ch and w_shape[1] == 1
    if groups != 1 and not depthwise:
        return False
    if "bias" in ann:
        return _static_shape(ann["bias"]) == (1, out_ch, 1, 1)
    return True


def _check_maxpool2d(ctx: PatternCheckContext) -> bool:
    pool = ctx.annotated_expr["root"]
    attrs = pool.attrs
    return (
        _is_activation(ctx.annotated_expr["data"], 4)
        and attrs.layout == "NCHW"
        and attrs.out_layout == "NCHW"
        and all(int(d) == 1 for d in attrs.dilation)
        and not bool(attrs.ceil_mode)
    )


def _check_fc(ctx: PatternCheckContext) -> bool:
    ann = ctx.annotated_expr
    matmul, data, weight = ann["matmul"], ann["data"], ann["weight"]
    if has_leaking_intermediate_variables(ctx) or not _is_activation(data, 2):
        return False
    w_shape = _static_shape(weight)
    if not _f32_result(matmul) or w_shape is None or len(w_shape) != 2:
        return False
    k, out = w_shape
    if _static_shape(data)[1] != k:
        return False
    if "bias" in ann:
        return _static_shape(ann["bias"]) in ((out,), (1, out))
    return True


def _check_reshape(ctx: PatternCheckContext) -> bool:
    data, reshape = ctx.annotated_expr["data"], ctx.annotated_expr["root"]
    if not _is_activation(data, 4):
        return False
    in_shape, out_shape = _static_shape(data), _static_shape(reshape)
    # A flatten keeps the batch and folds C, H, W into one axis.
    return (
        out_shape is not None
        and len(out_shape) == 2
        and out_shape[0] == in_shape[0]
        and out_shape[1] == in_shape[1] * in_shape[2] * in_shape[3]
    )


# ---------------------------------------------------------------------------------------------
# Patterns.


def _with_bias_relu(core: DFPattern, bias: DFPattern) -> DFPattern:
    """core, core + bias, relu(core), relu(core + bias)."""
    biased = core | is_op("relax.add")(core, bias)
    return biased | is_op("relax.nn.relu")(biased)


def _conv2d_pattern():
    data, weight, bias = wildcard(), is_const(), is_const()
    conv = is_op("relax.nn.conv2d")(data, weight)
    root = _with_bias_relu(conv, bias)
    ann = {"data": data, "weight": weight, "bias": bias, "conv": conv, "root": root}
    return ("mrvl.conv2d", root, ann, _check_conv2d)


def _maxpool2d_pattern():
    data = wildcard()
    root = is_op("relax.nn.max_pool2d")(data)
    return ("mrvl.maxpool2d", root, {"data": data, "root": root}, _check_maxpool2d)


def _fc_pattern():
    data, weight, bias = wildcard(), is_const(), is_const()
    matmul = is_op("relax.matmul")(data, weight)
    root = _with_bias_relu(matmul, bias)
    ann = {"data": data, "weight": weight, "bias": bias, "matmul": matmul, "root": root}
    return ("mrvl.fc", root, ann, _check_fc)


def _reshape_pattern():
    data = wildcard()
    root = is_op("relax.reshape")(data, wildcard())
    return ("mrvl.reshape", root, {"data": data, "root": root}, _check_reshape)


def _register() -> None:
    """Register the table once; re-registering would add duplicate entries."""
    table = [_reshape_pattern(), _maxpool2d_pattern(), _fc_pattern(), _conv2d_pattern()]
    register_patterns([p for p in table if get_pattern(p[0]) is None])


_register()
