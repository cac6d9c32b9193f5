"""The Numba engine's `qconv` instruction (docs/isa.md, `qconv` and "Numerics (int8 mode)"):
one run of output channels (groups = 1) from the blocks of `int8_mac.py`, shared between the
engine's threads as the fp16 `conv` is (`mac.py`); a depthwise conv across its channels
(`qconv_depthwise`); other grouped convs keep the plain loops of `int8.py`.

The window is copied once per thread as int16 values less the zero point, padded on every side
with zeros (a padding tap reads in_zp and adds 0) and each position's channels to an even
count, so that every tap of every output position is a run of channel pairs at a fixed offset:
no bounds test in the block. The weights are packed to the blocks' layout (`pack_qweights`).
The int32 sums wrap modulo 2^32 in any order, so the bytes are the reference interpreter's
whatever the blocking and whichever thread computes which chunk.
"""

from __future__ import annotations

import numpy as np

from mrvl.isa_int8 import RQ_SHIFT_MAX, RQ_SHIFT_MIN
from mrvl.sim.engines.numba.int8 import (
    QC_ACC_ADDR,
    QC_ACC_OUT,
    QC_B_ADDR,
    QC_CLAMP,
    QC_DILATION,
    QC_GROUPS,
    QC_IN_ADDR,
    QC_IN_SHAPE,
    QC_IN_ZP,
    QC_KERNEL,
    QC_LUT_ADDR,
    QC_OC0,
    QC_OC_TOTAL,
    QC_OROW0,
    QC_OUT_ADDR,
    QC_OUT_SHAPE,
    QC_OUT_ZP,
    QC_PAD,
    QC_ROW0,
    QC_RQ_ADDR,
    QC_STRIDE,
    QC_W_ADDR,
    load_i32,
    qconv_kernel_loops,
    store_i32,
    table_copy,
)
from mrvl.sim.engines.numba.int8_mac import QMAC_CHANNELS, QMAC_PIXELS, qmac_tile
from mrvl.sim.engines.numba.jit import jit
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

QMAC_SPEEDUP = 4
"""About how many times more multiply-adds a second `qmac_tile` does than the fp16 `mac_tile`
that sharing.CHUNK_MACS is sized for: a qconv chunk holds as many seconds of work."""


@jit
def qconv_geometry(row):
    """(padded rows, padded columns, channels padded to even) of a qconv's int16 window: every
    input row and column its output positions' taps reach, in the padding or not."""
    oh, ow = row[QC_OUT_SHAPE + 1], row[QC_OUT_SHAPE + 2]
    rows = (oh - 1) * row[QC_STRIDE] + (row[QC_KERNEL] - 1) * row[QC_DILATION] + 1
    cols = (ow - 1) * row[QC_STRIDE + 1] + (row[QC_KERNEL + 1] - 1) * row[QC_DILATION + 1] + 1
    return rows, cols, row[QC_IN_SHAPE + 3] + row[QC_IN_SHAPE + 3] % 2


@jit
def qconv_window(row, ocm):
    """int16[N, rows, cols, channels] (qconv_geometry): the input less in_zp where the taps
    read inside the input tile, 0 in the padding, beyond the tile's rows and in the extra
    channel."""
    n, ih, iw, c = (
        row[QC_IN_SHAPE],
        row[QC_IN_SHAPE + 1],
        row[QC_IN_SHAPE + 2],
        row[QC_IN_SHAPE + 3],
    )
    rows, cols, cp = qconv_geometry(row)
    top = row[QC_OROW0] * row[QC_STRIDE] - row[QC_PAD] - row[QC_ROW0]  # tile row of row 0
    left = -row[QC_PAD + 1]
    in_zp = np.int16(row[QC_IN_ZP])
    raw = ocm[row[QC_IN_ADDR] : row[QC_IN_ADDR] + n * ih * iw * c].view(np.int8)
    x = np.zeros(n * rows * cols * cp, np.int16)
    c_lo, c_hi = max(0, -left), min(cols, iw - left)
    for b in range(n):
        for r in range(rows):
            wr = r + top
            if wr < 0 or wr >= ih:
                continue
            src = ((b * ih + wr) * iw + c_lo + left) * c
            dst = ((b * rows + r) * cols + c_lo) * cp
            if cp == c:  # the row's columns inside the tile are one run
                run_in, run_out = (
                    raw[src : src + (c_hi - c_lo) * c],
                    x[dst : dst + (c_hi - c_lo) * c],
                )
                for k in range(run_in.size):
                    run_out[k] = run_in[k] - in_zp
                continue
            for q in range(c_hi - c_lo):
                run_in, run_out = (
                    raw[src + q * c : src + q * c + c],
                    x[dst + q * cp : dst + q * cp + c],
                )
                for k in range(c):
                    run_out[k] = run_in[k] - in_zp
    return x


