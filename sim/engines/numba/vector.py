"""The Numba engine's vector-unit instructions: `pool`, `resize`, `add`, `scale` and `mul`."""

from __future__ import annotations

import numpy as np

from mrvl.sim.engines.numba.fields import (
    ADD_A_ADDR,
    ADD_ACT,
    ADD_ACT_A,
    ADD_ACT_ADDR,
    ADD_ACT_B,
    ADD_B_ADDR,
    ADD_CHANNELS,
    ADD_COUNT,
    ADD_OUT_ADDR,
    MUL_A_ADDR,
    MUL_ACT,
    MUL_ACT_A,
    MUL_ACT_B,
    MUL_B_ADDR,
    MUL_CHANNELS,
    MUL_COUNT,
    MUL_OUT_ADDR,
    POOL_COUNT_INCLUDE_PAD,
    POOL_IN_ADDR,
    POOL_IN_HW,
    POOL_IN_SHAPE,
    POOL_KERNEL,
    POOL_MAX,
    POOL_MODE,
    POOL_OROW0,
    POOL_OUT_ADDR,
    POOL_OUT_SHAPE,
    POOL_PAD,
    POOL_PAD_END,
    POOL_ROW0,
    POOL_STRIDE,
    RESIZE_IN_ADDR,
    RESIZE_IN_SHAPE,
    RESIZE_OUT_ADDR,
    RESIZE_OUT_SHAPE,
    RESIZE_ROW0,
    RESIZE_XTAB_ADDR,
    RESIZE_YTAB_ADDR,
    SCALE_ACT,
    SCALE_ACT_A,
    SCALE_ACT_ADDR,
    SCALE_ACT_B,
    SCALE_B_ADDR,
    SCALE_CHANNELS,
    SCALE_COUNT,
    SCALE_IN_ADDR,
    SCALE_OUT_ADDR,
    SCALE_S_ADDR,
)
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.numerics import (
    F16_LANES,
    NO_SLOPES,
    finish,
    load_f16,
    load_f32,
    load_slopes,
    store_f16,
)
from mrvl.sim.engines.numba.sharing import apart, arrive, share


@jit
def pool(row, ocm, lut, tally, sync, worker, workers, step):
    """Shared by `workers` > 1 threads (every one calling this) by output positions, like
    conv: each computes and stores its own, meeting before computing, before storing if the
    output overlaps the input, and after. Returns the thread's step count, or -1 if the run
    was abandoned."""
    n_count, height, width, channels = (
        row[POOL_IN_SHAPE],
        row[POOL_IN_SHAPE + 1],
        row[POOL_IN_SHAPE + 2],
        row[POOL_IN_SHAPE + 3],
    )
    out_rows, out_cols = row[POOL_OUT_SHAPE + 1], row[POOL_OUT_SHAPE + 2]
    kh_count, kw_count = row[POOL_KERNEL], row[POOL_KERNEL + 1]
    stride_h, stride_w = row[POOL_STRIDE], row[POOL_STRIDE + 1]
    top, left = row[POOL_PAD], row[POOL_PAD + 1]
    full_h, full_w = row[POOL_IN_HW], row[POOL_IN_HW + 1]
    bottom, right = row[POOL_PAD_END], row[POOL_PAD_END + 1]
    is_max = row[POOL_MODE] == POOL_MAX
    positions = n_count * out_rows * out_cols
    first, stop = 0, positions
    if workers > 1:
        step = arrive(sync, worker, workers, step)
        if step < 0:
            return step
        first, stop = share(positions, 1, worker, workers)
    x = load_f16(ocm, row[POOL_IN_ADDR], n_count * height * width * channels, lut)
    out = np.empty((stop - first) * channels, np.float32)
    initial = np.float32(-np.inf) if is_max else np.float32(0.0)
    for position in range(first, stop):
        n = position // (out_rows * out_cols)
        r = position // out_cols % out_rows
        c = position % out_cols
        ih0 = (row[POOL_OROW0] + r) * stride_h - top  # input-tensor row of tap 0
        iw0 = c * stride_w - left
        base = (position - first) * channels
        acc = out[base : base + channels]
        acc[:] = initial
        valid = 0
        padded = 0
        for kh in range(kh_count):
            ih = ih0 + kh
            wr = ih - row[POOL_ROW0]
            for kw in range(kw_count):
                iw = iw0 + kw
                if -top <= ih < full_h + bottom and -left <= iw < full_w + right:
                    padded += 1
                if not (0 <= wr < height and 0 <= iw < width):
                    continue
                valid += 1
                x_base = ((n * height + wr) * width + iw) * channels
                if is_max:
                    for ch in range(channels):
                        v = x[x_base + ch]
                        if v > acc[ch] or np.isnan(v):
                            acc[ch] = v
                else:
                    for ch in range(channels):
                        acc[ch] = acc[ch] + x[x_base + ch]
        if not is_max:
            count = padded if row[POOL_COUNT_INCLUDE_PAD] != 0 else valid
            divisor = np.float32(count)
            for ch in range(channels):
                acc[ch] = acc[ch] / divisor
    in_bytes = 2 * n_count * height * width * channels
    if workers > 1 and not apart(
        row[POOL_IN_ADDR], in_bytes, row[POOL_OUT_ADDR], 2 * positions * channels
    ):
        step = arrive(sync, worker, workers, step)  # no store while another thread reads
        if step < 0:
            return step
    store_f16(ocm, row[POOL_OUT_ADDR] + 2 * first * channels, out, tally)
    if workers > 1:
        step = arrive(sync, worker, workers, step)
    return step


