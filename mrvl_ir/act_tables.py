"""The activation tables: one f16 -> f16 function as 65,536 binary16 results.

A table activation (`mrvl.isa.TABLE_ACTIVATIONS`) is computed on the MLIP by lookup:
`y = T[bits(f16(acc))]`. The compiler generates T here and puts it in the binary's constant
pool; a `lut` instruction loads it into a tile's activation-table memory. Every engine therefore
reads the same bits and no engine calls libm at run time.

Generation rule (docs/isa.md section 4), for every 16-bit pattern `p`:

1. `x` = the binary16 value of `p`, exactly, as a float64; +-inf are first saturated to
   +-65504 (the accumulator's f16 rounding saturates, so an infinite index is never looked up,
   and its entry holds the same value as 65504's).
2. `y = f(x)` in float64 (numpy's float64 `exp`, `tanh`, `log1p`, `log`, `sqrt`, `power`;
   `erf` from `math.erf`, which numpy lacks).
3. `y` rounded to binary16 with the machine's f16 rule: clamp to +-65504, round to nearest,
   ties to even (numpy's float64 -> float16 conversion, which rounds once, from the float64
   value); a NaN (from a NaN index) becomes the canonical quiet NaN 0x7E00.

The float64 value is within an ulp of float64 of the true f(x); an f16 ulp is 2^29 times larger,
so T is the correctly rounded f16 of f(x) except when f(x) lies within ~1e-16 relative of an f16
rounding tie. `tests/sim/test_act_tables.py` checks every entry against an independent float64
evaluation (Python's `math`).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from mrvl.isa import ACT_TABLE_ENTRIES, TABLE_ACTIVATIONS, Activation

F16_MAX = 65504.0
CANONICAL_NAN_BITS = 0x7E00


def table_inputs() -> np.ndarray:
    """The float64 value of every binary16 pattern, +-inf saturated to +-65504 (NaNs kept)."""
    bits = np.arange(ACT_TABLE_ENTRIES, dtype=np.uint32).astype(np.uint16)
    x = bits.view(np.float16).astype(np.float64)
    return np.where(np.isinf(x), np.copysign(F16_MAX, x), x)


def reference(act: Activation, x: np.ndarray, a: float = 0.0, b: float = 0.0) -> np.ndarray:
    """f(x) in float64 for a table activation (vectorized; NaN in, NaN out)."""
    with np.errstate(all="ignore"):
        if act == Activation.SIGMOID:
            return 1.0 / (1.0 + np.exp(-x))
        if act == Activation.TANH:
            return np.tanh(x)
        if act == Activation.HARD_SIGMOID:
            return np.minimum(np.maximum(a * x + b, 0.0), 1.0)
        if act == Activation.HARD_SWISH:
            return x * np.minimum(np.maximum(x + 3.0, 0.0), 6.0) / 6.0
        if act == Activation.SILU:
            return x / (1.0 + np.exp(-x))
        if act == Activation.MISH:
            return x * np.tanh(np.log1p(np.exp(x)))
        if act == Activation.GELU:
            return 0.5 * x * (1.0 + _erf_f64(x / np.sqrt(2.0)))
        if act == Activation.GELU_TANH:
            return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
        if act == Activation.ERF:
            return _erf_f64(x)
        if act == Activation.EXP:
            return np.exp(x)
        if act == Activation.LOG:
            return np.log(x)
        if act == Activation.SQRT:
            return np.sqrt(x)
        if act == Activation.RECIPROCAL:
            return 1.0 / x
        if act == Activation.ABS:
            return np.abs(x)
        if act == Activation.POW:
            return np.power(x, a)
        if act == Activation.LEAKY_FLOOR:
            return np.maximum(np.where(x < 0, a * x, x), b)
    raise ValueError(f"{act!r} is not a table activation")


_erf = np.frompyfunc(math.erf, 1, 1)


def _erf_f64(x: np.ndarray) -> np.ndarray:
    return _erf(x).astype(np.float64)


def round_f64_to_f16(y: np.ndarray) -> np.ndarray:
    """float64 -> binary16: saturate to +-65504, round to nearest even, canonical NaN."""
    result = np.clip(y, -F16_MAX, F16_MAX).astype(np.float16)
    result[np.isnan(y)] = np.uint16(CANONICAL_NAN_BITS).view(np.float16)
    return result


def table_key(act: Activation, act_a: float, act_b: float) -> tuple[Activation, float, float]:
    """What identifies a table: the activation and its binary32 parameters (HARD_SIGMOID's
    alpha and beta, LEAKY_FLOOR's slope and floor, POW's exponent in act_a; the others take
    none)."""
    act = Activation(act)
    if act not in TABLE_ACTIVATIONS:
        raise ValueError(f"{act.name} is not a table activation")
    if act in (Activation.HARD_SIGMOID, Activation.LEAKY_FLOOR):
        return act, float(np.float32(act_a)), float(np.float32(act_b))
    if act == Activation.POW:
        return act, float(np.float32(act_a)), 0.0
    return act, 0.0, 0.0


@cache
def _table(act: Activation, a: float, b: float) -> bytes:
    return round_f64_to_f16(reference(act, table_inputs(), a, b)).astype("<f2").tobytes()


def activation_table(act: Activation, act_a: float = 0.0, act_b: float = 0.0) -> np.ndarray:
    """The table of a table activation: float16[65536], entry p = f(value of bits p)."""
    return np.frombuffer(_table(*table_key(act, act_a, act_b)), dtype="<f2")


def table_name(act: Activation, act_a: float = 0.0, act_b: float = 0.0) -> str:
    """A constant name for the table (the tables with parameters carry their bits)."""
    act, a, b = table_key(act, act_a, act_b)
    if act not in (Activation.HARD_SIGMOID, Activation.POW, Activation.LEAKY_FLOOR):
        return f"lut_{act.name.lower()}"
    bits = np.array([a, b], np.float32).view(np.uint32)
    return f"lut_{act.name.lower()}_{bits[0]:08x}_{bits[1]:08x}"
