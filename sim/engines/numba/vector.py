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
    f32_from_bits,
    finish,
    load_f16,
    load_f16_into,
    load_f32,
    load_slopes,
    store_f16,
)
from mrvl.sim.engines.numba.sharing import (
    all_computed,
    all_stored,
    apart,
    chunk_bounds,
    chunk_size,
    claim,
    end_shared,
    start_shared,
)


@jit
def pool(row, ocm, lut, tally, sync, i, worker, workers):
    """Shared by `workers` > 1 threads (every one calling this) by chunks of output positions,
    like conv: each thread claims chunks until none is left and stores each as soon as it is
    computed, or, if the output overlaps the input, once every chunk is computed. Returns 0,
    or -1 if the run was abandoned."""
    n_count, height, width, channels = (
        row[POOL_IN_SHAPE],
        row[POOL_IN_SHAPE + 1],
        row[POOL_IN_SHAPE + 2],
        row[POOL_IN_SHAPE + 3],
    )
    positions = n_count * row[POOL_OUT_SHAPE + 1] * row[POOL_OUT_SHAPE + 2]
    if workers > 1 and not start_shared(sync, i, worker):
        return -1
    size = chunk_size(positions, 1, workers)
    chunks = (positions + size - 1) // size
    chunk = claim(sync, i, workers, chunks, 0)
    if chunk >= chunks:
        return end_shared(sync, i, worker, workers, chunks)
    x = load_f16(ocm, row[POOL_IN_ADDR], n_count * height * width * channels, lut)
    out = np.empty(positions * channels, np.float32)
    in_bytes = 2 * n_count * height * width * channels
    out_addr = row[POOL_OUT_ADDR]
    deferred = workers > 1 and not apart(
        row[POOL_IN_ADDR], in_bytes, out_addr, 2 * positions * channels
    )
    mine = np.empty(chunks, np.int64)  # the chunks this thread took
    taken = 0
    while chunk < chunks:
        first, stop = chunk_bounds(chunk, size, positions)
        pool_positions(row, x, out, first, stop)
        mine[taken] = chunk
        taken += 1
        if not deferred:
            span = out[first * channels : stop * channels]
            store_f16(ocm, out_addr + 2 * first * channels, span, tally)
        chunk = claim(sync, i, workers, chunks, taken)
    if deferred:
        if not all_computed(sync, i, taken, chunks):
            return -1
        for k in range(taken):
            first, stop = chunk_bounds(mine[k], size, positions)
            span = out[first * channels : stop * channels]
            store_f16(ocm, out_addr + 2 * first * channels, span, tally)
    return all_stored(sync, i, worker, workers, taken, chunks)