TABLE_NOT_INTEGER, TABLE_OUTSIDE = 1, 2
"""Faults of a resize table (its indices are data): `resize` returns 0, or one of these plus 2
for the column table."""


@jit
def check_table(table, size, lo):
    """0 if every index of the [rows, 4] table is an integer in [lo, lo + size), else the
    fault, found in the reference interpreter's order (all integers, then all inside)."""
    for i in range(table.shape[0]):
        for k in range(2):
            v = table[i, k]
            if v != np.floor(v):
                return TABLE_NOT_INTEGER
    for i in range(table.shape[0]):
        for k in range(2):
            v = table[i, k]
            if not (lo <= v < lo + size):
                return TABLE_OUTSIDE
    return 0


@jit
def two_tap(a, b, w0, w1):
    """fp32(fp32(w0 * a) + fp32(w1 * b))."""
    p = w0 * a
    q = w1 * b
    return p + q


@jit
def resize(row, ocm, lut, tally):
    n_count, height, width, channels = (
        row[RESIZE_IN_SHAPE],
        row[RESIZE_IN_SHAPE + 1],
        row[RESIZE_IN_SHAPE + 2],
        row[RESIZE_IN_SHAPE + 3],
    )
    out_rows, out_cols = np.int64(row[RESIZE_OUT_SHAPE + 1]), np.int64(row[RESIZE_OUT_SHAPE + 2])
    ytab = load_f32(ocm, row[RESIZE_YTAB_ADDR], out_rows * 4).reshape((out_rows, 4))
    xtab = load_f32(ocm, row[RESIZE_XTAB_ADDR], out_cols * 4).reshape((out_cols, 4))
    row0 = row[RESIZE_ROW0]
    fault = check_table(ytab, height, row0)
    if fault:
        return fault
    fault = check_table(xtab, width, 0)
    if fault:
        return fault + 2
    x = load_f16(ocm, row[RESIZE_IN_ADDR], n_count * height * width * channels, lut)
    out = np.empty(n_count * out_rows * out_cols * channels, np.float32)
    for n in range(n_count):
        for r in range(out_rows):
            y0, y1 = np.int64(ytab[r, 0]) - row0, np.int64(ytab[r, 1]) - row0
            wy0, wy1 = ytab[r, 2], ytab[r, 3]
            for q in range(out_cols):
                x0, x1 = np.int64(xtab[q, 0]), np.int64(xtab[q, 1])
                wx0, wx1 = xtab[q, 2], xtab[q, 3]
                a0 = ((n * height + y0) * width + x0) * channels
                a1 = ((n * height + y0) * width + x1) * channels
                b0 = ((n * height + y1) * width + x0) * channels
                b1 = ((n * height + y1) * width + x1) * channels
                base = ((n * out_rows + r) * out_cols + q) * channels
                for ch in range(channels):
                    top = two_tap(x[a0 + ch], x[a1 + ch], wx0, wx1)
                    bottom = two_tap(x[b0 + ch], x[b1 + ch], wx0, wx1)
                    out[base + ch] = two_tap(top, bottom, wy0, wy1)
    store_f16(ocm, row[RESIZE_OUT_ADDR], out, tally)
    return 0


