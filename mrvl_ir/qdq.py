"""QDQ models in Relax: what a quantized layer is, and whether the MLIP can run it in int8.

TVM 0.27 imports ONNX QuantizeLinear / DequantizeLinear as `relax.quantize` /
`relax.dequantize` and has no pass that folds `dequantize -> layer -> quantize` into an
integer layer (Relay's FakeQuantizationToInteger went with Relay). So mrvl recognizes the
QDQ form itself, in two places:

- `fold_constant_call` (called by `frontend.fold_constants`): a `dequantize` of constants
  (a weight or a bias) is folded in numpy, as ONNX DequantizeLinear computes it
  (fp32(q - zp) * scale), and the integer tensor it came from is remembered, keyed by the
  folded constant, in the module attribute `mrvl.quantized_constants`. Layout ops on such a
  constant (a bias reshape, a weight transpose) carry it along. TVM's FoldConstant would fold
  the same calls and forget where the floats came from.
- `quantized_form` (called by the partition checks): a layer whose inputs are dequantized and
  whose result is quantized is a quantized layer. It is checked against the int8 contract
  (docs/isa.md: int8 activations with one scale and zero point, symmetric int8 weights with a
  scale per output channel, int32 biases at s_x * s_w); a form the MLIP cannot run exactly
  gets its reason, and a quantized layer is never run in fp16 in its place.

A uint8 activation is the int8 one with q - 128 and zero point u - 128 (exact), so it passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

QUANTIZED_ATTR = "mrvl.quantized_constants"
"""Module attribute: folded float constant -> the integer tensor it dequantizes."""

ACTIVATION_DTYPES = ("int8", "uint8")
"""Activation types the MLIP runs (uint8 as int8 with its zero point moved by 128)."""

BIAS_LIMIT = 1 << 22
"""A bias is exact in the folded f32 only below this many steps (fp32 has 24 bits, and the
division that recovers it must land within half a step): larger ones stay on the CPU."""


@dataclass(frozen=True)
class QuantizedConstant:
    """The integer tensor a float constant dequantizes: float = fp32(values - zero_point) *
    scale, with `scale` and `zero_point` broadcast along `axis` (None: one for the tensor)."""

    values: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None
    dtype: str

    def per_channel(self, channels: int) -> tuple[np.ndarray, np.ndarray]:
        """Scale and zero point as `channels` values each."""
        scale = np.broadcast_to(self.scale.reshape(-1), (channels,))
        zero = np.broadcast_to(self.zero_point.reshape(-1), (channels,))
        return scale.astype(np.float32), zero.astype(np.int64)


def _op(call) -> str | None:
    op = getattr(call, "op", None)
    return op.name if isinstance(op, tvm.ir.Op) else None


def _view(const: GenericConst) -> np.ndarray:
    from .frontend import constant_view

    return constant_view(const)


def dequantized(values: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """ONNX DequantizeLinear in float32: one subtraction in integers, one fp32 multiply."""
    diff = values.astype(np.int64) - zero_point.astype(np.int64)
    return diff.astype(np.float32) * scale.astype(np.float32)


def _along(array: np.ndarray, axis: int | None, rank: int) -> np.ndarray:
    """A scale or zero point broadcastable onto a tensor of `rank` along `axis`."""
    if array.size == 1 or axis is None:
        return array.reshape(())
    shape = [1] * rank
    shape[axis] = array.size
    return array.reshape(shape)


def fold_constant_call(
    call: relax.Call,
    args: Sequence[relax.Expr],
    folded: np.ndarray | None,
    quantized: Mapping,
) -> tuple[np.ndarray | None, QuantizedConstant | None]:
    """The folded value of `call` and the integer tensor it dequantizes (or None).

    `folded` is the frontend's numpy fold of a layout op (or None); a `dequantize` of
    constants is folded here. A layout op of a dequantized constant (`quantized`: the
    origins known so far) carries its origin along.
    """
    name = _op(call)
    if name == "relax.dequantize":
        if not all(isinstance(a, GenericConst) for a in args[:3]):
            return None, None
        if str(call.attrs.out_dtype) != "float32":
            return None, None
        values, scale, zero = (_view(a) for a in args[:3])
        if values.dtype.kind not in "iu" or scale.dtype != np.float32:
            return None, None  # float8 and the like: left to TVM, and to the CPU
        axis = int(call.attrs.axis) % max(values.ndim, 1) if scale.size > 1 else None
        if axis is not None and values.shape[axis] != scale.size:
            return None, None
        result = dequantized(
            values, _along(scale, axis, values.ndim), _along(zero, axis, values.ndim)
        )
        origin = QuantizedConstant(
            np.array(values), np.array(scale), np.array(zero), axis, str(values.dtype)
        )
        return result, origin
    if folded is None or not args or not isinstance(args[0], GenericConst):
        return folded, None
    source = quantized.get(args[0])
    return folded, None if source is None else _moved(source, call, folded.shape)


def _moved(
    source: QuantizedConstant, call: relax.Call, shape: tuple[int, ...]
) -> QuantizedConstant | None:
    """The origin of a layout op's result: the same op on the integers, the axis followed."""
    name = _op(call)
    if name == "relax.astype":
        return None
    if name == "relax.permute_dims":
        axes = list(range(source.values.ndim))[::-1]
        if call.attrs.axes is not None:
            axes = [int(a) for a in call.attrs.axes]
        values = np.ascontiguousarray(source.values.transpose(axes))
        axis = None if source.axis is None else axes.index(source.axis)
    else:  # reshape, expand_dims, squeeze: the same elements in the same order
        values = source.values.reshape(shape)
        axis = None
        if source.axis is not None:
            before = int(np.prod(source.values.shape[: source.axis]))
            size = source.values.shape[source.axis]
            axis = next(
                (
                    k
                    for k in range(len(shape))
                    if shape[k] == size and int(np.prod(shape[:k])) == before
                ),
                None,
            )
            if axis is None:
                return None
    return QuantizedConstant(values, source.scale, source.zero_point, axis, source.dtype)


