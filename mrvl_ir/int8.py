"""The compile-time arithmetic of int8 (docs/isa.md, "Numerics (int8 mode)"): the numbers a
compiler computes from a QDQ model's scales and zero points to fill the int8 instructions'
fields and tables, and the machine's rules they feed, stated once in numpy.

- `quantize_multiplier(real) -> (multiplier, shift)`: a real rescale factor as the Q31
  multiplier and shift of the requantization rule (`requantize`);
- `conv_requant_pairs`, `qadd_params`, `qmul_params`, `requant_params`: the pairs of
  qconv/qfc (one per output channel), qadd, qmul and requant/qpool;
- `quantize_bias`: an f32 bias as int32 at scale s_x * s_w[o], refused beyond 32 bits;
- `clamp_bounds`: ReLU, ReLU6 and Clip as the saturation bounds of an int8 result;
- `int8_table(fn, s_in, z_in, s_out, z_out)`: a table activation as 256 int8 entries;
- `quantize_linear`, `dequantize_linear`: the `quant` and `dequant` instructions' rules
  (ONNX QuantizeLinear / DequantizeLinear in fp32);
- `accumulator_fits`: whether an exact int32 accumulation cannot wrap.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from mrvl.isa_int8 import QADD_LEFT_SHIFT, RQ_SHIFT_MAX, RQ_SHIFT_MIN

INT8_MIN, INT8_MAX = -128, 127
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


class Int8RangeError(ValueError):
    """A value the int8 machine cannot hold exactly (a bias beyond int32, a rescale factor
    beyond the requantization's range): the compiler keeps the layer off the MLIP and says
    why."""


# ------------------------------------------------------------------------ requantization


def quantize_multiplier(real: float) -> tuple[int, int]:
    """(multiplier, shift) with real = multiplier * 2^(shift - 31), multiplier a Q31 value in
    [2^30, 2^31) rounded to nearest (ties away from zero), shift in [RQ_SHIFT_MIN,
    RQ_SHIFT_MAX]: a relative error below 2^-31. 0 and factors below 2^-32 give (0, 0) (the
    rule then sends every int32 value to 0); a negative or NaN factor, or one that rounds to
    2^30 or more, raises Int8RangeError."""
    if not math.isfinite(real) or real < 0:
        raise Int8RangeError(f"rescale factor {real!r} is not a finite non-negative number")
    if real == 0:
        return 0, 0
    fraction, shift = math.frexp(real)  # real = fraction * 2^shift, fraction in [0.5, 1)
    multiplier = int(math.floor(fraction * (1 << 31) + 0.5))
    if multiplier == 1 << 31:
        multiplier, shift = 1 << 30, shift + 1
    if shift < RQ_SHIFT_MIN:
        return 0, 0
    if shift > RQ_SHIFT_MAX:
        raise Int8RangeError(f"rescale factor {real!r} is beyond 2^{RQ_SHIFT_MAX}")
    return multiplier, shift


def requantize(values, multiplier, shift) -> np.ndarray:
    """The machine's requantization (docs/isa.md §4b): round(v * multiplier / 2^(31 -
    shift)) with ties toward +inf, in int64, one rounding. `shift` is clamped into
    [RQ_SHIFT_MIN, RQ_SHIFT_MAX] (a pair read from OCM may hold anything). Broadcasts."""
    v = np.asarray(values, np.int64)
    m = np.asarray(multiplier, np.int64)
    right = 31 - np.clip(np.asarray(shift, np.int64), RQ_SHIFT_MIN, RQ_SHIFT_MAX)
    return (v * m + (np.int64(1) << (right - 1))) >> right


def saturate(values, lo: int = INT8_MIN, hi: int = INT8_MAX) -> np.ndarray:
    return np.clip(np.asarray(values, np.int64), lo, hi)


def conv_requant_pairs(s_x: float, s_w, s_y: float) -> np.ndarray:
    """int32 [OC, 2]: the (multiplier, shift) of each output channel of a qconv or qfc, for
    the real factor s_x * s_w[o] / s_y computed in float64 (scales as the model states them,
    f32)."""
    s_w = np.atleast_1d(np.asarray(s_w, np.float64))
    pairs = [quantize_multiplier(float(s_x) * float(w) / float(s_y)) for w in s_w]
    return np.asarray(pairs, np.int64).astype(np.int32).reshape(len(s_w), 2)


def requant_params(s_in: float, s_out: float) -> tuple[int, int]:
    """The (multiplier, shift) of a `requant` (or a `qpool`) from scale s_in to s_out."""
    return quantize_multiplier(float(s_in) / float(s_out))


def qmul_params(s_a: float, s_b: float, s_y: float) -> tuple[int, int]:
    """The `rq` of a `qmul`: the exact product of the two differences from their zero points
    (at scale s_a * s_b) to the result's scale, s_a * s_b / s_y in float64."""
    return quantize_multiplier(float(s_a) * float(s_b) / float(s_y))


