"""The Numba engine's `conv` instruction, from the blocks of `mac_tiles.py`: the input window,
the weight cache's packing, the threads' shares of a large conv, and the fused finish (`fc`
and `bmm` are in `matmul.py`)."""

from __future__ import annotations

import numpy as np

from mrvl.sim.engines.numba.depthwise import (
    NO_DEPTHWISE_TABLES,
    conv_depthwise,
    depthwise_tables,
)
from mrvl.sim.engines.numba.fields import (
    CONV_ACC_ADDR,
    CONV_ACC_OUT,
    CONV_ACT,
    CONV_ACT_A,
    CONV_ACT_ADDR,
    CONV_ACT_B,
    CONV_B_ADDR,
    CONV_DILATION,
    CONV_GROUPS,
    CONV_IN_ADDR,
    CONV_IN_SHAPE,
    CONV_KERNEL,
    CONV_OC0,
    CONV_OC_TOTAL,
    CONV_OROW0,
    CONV_OUT_ADDR,
    CONV_OUT_SHAPE,
    CONV_PAD,
    CONV_ROW0,
    CONV_STRIDE,
    CONV_W_ADDR,
)
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.mac_tiles import (
    MAC_PIXELS,
    NARROW,
    blocked_scratch,
    conv_order,
    conv_run_blocked,
    conv_run_narrow,
    merges_kernel_rows,
    pack_weights,
    packed_size,
    packing_stale,
    repack,
    window_columns,
)
from mrvl.sim.engines.numba.numerics import (
    finish,
    load_bias,
    load_f16,
    load_f16_into,
    load_slopes,
    read_f32,
    store_f32,
)
from mrvl.sim.engines.numba.sharing import (
    all_computed,
    all_stored,
    apart,
    chunk_bounds,
    chunk_size,
    chunk_size_by_work,
    claim,
    end_shared,
    start_shared,
)


@jit
def new_window(row, merged):
    """The conv's input window as fp32, unconverted (float32[N*H*W'*C], then zeros as long as
    the longest segment for the taps in the padding): `load_window` converts its rows. W' = W,
    or with `merged` (conv_run_blocked) W plus the zero columns of window_columns on each
    side."""
    n_count, height, width, in_channels = (
        row[CONV_IN_SHAPE],
        row[CONV_IN_SHAPE + 1],
        row[CONV_IN_SHAPE + 2],
        row[CONV_IN_SHAPE + 3],
    )
    group_channels = in_channels // row[CONV_GROUPS]
    left, right = window_columns(row) if merged else (0, 0)
    tail = row[CONV_KERNEL + 1] * group_channels if merged else group_channels
    size = n_count * height * (width + left + right) * in_channels
    x = np.empty(size + tail, np.float32)
    x[size:] = 0.0
    return x