def attach(mod: tvm.IRModule, quantized: Mapping) -> tvm.IRModule:
    """`mod` with the origins of its folded constants as `mrvl.quantized_constants`."""
    entries = {
        const: {
            "values": relax.const(origin.values),
            "scale": relax.const(origin.scale),
            "zero_point": relax.const(origin.zero_point),
            "axis": -1 if origin.axis is None else origin.axis,
            "dtype": origin.dtype,
        }
        for const, origin in quantized.items()
        if isinstance(const, GenericConst)
    }
    if not entries:
        return mod
    known = dict(mod.attrs[QUANTIZED_ATTR]) if QUANTIZED_ATTR in (mod.attrs or {}) else {}
    return mod.with_attr(QUANTIZED_ATTR, {**known, **entries})


def quantized_constants(mod: tvm.IRModule) -> dict[GenericConst, QuantizedConstant]:
    """The integer origin of each folded constant of `mod` (empty for a float model)."""
    if mod.attrs is None or QUANTIZED_ATTR not in mod.attrs:
        return {}
    out = {}
    for const, entry in mod.attrs[QUANTIZED_ATTR].items():
        axis = int(entry["axis"])
        out[const] = QuantizedConstant(
            _view(entry["values"]),
            _view(entry["scale"]),
            _view(entry["zero_point"]),
            None if axis < 0 else axis,
            str(entry["dtype"]),
        )
    return out


# ---------------------------------------------------------------------------------------------
# Quantized layers: the Relax form around a layer, and whether the MLIP runs it in int8.


@dataclass(frozen=True)
class TensorQuant:
    """One activation tensor's quantization: real = scale * (q - zero_point), q in int8."""

    scale: float
    zero_point: int

    def as_json(self) -> dict:
        return {"scale": self.scale, "zero_point": self.zero_point}


@dataclass(frozen=True)
class QuantizedLayer:
    """A layer in QDQ form: its inputs' and result's quantization, and (for conv / fc) the
    weights' per-channel scales and the int32 bias."""

    inputs: tuple[TensorQuant, ...]
    output: TensorQuant
    weight_scale: tuple[float, ...] = ()
    bias: tuple[int, ...] = ()
    edges: tuple[str, ...] = ()
    """The ONNX nodes of the dequantizes and quantizes around it: the partition keeps it int8
    only where they are in its region (a float tensor crosses the region's edge otherwise)."""

    def as_json(self) -> dict:
        out: dict = {
            "inputs": [q.as_json() for q in self.inputs],
            "output": self.output.as_json(),
        }
        if self.weight_scale:
            out["weight_scale"] = list(self.weight_scale)
        if self.bias:
            out["bias"] = list(self.bias)
        return out