def qadd_params(s_a: float, s_b: float, s_y: float) -> dict[str, tuple[int, int]]:
    """The a_rq, b_rq and out_rq fields of a `qadd` (TFLite's form): both inputs to the
    common scale 2 * max(s_a, s_b) / 2^QADD_LEFT_SHIFT (each factor <= 1/2), the sum to s_y."""
    twice_max = 2.0 * max(float(s_a), float(s_b))
    return {
        "a_rq": quantize_multiplier(float(s_a) / twice_max),
        "b_rq": quantize_multiplier(float(s_b) / twice_max),
        "out_rq": quantize_multiplier(twice_max / ((1 << QADD_LEFT_SHIFT) * float(s_y))),
    }


def quantize_bias(bias, s_x: float, s_w) -> np.ndarray:
    """int32 [OC]: an f32 bias at scale s_x * s_w[o] (zero point 0), rounded half to even as
    QuantizeLinear does. A value beyond int32 raises Int8RangeError naming the channel: the
    machine's bias is 32 bits, and saturating it would change the layer's results silently."""
    scale = float(s_x) * np.asarray(s_w, np.float64)
    q = np.rint(np.asarray(bias, np.float64) / scale)
    wide = np.flatnonzero((q < I32_MIN) | (q > I32_MAX) | ~np.isfinite(q))
    if wide.size:
        o = int(wide[0])
        raise Int8RangeError(
            f"bias of output channel {o} is {float(q.flat[o])} at scale s_x * s_w: "
            "it needs more than 32 bits"
        )
    return q.astype(np.int32)


def accumulator_fits(terms: int, in_zp: int, bias_abs_max: int = 0, w_abs_max: int = 128) -> bool:
    """Whether bias + a sum of `terms` products (x - in_zp) * w always fits int32, so that the
    machine's wrap-around (docs/isa.md) can never happen."""
    x_abs_max = max(abs(INT8_MIN - in_zp), abs(INT8_MAX - in_zp))
    return bias_abs_max + terms * x_abs_max * w_abs_max <= I32_MAX


# --------------------------------------------------------------------- quantize, dequantize


def quantize_linear(x, scale: float, zp: int) -> np.ndarray:
    """int8: the `quant` rule, saturate(round_half_even(fp32(x) / fp32(scale)) + zp), one fp32
    division; NaN gives -128, as onnxruntime's vectorized kernel does (docs/isa.md, `quant`)."""
    with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN quotients are data
        q = np.asarray(x, np.float32) / np.float32(scale)
    q = np.where(np.isnan(q), np.float32(-np.inf), q)
    q = np.clip(np.rint(q), INT8_MIN - 256, INT8_MAX + 256)  # inf and huge values, exactly
    return saturate(q.astype(np.int64) + zp).astype(np.int8)


def dequantize_linear(q, scale: float, zp: int) -> np.ndarray:
    """float32: the `dequant` rule, fp32(q - zp) * fp32(scale), one fp32 multiply."""
    diff = np.asarray(q, np.int64) - zp
    return diff.astype(np.float32) * np.float32(scale)


# ---------------------------------------------------------------------- activations


def _quantize_real(y: float, s: float, z: int) -> int:
    return int(quantize_linear(np.float32(y), s, z))


def clamp_bounds(
    kind: str, s_y: float, z_y: int, lo: float | None = None, hi: float | None = None
) -> tuple[int, int]:
    """The clamp [lo, hi] of an int8 result for a fused activation of the output (scale s_y,
    zero point z_y): "none", "relu", "relu6" or "clip" (with its float bounds lo and hi; None
    is unbounded). QuantizeLinear is monotone, so clipping the real value and then quantizing
    is clamping the quantized value to the quantized bounds: exact."""
    bounds = {"none": (None, None), "relu": (0.0, None), "relu6": (0.0, 6.0), "clip": (lo, hi)}
    if kind not in bounds:
        raise ValueError(f"no int8 clamp for activation {kind!r} (none, relu, relu6, clip)")
    a, b = bounds[kind]
    q_lo = INT8_MIN if a is None else _quantize_real(a, s_y, z_y)
    q_hi = INT8_MAX if b is None else _quantize_real(b, s_y, z_y)
    if q_lo > q_hi:
        raise ValueError(f"clip bounds {a}, {b} are empty at scale {s_y}, zero point {z_y}")
    return q_lo, q_hi


def int8_table(
    fn: Callable[[float], float], s_in: float, z_in: int, s_out: float, z_out: int
) -> np.ndarray:
    """int8 [256]: entry q + 128 is what the QDQ model means for an int8 input q: the input
    dequantized in fp32 (`dequantize_linear`), fn evaluated in float64 on that value and
    rounded to fp32, then quantized (`quantize_linear`). A NaN result quantizes to -128."""
    x = dequantize_linear(np.arange(INT8_MIN, INT8_MAX + 1), s_in, z_in)
    with np.errstate(all="ignore"):
        y = np.array([fn(float(v)) for v in x], np.float64).astype(np.float32)
    return quantize_linear(y, s_out, z_out)
