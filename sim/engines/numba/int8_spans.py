"""The Numba engine's `qadd`, `qpool` and `qfc` (docs/isa.md, "Numerics (int8 mode)"), each
cut into spans of its output bytes that the engine's threads share as they share the fp16
`add`, `pool` and `fc` (`sharing.py`): `int8.shared_int8` says which are worth it.

Each thread claims chunks of the instruction's output items (a qadd's values, a qpool's output
positions, a qfc's (row, output) pairs, one run of output bytes each) until none is left,
computes each into a buffer of its own (`qadd_span`, `qpool_span`, `qfc_span`) from the OCM,
and stores it at once, or once every chunk is computed if the output overlaps a byte the
instruction reads (`span_output_apart`): then no store reaches a byte another thread still
reads, and on one thread every result is computed before the first store, as the reference
interpreter reads every operand first. The sums are exact (int64, or int32 that wraps where
the ISA's int32 accumulator wraps), so any chunking gives the interpreter's bytes.
"""

from __future__ import annotations

import numpy as np

from mrvl.isa_int8 import QADD_LEFT_SHIFT
from mrvl.sim.engines.numba.fields import POOL_MAX
from mrvl.sim.engines.numba.int8 import (
    INT8_KERNELS as UNSHARED_KERNELS,
)
from mrvl.sim.engines.numba.int8 import (
    OP_QADD,
    OP_QFC,
    OP_QPOOL,
    QA_A_ADDR,
    QA_A_RQ,
    QA_A_ZP,
    QA_B_ADDR,
    QA_B_RQ,
    QA_B_ZP,
    QA_CLAMP,
    QA_COUNT,
    QA_LUT_ADDR,
    QA_OUT_ADDR,
    QA_OUT_RQ,
    QA_OUT_ZP,
    QF_B_ADDR,
    QF_CLAMP,
    QF_IN_ADDR,
    QF_IN_ZP,
    QF_K,
    QF_LUT_ADDR,
    QF_N,
    QF_O,
    QF_OUT_ADDR,
    QF_OUT_ZP,
    QF_RQ_ADDR,
    QF_W_ADDR,
    QP_COUNT_INCLUDE_PAD,
    QP_IN_ADDR,
    QP_IN_HW,
    QP_IN_SHAPE,
    QP_IN_ZP,
    QP_KERNEL,
    QP_MODE,
    QP_OROW0,
    QP_OUT_ADDR,
    QP_OUT_SHAPE,
    QP_OUT_ZP,
    QP_PAD,
    QP_PAD_END,
    QP_ROW0,
    QP_RQ,
    QP_STRIDE,
    finish,
    load_i32,
    requantize,
    rescale_terms,
    table_copy,
    wrap_int32,
)
from mrvl.sim.engines.numba.jit import jit
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
def qadd_span(row, ocm, results, start, stop, table, lut):
    """Values [start, stop) of a qadd into results[start:stop]: each operand's scaled term,
    their sum's requantization and clamp in one branch-free loop the compiler vectorizes (no
    lookup in it), then the table. Every product is of two int32 values (`rescale_terms`; a
    term is below 2^28 in size, as a_rq and b_rq multiply by less than 1, so their sum is an
    int32 too): one signed 32 x 32 -> 64-bit multiply each, not an emulated 64-bit one."""
    a = ocm[row[QA_A_ADDR] + start : row[QA_A_ADDR] + stop].view(np.int8)
    b = ocm[row[QA_B_ADDR] + start : row[QA_B_ADDR] + stop].view(np.int8)
    a_zp, b_zp = np.int32(row[QA_A_ZP]), np.int32(row[QA_B_ZP])
    a_factor, a_rounding, a_right = rescale_terms(row[QA_A_RQ], row[QA_A_RQ + 1])
    b_factor, b_rounding, b_right = rescale_terms(row[QA_B_RQ], row[QA_B_RQ + 1])
    out_zp = np.int64(row[QA_OUT_ZP])
    lo, hi = np.int64(row[QA_CLAMP]), np.int64(row[QA_CLAMP + 1])
    multiplier, rounding, right = rescale_terms(row[QA_OUT_RQ], row[QA_OUT_RQ + 1])
    out = results[start:stop]
    for k in range(stop - start):
        # int64 of an int32 (Numba's int32 arithmetic is int64): the compiler sees the
        # factors' 32 bits and multiplies them as such
        a_shifted = np.int64(np.int32((np.int32(a[k]) - a_zp) << QADD_LEFT_SHIFT))
        b_shifted = np.int64(np.int32((np.int32(b[k]) - b_zp) << QADD_LEFT_SHIFT))
        a_term = np.int32((a_shifted * a_factor + a_rounding) >> a_right)
        b_term = np.int32((b_shifted * b_factor + b_rounding) >> b_right)
        total = np.int64(np.int32(a_term + b_term))
        y = out_zp + ((total * multiplier + rounding) >> right)
        out[k] = np.uint8(min(max(y, lo), hi) & 0xFF)
    if lut != -1:  # a byte's int8 value + 128 is the byte ^ 0x80
        for k in range(stop - start):
            out[k] = table[out[k] ^ 0x80]


