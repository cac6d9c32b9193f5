"""An activation the quantizer left in float between a dequantize and a pool, run in fp16
between the region's own `dequant` and `quant` (issue 20: PP-OCRv3-rec's last HardSwish).

onnxruntime's QDQ quantizer (under `mrvl.quantize`) quantizes no HardSwish and no
AveragePool: PP-OCRv3-rec's backbone ends `DQ -> HardSwish -> AveragePool -> Q`, the Q
written for the layers after the pool. Neither op is a quantized layer (no QDQ pair sits
between them), so neither had int8 edges of its own, and both stayed on the CPU and split
the region. The MLIP runs them as the float model does, in fp16 between the edges, reported
fp16: the activation on the dequantized int8 values, the pool on its f16 result, one
quantize. Each f16 rounding errs by 2^-11 of its value (the dequantized input, the
activation's result, the pool's fp32 sum rounded to f16) and an activation of one value and
an average grow no value past the largest input's magnitude, so the result is within
3 · 2^-11 · 255 < 0.4 of a step of onnxruntime's fp32 one before the quantize's rounding:
within one step. Only this chain is taken (an activation of one value whose result only
pools read, a pool whose result only quantizes read); anything else stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tvm import relax
from tvm.ir.expr import GenericConst

from mrvl.activation_forms import prim_float
from mrvl.qdq import _op

FLOAT_ACTIVATION_KINDS = ("scale_shift",)
FLOAT_POOL_OPS = ("relax.nn.avg_pool2d", "relax.nn.max_pool2d")
FLOAT_POOL_KINDS = ("pool2d",)

ELEMENTWISE_STEPS = 8
"""The most calls of one activation (HardSwish imports as an add, a clip, a multiply and a
divide) between the dequantize and the pool."""


def _quantized_only(var, users) -> bool:
    readers = users.get(var, [])
    return bool(readers) and all(_op(r) == "relax.quantize" for r in readers)


def activation_before_pool(
    kind: str, inputs: Sequence[relax.Var], dequantizes: Sequence, result, index, users
) -> bool:
    """Whether a match is an activation of dequantized int8 values whose result only pools
    read, each read only by quantizes."""
    if kind not in FLOAT_ACTIVATION_KINDS or len(dequantizes) != len(inputs) or result is None:
        return False
    readers = users.get(result, [])
    return bool(readers) and all(
        _op(r) in FLOAT_POOL_OPS and _quantized_only(index.var_of.get(r), users) for r in readers
    )


def _from_dequantize(var, bound: Mapping) -> bool:
    """Whether `var` is computed from one dequantize by elementwise calls of it and
    constants (an activation as Relax imports it: HardSwish is x · clip(x + 3, 0, 6) / 6)."""
    todo, seen, sources = [var], set(), set()
    while todo:
        var = todo.pop()
        if var in seen:
            continue
        seen.add(var)
        call = bound.get(var)
        if _op(call) == "relax.dequantize":
            sources.add(var)
            continue
        if not isinstance(call, relax.Call) or len(seen) > ELEMENTWISE_STEPS:
            return False
        if any(
            not isinstance(a, relax.Var | GenericConst) and prim_float(a) is None for a in call.args
        ):
            return False  # a clip's bounds are scalars, anything else is no activation's
        if tuple(call.ty.shape) != tuple(bound_shape(call.args)):
            return False  # not elementwise (a reduction, a broadcast to a larger shape)
        todo += [a for a in call.args if isinstance(a, relax.Var)]
    return len(sources) == 1


def bound_shape(args) -> tuple:
    """The shape of the first variable among `args`."""
    first = next(a for a in args if isinstance(a, relax.Var))
    return tuple(first.ty.shape)


def pool_after_activation(
    kind: str, inputs: Sequence[relax.Var], result, quantizes, index, users
) -> bool:
    """Whether a match is a pool of an activation that `activation_before_pool` took (its
    input computed from a dequantize), its result read only by quantizes."""
    if kind not in FLOAT_POOL_KINDS or len(inputs) != 1 or not quantizes:
        return False
    if len(quantizes) != len(users.get(result, [])):
        return False
    activation = index.bound.get(inputs[0])
    return (
        isinstance(activation, relax.Call)
        and _op(activation) != "relax.dequantize"
        and _from_dequantize(inputs[0], index.bound)
        and all(_op(r) in FLOAT_POOL_OPS for r in users.get(inputs[0], []))
    )