@jit
def qconv_segments(row):
    """(taps, pairs): each segment's offset from a position's window origin, and its channel
    pairs (all alike). With a dilation of 1 across, a kernel row's taps are one run of
    contiguous inputs; else each tap is its own."""
    kh_count, kw_count = row[QC_KERNEL], row[QC_KERNEL + 1]
    dh, dw = row[QC_DILATION], row[QC_DILATION + 1]
    _, cols, cp = qconv_geometry(row)
    if dw == 1:
        taps = np.empty(kh_count, np.int64)
        for kh in range(kh_count):
            taps[kh] = kh * dh * cols * cp
        return taps, kw_count * cp // 2
    taps = np.empty(kh_count * kw_count, np.int64)
    for kh in range(kh_count):
        for kw in range(kw_count):
            taps[kh * kw_count + kw] = (kh * dh * cols + kw * dw) * cp
    return taps, cp // 2


@jit
def pack_qweights(row, ocm, packed):
    """Pack the OHWI int8 weights into `packed` (int16, int8_weights.packed_qweights_size)
    as qmac_tile's blocks: per block of QMAC_CHANNELS output channels, per channel pair (kh,
    kw, then channel pairs, the extra channel 0), the block's channels' two weights side by
    side; 0 past the last output channel."""
    oc = row[QC_OUT_SHAPE + 3]
    kh_count, kw_count, c = row[QC_KERNEL], row[QC_KERNEL + 1], row[QC_IN_SHAPE + 3]
    cp = c + c % 2
    pairs = kh_count * kw_count * cp // 2
    w = ocm[row[QC_W_ADDR] : row[QC_W_ADDR] + oc * kh_count * kw_count * c].view(np.int8)
    packed[:] = 0
    pair_stride = QMAC_CHANNELS * 2  # int16 values of one channel pair of a block
    for o in range(oc):
        block, lane = o // QMAC_CHANNELS, o % QMAC_CHANNELS
        lane_values = packed[block * pairs * pair_stride + 2 * lane :]
        source = w[o * kh_count * kw_count * c : (o + 1) * kh_count * kw_count * c]
        for tap in range(kh_count * kw_count):
            taps_in, first = source[tap * c : (tap + 1) * c], tap * cp // 2
            for ci in range(0, c - 1, 2):
                at = (first + ci // 2) * pair_stride
                lane_values[at] = taps_in[ci]
                lane_values[at + 1] = taps_in[ci + 1]
            if c % 2:
                lane_values[(first + c // 2) * pair_stride] = taps_in[c - 1]


@jit
def cached_qweights(row, ocm, slot_arrays, i, worker):
    """Instruction i's packed weights from its int8_weights slot (thread 0 repacks it first
    if the weights in OCM are not the bytes it was packed from), or an empty array if it has
    none."""
    slots, raw_at, packed_at, raw, packed, filled = slot_arrays
    slot = slots[i]
    if slot < 0:
        return packed[:0]
    mine = packed[packed_at[slot] : packed_at[slot + 1]]
    if worker == 0:
        bytes_packed = raw[raw_at[slot] : raw_at[slot + 1]]
        weights = ocm[row[QC_W_ADDR] : row[QC_W_ADDR] + bytes_packed.size]
        differ = np.uint8(filled[slot] == 0)
        for k in range(weights.size):  # no early exit: a loop the compiler vectorizes
            differ |= weights[k] ^ bytes_packed[k]
        if differ != 0:
            pack_qweights(row, ocm, mine)
            bytes_packed[:] = weights
            filled[slot] = 1
    return mine


@jit
def qconv_positions(row, x, packed, taps, pairs, acc, start, stop):
    """acc[p * OCP + o] = the sum of position p's taps for output channel o (OCP: the channels
    rounded up to whole blocks), for positions [start, stop); rows up to the next whole
    QMAC_PIXELS are computed too (from the last position's window), so acc has room for them."""
    oh, ow, oc = row[QC_OUT_SHAPE + 1], row[QC_OUT_SHAPE + 2], row[QC_OUT_SHAPE + 3]
    rows, cols, cp = qconv_geometry(row)
    sh, sw = row[QC_STRIDE], row[QC_STRIDE + 1]
    blocks = (oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS
    width = blocks * QMAC_CHANNELS
    block_size = taps.size * pairs * QMAC_CHANNELS * 2
    bases = np.empty(QMAC_PIXELS, np.int64)
    out_at = np.empty(QMAC_PIXELS, np.int64)
    for block in range(blocks):
        for first in range(start, stop, QMAC_PIXELS):
            for p in range(QMAC_PIXELS):
                position = min(first + p, stop - 1)
                b, rest = position // (oh * ow), position % (oh * ow)
                r, q = rest // ow, rest % ow
                bases[p] = ((b * rows + r * sh) * cols + q * sw) * cp
                out_at[p] = (first + p) * width + block * QMAC_CHANNELS
            qmac_tile(x, bases, taps, taps.size, pairs, packed, block * block_size, acc, out_at)


@jit
def qconv_start(row, ocm, bias, acc, start, stop):
    """Add each position's int32 start to its sums, wrapped to int32: the partial sums at
    acc_addr (read now, before any thread stores), else the bias (or 0)."""
    oc = row[QC_OUT_SHAPE + 3]
    width = (oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS * QMAC_CHANNELS
    acc_addr = row[QC_ACC_ADDR]
    if acc_addr != -1:
        partial = load_i32(ocm, np.int64(acc_addr) + 4 * start * oc, (stop - start) * oc)
        for p in range(start, stop):
            sums, starts = acc[p * width : p * width + oc], partial[(p - start) * oc :]
            for o in range(oc):  # the int32 sum modulo 2^32 (LLVM's add wraps)
                sums[o] = np.int32(np.int64(sums[o]) + starts[o])
        return
    if bias.size == 0:
        return
    for p in range(start, stop):
        sums = acc[p * width : p * width + oc]
        for o in range(oc):
            sums[o] = np.int32(np.int64(sums[o]) + bias[o])


@jit
def qconv_store(row, ocm, acc, start, stop, multipliers, roundings, rights, table, lut):
    """Store positions [start, stop): the int32 accumulator (acc_out), or out_zp plus each
    channel's requantization (`int8.requantize`, its factor, 2^(r - 1) and r per channel),
    clamped and looked up in the table (`int8.finish`, in two passes)."""
    oc = row[QC_OUT_SHAPE + 3]
    width = (oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS * QMAC_CHANNELS
    out = np.int64(row[QC_OUT_ADDR])
    if row[QC_ACC_OUT]:
        if out % 4 == 0:
            view = ocm[out + 4 * start * oc : out + 4 * stop * oc].view(np.int32)
            for p in range(start, stop):
                view[(p - start) * oc : (p - start + 1) * oc] = acc[p * width : p * width + oc]
            return
        for p in range(start, stop):
            store_i32(ocm, out + 4 * p * oc, acc[p * width : p * width + oc].astype(np.int64))
        return
    lo, hi, out_zp = np.int64(row[QC_CLAMP]), np.int64(row[QC_CLAMP + 1]), np.int64(row[QC_OUT_ZP])
    for p in range(start, stop):  # a loop the compiler vectorizes: no branch, no lookup
        sums = acc[p * width : p * width + oc]
        at = out + p * oc
        bytes_out = ocm[at : at + oc]
        for o in range(oc):
            v = (np.int64(sums[o]) * multipliers[o] + roundings[o]) >> rights[o]
            bytes_out[o] = np.uint8(min(max(out_zp + v, lo), hi) & 0xFF)
        if lut != -1:  # a byte's int8 value + 128 is the byte ^ 0x80
            for o in range(oc):
                bytes_out[o] = table[bytes_out[o] ^ 0x80]


@jit
def qconv_rescale(row, ocm):
    """Each output channel's requantization as (factor, 2^(r - 1), r) of `int8.requantize`
    (int64[OCt] each; unused with acc_out)."""
    oc = row[QC_OUT_SHAPE + 3]
    multipliers = np.empty(oc, np.int64)
    roundings = np.empty(oc, np.int64)
    rights = np.empty(oc, np.int64)
    if not row[QC_ACC_OUT]:
        rq = load_i32(ocm, np.int64(row[QC_RQ_ADDR]), 2 * oc)
        for o in range(oc):
            multipliers[o] = rq[2 * o]
            rights[o] = 31 - min(max(rq[2 * o + 1], RQ_SHIFT_MIN), RQ_SHIFT_MAX)
            roundings[o] = np.int64(1) << (rights[o] - 1)
    return multipliers, roundings, rights


@jit
def qconv_depthwise(row, ocm):
    """A depthwise qconv (one input channel a group, one output channel each): per output
    position, each tap's inputs times its weights added across the channels at once, in int32
    that wraps, from the padded window (qconv_window: no bounds test); then qconv_start and
    qconv_store, all positions at once after every read."""
    n, oh, ow, oc = (
        row[QC_OUT_SHAPE],
        row[QC_OUT_SHAPE + 1],
        row[QC_OUT_SHAPE + 2],
        row[QC_OUT_SHAPE + 3],
    )
    kh_count, kw_count = row[QC_KERNEL], row[QC_KERNEL + 1]
    dh, dw, sh, sw = row[QC_DILATION], row[QC_DILATION + 1], row[QC_STRIDE], row[QC_STRIDE + 1]
    rows, cols, cp = qconv_geometry(row)
    x = qconv_window(row, ocm)
    taps = kh_count * kw_count
    w = ocm[row[QC_W_ADDR] : row[QC_W_ADDR] + oc * taps].view(np.int8)
    wt = np.empty((taps, oc), np.int32)  # [tap, channel]
    offsets = np.empty(taps, np.int64)
    for kh in range(kh_count):
        for kw in range(kw_count):
            offsets[kh * kw_count + kw] = (kh * dh * cols + kw * dw) * cp + row[QC_OC0]
    for o in range(oc):
        for t in range(taps):
            wt[t, o] = w[o * taps + t]
    positions = n * oh * ow
    width = (oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS * QMAC_CHANNELS
    acc = np.zeros(positions * width, np.int32)
    for position in range(positions):
        b, rest = position // (oh * ow), position % (oh * ow)
        base = ((b * rows + (rest // ow) * sh) * cols + (rest % ow) * sw) * cp
        sums = acc[position * width : position * width + oc]
        for t in range(taps):
            inputs, weights = x[base + offsets[t] : base + offsets[t] + oc], wt[t]
            for o in range(oc):
                sums[o] = np.int32(sums[o] + np.int32(inputs[o]) * weights[o])
    b_addr = row[QC_B_ADDR]
    bias = load_i32(ocm, np.int64(b_addr), oc) if b_addr != -1 else np.zeros(0, np.int64)
    qconv_start(row, ocm, bias, acc, 0, positions)
    multipliers, roundings, rights = qconv_rescale(row, ocm)
    table, lut = table_copy(ocm, row[QC_LUT_ADDR])
    qconv_store(row, ocm, acc, 0, positions, multipliers, roundings, rights, table, lut)


@jit
def qconv_output_apart(row):
    """Whether a qconv's output lies apart from every OCM byte it reads: its input window,
    weights, bias, partial sums, pairs and table. Then the threads sharing it may each store
    their chunks as soon as they have them."""
    n, ih, iw, c = (
        row[QC_IN_SHAPE],
        row[QC_IN_SHAPE + 1],
        row[QC_IN_SHAPE + 2],
        row[QC_IN_SHAPE + 3],
    )
    positions = row[QC_OUT_SHAPE] * row[QC_OUT_SHAPE + 1] * row[QC_OUT_SHAPE + 2]
    oc = row[QC_OUT_SHAPE + 3]
    out_addr = row[QC_OUT_ADDR]
    nbytes = (4 if row[QC_ACC_OUT] else 1) * positions * oc
    weights = oc * row[QC_KERNEL] * row[QC_KERNEL + 1] * c
    return (
        apart(row[QC_IN_ADDR], n * ih * iw * c, out_addr, nbytes)
        and apart(row[QC_W_ADDR], weights, out_addr, nbytes)
        and apart(row[QC_B_ADDR], 4 * oc, out_addr, nbytes)
        and apart(row[QC_ACC_ADDR], 4 * positions * oc, out_addr, nbytes)
        and apart(row[QC_RQ_ADDR], 8 * oc, out_addr, nbytes)
        and apart(row[QC_LUT_ADDR], 256, out_addr, nbytes)
    )


@jit
def qconv_kernel(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    """`qconv`: groups = 1 on the blocks (shared by chunks of output positions when `workers`
    > 1, as the fp16 conv: each thread claims chunks of whole qmac_tile calls until none is
    left, storing each at once, or once all are computed if the output overlaps what the conv
    reads); a depthwise one (one channel a group, one output each) on `qconv_depthwise`, other
    groupings on `int8.py`'s loops. Returns 0, or -1 if the run was abandoned."""
    if row[QC_GROUPS] != 1:  # never shared (shared_qconv)
        if row[QC_IN_SHAPE + 3] == row[QC_GROUPS] and row[QC_OC_TOTAL] == row[QC_GROUPS]:
            qconv_depthwise(row, machine[1][row[1]])
            return 0
        return qconv_kernel_loops(i, row, frow, machine, tally, weights, skip, sync, worker, 1)
    ocm = machine[1][row[1]]
    positions = row[QC_OUT_SHAPE] * row[QC_OUT_SHAPE + 1] * row[QC_OUT_SHAPE + 2]
    oc = row[QC_OUT_SHAPE + 3]
    packed = cached_qweights(row, ocm, machine[5], i, worker)  # before the others start
    if workers > 1 and not start_shared(sync, i, worker):
        return -1
    steps = row[QC_KERNEL] * row[QC_KERNEL + 1] * row[QC_IN_SHAPE + 3]
    tile_macs = QMAC_PIXELS * steps * oc // QMAC_SPEEDUP
    size = chunk_size_by_work(positions, QMAC_PIXELS, max(tile_macs, 1), workers)
    chunks = (positions + size - 1) // size
    chunk = claim(sync, i, workers, chunks, 0)
    if chunk >= chunks:
        return end_shared(sync, i, worker, workers, chunks)
    # everything the conv reads, copied before this thread stores anything
    x = qconv_window(row, ocm)
    if packed.size == 0:  # no slot: this thread packs its own
        kh, kw, c = row[QC_KERNEL], row[QC_KERNEL + 1], row[QC_IN_SHAPE + 3]
        blocks = (oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS
        packed = np.empty(blocks * kh * kw * (c + c % 2) * QMAC_CHANNELS, np.int16)
        pack_qweights(row, ocm, packed)
    taps, pairs = qconv_segments(row)
    b_addr = row[QC_B_ADDR]
    bias = load_i32(ocm, np.int64(b_addr), oc) if b_addr != -1 else np.zeros(0, np.int64)
    multipliers, roundings, rights = qconv_rescale(row, ocm)
    table, lut = table_copy(ocm, row[QC_LUT_ADDR])
    width = (oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS * QMAC_CHANNELS
    acc = np.empty((positions + QMAC_PIXELS) * width, np.int32)
    deferred = workers > 1 and not qconv_output_apart(row)
    mine = np.empty(chunks, np.int64)  # the chunks this thread took
    taken = 0
    while chunk < chunks:
        start, stop = chunk_bounds(chunk, size, positions)
        qconv_positions(row, x, packed, taps, pairs, acc, start, stop)
        qconv_start(row, ocm, bias, acc, start, stop)
        mine[taken] = chunk
        taken += 1
        if not deferred:
            qconv_store(row, ocm, acc, start, stop, multipliers, roundings, rights, table, lut)
        chunk = claim(sync, i, workers, chunks, taken)
    if deferred:
        if not all_computed(sync, i, taken, chunks):
            return -1
        for k in range(taken):
            start, stop = chunk_bounds(mine[k], size, positions)
            qconv_store(row, ocm, acc, start, stop, multipliers, roundings, rights, table, lut)
    return all_stored(sync, i, worker, workers, taken, chunks)
