"""The Numba engine's `qconv` instruction (docs/isa.md, `qconv` and "Numerics (int8 mode)"):
one run of output channels (groups = 1) from the blocks of `int8_mac.py`, or a depthwise conv
across its channels (`depthwise_positions`), both shared between the engine's threads as the
fp16 `conv` is (`mac.py`); other grouped convs keep the plain loops of `int8.py`.

The window is copied by each thread, the rows its chunks read (`window_rows`), as unsigned
values (bytes, or uint16 where the blocks read them so: `int8_mac.QMAC_WINDOW`), the int8
input + 128, padded on every
side with in_zp + 128 (a padding tap reads in_zp and adds 0) and each position's channels to a
multiple of four, so that every tap of every output position is a run of channel groups at a
fixed offset: no bounds test in the block. The weights are packed to the blocks' layout, with
each output channel's weight sum Σw (`pack_qweights`): the blocks sum (x + 128)·w, and each
sum starts at -(in_zp + 128)·Σw (`qconv_start`), which leaves the ISA's Σ(x - in_zp)·w. The
int32 sums wrap modulo 2^32 in any order, so the bytes are the reference interpreter's whatever
the blocking and whichever thread computes which chunk.
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
    QC_OROW0,
    QC_OUT_ADDR,
    QC_OUT_SHAPE,
    QC_OUT_ZP,
    QC_PAD,
    QC_ROW0,
    QC_RQ_ADDR,
    QC_STRIDE,
    QC_W_ADDR,
    is_depthwise,
    load_i32,
    qconv_kernel_loops,
    store_i32,
    table_copy,
)
from mrvl.sim.engines.numba.int8_mac import (
    QMAC_CHANNELS,
    QMAC_GROUP,
    QMAC_PIXELS,
    QMAC_SPEEDUP,
    QMAC_WINDOW,
    qmac_tile,
)
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
from mrvl.sim.weight_cache import CONSTANT, PACKED

QDEPTHWISE_SLOWDOWN = 4
"""About how many times fewer multiply-adds a second `depthwise_positions` does than the fp16
`mac_tile`: a depthwise qconv's chunk holds as many seconds of work as a conv's."""


@jit
def qconv_geometry(row):
    """(padded rows, padded columns, channels padded to a multiple of QMAC_GROUP) of a qconv's
    window: every input row and column its output positions' taps reach, in the padding or
    not."""
    oh, ow = row[QC_OUT_SHAPE + 1], row[QC_OUT_SHAPE + 2]
    rows = (oh - 1) * row[QC_STRIDE] + (row[QC_KERNEL] - 1) * row[QC_DILATION] + 1
    cols = (ow - 1) * row[QC_STRIDE + 1] + (row[QC_KERNEL + 1] - 1) * row[QC_DILATION + 1] + 1
    return rows, cols, padded_channels(row[QC_IN_SHAPE + 3])


@jit
def padded_channels(c):
    """c rounded up to a multiple of QMAC_GROUP."""
    return (c + QMAC_GROUP - 1) // QMAC_GROUP * QMAC_GROUP


@jit
def zero_byte(row):
    """The window's byte for in_zp: every tap that reads it adds 0 to a sum."""
    return np.uint8((row[QC_IN_ZP] + 128) & 0xFF)


@jit
def window_rows(row, start, stop):
    """The window rows [lo, hi) that output positions [start, stop) read, counted across the
    batch (image b's row r is b * rows + r): a thread sharing a qconv fills only those of its
    chunks (`fill_window_rows`)."""
    oh, ow = row[QC_OUT_SHAPE + 1], row[QC_OUT_SHAPE + 2]
    rows, _, _ = qconv_geometry(row)
    first, last = start, stop - 1
    lo = first // (oh * ow) * rows + first % (oh * ow) // ow * row[QC_STRIDE]
    reach = (row[QC_KERNEL] - 1) * row[QC_DILATION] + 1
    hi = last // (oh * ow) * rows + last % (oh * ow) // ow * row[QC_STRIDE] + reach
    return lo, hi


