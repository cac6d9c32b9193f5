"""The edges of int8 code from Relax: the quantize and dequantize layers (their patterns,
checks and import), and the weight scales a quantized conv or fc carries into its region.

    mrvl.quantize      relax.quantize of a float32 activation, per tensor, to int8 or uint8
    mrvl.dequantize    relax.dequantize of such a tensor back to float32

Each becomes `mrvl.quantize` / `mrvl.dequantize`; `mrvl-fold-qdq` then folds the pairs around
an int8 layer into the layer (`passes/graph/fold_qdq.py`). A uint8 tensor is the int8 one
with q - 128 and its zero point moved by 128 (`qdq.activation_quant`), so both ends of a
uint8 pair agree inside the region.
"""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.ir.expr import GenericConst
from tvm.relax.dpl import is_const, is_op, wildcard
from tvm.relax.transform import PatternCheckContext
from xdsl.dialects.builtin import DenseArrayBase, f32
from xdsl.ir import SSAValue

from mrvl import qdq
from mrvl.dialects import mrvl
from mrvl.errors import UnsupportedOpError
from mrvl.frontend import node_name_of
from mrvl.pattern_checks import _activation, _Reject, checked, current_collector

WEIGHT_SCALES_ATTR = "mrvl.weight_scales"
"""Composite attribute: the f32 scale of each output channel of the layer's int8 weights
(comma-separated `repr`s, exact for f32), set when its constant weights dequantize int8."""

RANKS = (2, 3, 4)


def _quant_pattern(name: str, op: str):
    data = wildcard()
    root = is_op(op)(data, is_const(), is_const())
    return (name, root, {"data": data, "root": root}, checked(_checks[name]))


def check_quantize(ctx: PatternCheckContext) -> None:
    """A per-tensor quantize of a float32 activation to int8 or uint8."""
    call = ctx.annotated_expr["root"]
    _activation(call.args[0], RANKS, call, any_batch=True)
    _quant_of(call)


def check_dequantize(ctx: PatternCheckContext) -> None:
    """A per-tensor dequantize of an int8 or uint8 activation to float32."""
    call = ctx.annotated_expr["root"]
    if isinstance(call.args[0], GenericConst):
        raise _Reject("dequantize of a constant (TVM folds it)", call)
    collector = current_collector()
    if collector is not None and node_name_of(call) not in _paired_dequantizes(collector):
        # the pair goes into one region, whose interface to TVM stays float
        raise _Reject("dequantize of a tensor no quantize made here", call)
    if str(call.attrs.out_dtype) != "float32":
        raise _Reject(f"dequantize to {call.attrs.out_dtype}", call)
    shape = tuple(int(d) for d in call.ty.shape)
    if len(shape) not in RANKS:
        raise _Reject(f"rank {len(shape)}", call)
    _quant_of(call)


_PAIRED: list = [None, frozenset()]
"""The collector `_paired_dequantizes` last answered for, and its answer."""


def _paired_dequantizes(collector) -> frozenset[str]:
    """The ONNX nodes of the dequantizes whose input a quantize makes, in the module as
    partitioning found it (the matcher sees a dequantize's input after its producer was
    fused, bound to a composite call, so this is read from the module's own bindings)."""
    if _PAIRED[0] is not collector:
        bound = collector.bound
        names = {
            node_name_of(value)
            for value in bound.values()
            if qdq._op(value) == "relax.dequantize"
            and qdq._op(bound.get(value.args[0])) == "relax.quantize"
        }
        _PAIRED[:] = [collector, frozenset(n for n in names if n is not None)]
    return _PAIRED[1]


_checks = {"mrvl.quantize": check_quantize, "mrvl.dequantize": check_dequantize}


def _quant_of(call: relax.Call) -> qdq.TensorQuant:
    try:
        quant = qdq.activation_quant(call)
    except qdq.NotInt8 as err:
        raise _Reject(err.reason, err.at) from None
    kind = qdq._op(call).split(".")[-1]
    if kind not in qdq.INT8_READY:
        raise _Reject(qdq.NOT_LOWERED.format(kind=kind), call)
    return quant


def quant_patterns() -> list[tuple]:
    return [
        _quant_pattern("mrvl.quantize", "relax.quantize"),
        _quant_pattern("mrvl.dequantize", "relax.dequantize"),
    ]


def weight_scale_attrs(annotated) -> dict[str, str]:
    """`mrvl.weight_scales` for a conv or fc (`annotated`: its pattern's annotated calls)
    whose constant weights dequantize int8 ones (`qdq.quantized_constants`), else nothing."""
    collector = current_collector()
    if collector is None or not collector.quantized:
        return {}
    core = next((annotated[k] for k in ("conv", "matmul") if k in annotated), None)
    if core is None or qdq._op(core) not in qdq.MAC_OPS:
        return {}
    weight = core.args[1]
    origin = collector.quantized.get(weight) if isinstance(weight, GenericConst) else None
    if origin is None or origin.dtype != "int8":
        return {}
    scale, _ = origin.per_channel(int(weight.ty.shape[qdq.MAC_OPS[qdq._op(core)]]))
    alpha = annotated.get("alpha")  # Gemm's alpha, which the import folds into the weights
    if alpha is not None:
        value = np.asarray(qdq._view(alpha), np.float32).reshape(-1)
        if value.size != 1 or not _power_of_two(float(value[0])):
            return {}  # q·s·alpha is no exact int8 at any scale: the fc stays in fp16
        if abs(float(value[0])) > 1 and not _bias_in_steps_of(core, collector, abs(value[0])):
            return {}  # the int32 bias is no integer at s_x·s_w·alpha: the fc stays in fp16
        scale = scale.astype(np.float32) * value[0]
    return {WEIGHT_SCALES_ATTR: ",".join(repr(float(s)) for s in scale)}


