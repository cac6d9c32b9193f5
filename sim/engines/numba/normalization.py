"""The Numba engine's normalization instructions, `softmax` (and its exp32) and `layernorm`,
bit for bit the reference interpreter's (docs/isa.md §3 and §4): the same fp32 steps in the
same order, one row at a time. Threads share a large softmax by its outer indices, a large layernorm by rows."""

from __future__ import annotations

import numpy as np

from mrvl.isa import EXP_LN2_HI, EXP_LN2_LO, EXP_LOG2E, EXP_LOW, EXP_POLY
from mrvl.sim.engines.numba.fields import (
    LN_B_ADDR,
    LN_EPS,
    LN_G_ADDR,
    LN_IN_ADDR,
    LN_LENGTH,
    LN_OUT_ADDR,
    LN_ROWS,
    SOFTMAX_IN_ADDR,
    SOFTMAX_INNER,
    SOFTMAX_LENGTH,
    SOFTMAX_OUT_ADDR,
    SOFTMAX_OUTER,
)
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.numerics import (
    f32_from_bits,
    load_f16_into,
    load_f32,
    store_f16,
)
from mrvl.sim.engines.numba.sharing import (
    all_computed,
    all_stored,
    apart,
    chunk_bounds,
    chunk_size_by_work,
    claim,
    end_shared,
    start_shared,
)

_LOW, _LOG2E = np.float32(EXP_LOW), np.float32(EXP_LOG2E)
_HI, _LO = np.float32(EXP_LN2_HI), np.float32(EXP_LN2_LO)
_P7, _P6, _P5, _P4, _P3, _P2, _P1, _P0 = (np.float32(c) for c in EXP_POLY)


@jit
def exp32(d):
    """`mrvl.sim.numerics.exp32` on one float32."""
    t = _LOW if d < _LOW else d
    u = t * _LOG2E + np.float32(0.5)
    k = 0 if u != u else int(np.floor(u))
    kf = np.float32(k)
    r = (t - kf * _HI) - kf * _LO
    p = _P7
    p = p * r + _P6
    p = p * r + _P5
    p = p * r + _P4
    p = p * r + _P3
    p = p * r + _P2
    p = p * r + _P1
    p = p * r + _P0
    return p * f32_from_bits(np.uint32((k + 127) << 23))


SOFTMAX_VALUE_MACS = 200
"""About what one softmax value costs (a max, exp32, a sum and a division: some 7 ns) in
mac_tile multiply-adds, to size a shared softmax's chunks by work (`chunk_size_by_work`)."""


@jit
def softmax(row, ocm, lut, tally, sync, i, worker, workers):
    """Each row (outer index o, inner index i) of the [outer, length, inner] input: its max,
    exp32(x - max) kept in fp32, their sum in order, then e / sum, stored as f16. `workers`
    > 1 threads (shared_softmax) share it by chunks of outer indices: each converts, computes
    and stores its own (once every chunk is computed if the output overlaps the input other
    than exactly in place). Returns 0, or -1 if the run was abandoned."""
    outer, length, inner = row[SOFTMAX_OUTER], row[SOFTMAX_LENGTH], row[SOFTMAX_INNER]
    if workers > 1 and not start_shared(sync, i, worker):
        return -1
    span = length * inner  # the values of one outer index
    size = chunk_size_by_work(outer, 1, span * SOFTMAX_VALUE_MACS, workers)
    chunks = (outer + size - 1) // size
    chunk = claim(sync, i, workers, chunks, 0)
    if chunk >= chunks:
        return end_shared(sync, i, worker, workers, chunks)
    in_addr, out_addr = row[SOFTMAX_IN_ADDR], row[SOFTMAX_OUT_ADDR]
    nbytes = 2 * outer * span
    deferred = workers > 1 and in_addr != out_addr and not apart(in_addr, nbytes, out_addr, nbytes)
    x = np.empty(outer * span, np.float32)  # read before writing
    e = np.empty(length, np.float32)
    mine = np.empty(chunks, np.int64)
    taken = 0
    while chunk < chunks:
        first, last = chunk_bounds(chunk, size, outer)
        lo, hi = first * span, last * span
        load_f16_into(ocm, in_addr + 2 * lo, x[lo:hi], lut)
        softmax_rows(x, e, first, last, length, inner)
        mine[taken] = chunk
        taken += 1
        if not deferred:
            store_f16(ocm, out_addr + 2 * lo, x[lo:hi], tally)
        chunk = claim(sync, i, workers, chunks, taken)
    if deferred:
        if not all_computed(sync, i, taken, chunks):
            return -1
        for c in range(taken):
            lo, hi = chunk_bounds(mine[c], size, outer)
            store_f16(ocm, out_addr + 2 * lo * span, x[lo * span : hi * span], tally)
    return all_stored(sync, i, worker, workers, taken, chunks)


