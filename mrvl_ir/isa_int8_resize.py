"""The int8 resize instruction (`qresize`, docs/isa.md): `resize`'s window and tables with
int8 data, fixed-point weights and one integer rounding.

Apart from `isa_int8.py` to keep that module short; `int8_opcodes` appends `qresize_spec`.
The arithmetic every engine shares (`RESIZE_WEIGHT_BITS`, `fixed_point_table`, the rounding
`requantize_half_even`) is here too.
"""

from __future__ import annotations

import dataclasses

import numpy as np

RESIZE_WEIGHT_BITS = 11
"""A `qresize` weight is an integer in [0, 2^11] (OpenCV's INTER_RESIZE_COEF_BITS): the two
weights of an axis sum to 2^11, so the product of a row and a column weight is at most 2^22
and the interpolated sum of int8 differences stays below 2^30 (exact in int32)."""

RESIZE_ONE = 1 << RESIZE_WEIGHT_BITS
"""The weight 1 in `qresize`'s fixed point."""


def requantize_half_even(values, multiplier, shift) -> np.ndarray:
    """`qresize`'s rounding: §4b's `requantize` (v * m / 2^(31 - shift), shift clamped into
    [RQ_SHIFT_MIN, RQ_SHIFT_MAX], in int64) with ties to even instead of toward +inf.
    An interpolation lands on exact halves often, and rounding them all up would bias the
    tensor; onnxruntime's fp32 interpolation rounds most of them to even. Broadcasts."""
    from mrvl.isa_int8 import RQ_SHIFT_MAX, RQ_SHIFT_MIN

    x = np.asarray(values, np.int64) * np.asarray(multiplier, np.int64)
    right = 31 - np.clip(np.asarray(shift, np.int64), RQ_SHIFT_MIN, RQ_SHIFT_MAX)
    return (x + (np.int64(1) << (right - 1)) - 1 + ((x >> right) & 1)) >> right


def fixed_point_table(table: np.ndarray) -> np.ndarray:
    """A `resize` table [rows, 4] f32 (i0, i1, w0, w1) as `qresize`'s [rows, 3] int32
    (i0, i1, w1): w1 rounded to RESIZE_WEIGHT_BITS fractional bits (half up; w0 is
    2^11 - w1, so the weights still sum to 1 exactly). Weights that are multiples of 2^-11
    are exact (nearest's 1 and 0; half_pixel's k/(2s) for a power-of-two factor s up to
    1024); others move by at most 2^-12."""
    t = np.asarray(table, np.float64).reshape(-1, 4)
    w1 = np.floor(t[:, 3] * RESIZE_ONE + 0.5)
    return np.stack([t[:, 0], t[:, 1], np.clip(w1, 0, RESIZE_ONE)], axis=1).astype(np.int32)


def qresize_spec(base: dict, in_zp, out_zp, rq, finish):
    """The `qresize` OpcodeSpec from `resize`'s (`base` by name) geometry fields and the int8
    fields of `isa_int8` (`rq` makes a requantization pair field, `finish` clamp and table)."""
    from mrvl.isa import OpcodeSpec, _f

    docs = {
        "in_addr": "OCM byte address of the input window, NHWC, int8",
        "out_addr": "OCM byte address of the output tile, NHWC, int8",
    }
    geometry = tuple(
        dataclasses.replace(f, doc=docs[f.name]) if f.name in docs else f
        for f in base["resize"].fields
        if f.name not in ("ytab_addr", "xtab_addr")
    )
    return OpcodeSpec(
        "qresize",
        0x23,
        "vector",
        "Separable two-tap interpolation of an int8 NHWC window into an int8 tile by int32 "
        "row and column tables (i0, i1, w1; w0 = 2^11 - w1): the exact int32 sum of the "
        "weighted differences from in_zp, requantized once (ties to even) to the output, plus "
        "out_zp, "
        "clamped, then an optional int8 table (bilinear or nearest Resize of a QDQ model).",
        (
            *geometry,
            _f(
                "ytab_addr",
                "i32",
                "OCM byte address of the row table [OH, 3] int32: input rows i0, i1 and the "
                "weight w1 of i1 (2^-11 units) of each output row",
            ),
            _f(
                "xtab_addr",
                "i32",
                "OCM byte address of the column table [OW, 3] int32: input columns i0, i1 and "
                "the weight w1 of i1 of each output column",
            ),
            in_zp,
            out_zp,
            rq(
                "rq",
                "requantization (multiplier, shift) of the sum, s_in / (2^22 * s_out), rounded "
                "half to even",
            ),
            *finish(),
        ),
    )
