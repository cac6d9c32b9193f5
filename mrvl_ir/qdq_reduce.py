"""A quantized ReduceMean, ReduceMax or ReduceMin in fp16 between edges.

No int8 instruction reduces a row (`qpool` averages a window of a plane, and a reduction over
an axis that is not the plane's is no pool), so a quantized one ran on the CPU: zoo TC-ResNet8's
mean over time split its QDQ form into 2 regions. The `reduce` instruction reads f16 and adds
in fp32 (docs/isa.md), so between the region's own `dequant` and `quant` (as int8 Softmax,
`qdq.FP16_BETWEEN_EDGES`) its error is one f16 rounding of each input (2^-11 of |x|), the
fp32 sum's (`length` adds of 2^-24), and one f16 rounding of the result (2^-11 of |y|): a
mean, max or min is accepted where that bound is at most one step of the result's scale, and
reported as fp16. A sum (its result grows with the row) stays on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tvm import relax

from mrvl.qdq import TensorQuant, _op
from mrvl.qdq_binary import F16_UNIT_ROUNDOFF, MAX_ERROR_STEPS, _magnitude

FP32_UNIT_ROUNDOFF = 2.0**-24

REDUCE_IN_FP16 = ("relax.mean", "relax.max", "relax.min")


def reduce_error_in_steps(length: int, x: TensorQuant, y: TensorQuant) -> float:
    """A bound on |fp16 mean, max or min - exact| in steps of y's scale over rows of `length`."""
    biggest_x = _magnitude(x)
    bound = biggest_x * (F16_UNIT_ROUNDOFF + length * FP32_UNIT_ROUNDOFF)
    return (bound + _magnitude(y) * F16_UNIT_ROUNDOFF) / y.scale


def reduce_in_fp16(
    calls: Sequence[relax.Call], ins: Sequence[TensorQuant], out: TensorQuant
) -> bool:
    """Whether a `reduce` match is a mean, max or min of an int8 tensor that runs in fp16
    between its edges within `MAX_ERROR_STEPS` of the exact result."""
    if len(calls) != 1 or len(ins) != 1 or _op(calls[0]) not in REDUCE_IN_FP16:
        return False
    (call,) = calls
    before = [int(d) for d in call.args[0].ty.shape]
    after = [int(d) for d in call.ty.shape]
    length = int(np.prod(before)) // max(int(np.prod(after)), 1)
    return reduce_error_in_steps(length, ins[0], out) <= MAX_ERROR_STEPS