class NotInt8(Exception):
    """A quantized form the MLIP cannot run exactly; `reason` says why, `at` blames a call."""

    def __init__(self, reason: str, at: relax.Expr | None = None, *, partial: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.at = at
        self.partial = partial
        """The layer may go on (a bias add, an activation) to a quantize: a longer match."""


def _scalar(expr, what: str, at) -> np.ndarray:
    if not isinstance(expr, GenericConst):
        raise NotInt8(f"{what} is not a constant", at)
    return _view(expr)


def activation_quant(call: relax.Call) -> TensorQuant:
    """The int8 quantization of a `quantize` / `dequantize` of an activation tensor."""
    name = _op(call).split(".")[-1]
    scale = _scalar(call.args[1], f"the {name} scale", call)
    zero = _scalar(call.args[2], f"the {name} zero point", call)
    dtype = str(call.attrs.out_dtype if name == "quantize" else call.args[0].ty.dtype)
    if dtype not in ACTIVATION_DTYPES:
        raise NotInt8(f"{name} to {dtype}: the MLIP's activations are int8 (or uint8)", call)
    if scale.size != 1 or zero.size != 1:
        raise NotInt8(f"{name} per channel: an int8 activation has one scale", call)
    s = float(scale.reshape(()))
    if not (np.isfinite(s) and s > 0):
        raise NotInt8(f"{name} scale {s}", call)
    z = int(zero.reshape(())) - (128 if dtype == "uint8" else 0)
    return TensorQuant(float(np.float32(s)), z)


def weight_quant(
    origin: QuantizedConstant | None, channels: int, channel_axis: int, at
) -> np.ndarray:
    """The per-output-channel scales of int8 symmetric weights (`NotInt8` otherwise)."""
    if origin is None:
        raise NotInt8("float weights between a dequantize and a quantize", at)
    if origin.dtype != "int8":
        raise NotInt8(f"{origin.dtype} weights: the MLIP's weights are int8", at)
    if origin.axis is not None and origin.axis != channel_axis:
        raise NotInt8(f"weights quantized along axis {origin.axis}, not per output channel", at)
    scale, zero = origin.per_channel(channels)
    if np.any(zero != 0):
        raise NotInt8("asymmetric weights (zero point not 0): the MLIP's are symmetric", at)
    if np.any(origin.values == -128):
        # symmetric int8 is [-127, 127]: a -128 has no mirror, and qconv's contract is it
        raise NotInt8("weights use -128 (symmetric int8 is [-127, 127])", at)
    return scale


def bias_quant(
    origin: QuantizedConstant | None, channels: int, s_x: float, s_w: np.ndarray, at
) -> np.ndarray:
    """The int32 bias at scale s_x * s_w (`NotInt8` for any other form)."""
    if origin is None:
        raise NotInt8("a float bias on a quantized layer (int32 at s_x * s_w expected)", at)
    if origin.dtype != "int32":
        raise NotInt8(f"{origin.dtype} bias: the MLIP's biases are int32", at)
    scale, zero = origin.per_channel(channels)
    if np.any(zero != 0):
        raise NotInt8("bias with a zero point", at)
    want = (np.float32(s_x) * s_w.astype(np.float32)).astype(np.float32)
    if not np.array_equal(scale, want):
        raise NotInt8("bias scale is not s_x * s_w", at)
    values = origin.values.reshape(-1).astype(np.int64)
    if np.any(np.abs(values) >= BIAS_LIMIT):
        raise NotInt8(f"bias beyond 2^22 steps ({int(np.abs(values).max())})", at)
    return np.broadcast_to(values, (channels,))


def quantized_form(
    inputs: Sequence[relax.Expr],
    result: relax.Expr,
    bound: Callable[[relax.Expr], relax.Expr | None],
    users: Callable[[relax.Expr], list[relax.Call]],
) -> tuple[list[relax.Call], list[relax.Call]] | None:
    """The dequantizes feeding a layer's `inputs` and the quantizes reading its `result`, or
    None for a float layer (no input dequantized and no quantize reading it).

    `bound` maps a variable to the value bound to it, `users` a variable to its readers.
    """
    feeding = [bound(x) for x in inputs]
    dequantizes = [v for v in feeding if _op(v) == "relax.dequantize"]
    readers = users(result)
    quantizes = [r for r in readers if _op(r) == "relax.quantize"]
    if not dequantizes and not quantizes:
        return None
    return dequantizes, quantizes


def check_quantized_io(
    inputs: Sequence[relax.Expr],
    result: relax.Expr,
    dequantizes: list[relax.Call],
    quantizes: list[relax.Call],
    bound: Callable[[relax.Expr], relax.Expr | None],
    users: Callable[[relax.Expr], list[relax.Call]],
    at,
) -> tuple[list[TensorQuant], TensorQuant]:
    """Each input's and the result's int8 quantization: every input must be dequantized and
    the result read only by quantizes of one scale and zero point."""
    if len(dequantizes) != len(inputs):
        raise NotInt8("a quantized layer with a float input", at)
    if not quantizes or len(quantizes) != len(users(result)):
        raise NotInt8(
            "a quantized layer whose result is also used in float", at, partial=not quantizes
        )
    ins = [activation_quant(bound(x)) for x in inputs]
    outs = {activation_quant(q) for q in quantizes}
    if len(outs) != 1:
        raise NotInt8("result quantized at two scales", at)
    return ins, outs.pop()


# ---------------------------------------------------------------------------------------------
# The partition's view: one match (a would-be layer) and its QDQ neighbourhood.

MAC_OPS = {"relax.nn.conv2d": 0, "relax.nn.conv1d": 0, "relax.matmul": 1}
"""MAC layers with constant weights, and the axis of the weight's output channels."""

INT8_READY: frozenset[str] = frozenset(
    {
        "conv2d", "fc", "add", "pool2d", "global_pool2d", "reshape", "transpose", "concat",
        "copy", "quantize", "dequantize", "mul", "scale_shift", "resize",
        "bmm_nn", "bmm_nt", "bmm_tn", "bmm_tt",  # qbmm: a product of two int8 activations
    }
)  # fmt: skip
"""Composites whose int8 form the compiler lowers to the MLIP's int8 instructions. Until a
kind is here, its quantized layers stay on the CPU (`NOT_LOWERED`), never in fp16. An int8
`scale_shift` (an activation, with scalar steps) is a 256-entry table (`mrvl.int8_table`); an
int8 `mul` the `qmul` instruction, an int8 `resize` (bilinear, or a nearest that is no copy)
the `qresize` instruction, an int8 `bmm_*` (a product of two activations) `qbmm`."""

FP16_BETWEEN_EDGES: frozenset[str] = frozenset(
    {
        "softmax",
        "layernorm",
    }
)
"""Quantized composites the MLIP runs in fp16 between its own `dequant` and `quant` (issue
20's mixed precision at the layer's edges): no int8 instruction computes them, and their
fp16 result is within half a step of the exact one at any int8 output scale they have
(a softmax's values lie in [0, 1], its f16 error below 2^-11 there). Such a layer is checked
as an int8 one (its inputs' and result's quantization) but reported as fp16, never int8.

A layernorm's outputs are not in [0, 1], so its bound is in steps of its output scale s_y,
and it depends on the data. `layernorm` computes in fp32 and rounds once to f16: at most
2^-11 |y|, and an unsaturated result has |y| <= 255 s_y, so at most 255/2048 < 1/8 step. Its
input, the dequantized x in f16, carries up to 2^-11 |x_i| each, which moves the normalized
(x_i - mean) / sigma by up to about 2^-11 (max|x| / sigma)(2 + |z_i|), z_i the normalized
value: in steps, E = 2^-11 (max|x| / sigma)(2 |g|max + 255 s_y + |b|max) / s_y at most. For
a transformer's residual stream (max|x| / sigma about 3 to 10, |g| and |b| within a few
s_y·32) E is a few hundredths to a few tenths of a step; where E < 1 the quantized result is
at most one step from the exact layernorm rounded at s_y, as the softmax's is. An input with
a huge outlier against its own spread (max|x| / sigma in the thousands) breaks it.
`tests/e2e/test_int8_layernorm.py` measures the f16 result against float64."""

NOT_LOWERED = "int8 {kind}: not lowered to the MLIP's int8 instructions yet (never run in fp16)"


def dequantized_constant(bb, expr) -> np.ndarray | None:
    """The value of `expr` when it is a constant, or a `dequantize` of constants that the
    frontend's fold has not reached yet (the int8 scale of a QDQ model's BatchNormalization,
    which onnxruntime quantizes like a weight): ONNX DequantizeLinear's fp32 values."""
    if isinstance(expr, GenericConst):
        return _view(expr)
    call = bb.lookup_binding(expr) if isinstance(expr, relax.Var) else expr
    if _op(call) != "relax.dequantize" or not all(
        isinstance(a, GenericConst) for a in call.args[:3]
    ):
        return None
    values, scale, zero = (_view(a) for a in call.args[:3])
    if values.dtype.kind not in "iu" or scale.dtype != np.float32:
        return None
    axis = int(call.attrs.axis) % max(values.ndim, 1) if scale.size > 1 else None
    return dequantized(values, _along(scale, axis, values.ndim), _along(zero, axis, values.ndim))