@jit
def fill_window_rows(row, ocm, x, lo, hi):
    """Rows [lo, hi) (counted across the batch, as `window_rows`) of a qconv's window `x`,
    [N, rows, cols, channels] (qconv_geometry) of QMAC_WINDOW values: the input + 128 (its
    byte ^ 0x80) where the taps read inside the input tile, in_zp + 128 (zero_byte) in the
    padding, beyond the tile's rows and in the extra channels."""
    ih, iw, c = row[QC_IN_SHAPE + 1], row[QC_IN_SHAPE + 2], row[QC_IN_SHAPE + 3]
    rows, cols, cp = qconv_geometry(row)
    top = row[QC_OROW0] * row[QC_STRIDE] - row[QC_PAD] - row[QC_ROW0]  # tile row of row 0
    left = -row[QC_PAD + 1]
    raw = ocm[row[QC_IN_ADDR] : row[QC_IN_ADDR] + row[QC_IN_SHAPE] * ih * iw * c]
    zero = zero_byte(row)
    c_lo, c_hi = max(0, -left), min(cols, iw - left)
    for flat in range(lo, hi):
        b, r = flat // rows, flat % rows
        line = x[flat * cols * cp : (flat + 1) * cols * cp]
        line[:] = zero
        wr = r + top
        if wr < 0 or wr >= ih:
            continue
        src = ((b * ih + wr) * iw + c_lo + left) * c
        dst = c_lo * cp
        if cp == c:  # the row's columns inside the tile are one run
            run_in, run_out = (
                raw[src : src + (c_hi - c_lo) * c],
                line[dst : dst + (c_hi - c_lo) * c],
            )
            for k in range(run_in.size):
                run_out[k] = run_in[k] ^ 0x80
            continue
        for q in range(c_hi - c_lo):
            run_in, run_out = (
                raw[src + q * c : src + q * c + c],
                line[dst + q * cp : dst + q * cp + c],
            )
            for k in range(c):
                run_out[k] = run_in[k] ^ 0x80


@jit
def qconv_segments(row):
    """(taps, groups): each segment's offset from a position's window origin, and its groups
    of QMAC_GROUP channels (all alike). With a dilation of 1 across, a kernel row's taps are
    one run of contiguous inputs; else each tap is its own."""
    kh_count, kw_count = row[QC_KERNEL], row[QC_KERNEL + 1]
    dh, dw = row[QC_DILATION], row[QC_DILATION + 1]
    _, cols, cp = qconv_geometry(row)
    if dw == 1:
        taps = np.empty(kh_count, np.int64)
        for kh in range(kh_count):
            taps[kh] = kh * dh * cols * cp
        return taps, kw_count * cp // QMAC_GROUP
    taps = np.empty(kh_count * kw_count, np.int64)
    for kh in range(kh_count):
        for kw in range(kw_count):
            taps[kh * kw_count + kw] = (kh * dh * cols + kw * dw) * cp
    return taps, cp // QMAC_GROUP


@jit
def qweights_size(out_channels, kh, kw, channels):
    """Bytes of `pack_qweights`' packing of such weights: the blocks, then the int32 weight
    sums of their channels."""
    blocks = (out_channels + QMAC_CHANNELS - 1) // QMAC_CHANNELS
    return blocks * QMAC_CHANNELS * (kh * kw * padded_channels(channels) + 4)