INT8_FUSED_ACTIVATIONS = (None, "relu", "clip")
"""The fused activations an int8 add or mul runs (`fold_qdq.INT8_ACTIVATIONS`)."""


def kept_in_fp16(kind: str, ctx) -> bool:
    """Whether a quantized match that `qdq_match.check_match` found int8 is one the compiler
    keeps in fp16 between its dequantize and quantize instead, so the partition does not
    report it int8 (`mrvl-verify-int8` would stop the build): a conv or fc whose weight scales
    cannot carry its Gemm alpha (`weight_scale_attrs` gives none), an add or mul whose fused
    activation int8 does not run (a HardSwish after SiLU's product)."""
    from mrvl.activation_forms import ActivationFormError, split_activation

    if kind in ("conv2d", "fc"):
        return not weight_scale_attrs(ctx.annotated_expr)
    if kind in ("add", "mul"):
        bindings = ctx.matched_bindings
        try:
            form, _ = split_activation(ctx.matched_expr, lambda e: bindings.get(e, e))
        except ActivationFormError:
            return False
        return (None if form is None else form.kind) not in INT8_FUSED_ACTIVATIONS
    return False


def _bias_in_steps_of(core: relax.Call, collector, alpha: float) -> bool:
    """Whether the int32 bias added to `core` (a Gemm's matmul; none: True) is a multiple of
    `alpha`. onnxruntime quantizes a Gemm's bias at s_x·s_w, and the accumulator of an fc whose
    weight scales carry an alpha above 1 counts steps of s_x·s_w·alpha."""
    from mrvl.qdq_match import module_index

    index = module_index(collector.bound)
    original = index.original(core)
    var = index.var_of.get(original) if original is not None else None
    for reader in collector.users.get(var, []) if var is not None else []:
        if qdq._op(reader) != "relax.add":
            continue
        for arg in reader.args:
            origin = collector.quantized.get(arg) if isinstance(arg, GenericConst) else None
            if origin is not None:
                return bool(np.all(origin.values.astype(np.int64) % int(alpha) == 0))
    return True


def _power_of_two(value: float) -> bool:
    """Whether `value` is ±2^k, which scales a float exactly."""
    mantissa, _ = np.frexp(abs(value))
    return value != 0 and mantissa == 0.5


def weight_scales(attrs) -> list[float] | None:
    """The scales `weight_scale_attrs` recorded on a composite (None: float weights)."""
    if attrs is None or WEIGHT_SCALES_ATTR not in attrs:
        return None
    return [float(np.float32(s)) for s in str(attrs[WEIGHT_SCALES_ATTR]).split(",")]


def with_weight_scales(result: SSAValue, attrs) -> SSAValue:
    """`result` of an imported composite, its conv or fc told that its float weights
    dequantize int8 ones (`mrvl-fold-qdq` makes them int8 again), when `attrs` say so."""
    scales = weight_scales(attrs)
    if scales is None:
        return result
    layer = result.owner
    while isinstance(layer, mrvl.ReshapeOp | mrvl.LayoutConvertOp):  # a 1-D conv's view
        layer = layer.input.owner
    if not isinstance(layer, mrvl.Conv2DOp | mrvl.FullyConnectedOp):
        raise UnsupportedOpError(f"int8 weight scales on a {layer.name}", None)
    layer.properties["weight_scales"] = DenseArrayBase.from_list(f32, scales)
    return result


def _import_conversion(importer, chain, inner: dict, relax_op: str, op_class) -> SSAValue:
    """A lone relax.quantize / relax.dequantize, as the mrvl op of its activation quantization."""
    call = chain.take_one(relax_op)
    node = node_name_of(call)
    quant = qdq.activation_quant(call)
    x = importer._operand(inner, call.args[0], node)
    return importer._located(op_class(x, quant.scale, quant.zero_point), node)


def import_quantize(importer, chain, inner: dict) -> SSAValue:
    return _import_conversion(importer, chain, inner, "relax.quantize", mrvl.QuantizeOp)


def import_dequantize(importer, chain, inner: dict) -> SSAValue:
    return _import_conversion(importer, chain, inner, "relax.dequantize", mrvl.DequantizeOp)


QUANT_LAYERS = {"mrvl.quantize": import_quantize, "mrvl.dequantize": import_dequantize}
"""The importers of this module's composites (`relax_import._LAYERS`)."""