@jit
def qpool_span(row, ocm, results, start, stop):
    """Output positions [start, stop) of a qpool into results (channels a position): per
    position and channel the max of the valid taps, or the sum of their differences from
    in_zp divided by the divisor (ties away from zero); then rescaled."""
    n, ih, iw, c = (
        row[QP_IN_SHAPE],
        row[QP_IN_SHAPE + 1],
        row[QP_IN_SHAPE + 2],
        row[QP_IN_SHAPE + 3],
    )
    oh, ow = row[QP_OUT_SHAPE + 1], row[QP_OUT_SHAPE + 2]
    kh_count, kw_count = row[QP_KERNEL], row[QP_KERNEL + 1]
    sh, sw, top, left = row[QP_STRIDE], row[QP_STRIDE + 1], row[QP_PAD], row[QP_PAD + 1]
    height, width = row[QP_IN_HW], row[QP_IN_HW + 1]
    bottom, right = row[QP_PAD_END], row[QP_PAD_END + 1]
    is_max, include_pad = row[QP_MODE] == POOL_MAX, row[QP_COUNT_INCLUDE_PAD] != 0
    in_zp, out_zp = np.int64(row[QP_IN_ZP]), row[QP_OUT_ZP]
    multiplier, shift = row[QP_RQ], row[QP_RQ + 1]
    x = ocm[row[QP_IN_ADDR] : row[QP_IN_ADDR] + n * ih * iw * c].view(np.int8)
    acc = np.empty(c, np.int64)
    for position in range(start, stop):
        b, rest = position // (oh * ow), position % (oh * ow)
        r, q = rest // ow, rest % ow
        rows0 = (row[QP_OROW0] + r) * sh - top  # input-tensor row of the first tap
        cols0 = q * sw - left
        acc[:] = -(np.int64(1) << 40) if is_max else 0
        valid = 0
        for kh in range(kh_count):
            wr = rows0 + kh - row[QP_ROW0]
            if wr < 0 or wr >= ih:
                continue
            for kw in range(kw_count):
                wc = cols0 + kw
                if wc < 0 or wc >= iw:
                    continue
                valid += 1
                taps = x[((b * ih + wr) * iw + wc) * c :]
                if is_max:
                    for ch in range(c):
                        acc[ch] = max(acc[ch], np.int64(taps[ch]))
                else:
                    for ch in range(c):
                        acc[ch] += taps[ch]
        divisor = valid
        if include_pad:
            rows_in = min(rows0 + kh_count, height + bottom) - max(rows0, -top)
            cols_in = min(cols0 + kw_count, width + right) - max(cols0, -left)
            divisor = rows_in * cols_in
        out = results[position * c : (position + 1) * c]
        for ch in range(c):
            if is_max:
                value = acc[ch] - in_zp
            else:
                s = acc[ch] - valid * in_zp  # the sum of the taps' (v - in_zp)
                magnitude = (abs(s) + divisor // 2) // divisor
                value = magnitude if s >= 0 else -magnitude
            y = out_zp + requantize(value, multiplier, shift)
            out[ch] = np.uint8(min(max(y, -128), 127) & 0xFF)


@jit
def qfc_span(row, ocm, results, start, stop, operands, table, lut):
    """Outputs [start, stop) of a qfc, counted across its rows (row r's output j is r * O +
    j), into results: each the dot product of the row's inputs less in_zp and the output's
    weights (`operands`: qfc_operands), plus its bias, wrapped to int32, requantized, clamped
    and looked up."""
    inputs, bias, pairs = operands
    inner, outs = row[QF_K], row[QF_O]
    w = ocm[row[QF_W_ADDR] : row[QF_W_ADDR] + outs * inner].view(np.int8)
    lo, hi, out_zp = row[QF_CLAMP], row[QF_CLAMP + 1], row[QF_OUT_ZP]
    for item in range(start, stop):
        r, j = item // outs, item % outs
        x, wj = inputs[r * inner : (r + 1) * inner], w[j * inner : (j + 1) * inner]
        s = np.int64(0)
        for kk in range(inner):  # int32 products: |(x - in_zp)·w| <= 255·128
            s += np.int32(x[kk]) * np.int32(wj[kk])
        y = out_zp + requantize(wrap_int32(bias[j] + s), pairs[2 * j], pairs[2 * j + 1])
        results[item] = np.uint8(finish(y, lo, hi, table, lut) & 0xFF)


@jit
def qfc_operands(row, ocm):
    """A qfc's input rows less in_zp (int32 [N * K]), its int32 biases (0 if b_addr = -1) and
    its rescale pairs (int64 [O], [2 * O])."""
    count, outs = row[QF_N] * row[QF_K], row[QF_O]
    raw = ocm[row[QF_IN_ADDR] : row[QF_IN_ADDR] + count].view(np.int8)
    inputs = np.empty(count, np.int32)
    in_zp = np.int32(row[QF_IN_ZP])
    for k in range(count):
        inputs[k] = np.int32(raw[k]) - in_zp
    b_addr = row[QF_B_ADDR]
    bias = load_i32(ocm, np.int64(b_addr), outs) if b_addr != -1 else np.zeros(outs, np.int64)
    return inputs, bias, load_i32(ocm, np.int64(row[QF_RQ_ADDR]), 2 * outs)


@jit
def span_layout(op, row):
    """(items, bytes an item, output address, table address) of a qadd, qpool or qfc."""
    if op == OP_QADD:
        return row[QA_COUNT], 1, row[QA_OUT_ADDR], row[QA_LUT_ADDR]
    if op == OP_QPOOL:
        positions = row[QP_OUT_SHAPE] * row[QP_OUT_SHAPE + 1] * row[QP_OUT_SHAPE + 2]
        return positions, row[QP_OUT_SHAPE + 3], row[QP_OUT_ADDR], -1
    return row[QF_N] * row[QF_O], 1, row[QF_OUT_ADDR], row[QF_LUT_ADDR]


@jit
def span_output_apart(op, row):
    """Whether the output of a qadd, qpool or qfc lies apart from every OCM byte it reads but
    its own values (a qadd operand at the output's address reads each value before its
    store): then the threads sharing it store their chunks as soon as they have them."""
    items, unit, out, lut = span_layout(op, row)
    size = items * unit
    if not apart(lut, 256, out, size):
        return False
    if op == OP_QADD:
        a, b = row[QA_A_ADDR], row[QA_B_ADDR]
        return (a == out or apart(a, size, out, size)) and (b == out or apart(b, size, out, size))
    if op == OP_QPOOL:
        inputs = row[QP_IN_SHAPE] * row[QP_IN_SHAPE + 1] * row[QP_IN_SHAPE + 2]
        return apart(row[QP_IN_ADDR], inputs * row[QP_IN_SHAPE + 3], out, size)
    outs = row[QF_O]
    return (
        apart(row[QF_IN_ADDR], row[QF_N] * row[QF_K], out, size)
        and apart(row[QF_W_ADDR], outs * row[QF_K], out, size)
        and apart(row[QF_B_ADDR], 4 * outs, out, size)
        and apart(row[QF_RQ_ADDR], 8 * outs, out, size)
    )


@jit
def span_kernel(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    """`qadd`, `qpool` or `qfc`, by chunks of output items (span_layout) shared by `workers`
    threads (all of it in one chunk on one thread). Returns 0, or -1 if the run was
    abandoned."""
    op, ocm = row[0], machine[1][row[1]]
    items, unit, out, lut_addr = span_layout(op, row)
    if workers > 1 and not start_shared(sync, i, worker):
        return -1
    size = chunk_size(items, 1, workers)
    chunks = (items + size - 1) // size
    chunk = claim(sync, i, workers, chunks, 0)
    if chunk >= chunks:
        return end_shared(sync, i, worker, workers, chunks)
    # read before this thread stores: the table and a qfc's inputs, biases and pairs
    table, lut = table_copy(ocm, lut_addr)
    operands = (np.empty(0, np.int32), np.empty(0, np.int64), np.empty(0, np.int64))
    if op == OP_QFC:
        operands = qfc_operands(row, ocm)
    results = np.empty(items * unit, np.uint8)
    deferred = workers > 1 and not span_output_apart(op, row)
    mine = np.empty(chunks, np.int64)  # the chunks this thread took
    taken = 0
    while chunk < chunks:
        start, stop = chunk_bounds(chunk, size, items)
        if op == OP_QADD:
            qadd_span(row, ocm, results, start, stop, table, lut)
        elif op == OP_QPOOL:
            qpool_span(row, ocm, results, start, stop)
        else:
            qfc_span(row, ocm, results, start, stop, operands, table, lut)
        mine[taken] = chunk
        taken += 1
        if not deferred:
            ocm[out + start * unit : out + stop * unit] = results[start * unit : stop * unit]
        chunk = claim(sync, i, workers, chunks, taken)
    if deferred:
        if not all_computed(sync, i, taken, chunks):
            return -1
        for k in range(taken):
            start, stop = chunk_bounds(mine[k], size, items)
            ocm[out + start * unit : out + stop * unit] = results[start * unit : stop * unit]
    return all_stored(sync, i, worker, workers, taken, chunks)


INT8_KERNELS = {**UNSHARED_KERNELS, "qadd": span_kernel, "qpool": span_kernel, "qfc": span_kernel}
"""The int8 opcodes' kernels, which `dispatch.py` registers (with `qconv` of `int8_conv.py`,
`qresize` of `int8_resize.py` and `qbmm` of `int8_bmm.py`)."""
