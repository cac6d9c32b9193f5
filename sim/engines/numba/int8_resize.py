"""The Numba engine's `qresize` (docs/isa.md): the reference interpreter's integer
interpolation (`reference_int8_resize.py`) as loops. Every sum is exact in int64, so the bytes
are the reference's. `dispatch.py` registers `qresize_kernel`."""

from __future__ import annotations

import numpy as np

from mrvl.isa import OPCODE_BY_NAME
from mrvl.isa_int8 import RQ_SHIFT_MAX, RQ_SHIFT_MIN
from mrvl.isa_int8_resize import RESIZE_ONE
from mrvl.sim.engines.numba.int8 import (
    finish,
    load_i8,
    load_i32,
    store_i8,
    table_copy,
)
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.vector import TABLE_OUTSIDE
from mrvl.sim.validate import field_words

_qresize = field_words(OPCODE_BY_NAME["qresize"])
QR_IN_ADDR, QR_IN_SHAPE, QR_ROW0 = _qresize["in_addr"], _qresize["in_shape"], _qresize["row0"]
QR_OUT_ADDR, QR_OUT_SHAPE = _qresize["out_addr"], _qresize["out_shape"]
QR_YTAB_ADDR, QR_XTAB_ADDR = _qresize["ytab_addr"], _qresize["xtab_addr"]
QR_IN_ZP, QR_OUT_ZP, QR_RQ = _qresize["in_zp"], _qresize["out_zp"], _qresize["rq"]
QR_CLAMP, QR_LUT_ADDR = _qresize["clamp"], _qresize["lut_addr"]

FAULT = -1
"""dispatch.py's FAULT (not imported: dispatch imports this module): a kernel returns
FAULT - fault, with `resize`'s fault codes, so dispatch words the message as for `resize`."""


@jit
def requantize_half_even(v, multiplier, shift):
    """`isa_int8_resize.requantize_half_even` on one value: int8.py's `requantize` with ties
    to even."""
    s = min(max(np.int64(shift), RQ_SHIFT_MIN), RQ_SHIFT_MAX)
    right = 31 - s
    x = np.int64(v) * np.int64(multiplier)
    return (x + (np.int64(1) << (right - 1)) - 1 + ((x >> right) & 1)) >> right


@jit
def _taps(table, size, lo):
    """i0, i1 relative to `lo` and w0, w1 of an int32 [rows, 3] table (w1 clamped into
    [0, 2^11]); ok = False when an index falls outside [0, size)."""
    rows = table.shape[0]
    i0, i1 = np.empty(rows, np.int64), np.empty(rows, np.int64)
    w0, w1 = np.empty(rows, np.int64), np.empty(rows, np.int64)
    ok = True
    for r in range(rows):
        i0[r], i1[r] = np.int64(table[r, 0]) - lo, np.int64(table[r, 1]) - lo
        if not (0 <= i0[r] < size and 0 <= i1[r] < size):
            ok = False
        w1[r] = min(max(np.int64(table[r, 2]), 0), RESIZE_ONE)
        w0[r] = RESIZE_ONE - w1[r]
    return i0, i1, w0, w1, ok


@jit
def qresize_kernel(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    ocm = machine[1][row[1]]
    n_count, height = row[QR_IN_SHAPE], row[QR_IN_SHAPE + 1]
    width, channels = row[QR_IN_SHAPE + 2], row[QR_IN_SHAPE + 3]
    out_rows, out_cols = np.int64(row[QR_OUT_SHAPE + 1]), np.int64(row[QR_OUT_SHAPE + 2])
    ytab = load_i32(ocm, np.int64(row[QR_YTAB_ADDR]), out_rows * 3).reshape((out_rows, 3))
    xtab = load_i32(ocm, np.int64(row[QR_XTAB_ADDR]), out_cols * 3).reshape((out_cols, 3))
    y0, y1, wy0, wy1, ok = _taps(ytab, height, row[QR_ROW0])
    if not ok:
        return FAULT - TABLE_OUTSIDE
    x0, x1, wx0, wx1, ok = _taps(xtab, width, 0)
    if not ok:
        return FAULT - (TABLE_OUTSIDE + 2)
    in_zp, out_zp = np.int64(row[QR_IN_ZP]), row[QR_OUT_ZP]
    m, sh = row[QR_RQ], row[QR_RQ + 1]
    lo, hi, lut = row[QR_CLAMP], row[QR_CLAMP + 1], row[QR_LUT_ADDR]
    table, lut = table_copy(ocm, lut)
    x = load_i8(ocm, np.int64(row[QR_IN_ADDR]), n_count * height * width * channels)
    out = np.int64(row[QR_OUT_ADDR])
    for n in range(n_count):
        for r in range(out_rows):
            for q in range(out_cols):
                a0 = ((n * height + y0[r]) * width + x0[q]) * channels
                a1 = ((n * height + y0[r]) * width + x1[q]) * channels
                b0 = ((n * height + y1[r]) * width + x0[q]) * channels
                b1 = ((n * height + y1[r]) * width + x1[q]) * channels
                base = ((n * out_rows + r) * out_cols + q) * channels
                for ch in range(channels):
                    top = wx0[q] * (x[a0 + ch] - in_zp) + wx1[q] * (x[a1 + ch] - in_zp)
                    bottom = wx0[q] * (x[b0 + ch] - in_zp) + wx1[q] * (x[b1 + ch] - in_zp)
                    acc = wy0[r] * top + wy1[r] * bottom
                    y = out_zp + requantize_half_even(acc, m, sh)
                    store_i8(ocm, out + base + ch, finish(y, lo, hi, table, lut))
    return 0