@jit
def add(row, frow, ocm, lut, table, tally, sync, worker, workers, step):
    """Shared by `workers` > 1 threads (every one calling this) by output values, like conv:
    each computes and stores its own, meeting before computing, before storing if an operand
    overlaps the output at another offset, and after. Returns the thread's step count, or -1
    if the run was abandoned."""
    count = row[ADD_COUNT]
    a_addr, b_addr, out_addr, act = (
        row[ADD_A_ADDR],
        row[ADD_B_ADDR],
        row[ADD_OUT_ADDR],
        row[ADD_ACT],
    )
    act_a, act_b = frow[ADD_ACT_A], frow[ADD_ACT_B]
    start, stop = 0, count
    if workers > 1:  # never with PRELU (shared_values): its slope follows the index
        step = arrive(sync, worker, workers, step)
        if step < 0:
            return step
        start, stop = share(count, F16_LANES, worker, workers)
    a = load_f16(ocm, a_addr + 2 * start, stop - start, lut)
    b = load_f16(ocm, b_addr + 2 * start, stop - start, lut)
    for i in range(stop - start):
        a[i] = a[i] + b[i]
    slopes = load_slopes(ocm, act, row[ADD_ACT_ADDR], row[ADD_CHANNELS])
    # each thread reads and writes its own span: only an operand at another offset of the
    # output's bytes needs every thread to have read before any stores
    nbytes = 2 * count
    a_safe = a_addr == out_addr or apart(a_addr, nbytes, out_addr, nbytes)
    b_safe = b_addr == out_addr or apart(b_addr, nbytes, out_addr, nbytes)
    if workers > 1 and not (a_safe and b_safe):
        step = arrive(sync, worker, workers, step)
        if step < 0:
            return step
    finish(a, act, act_a, act_b, slopes, table, ocm, out_addr + 2 * start, tally)
    if workers > 1:
        step = arrive(sync, worker, workers, step)
    return step


@jit
def scale(row, frow, ocm, lut, table, tally):
    count, channels = row[SCALE_COUNT], row[SCALE_CHANNELS]
    x = load_f16(ocm, row[SCALE_IN_ADDR], count, lut)
    s = load_f32(ocm, row[SCALE_S_ADDR], channels)
    b = load_f32(ocm, row[SCALE_B_ADDR], channels)
    for i in range(count):
        c = i % channels
        product = x[i] * s[c]  # rounds to fp32, then the sum rounds again
        x[i] = product + b[c]
    act = row[SCALE_ACT]
    slopes = load_slopes(ocm, act, row[SCALE_ACT_ADDR], channels)
    act_a, act_b = frow[SCALE_ACT_A], frow[SCALE_ACT_B]
    finish(x, act, act_a, act_b, slopes, table, ocm, row[SCALE_OUT_ADDR], tally)


@jit
def mul(row, frow, ocm, lut, table, tally):
    count, channels = row[MUL_COUNT], row[MUL_CHANNELS]
    a = load_f16(ocm, row[MUL_A_ADDR], count, lut)
    b = load_f16(ocm, row[MUL_B_ADDR], channels if channels > 0 else count, lut)
    for i in range(count):
        a[i] = a[i] * b[i % channels if channels > 0 else i]  # exact: two f16 values
    act_a, act_b = frow[MUL_ACT_A], frow[MUL_ACT_B]
    finish(a, row[MUL_ACT], act_a, act_b, NO_SLOPES, table, ocm, row[MUL_OUT_ADDR], tally)