@jit
def pool_positions(row, x, out, first, stop):
    """Pool output positions [first, stop) of the input `x` (fp32) into `out`."""
    height, width, channels = (
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
    initial = np.float32(-np.inf) if is_max else np.float32(0.0)
    x_bits, out_bits = x.view(np.uint32), out.view(np.uint32)
    lanes = np.uint64(channels)
    for position in range(first, stop):
        n = position // (out_rows * out_cols)
        r = position // out_cols % out_rows
        c = position % out_cols
        ih0 = (row[POOL_OROW0] + r) * stride_h - top  # input-tensor row of tap 0
        iw0 = c * stride_w - left
        base = position * channels
        acc = np.uint64(base)  # unsigned indices, no slices: the loops vectorize
        for ch in range(lanes):
            out[acc + ch] = initial
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
                x_base = np.uint64(((n * height + wr) * width + iw) * channels)
                if is_max:  # v taken if v > acc or v is a NaN, by a mask (a branch is scalar)
                    for ch in range(lanes):
                        v_bits, a_bits = x_bits[x_base + ch], out_bits[acc + ch]
                        v, a = f32_from_bits(v_bits), f32_from_bits(a_bits)
                        take = np.uint32(0) - np.uint32((v > a) | np.isnan(v))
                        out_bits[acc + ch] = (v_bits & take) | (a_bits & ~take)
                else:
                    for ch in range(lanes):
                        out[acc + ch] = out[acc + ch] + x[x_base + ch]
        if not is_max:
            count = padded if row[POOL_COUNT_INCLUDE_PAD] != 0 else valid
            divisor = np.float32(count)
            for ch in range(lanes):
                out[acc + ch] = out[acc + ch] / divisor


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
    # A row's taps across (`top`, `bottom`) depend on its input row and the output column
    # only: each input row the table names is interpolated across once, into `across`, and
    # every output row is then two_tap of two such rows, one run of out_cols * channels.
    used = np.zeros(height, np.bool_)
    for r in range(out_rows):
        used[np.int64(ytab[r, 0]) - row0] = True
        used[np.int64(ytab[r, 1]) - row0] = True
    run = np.uint64(out_cols * channels)
    across = np.empty((height, out_cols * channels), np.float32)
    out = np.empty(n_count * out_rows * out_cols * channels, np.float32)
    for n in range(n_count):
        for y in range(height):
            if not used[y]:
                continue
            line = across[y]
            for q in range(out_cols):
                x0, x1 = np.int64(xtab[q, 0]), np.int64(xtab[q, 1])
                wx0, wx1 = xtab[q, 2], xtab[q, 3]
                a0 = ((n * height + y) * width + x0) * channels
                a1 = ((n * height + y) * width + x1) * channels
                for ch in range(channels):
                    line[q * channels + ch] = two_tap(x[a0 + ch], x[a1 + ch], wx0, wx1)
        for r in range(out_rows):
            top, bottom = across[np.int64(ytab[r, 0]) - row0], across[np.int64(ytab[r, 1]) - row0]
            wy0, wy1 = ytab[r, 2], ytab[r, 3]
            base = np.uint64((n * out_rows + r) * run)
            for k in range(run):  # unsigned indices: no wraparound test a value
                out[base + k] = two_tap(top[k], bottom[k], wy0, wy1)
    store_f16(ocm, row[RESIZE_OUT_ADDR], out, tally)
    return 0


@jit
def add(row, frow, ocm, lut, table, tally, sync, i, worker, workers):
    """Shared by `workers` > 1 threads (every one calling this) by chunks of output values,
    like conv: each thread claims chunks until none is left and stores each as soon as it is
    computed, or, if an operand overlaps the output at another offset, once every chunk is
    computed. Returns 0, or -1 if the run was abandoned."""
    count = row[ADD_COUNT]
    a_addr, b_addr, out_addr, act = (
        row[ADD_A_ADDR],
        row[ADD_B_ADDR],
        row[ADD_OUT_ADDR],
        row[ADD_ACT],
    )
    act_a, act_b = frow[ADD_ACT_A], frow[ADD_ACT_B]
    if workers > 1 and not start_shared(sync, i, worker):
        return -1
    size = chunk_size(count, F16_LANES, workers)
    chunks = (count + size - 1) // size
    chunk = claim(sync, i, workers, chunks, 0)
    if chunk >= chunks:
        return end_shared(sync, i, worker, workers, chunks)
    # never shared with PRELU (shared_values): its slope follows the index from 0
    slopes = load_slopes(ocm, act, row[ADD_ACT_ADDR], row[ADD_CHANNELS])
    # each thread reads and writes its own chunks: only an operand at another offset of the
    # output's bytes needs every chunk read before any is stored
    nbytes = 2 * count
    a_safe = a_addr == out_addr or apart(a_addr, nbytes, out_addr, nbytes)
    b_safe = b_addr == out_addr or apart(b_addr, nbytes, out_addr, nbytes)
    deferred = workers > 1 and not (a_safe and b_safe)
    sums = np.empty(count, np.float32)
    mine = np.empty(chunks, np.int64)  # the chunks this thread took
    taken = 0
    while chunk < chunks:
        start, stop = chunk_bounds(chunk, size, count)
        span = sums[start:stop]
        load_f16_into(ocm, a_addr + 2 * start, span, lut)
        b = load_f16(ocm, b_addr + 2 * start, stop - start, lut)
        for k in range(stop - start):
            span[k] = span[k] + b[k]
        mine[taken] = chunk
        taken += 1
        if not deferred:
            finish(span, act, act_a, act_b, slopes, table, ocm, out_addr + 2 * start, tally)
        chunk = claim(sync, i, workers, chunks, taken)
    if deferred:
        if not all_computed(sync, i, taken, chunks):
            return -1
        for k in range(taken):
            start, stop = chunk_bounds(mine[k], size, count)
            span = sums[start:stop]
            finish(span, act, act_a, act_b, slopes, table, ocm, out_addr + 2 * start, tally)
    return all_stored(sync, i, worker, workers, taken, chunks)


@jit
def scale(row, frow, ocm, lut, table, tally):
    count, channels = row[SCALE_COUNT], row[SCALE_CHANNELS]
    x = load_f16(ocm, row[SCALE_IN_ADDR], count, lut)
    s = load_f32(ocm, row[SCALE_S_ADDR], channels)
    b = load_f32(ocm, row[SCALE_B_ADDR], channels)
    width = np.uint64(channels)
    for p in range(np.uint64(count // channels)):  # pixel by pixel: no division an element
        at = p * width
        for c in range(width):
            product = x[at + c] * s[c]  # rounds to fp32, then the sum rounds again
            x[at + c] = product + b[c]
    act = row[SCALE_ACT]
    slopes = load_slopes(ocm, act, row[SCALE_ACT_ADDR], channels)
    act_a, act_b = frow[SCALE_ACT_A], frow[SCALE_ACT_B]
    finish(x, act, act_a, act_b, slopes, table, ocm, row[SCALE_OUT_ADDR], tally)


@jit
def mul(row, frow, ocm, lut, table, tally):
    count, channels = row[MUL_COUNT], row[MUL_CHANNELS]
    a = load_f16(ocm, row[MUL_A_ADDR], count, lut)
    b = load_f16(ocm, row[MUL_B_ADDR], channels if channels > 0 else count, lut)
    # exact: two f16 values. Pixel by pixel with unsigned indices, so the loop has no
    # division an element (i mod C took most of a squeeze-excitation gate's time) and
    # vectorizes.
    width = np.uint64(channels if channels > 0 else count)
    for p in range(np.uint64(count) // width):
        at = p * width
        for c in range(width):
            a[at + c] = a[at + c] * b[c]
    act_a, act_b = frow[MUL_ACT_A], frow[MUL_ACT_B]
    finish(a, row[MUL_ACT], act_a, act_b, NO_SLOPES, table, ocm, row[MUL_OUT_ADDR], tally)
