"""The Numba engine's `fc` and `bmm` instructions on `mac_tile`: rows of the left operand are
its positions, the reduction one segment in order, so each output's sum is the documented
sequential one. Both are shared between the engine's threads by blocks of MAC_PIXELS rows
(`sharing.py`): each thread claims chunks of them, converts only its chunks' rows, and computes
each output alone, so any split gives the same bits."""

from __future__ import annotations

import numpy as np

from mrvl.sim.engines.numba.fields import (
    BMM_A_ADDR,
    BMM_A_SHARED,
    BMM_ACC_ADDR,
    BMM_ACC_OUT,
    BMM_B_ADDR,
    BMM_B_SHARED,
    BMM_BATCH,
    BMM_K,
    BMM_M,
    BMM_N,
    BMM_OUT_ADDR,
    BMM_TRANS_A,
    BMM_TRANS_B,
    FC_ACT,
    FC_ACT_A,
    FC_ACT_ADDR,
    FC_ACT_B,
    FC_B_ADDR,
    FC_IN_ADDR,
    FC_K,
    FC_N,
    FC_O,
    FC_OUT_ADDR,
    FC_W_ADDR,
)
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.mac_tiles import (
    MAC_CHANNELS,
    MAC_PIXELS,
    ROW_BLOCKS,
    WIDE_REGISTERS,
    mac_tile,
    mac_tile_one,
    mac_tile_pair,
    mac_tile_row,
    packed_size,
    packing_stale,
    repack,
)
from mrvl.sim.engines.numba.numerics import (
    finish,
    load_bias,
    load_f16,
    load_f16_into,
    load_slopes,
    read_f32,
    store_f16,
    store_f32,
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


@jit
def rows_scratch():
    """The scratch arrays of `mac_rows`, made once per instruction and thread: the segment
    length, the rows' input offsets, the accumulator tile and its offsets, and the init and
    output offsets of a tile computed in place."""
    acc_at = np.arange(MAC_PIXELS) * MAC_CHANNELS
    at = np.empty(MAC_PIXELS, np.int64)
    acc = np.empty(MAC_PIXELS * MAC_CHANNELS, np.float32)
    return np.empty(1, np.int64), at, acc, acc_at, np.empty(MAC_PIXELS, np.int64), at.copy()


@jit
def mac_rows(
    x, x0, packed, first_row, stop_row, inner, outs, init, init0, init_stride, out, out0, scratch
):
    """out[out0 + i * outs + j] = init[init0 + i * init_stride + j] + the sum over k of
    x[x0 + i * inner + k] * w[j, k] in order of k, for rows i in [first_row, stop_row), by
    mac_tile over the packed weights (pack_weights, steps in order; `pack_matrix`). A whole
    tile (MAC_PIXELS rows x MAC_CHANNELS outputs; x 2 MAC_CHANNELS by mac_tile_pair while two
    blocks remain, WIDE_REGISTERS only) goes from init straight to out, and so does a last
    row alone, by mac_tile_row while ROW_BLOCKS blocks remain, then by mac_tile_one; the edges
    through a scratch tile (rows past the end repeat the last one). An fc starts every row
    from its bias (init_stride 0); a bmm from the partial sums it continues (init is out:
    mac_tile loads every accumulator before it stores one)."""
    lengths, at, acc, acc_at, init_at, out_at = scratch
    lengths[0] = inner
    for first in range(first_row, stop_row, MAC_PIXELS):
        count = min(MAC_PIXELS, stop_row - first)
        for q in range(MAC_PIXELS):
            at[q] = x0 + (first + min(q, count - 1)) * inner
        lo = 0
        while lo < outs:
            width = min(MAC_CHANNELS, outs - lo)
            w_off = lo // MAC_CHANNELS * inner * MAC_CHANNELS
            if count == 1 and width == MAC_CHANNELS:  # one row: ROW_BLOCKS blocks, or one
                init_at[0] = init0 + first * init_stride + lo
                out_at[0] = out0 + first * outs + lo
                if outs - lo >= ROW_BLOCKS * MAC_CHANNELS:
                    mac_tile_row(x, at, lengths, 1, packed, w_off, init, init_at, out, out_at)
                    lo += ROW_BLOCKS * MAC_CHANNELS
                    continue
                mac_tile_one(x, at, lengths, 1, packed, w_off, init, init_at, out, out_at)
                lo += MAC_CHANNELS
                continue
            if count == MAC_PIXELS and width == MAC_CHANNELS:
                for q in range(MAC_PIXELS):
                    init_at[q] = init0 + (first + q) * init_stride + lo
                    out_at[q] = out0 + (first + q) * outs + lo
                if WIDE_REGISTERS and outs - lo >= 2 * MAC_CHANNELS:  # two blocks at once
                    mac_tile_pair(x, at, lengths, 1, packed, w_off, init, init_at, out, out_at)
                    lo += 2 * MAC_CHANNELS
                    continue
                mac_tile(x, at, lengths, 1, packed, w_off, init, init_at, out, out_at)
                lo += MAC_CHANNELS
                continue
            for q in range(MAC_PIXELS):  # indices, not slices (atomic reference counts)
                at_init = init0 + (first + min(q, count - 1)) * init_stride + lo
                for j in range(MAC_CHANNELS):
                    acc[q * MAC_CHANNELS + j] = init[at_init + j] if j < width else 0.0
            if count == 1:  # one position of the tile
                mac_tile_one(x, at, lengths, 1, packed, w_off, acc, acc_at, acc, acc_at)
            else:
                mac_tile(x, at, lengths, 1, packed, w_off, acc, acc_at, acc, acc_at)
            for q in range(count):
                start = out0 + (first + q) * outs + lo
                for j in range(width):
                    out[start + j] = acc[q * MAC_CHANNELS + j]
            lo += MAC_CHANNELS


@jit
def pack_matrix(b, b0, k, n, transposed, packed):
    """A bmm's right operand at b[b0:] as mac_rows reads it (pack_weights of the [N, K]
    matrix with steps in order), straight from how it is stored: [K, N] (each step's block of
    MAC_CHANNELS columns is a contiguous run) or, `transposed`, [N, K]. Zeros past column n."""
    blocks = (n + MAC_CHANNELS - 1) // MAC_CHANNELS
    for block in range(blocks):
        lo = block * MAC_CHANNELS
        width = min(MAC_CHANNELS, n - lo)
        base = block * k * MAC_CHANNELS
        if transposed:
            for j in range(MAC_CHANNELS):
                if j < width:
                    source = b0 + (lo + j) * k
                    for t in range(k):
                        packed[base + t * MAC_CHANNELS + j] = b[source + t]
                else:
                    for t in range(k):
                        packed[base + t * MAC_CHANNELS + j] = 0.0
        elif width == MAC_CHANNELS:
            for t in range(k):
                source = b0 + t * n + lo
                target = base + t * MAC_CHANNELS
                for j in range(MAC_CHANNELS):
                    packed[target + j] = b[source + j]
        else:
            for t in range(k):
                for j in range(MAC_CHANNELS):
                    value = b[b0 + t * n + lo + j] if j < width else 0.0
                    packed[base + t * MAC_CHANNELS + j] = value


@jit
def fc(row, frow, ocm, lut, table, tally, cache, sync, i, worker, workers):
    """With a weight-cache slot (`cache` as for conv), the rows run on mac_rows over the slot's
    packing, and `workers` > 1 threads share them by chunks of whole mac_tile rows (thread 0
    packs the weights if stale, then opens the instruction; as conv's, a chunk is stored when
    computed unless the output overlaps what the fc reads). Without one (never shared), on
    weights transposed here. Returns 0, or -1 if the run was abandoned."""
    rows, inner, outs = row[FC_N], row[FC_K], row[FC_O]
    act, out_addr = row[FC_ACT], row[FC_OUT_ADDR]
    if cache[0].size == 0:
        x = load_f16(ocm, row[FC_IN_ADDR], rows * inner, lut)
        out = np.empty(rows * outs, np.float32)
        fc_unpacked(row, ocm, lut, x, load_bias(ocm, row[FC_B_ADDR], outs), out)
        slopes = load_slopes(ocm, act, row[FC_ACT_ADDR], outs)
        finish(out, act, frow[FC_ACT_A], frow[FC_ACT_B], slopes, table, ocm, out_addr, tally)
        return 0
    if worker == 0 and packing_stale(ocm, row[FC_W_ADDR], cache):
        repack(ocm, row[FC_W_ADDR], np.arange(inner), outs, cache, lut)
    if workers > 1 and not start_shared(sync, i, worker):
        return -1
    size = chunk_size_by_work(rows, MAC_PIXELS, MAC_PIXELS * inner * outs, workers)
    chunks = (rows + size - 1) // size
    chunk = claim(sync, i, workers, chunks, 0)
    if chunk >= chunks:
        return end_shared(sync, i, worker, workers, chunks)
    x = np.empty(rows * inner, np.float32)  # a thread converts its chunks' rows
    bias = load_bias(ocm, row[FC_B_ADDR], outs)
    slopes = load_slopes(ocm, act, row[FC_ACT_ADDR], outs)
    out = np.empty(rows * outs, np.float32)
    out_bytes = 2 * rows * outs
    deferred = workers > 1 and not (
        apart(row[FC_IN_ADDR], 2 * rows * inner, out_addr, out_bytes)
        and apart(row[FC_B_ADDR], 4 * outs, out_addr, out_bytes)
        and apart(row[FC_ACT_ADDR], 4 * outs, out_addr, out_bytes)
    )
    scratch = rows_scratch()
    mine = np.empty(chunks, np.int64)
    taken = 0
    while chunk < chunks:
        start, stop = chunk_bounds(chunk, size, rows)
        in_addr = row[FC_IN_ADDR] + 2 * start * inner
        load_f16_into(ocm, in_addr, x[start * inner : stop * inner], lut)
        mac_rows(x, 0, cache[1], start, stop, inner, outs, bias, 0, 0, out, 0, scratch)
        mine[taken] = chunk
        taken += 1
        if not deferred:
            fc_store(frow, ocm, table, tally, out, slopes, act, out_addr, outs, start, stop)
        chunk = claim(sync, i, workers, chunks, taken)
    if deferred:
        if not all_computed(sync, i, taken, chunks):
            return -1
        for c in range(taken):
            start, stop = chunk_bounds(mine[c], size, rows)
            fc_store(frow, ocm, table, tally, out, slopes, act, out_addr, outs, start, stop)
    return all_stored(sync, i, worker, workers, taken, chunks)


@jit
def fc_store(frow, ocm, table, tally, out, slopes, act, out_addr, outs, start, stop):
    """Finish rows [start, stop) of an fc's fp32 results to f16 at their place in OCM."""
    span = out[start * outs : stop * outs]
    addr = out_addr + 2 * start * outs
    finish(span, act, frow[FC_ACT_A], frow[FC_ACT_B], slopes, table, ocm, addr, tally)


@jit
def fc_unpacked(row, ocm, lut, x, bias, out):
    """An fc without a weight-cache slot: out = bias + x . w^T, weights transposed here so
    the output is innermost, each sum in order of k."""
    rows, inner, outs = row[FC_N], row[FC_K], row[FC_O]
    w = load_f16(ocm, row[FC_W_ADDR], outs * inner, lut)
    wt = np.empty(inner * outs, np.float32)  # [K, O]: output innermost
    for j in range(outs):
        for kk in range(inner):
            wt[kk * outs + j] = w[j * inner + kk]
    for i in range(rows):
        acc = out[i * outs : (i + 1) * outs]
        acc[:] = bias
        for kk in range(inner):
            xv = x[i * inner + kk]
            for j in range(outs):
                acc[j] = acc[j] + xv * wt[kk * outs + j]


@jit
def bmm(row, ocm, lut, tally, sync, i, worker, workers):
    """out[q] = acc[q] + A[q] . B[q] (isa.md `bmm`): each batch's product runs on mac_rows, A's
    rows [M, K] the positions and B's columns the outputs, packed as fc weights (pack_matrix).
    `workers` > 1 threads share the batches' blocks of MAC_PIXELS rows by chunks: each thread
    packs the B of the batches its chunks reach, and computes and stores its own rows (after
    every chunk is computed when the output overlaps A, B or other partial sums). Returns 0,
    or -1 if the run was abandoned."""
    batch, m, k, n = row[BMM_BATCH], row[BMM_M], row[BMM_K], row[BMM_N]
    if workers > 1 and not start_shared(sync, i, worker):
        return -1
    tiles = (m + MAC_PIXELS - 1) // MAC_PIXELS  # blocks of rows per batch
    units = batch * tiles
    size = chunk_size_by_work(units, 1, MAC_PIXELS * k * n, workers)
    chunks = (units + size - 1) // size
    chunk = claim(sync, i, workers, chunks, 0)
    if chunk >= chunks:
        return end_shared(sync, i, worker, workers, chunks)
    trans_a, trans_b = row[BMM_TRANS_A], row[BMM_TRANS_B]
    a_stride = 0 if row[BMM_A_SHARED] else m * k
    b_stride = 0 if row[BMM_B_SHARED] else k * n
    a_addr, b_addr, acc_addr = row[BMM_A_ADDR], row[BMM_B_ADDR], row[BMM_ACC_ADDR]
    out_addr, acc_out = row[BMM_OUT_ADDR], row[BMM_ACC_OUT]
    a = load_f16(ocm, a_addr, m * k * (batch if a_stride else 1), lut)
    b = load_f16(ocm, b_addr, k * n * (batch if b_stride else 1), lut)
    out = np.empty(batch * m * n, np.float32)
    partial = read_f32(ocm, acc_addr, batch * m * n) if acc_addr != -1 else out[:0]
    x = np.empty(m * k if trans_a else 0, np.float32)  # one transposed A matrix as [M, K]
    packed = np.empty(packed_size(n, k), np.float32)
    out_bytes = (4 if acc_out else 2) * batch * m * n
    in_place = acc_out == 1 and acc_addr == out_addr  # each thread reads its own rows' sums
    deferred = workers > 1 and not (
        apart(a_addr, 2 * m * k * (batch if a_stride else 1), out_addr, out_bytes)
        and apart(b_addr, 2 * k * n * (batch if b_stride else 1), out_addr, out_bytes)
        and (in_place or apart(acc_addr, 4 * batch * m * n, out_addr, out_bytes))
    )
    scratch = rows_scratch()
    mine = np.empty(chunks, np.int64)
    taken = 0
    packed_for, moved_for = -1, -1  # the batch whose B is packed, whose A is transposed
    while chunk < chunks:
        for unit in range(chunk * size, min(units, (chunk + 1) * size)):
            q, first = unit // tiles, unit % tiles * MAC_PIXELS
            stop = min(m, first + MAC_PIXELS)
            if packed_for == -1 or (b_stride and packed_for != q):
                pack_matrix(b, q * b_stride, k, n, trans_b == 1, packed)
                packed_for = q
            x_at = q * a_stride
            if trans_a:
                if moved_for == -1 or (a_stride and moved_for != q):
                    for r in range(m):
                        for kk in range(k):
                            x[r * k + kk] = a[x_at + kk * m + r]
                    moved_for = q
                x_at = 0
            base = q * m * n
            for e in range(base + first * n, base + stop * n):
                out[e] = partial[e] if acc_addr != -1 else 0.0
            mac_rows(
                x if trans_a else a,
                x_at,
                packed,
                first,
                stop,
                k,
                n,
                out,
                base,
                n,
                out,
                base,
                scratch,
            )
        mine[taken] = chunk
        taken += 1
        if not deferred:
            bmm_store(ocm, tally, out, acc_out, out_addr, chunk * size, size, units, tiles, m, n)
        chunk = claim(sync, i, workers, chunks, taken)
    if deferred:
        if not all_computed(sync, i, taken, chunks):
            return -1
        for c in range(taken):
            bmm_store(ocm, tally, out, acc_out, out_addr, mine[c] * size, size, units, tiles, m, n)
    return all_stored(sync, i, worker, workers, taken, chunks)


@jit
def bmm_store(ocm, tally, out, acc_out, out_addr, first_unit, size, units, tiles, m, n):
    """Store the rows of units [first_unit, first_unit + size) (blocks of MAC_PIXELS rows of
    one batch each, batch-major) from `out`: the fp32 sums (acc_out), or rounded to f16. The
    units of a chunk are consecutive rows of [batch * M, N], stored as one span."""
    last = min(units, first_unit + size) - 1
    lo = (first_unit // tiles * m + first_unit % tiles * MAC_PIXELS) * n
    hi = (last // tiles * m + min(m, last % tiles * MAC_PIXELS + MAC_PIXELS)) * n
    if acc_out:
        store_f32(ocm, out_addr + 4 * lo, out[lo:hi])
    else:
        store_f16(ocm, out_addr + 2 * lo, out[lo:hi], tally)