@jit
def softmax_rows(x, e, first, stop, length, inner):
    """softmax's rows of outer indices [first, stop) in x, in place (e: scratch of length)."""
    stride = np.uint64(inner)
    for o in range(first, stop):
        for i in range(inner):
            base = np.uint64(o * length * inner + i)
            m = np.float32(-np.inf)
            for j in range(np.uint64(length)):
                v = x[base + j * stride]
                if v > m or v != v:
                    m = v
            # the exponentials in a loop of their own, which vectorizes (unsigned indices,
            # exp32 branch-free), then their sum in order: ViT-Tiny's softmaxes took 12 ns a
            # value with the sum in the same loop, which kept it scalar
            for j in range(np.uint64(length)):
                e[j] = exp32(x[base + j * stride] - m)
            total = np.float32(0.0)
            for j in range(np.uint64(length)):
                total = total + e[j]
            for j in range(np.uint64(length)):
                x[base + j * stride] = e[j] / total


LN_VALUE_MACS = 40
"""About what one layernorm value costs (two sums, a subtraction, two multiplies and an add:
some 1.2 ns) in mac_tile multiply-adds, to size a shared layernorm's chunks by work."""


@jit
def layernorm(row, frow, ocm, lut, tally, sync, i, worker, workers):
    """Each row of the [rows, length] input: the fp32 sum, the mean, the fp32 sum of squared
    deviations, the variance, rstd = 1 / sqrt(var + eps) (each one IEEE fp32 operation),
    then ((x - mean) * rstd) * g + b, stored as f16. `workers` > 1 threads (shared_layernorm)
    share it by chunks of rows, as softmax. Returns 0, or -1 if the run was abandoned."""
    rows, length = row[LN_ROWS], row[LN_LENGTH]
    if workers > 1 and not start_shared(sync, i, worker):
        return -1
    size = chunk_size_by_work(rows, 1, length * LN_VALUE_MACS, workers)
    chunks = (rows + size - 1) // size
    chunk = claim(sync, i, workers, chunks, 0)
    if chunk >= chunks:
        return end_shared(sync, i, worker, workers, chunks)
    in_addr, out_addr = row[LN_IN_ADDR], row[LN_OUT_ADDR]
    nbytes = 2 * rows * length
    g = load_f32(ocm, row[LN_G_ADDR], length)
    b = load_f32(ocm, row[LN_B_ADDR], length)
    deferred = workers > 1 and not (
        (in_addr == out_addr or apart(in_addr, nbytes, out_addr, nbytes))
        and apart(row[LN_G_ADDR], 4 * length, out_addr, nbytes)
        and apart(row[LN_B_ADDR], 4 * length, out_addr, nbytes)
    )
    x = np.empty(rows * length, np.float32)  # read before writing
    eps = np.float32(frow[LN_EPS])
    mine = np.empty(chunks, np.int64)
    taken = 0
    while chunk < chunks:
        first, last = chunk_bounds(chunk, size, rows)
        lo, hi = first * length, last * length
        load_f16_into(ocm, in_addr + 2 * lo, x[lo:hi], lut)
        layernorm_rows(x, g, b, eps, first, last, length)
        mine[taken] = chunk
        taken += 1
        if not deferred:
            store_f16(ocm, out_addr + 2 * lo, x[lo:hi], tally)
        chunk = claim(sync, i, workers, chunks, taken)
    if deferred:
        if not all_computed(sync, i, taken, chunks):
            return -1
        for c in range(taken):
            lo, hi = chunk_bounds(mine[c], size, rows)
            store_f16(ocm, out_addr + 2 * lo * length, x[lo * length : hi * length], tally)
    return all_stored(sync, i, worker, workers, taken, chunks)


@jit
def layernorm_rows(x, g, b, eps, first, stop, length):
    """layernorm's rows [first, stop) of x, in place."""
    count = np.float32(length)
    for r in range(first, stop):
        base = r * length
        total = np.float32(0.0)
        for j in range(length):
            total = total + x[base + j]
        mean = total / count
        squares = np.float32(0.0)
        for j in range(length):
            d = x[base + j] - mean
            squares = squares + d * d
        var = squares / count
        # np.divide: IEEE 1 / +0 = inf (Numba's `/` raises), correctly rounded to fp32
        rstd = np.float32(np.divide(np.float32(1.0), np.float32(np.sqrt(var + eps))))
        for j in range(length):
            x[base + j] = ((x[base + j] - mean) * rstd) * g[j] + b[j]