@jit
def weight_sums(packed, oc):
    """int32[oc]: each output channel's weight sum Σw in `pack_qweights`' packing."""
    blocks = (oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS
    at = packed.size - 4 * blocks * QMAC_CHANNELS
    return packed[at : at + 4 * oc].view(np.int32)


@jit
def pack_qweights(row, ocm, packed):
    """Pack the OHWI int8 weights into `packed` (int8, qweights_size) as qmac_tile's blocks:
    per block of QMAC_CHANNELS output channels, per group of QMAC_GROUP channels (kh, kw, then
    channel groups, the extra channels 0), the block's channels' four weights side by side, 0
    past the last output channel; then each output channel's weight sum (`weight_sums`)."""
    oc = row[QC_OUT_SHAPE + 3]
    kh_count, kw_count, c = row[QC_KERNEL], row[QC_KERNEL + 1], row[QC_IN_SHAPE + 3]
    cp = padded_channels(c)
    taps = kh_count * kw_count
    groups = taps * cp // QMAC_GROUP
    w = ocm[row[QC_W_ADDR] : row[QC_W_ADDR] + oc * taps * c].view(np.int8)
    packed[:] = 0
    sums = weight_sums(packed, oc)
    group_stride = QMAC_CHANNELS * QMAC_GROUP  # bytes of one channel group of a block
    for o in range(oc):
        block, lane = o // QMAC_CHANNELS, o % QMAC_CHANNELS
        lane_values = packed[block * groups * group_stride + QMAC_GROUP * lane :]
        source = w[o * taps * c : (o + 1) * taps * c]
        total = np.int32(0)
        for tap in range(taps):
            for ci in range(c):
                k = tap * cp + ci  # the input channel's place in the window's taps
                value = source[tap * c + ci]
                lane_values[k // QMAC_GROUP * group_stride + k % QMAC_GROUP] = value
                total += np.int32(value)
        sums[o] = total


@jit
def cached_qweights(row, ocm, slot_arrays, i, worker):
    """Instruction i's packed weights from its int8_weights slot, or an empty array if it has
    none. Thread 0 packs a slot first if it is not packed, and repacks one whose weights are
    not constant if the weights in OCM are not the bytes it was packed from (a constant slot's
    DMA may have been skipped: its bytes in OCM are not read)."""
    slots, raw_at, packed_at, raw, packed, filled = slot_arrays
    slot = slots[i]
    if slot < 0:
        return packed[:0]
    mine = packed[packed_at[slot] : packed_at[slot + 1]]
    flag = filled[slot]
    if worker == 0 and ((flag & PACKED) == 0 or (flag & CONSTANT) == 0):
        bytes_packed = raw[raw_at[slot] : raw_at[slot + 1]]
        weights = ocm[row[QC_W_ADDR] : row[QC_W_ADDR] + bytes_packed.size]
        differ = np.uint8((flag & PACKED) == 0)
        for k in range(weights.size):  # no early exit: a loop the compiler vectorizes
            differ |= weights[k] ^ bytes_packed[k]
        if differ != 0:
            pack_qweights(row, ocm, mine)
            bytes_packed[:] = weights
            filled[slot] = flag | PACKED
    return mine


@jit
def qconv_positions(row, x, packed, taps, groups, starts, acc, start, stop):
    """acc[p * OCP + o] = starts[o] + the sum of position p's taps for output channel o (OCP:
    the channels rounded up to whole blocks, as `starts`), for positions [start, stop); rows up
    to the next whole QMAC_PIXELS are computed too (from the last position's window), so acc
    has room for them. Each position's window offset is found once, not once per block."""
    oh, ow, oc = row[QC_OUT_SHAPE + 1], row[QC_OUT_SHAPE + 2], row[QC_OUT_SHAPE + 3]
    rows, cols, cp = qconv_geometry(row)
    sh, sw = row[QC_STRIDE], row[QC_STRIDE + 1]
    blocks = (oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS
    width = blocks * QMAC_CHANNELS
    block_size = taps.size * groups * QMAC_CHANNELS * QMAC_GROUP
    tiles = (stop - start + QMAC_PIXELS - 1) // QMAC_PIXELS
    bases = np.empty(tiles * QMAC_PIXELS, np.int64)
    for k in range(bases.size):
        position = min(start + k, stop - 1)
        b, rest = position // (oh * ow), position % (oh * ow)
        r, q = rest // ow, rest % ow
        bases[k] = ((b * rows + r * sh) * cols + q * sw) * cp
    out_at = np.empty(QMAC_PIXELS, np.int64)
    for block in range(blocks):
        for tile in range(tiles):
            first = tile * QMAC_PIXELS
            for p in range(QMAC_PIXELS):
                out_at[p] = (start + first + p) * width + block * QMAC_CHANNELS
            tile_bases = bases[first : first + QMAC_PIXELS]
            w_off, starts_at = block * block_size, block * QMAC_CHANNELS
            qmac_tile(
                x,
                tile_bases,
                taps,
                taps.size,
                groups,
                packed,
                w_off,
                starts,
                starts_at,
                acc,
                out_at,
            )


@jit
def qconv_offsets(row, ocm, sums):
    """Each output channel's int64 start besides any partial sums: the bias (none with partial
    sums, else 0 if b_addr = -1) less (in_zp + 128)·Σw (`sums`: the blocks sum (x + 128)·w)."""
    oc = row[QC_OUT_SHAPE + 3]
    shift = np.int64(row[QC_IN_ZP]) + 128
    offsets = np.empty(oc, np.int64)
    for o in range(oc):
        offsets[o] = -shift * np.int64(sums[o])
    b_addr = row[QC_B_ADDR]
    if row[QC_ACC_ADDR] == -1 and b_addr != -1:
        bias = load_i32(ocm, np.int64(b_addr), oc)
        for o in range(oc):
            offsets[o] += bias[o]
    return offsets


@jit
def qconv_first_sums(row, offsets):
    """int32[OCP] (qconv_positions' `starts`): `offsets` wrapped to int32, 0 past the last
    output channel."""
    oc = row[QC_OUT_SHAPE + 3]
    starts = np.zeros((oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS * QMAC_CHANNELS, np.int32)
    for o in range(oc):
        starts[o] = np.int32(offsets[o])  # modulo 2^32
    return starts


@jit
def qconv_partials(row, ocm, acc, start, stop):
    """Add the partial sums at acc_addr (read now, before any thread stores), if any, to
    positions [start, stop) of `acc`, wrapped to int32."""
    acc_addr = row[QC_ACC_ADDR]
    if acc_addr == -1:
        return
    qconv_start(row, ocm, np.zeros(row[QC_OUT_SHAPE + 3], np.int64), acc, start, stop)


@jit
def qconv_start(row, ocm, offsets, acc, start, stop):
    """Add each position's int32 start to its sums, wrapped to int32: `offsets`
    (qconv_offsets) and the partial sums at acc_addr (read now, before any thread stores)."""
    oc = row[QC_OUT_SHAPE + 3]
    width = (oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS * QMAC_CHANNELS
    acc_addr = row[QC_ACC_ADDR]
    if acc_addr != -1:
        partial = load_i32(ocm, np.int64(acc_addr) + 4 * start * oc, (stop - start) * oc)
        for p in range(start, stop):
            sums, starts = acc[p * width : p * width + oc], partial[(p - start) * oc :]
            for o in range(oc):  # the int32 sum modulo 2^32 (LLVM's add wraps)
                sums[o] = np.int32(np.int64(sums[o]) + starts[o] + offsets[o])
        return
    for p in range(start, stop):
        sums = acc[p * width : p * width + oc]
        for o in range(oc):
            sums[o] = np.int32(np.int64(sums[o]) + offsets[o])


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
    out_zp = np.int64(row[QC_OUT_ZP])
    lo, hi = np.int64(row[QC_CLAMP]) - out_zp, np.int64(row[QC_CLAMP + 1]) - out_zp
    for p in range(start, stop):  # a loop the compiler vectorizes: no branch, no lookup
        sums = acc[p * width : p * width + oc]
        at = out + p * oc
        bytes_out = ocm[at : at + oc]
        for o in range(oc):  # int32 x int32: one VPMULDQ a lane pair, not an int64 product
            v = (np.int64(sums[o]) * np.int64(multipliers[o]) + roundings[o]) >> rights[o]
            bytes_out[o] = np.uint8((min(max(v, lo), hi) + out_zp) & 0xFF)
        if lut != -1:  # a byte's int8 value + 128 is the byte ^ 0x80
            for o in range(oc):
                bytes_out[o] = table[bytes_out[o] ^ 0x80]


@jit
def qconv_rescale(row, ocm):
    """Each output channel's requantization as (factor, 2^(r - 1), r) of `int8.requantize`
    (the Q31 factor as int32[OCt], the others int64[OCt]; unused with acc_out)."""
    oc = row[QC_OUT_SHAPE + 3]
    multipliers = np.empty(oc, np.int32)
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
def depthwise_weights(row, ocm):
    """A depthwise qconv's (one input channel a group, one output each) weights as int32
    [tap, channel], each tap's offset from a position's window origin (its channel oc0
    included), and each output channel's int64 start (`qconv_offsets`)."""
    oc, kh_count, kw_count = row[QC_OUT_SHAPE + 3], row[QC_KERNEL], row[QC_KERNEL + 1]
    _, cols, cp = qconv_geometry(row)
    taps = kh_count * kw_count
    w = ocm[row[QC_W_ADDR] : row[QC_W_ADDR] + oc * taps].view(np.int8)
    wt = np.empty((taps, oc), np.int32)
    sums_w = np.zeros(oc, np.int32)
    offsets = np.empty(taps, np.int64)
    for kh in range(kh_count):
        for kw in range(kw_count):
            at = (kh * row[QC_DILATION] * cols + kw * row[QC_DILATION + 1]) * cp
            offsets[kh * kw_count + kw] = at + row[QC_OC0]
    for o in range(oc):
        for t in range(taps):
            wt[t, o] = w[o * taps + t]
            sums_w[o] += wt[t, o]
    return wt, offsets, qconv_offsets(row, ocm, sums_w)


@jit
def depthwise_positions(row, x, wt, offsets, acc, start, stop):
    """acc[p * OCP + o] = the sum of position p's taps of channel o (inputs + 128 times
    weights, across the channels at once, in int32 that wraps) for positions [start, stop),
    from the padded window (no bounds test)."""
    oh, ow, oc = row[QC_OUT_SHAPE + 1], row[QC_OUT_SHAPE + 2], row[QC_OUT_SHAPE + 3]
    sh, sw = row[QC_STRIDE], row[QC_STRIDE + 1]
    rows, cols, cp = qconv_geometry(row)
    width = (oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS * QMAC_CHANNELS
    for position in range(start, stop):
        b, rest = position // (oh * ow), position % (oh * ow)
        base = ((b * rows + (rest // ow) * sh) * cols + (rest % ow) * sw) * cp
        sums = acc[position * width : position * width + oc]
        sums[:] = 0
        for t in range(offsets.size):
            inputs, weights = x[base + offsets[t] : base + offsets[t] + oc], wt[t]
            for o in range(oc):
                sums[o] = np.int32(sums[o] + np.int32(inputs[o]) * weights[o])


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
    weights = oc * row[QC_KERNEL] * row[QC_KERNEL + 1] * (c // row[QC_GROUPS])
    return (
        apart(row[QC_IN_ADDR], n * ih * iw * c, out_addr, nbytes)
        and apart(row[QC_W_ADDR], weights, out_addr, nbytes)
        and apart(row[QC_B_ADDR], 4 * oc, out_addr, nbytes)
        and apart(row[QC_ACC_ADDR], 4 * positions * oc, out_addr, nbytes)
        and apart(row[QC_RQ_ADDR], 8 * oc, out_addr, nbytes)
        and apart(row[QC_LUT_ADDR], 256, out_addr, nbytes)
    )


@jit
def qconv_chunk_size(row, positions, workers):
    """The output positions of a chunk of a shared qconv: whole qmac_tile calls of about as
    many seconds of work as sharing.CHUNK_MACS (QMAC_SPEEDUP), or for a depthwise one
    (QDEPTHWISE_SLOWDOWN) single positions."""
    oc, taps = row[QC_OUT_SHAPE + 3], row[QC_KERNEL] * row[QC_KERNEL + 1]
    if is_depthwise(row):
        return chunk_size_by_work(positions, 1, taps * oc * QDEPTHWISE_SLOWDOWN, workers)
    tile_macs = np.int64(QMAC_PIXELS * taps * row[QC_IN_SHAPE + 3] * oc / QMAC_SPEEDUP)
    return chunk_size_by_work(positions, QMAC_PIXELS, max(tile_macs, 1), workers)


@jit
def qconv_kernel(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    """`qconv`: groups = 1 on the blocks, or a depthwise one (`depthwise_positions`); both
    shared by chunks of output positions when `workers` > 1, as the fp16 conv: each thread
    claims chunks until none is left, fills the window rows they read (`window_rows`), and
    stores each chunk at once, or once all are computed if the output overlaps what the conv
    reads. Other groupings run on `int8.py`'s loops. Returns 0, or -1 if the run was
    abandoned."""
    depthwise = is_depthwise(row)
    if row[QC_GROUPS] != 1 and not depthwise:  # never shared (shared_qconv)
        return qconv_kernel_loops(i, row, frow, machine, tally, weights, skip, sync, worker, 1)
    ocm = machine[1][row[1]]
    positions = row[QC_OUT_SHAPE] * row[QC_OUT_SHAPE + 1] * row[QC_OUT_SHAPE + 2]
    oc = row[QC_OUT_SHAPE + 3]
    packed = cached_qweights(row, ocm, machine[5], i, worker)  # before the others start
    if workers > 1 and not start_shared(sync, i, worker):
        return -1
    size = qconv_chunk_size(row, positions, workers)
    chunks = (positions + size - 1) // size
    chunk = claim(sync, i, workers, chunks, 0)
    if chunk >= chunks:
        return end_shared(sync, i, worker, workers, chunks)
    # everything the conv reads but its window, copied before this thread stores anything
    if depthwise:
        wt, taps, offsets = depthwise_weights(row, ocm)
        groups = 0
    else:
        if packed.size == 0:  # no slot: this thread packs its own
            kh, kw, c = row[QC_KERNEL], row[QC_KERNEL + 1], row[QC_IN_SHAPE + 3]
            packed = np.empty(qweights_size(oc, kh, kw, c), np.int8)
            pack_qweights(row, ocm, packed)
        wt = np.empty((0, 0), np.int32)
        taps, groups = qconv_segments(row)
        offsets = qconv_offsets(row, ocm, weight_sums(packed, oc))
    starts = qconv_first_sums(row, offsets)
    multipliers, roundings, rights = qconv_rescale(row, ocm)
    table, lut = table_copy(ocm, row[QC_LUT_ADDR])
    rows, cols, cp = qconv_geometry(row)
    x = np.empty(row[QC_IN_SHAPE] * rows * cols * cp, QMAC_WINDOW)
    filled = 0  # the window rows filled: a thread's chunks come in order
    width = (oc + QMAC_CHANNELS - 1) // QMAC_CHANNELS * QMAC_CHANNELS
    acc = np.empty((positions + QMAC_PIXELS) * width, np.int32)
    deferred = workers > 1 and not qconv_output_apart(row)
    mine = np.empty(chunks, np.int64)  # the chunks this thread took
    taken = 0
    while chunk < chunks:
        start, stop = chunk_bounds(chunk, size, positions)
        lo, hi = window_rows(row, start, stop)
        fill_window_rows(row, ocm, x, max(lo, filled), hi)
        filled = max(filled, hi)
        if depthwise:
            depthwise_positions(row, x, wt, taps, acc, start, stop)
            qconv_start(row, ocm, offsets, acc, start, stop)
        else:
            qconv_positions(row, x, packed, taps, groups, starts, acc, start, stop)
            qconv_partials(row, ocm, acc, start, stop)
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
