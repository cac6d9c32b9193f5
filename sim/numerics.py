"""The machine's arithmetic rules, one function each, so every engine states them the same way.

fp16 mode: tensors are stored as IEEE binary16; a product of two binary16 values is exact in
binary32 (at most 22 significant bits, exponent well inside range), so the only rounding inside a
MAC loop is the fp32 add (`fp32_mac`). Results go back to binary16 through `round_to_f16`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mrvl.isa import (
    EXP_LN2_HI,
    EXP_LN2_LO,
    EXP_LOG2E,
    EXP_LOW,
    EXP_POLY,
    TABLE_ACTIVATIONS,
    Activation,
)

F16_MAX = np.float32(65504.0)
F16_CANONICAL_NAN = np.uint16(0x7E00).view(np.float16)
"""Every NaN result is stored as this quiet NaN, so engines agree bit for bit on NaN outputs."""


def round_to_f16(values: np.ndarray) -> np.ndarray:
    """fp32 -> binary16: saturate to +-65504 (infinities too), then round to nearest even.

    Clamping first is the same as rounding then saturating: everything between 65504 and the
    overflow threshold 65520 rounds to 65504 anyway. NaN becomes the canonical quiet NaN 0x7E00.
    """
    if values.dtype != np.float32:
        raise TypeError(f"round_to_f16 takes float32, got {values.dtype}")
    result = np.clip(values, -F16_MAX, F16_MAX).astype(np.float16)
    result[np.isnan(values)] = F16_CANONICAL_NAN
    return result


class F16Counts(NamedTuple):
    """What one instruction's conversions to f16 counted (docs/isa.md §4, "Counted")."""

    saturated: int
    """Results stored as +-65504 because the value was beyond it (+-inf included)."""
    nans: int
    """Results stored as NaN."""


def f16_counts(values: np.ndarray) -> F16Counts:
    """The counts of `round_to_f16(values)`: values beyond +-65504 (+-inf included), NaNs."""
    magnitude = np.abs(values)
    return F16Counts(
        int(np.count_nonzero(magnitude > F16_MAX)), int(np.count_nonzero(np.isnan(values)))
    )


def fp32_mac(acc: np.ndarray, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """One accumulation step, acc + x*w in fp32: the product of f16 values is exact, the add
    rounds."""
    return acc + x.astype(np.float32) * w.astype(np.float32)


def fp32_max(acc: np.ndarray, x: np.ndarray) -> np.ndarray:
    """One max-pool step: x replaces acc when it is greater or NaN, so of equal values (+0.0
    and -0.0) the first in tap order stays, and a NaN stays once taken."""
    return np.where((x > acc) | np.isnan(x), x, acc)


def apply_activation(
    acc: np.ndarray,
    act: Activation,
    act_a: float,
    act_b: float,
    slopes: np.ndarray | None = None,
) -> np.ndarray:
    """The fp32 activations on the fp32 accumulator; every comparison is `<` or `>`, so a NaN
    accumulator passes through. PRELU's `slopes` (f32) broadcast along the last axis, which is
    the channel."""
    zero = np.float32(0.0)
    a, b = np.float32(act_a), np.float32(act_b)
    if act == Activation.NONE:
        return acc
    if act == Activation.RELU:
        return np.where(acc < zero, zero, acc)
    if act == Activation.CLIP:
        raised = np.where(acc < a, a, acc)
        return np.where(raised > b, b, raised)
    if act == Activation.LEAKY_RELU:
        return np.where(acc < zero, a * acc, acc)
    if act == Activation.PRELU:
        if slopes is None:
            raise ValueError("PRELU needs its slopes")
        return np.where(acc < zero, slopes.astype(np.float32) * acc, acc)
    raise ValueError(f"no fp32 rule for activation {act!r}")


def activate(
    acc: np.ndarray,
    act: Activation,
    act_a: float,
    act_b: float,
    *,
    table: np.ndarray | None = None,
    slopes: np.ndarray | None = None,
) -> tuple[np.ndarray, F16Counts]:
    """A compute instruction's result from its fp32 accumulator: f16(activation(acc)), or for a
    table activation T[bits(f16(acc))] with T the tile's loaded float16[65536] table; and what
    the result counts. A table result counts as saturated when its index saturated and the
    entry is +-65504 (the saturated input reached the output), as NaN when the entry is NaN."""
    if act in TABLE_ACTIVATIONS:
        if table is None:
            raise ValueError(f"{act.name} needs its table")
        acc = np.asarray(acc, np.float32)
        index = round_to_f16(acc).view(np.uint16)
        result = table[index].astype(np.float16)
        saturated = (np.abs(acc) > F16_MAX) & (np.abs(result) == np.float16(F16_MAX))
        counts = F16Counts(
            int(np.count_nonzero(saturated)), int(np.count_nonzero(np.isnan(result)))
        )
        return result, counts
    activated = apply_activation(acc, act, act_a, act_b, slopes)
    return round_to_f16(activated), f16_counts(activated)


def two_tap(a: np.ndarray, b: np.ndarray, w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """One interpolation step of `resize`: fp32(fp32(w0 * a) + fp32(w1 * b)), with a and b
    f16 or fp32 values and w0, w1 fp32 weights; each product and the sum round to nearest
    even in fp32 (numpy float32 arithmetic does exactly that)."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    return w0.astype(np.float32) * a32 + w1.astype(np.float32) * b32


def exp32(d: np.ndarray) -> np.ndarray:
    """exp of fp32 `d` (softmax's d = x - max <= 0), every step an IEEE fp32 operation:

        t = EXP_LOW if d < EXP_LOW else d                 (NaN stays NaN)
        k = floor(fp32(fp32(t * EXP_LOG2E) + 0.5))        (0 for NaN)
        r = fp32(fp32(t - fp32(k * EXP_LN2_HI)) - fp32(k * EXP_LN2_LO))
        p = EXP_POLY[0]; p = fp32(fp32(p * r) + c) for each next c
        e = fp32(p * 2^k)                                 (exact: 2^k is normal, k >= -116)

    For d in [-80, 0] this is within 2 fp32 ulps of exp(d)."""
    low, log2e = np.float32(EXP_LOW), np.float32(EXP_LOG2E)
    hi, lo = np.float32(EXP_LN2_HI), np.float32(EXP_LN2_LO)
    poly = [np.float32(c) for c in EXP_POLY]
    d = np.asarray(d, np.float32)
    with np.errstate(invalid="ignore"):  # NaN arguments are data (they give NaN)
        t = np.where(d < low, low, d)
        u = t * log2e + np.float32(0.5)
        k = np.where(np.isnan(u), np.float32(0.0), np.floor(u)).astype(np.int32)
        kf = k.astype(np.float32)
        r = (t - kf * hi) - kf * lo
        p = np.full(r.shape, poly[0], np.float32)
        for c in poly[1:]:
            p = p * r + c
        scale = ((k + 127).astype(np.uint32) << np.uint32(23)).view(np.float32)
        return p * scale