@jit
def load_window(row, ocm, x, start, stop, loaded, lut, merged):
    """Convert the window rows (`new_window`) that output positions [start, stop) read and
    that are not among the first `loaded`; returns the new `loaded`. A thread sharing the conv
    converts only its chunks' rows (the rest of its window is never read), each once: its
    chunks come in increasing order, so their rows do. One image only; with several, all of
    it."""
    n_count, height, width, in_channels = (
        row[CONV_IN_SHAPE],
        row[CONV_IN_SHAPE + 1],
        row[CONV_IN_SHAPE + 2],
        row[CONV_IN_SHAPE + 3],
    )
    left, right = window_columns(row) if merged else (0, 0)
    out_cols = row[CONV_OUT_SHAPE + 2]
    padded_row = (width + left + right) * in_channels
    lo, hi = 0, n_count * height  # rows of all the images, [N*H, W, C]
    if n_count == 1 and stop > start:
        first = (row[CONV_OROW0] + start // out_cols) * row[CONV_STRIDE] - row[CONV_PAD]
        last = (row[CONV_OROW0] + (stop - 1) // out_cols) * row[CONV_STRIDE] - row[CONV_PAD]
        last += (row[CONV_KERNEL] - 1) * row[CONV_DILATION]
        lo = min(max(first - row[CONV_ROW0], 0), height)
        hi = max(min(last - row[CONV_ROW0] + 1, height), lo)
    elif stop <= start:
        hi = 0
    lo = max(lo, loaded)
    if hi <= lo:
        return loaded
    per_row = width * in_channels
    if left + right == 0:
        load_f16_into(
            ocm, row[CONV_IN_ADDR] + 2 * lo * per_row, x[lo * per_row : hi * per_row], lut
        )
        return hi
    for r in range(lo, hi):
        base = r * padded_row
        inside = base + left * in_channels
        x[base:inside] = 0.0
        load_f16_into(ocm, row[CONV_IN_ADDR] + 2 * r * per_row, x[inside : inside + per_row], lut)
        x[inside + per_row : base + padded_row] = 0.0
    return hi


@jit
def output_apart(row, nbytes):
    """Whether a conv's output (`nbytes` at out_addr) lies apart from every OCM byte it reads
    while computing and storing: its input window, bias, partial sums and PRELU slopes (a conv
    with a weight-cache slot reads its packed weights, not OCM). Then the threads sharing it
    may each store their results as soon as they have them."""
    out_addr, out_channels = row[CONV_OUT_ADDR], row[CONV_OUT_SHAPE + 3]
    positions = row[CONV_OUT_SHAPE] * row[CONV_OUT_SHAPE + 1] * row[CONV_OUT_SHAPE + 2]
    window = 2 * row[CONV_IN_SHAPE] * row[CONV_IN_SHAPE + 1] * row[CONV_IN_SHAPE + 2]
    window *= row[CONV_IN_SHAPE + 3]
    return (
        apart(row[CONV_IN_ADDR], window, out_addr, nbytes)
        and apart(row[CONV_B_ADDR], 4 * out_channels, out_addr, nbytes)
        and apart(row[CONV_ACT_ADDR], 4 * out_channels, out_addr, nbytes)
        and apart(row[CONV_ACC_ADDR], 4 * positions * out_channels, out_addr, nbytes)
    )


@jit
def fp32_result_apart(row, nbytes):
    """Whether a conv writes its fp32 accumulator (acc_out) to an aligned OCM range apart from
    every byte it reads (output_apart). Then it may write its results in place as it computes
    them, on any number of threads."""
    if row[CONV_ACC_OUT] != 1 or row[CONV_OUT_ADDR] % 4 != 0:
        return False
    return output_apart(row, nbytes)


@jit
def conv(row, frow, ocm, lut, table, tally, cache, sync, i, worker, workers):
    """`cache` is this instruction's slot of the weight cache (WeightCache): empty arrays if it
    has none, else (raw, packed, filled), the f16 bits last packed, their packing, and the
    slot's flag (PACKED, CONSTANT): a packing of constant weights is used as it is, any other
    only if the weights in OCM still equal the bits it was made from.

    A conv with a slot computed by several threads (`workers` > 1, every one calling this)
    is shared by output positions: thread 0 packs the weights and opens it (start_shared),
    then each thread claims chunks of whole mac_tile calls (a depthwise conv: of whole output
    rows, and every thread converts the weights) until none is left, computing each output in
    the documented order, so the bits do not depend on who computes what. A thread stores a
    chunk as soon as it is computed, unless the output overlaps bytes the conv reads
    (output_apart): then it stores its chunks once every chunk is computed, so no store
    reaches a byte another thread still loads. Returns 0, or -1 if the run was abandoned."""
    n_count, in_channels = row[CONV_IN_SHAPE], row[CONV_IN_SHAPE + 3]
    out_rows, out_cols, out_channels = (
        row[CONV_OUT_SHAPE + 1],
        row[CONV_OUT_SHAPE + 2],
        row[CONV_OUT_SHAPE + 3],
    )
    kh_count, kw_count = row[CONV_KERNEL], row[CONV_KERNEL + 1]
    groups = row[CONV_GROUPS]
    group_channels = in_channels // groups
    steps = kh_count * kw_count * group_channels
    positions = n_count * out_rows * out_cols
    raw, cached, _ = cache
    w_addr = row[CONV_W_ADDR]
    # one run of output channels (groups=1) with a weight-cache slot: packed when stale
    if raw.size > 0 and worker == 0 and packing_stale(ocm, w_addr, cache):
        tap = conv_order(kh_count, kw_count, group_channels)
        repack(ocm, w_addr, tap, out_channels, cache, lut)
    if workers > 1 and not start_shared(sync, i, worker):
        return -1
    # whole mac_tile calls; a depthwise conv's whole output rows (conv_depthwise)
    if raw.size > 0:  # by multiply-adds: MAC_PIXELS positions of every output channel
        tile_macs = MAC_PIXELS * steps * out_channels
        size = chunk_size_by_work(positions, MAC_PIXELS, tile_macs, workers)
    else:
        size = chunk_size(positions, out_cols, workers)
    chunks = (positions + size - 1) // size
    chunk = claim(sync, i, workers, chunks, 0)
    if chunk >= chunks:
        return end_shared(sync, i, worker, workers, chunks)
    merged = raw.size > 0 and merges_kernel_rows(row)  # a segment per kernel row
    x = new_window(row, merged)
    loaded = 0  # the window rows converted
    bias = load_bias(ocm, row[CONV_B_ADDR], out_channels)
    out_addr = row[CONV_OUT_ADDR]
    direct = raw.size > 0 and fp32_result_apart(row, 4 * positions * out_channels)
    if direct:  # the fp32 results go straight to OCM: nothing the conv reads is there
        out = ocm[out_addr : out_addr + 4 * positions * out_channels].view(np.float32)
    else:
        out = np.empty(positions * out_channels, np.float32)
    acc_addr = row[CONV_ACC_ADDR]
    # fp32 partial sums of the earlier input-channel blocks (the bias is in them), or none
    # (read in place: no thread stores over them while another reads, output_apart)
    partial = read_f32(ocm, acc_addr, positions * out_channels) if acc_addr != -1 else out[:0]
    w = cached[:0]
    if raw.size == 0:
        w = load_f16(ocm, w_addr, out_channels * steps, lut)
    out_bytes = (4 if row[CONV_ACC_OUT] == 1 else 2) * positions * out_channels
    # without a slot, each thread reads the weights in OCM too
    weights_apart = raw.size > 0 or apart(w_addr, 2 * out_channels * steps, out_addr, out_bytes)
    deferred = workers > 1 and not (output_apart(row, out_bytes) and weights_apart)
    slopes = load_slopes(ocm, row[CONV_ACT], row[CONV_ACT_ADDR], out_channels)
    scratch = blocked_scratch(row, out_channels, merged)  # for a slot's conv_run_blocked
    tables = NO_DEPTHWISE_TABLES
    if raw.size == 0 and group_channels == 1:
        tables = depthwise_tables(row, w)
    mine = np.empty(chunks, np.int64)  # the chunks this thread took
    taken = 0
    while chunk < chunks:
        start, stop = chunk_bounds(chunk, size, positions)
        loaded = load_window(row, ocm, x, start, stop, loaded, lut, merged)
        conv_positions(row, x, w, cached, bias, partial, out, start, stop, merged, scratch, tables)
        mine[taken] = chunk
        taken += 1
        if not deferred:
            conv_store(row, frow, ocm, table, tally, out, slopes, start, stop, direct)
        chunk = claim(sync, i, workers, chunks, taken)
    if deferred:
        if not all_computed(sync, i, taken, chunks):
            return -1
        for k in range(taken):
            start, stop = chunk_bounds(mine[k], size, positions)
            conv_store(row, frow, ocm, table, tally, out, slopes, start, stop, direct)
    return all_stored(sync, i, worker, workers, taken, chunks)


@jit
def conv_positions(row, x, w, cached, bias, partial, out, start, stop, merged, scratch, tables):
    """Compute output positions [start, stop) of every output channel into `out`, from the
    window `x` (load_window), the slot's packing `cached` if it has one (`scratch`: its
    blocked_scratch), else the weights `w` (fp32; a depthwise conv's `tables`:
    depthwise_tables)."""
    kh_count, kw_count = row[CONV_KERNEL], row[CONV_KERNEL + 1]
    out_cols, out_channels = row[CONV_OUT_SHAPE + 2], row[CONV_OUT_SHAPE + 3]
    group_channels = row[CONV_IN_SHAPE + 3] // row[CONV_GROUPS]
    steps = kh_count * kw_count * group_channels
    if cached.size > 0:
        conv_run_blocked(
            row,
            x,
            cached,
            steps,
            bias,
            partial,
            out,
            0,
            out_channels,
            0,
            start,
            stop,
            merged,
            scratch,
        )
        return
    if group_channels == 1:
        conv_depthwise(row, x, tables, bias, partial, out, start // out_cols, -(-stop // out_cols))
        return
    oc0, group_outputs = row[CONV_OC0], row[CONV_OC_TOTAL] // row[CONV_GROUPS]
    tap = conv_order(kh_count, kw_count, group_channels)
    o_lo = 0
    while o_lo < out_channels:  # runs of output channels that belong to one group
        group = (oc0 + o_lo) // group_outputs
        o_hi = min(out_channels, (group + 1) * group_outputs - oc0)
        c_base = group * group_channels
        if o_hi - o_lo < NARROW:
            conv_run_narrow(row, x, w, tap, bias, partial, out, o_lo, o_hi, c_base)
        else:
            packed = np.empty(packed_size(o_hi - o_lo, steps), np.float32)
            pack_weights(w, tap, o_lo, o_hi, packed)
            scratch = blocked_scratch(row, o_hi - o_lo, False)
            conv_run_blocked(
                row,
                x,
                packed,
                steps,
                bias,
                partial,
                out,
                o_lo,
                o_hi,
                c_base,
                start,
                stop,
                False,
                scratch,
            )
        o_lo = o_hi


@jit
def conv_store(row, frow, ocm, table, tally, out, slopes, start, stop, direct):
    """Store output positions [start, stop) of `out`: the fp32 accumulator itself (for the next
    input-channel block to continue; `direct`: already in place), or finished to f16."""
    out_channels = row[CONV_OUT_SHAPE + 3]
    span = out[start * out_channels : stop * out_channels]
    if row[CONV_ACC_OUT] == 1:
        if not direct:
            store_f32(ocm, row[CONV_OUT_ADDR] + 4 * start * out_channels, span)
        return
    addr = row[CONV_OUT_ADDR] + 2 * start * out_channels
    act_a, act_b = frow[CONV_ACT_A], frow[CONV_ACT_B]
    finish(span, row[CONV_ACT], act_a, act_b, slopes, table, ocm, addr, tally)
