"""A quantized binary op of a tensor and a constant of any shape, in fp16 between edges.

YOLOv8n's box decoding adds and subtracts its anchor points ([1, 2, 2100]) and multiplies by
its strides ([1, 2100]): a binary op of an int8 tensor and a constant that is neither a
scalar nor one value per channel, so no int8 table or per-channel affine computes it. The
MLIP runs it as `mrvl.binary` does in fp16 (the constant read as data, `constant_operands.py`)
between the region's own `dequant` and `quant`, as int8 Softmax (`qdq.FP16_BETWEEN_EDGES`);
it is reported as fp16. That is accepted only where fp16's rounding stays below one step of
the result's scale (`fp16_error_in_steps`), so the result is within 2 steps of the exact
one, inside the 3 of DESIGN §9; a larger bound keeps the op on the CPU (`NOT_LOWERED`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tvm import relax
from tvm.ir.expr import GenericConst

from mrvl.qdq import TensorQuant, _op, _view

F16_UNIT_ROUNDOFF = 2.0**-11
"""Relative error of one rounding to fp16 (half an ulp of its 11-bit significand)."""

F16_MAX = 65504.0

ADDITIVE = ("relax.add", "relax.subtract")
MULTIPLICATIVE = ("relax.multiply", "relax.divide")

MAX_ERROR_STEPS = 1.0
"""The largest fp16 error bound accepted, in steps of the result's scale."""


def _magnitude(quant: TensorQuant) -> float:
    """The largest |real value| an int8 tensor of this quantization holds."""
    return quant.scale * max(abs(-128 - quant.zero_point), abs(127 - quant.zero_point))


def fp16_error_in_steps(
    name: str, constant: np.ndarray, x: TensorQuant, y: TensorQuant
) -> float | None:
    """A bound on |fp16 result - exact result| in steps of y's scale, for `name` of the int8
    tensor x and `constant`, or None where fp16 cannot hold the values.

    Each rounding to fp16 errs by at most 2^-11 of its value: x's dequantized value, the
    constant, and the result (a result beyond y's range saturates, so its error does not
    matter). A sum or difference errs by those three (|x| + |c| + |y|); a product or quotient
    by 2^-11 of |y| for each (four: a quotient may be a product by the rounded reciprocal)."""
    biggest_c = float(np.abs(constant).max(initial=0.0))
    if name == "relax.divide":
        smallest = float(np.abs(constant).min(initial=np.inf))
        if smallest == 0.0 or 1.0 / smallest > F16_MAX:
            return None
    biggest_x, biggest_y = _magnitude(x), _magnitude(y)
    if max(biggest_c, biggest_x, biggest_y) > F16_MAX:
        return None
    if name in ADDITIVE:
        bound = (biggest_x + biggest_c + biggest_y) * F16_UNIT_ROUNDOFF
    elif name in MULTIPLICATIVE:
        bound = 4 * biggest_y * F16_UNIT_ROUNDOFF
    else:
        return None
    return bound / y.scale


def constant_binary_in_fp16(
    calls: Sequence[relax.Call], ins: Sequence[TensorQuant], out: TensorQuant
) -> bool:
    """Whether a `binary` match is one op of an int8 tensor and a constant that runs in fp16
    between its edges within `MAX_ERROR_STEPS` of the exact result."""
    if len(calls) != 1 or len(ins) != 1:
        return False
    (call,) = calls
    consts = [a for a in call.args if isinstance(a, GenericConst)]
    if len(consts) != 1 or _op(call) not in ADDITIVE + MULTIPLICATIVE:
        return False
    constant = _view(consts[0])
    if not np.all(np.isfinite(constant)):
        return False
    steps = fp16_error_in_steps(_op(call), constant, ins[0], out)
    return steps is not None and steps <= MAX_ERROR_STEPS
