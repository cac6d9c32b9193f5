"""The Numba engine's multiply-accumulate blocks: `mac_tile` (LLVM IR vectors, each output's
sum in the documented order), the weight packing it reads, the conv's segments of contiguous
inputs, and the kernel for runs of few output channels. `mac.py` assembles them into the
`conv` and `fc` instructions (depthwise convs: `depthwise.py`)."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from mrvl.sim.engines.numba.fields import (
    CI_BLOCK,
    CONV_DILATION,
    CONV_GROUPS,
    CONV_IN_SHAPE,
    CONV_KERNEL,
    CONV_OROW0,
    CONV_OUT_SHAPE,
    CONV_PAD,
    CONV_ROW0,
    CONV_STRIDE,
)
from mrvl.sim.engines.numba.jit import cpu_features, jit, jit_inline
from mrvl.sim.engines.numba.numerics import counted_loop, load_f16
from mrvl.sim.weight_cache import CONSTANT, PACKED

# ------------------------------------------------------------------------------------ conv

MAC_PIXELS = 6
"""Output positions of one `mac_tile` call."""
MAC_CHANNELS = 16
"""Output channels of one `mac_tile` call: one vector of MAC_CHANNELS lanes (one AVX-512
register; LLVM splits it in two on machines with 256-bit vectors, in four with 128-bit ones,
with the same results: each lane is computed on its own)."""
LANES = 8
"""fp32 lanes of the vectors of `mac_tile_half` and `mac_tile_narrow` (one AVX register)."""
WIDE_REGISTERS = "+avx512f" in cpu_features().split(",")
"""Whether Numba compiles for AVX-512's 32 vector registers of 16 fp32 lanes. Then the
kernels with twice the accumulators (`mac_tile_pair`, `depthwise.depthwise_tile16`) keep them
all in registers; with AVX2's 16 registers of 8 lanes they spill, and their callers take the
smaller kernel instead (the same bits: each lane is computed on its own, in the same order).
On an AMD EPYC (znver3, AVX2 and FMA), in a loop over a 1x1 conv's tiles: mac_tile_pair 21
GMAC/s, mac_tile 50; depthwise_tile16 15, depthwise_tile8 21 (25 taps)."""


def mac_tile_codegen(pixels, halves, lanes=LANES, blocks=1):
    """The LLVM IR of a mac_tile kernel over `pixels` positions x `blocks` consecutive blocks
    of MAC_CHANNELS output channels x `halves` vectors of `lanes` channels from each block (the
    weights' packing has MAC_CHANNELS a step whatever `halves`; block b's weights start
    b x the reduction's steps x MAC_CHANNELS after block 0's, its outputs MAC_CHANNELS after).
    Wider vectors do the same lanewise arithmetic in fewer instructions: mac_tile's 16 channels
    as one vector of 16 lanes rather than two of 8 run 1.25-1.3x faster where AVX-512 is (28
    vs 22.5 GMAC/s on one core of the Xeon this was measured on).

    Each multiply-add is one `llvm.fmuladd`: LLVM fuses it into one FMA instruction where the
    CPU has them and emits a multiply and an add elsewhere, the same bits either way here
    since both factors are f16 values, whose product is exact in fp32 (see mac_tile)."""

    def codegen(context, builder, signature, args):
        x_value, rows_value, lengths_value, segments_value, w_value, w_off_value = args[:6]
        init_value, init_at_value, out_value, out_at_value = args[6:]
        f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
        vector = ir.VectorType(f32, lanes)
        vector_ptr = vector.as_pointer()
        fmuladd = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vector, [vector] * 3), f"llvm.fmuladd.v{lanes}f32"
        )

        def data(index, value):
            return context.make_array(signature.args[index])(context, builder, value).data

        x_ptr, rows_ptr, lengths_ptr = data(0, x_value), data(1, rows_value), data(2, lengths_value)
        w_ptr = data(4, w_value)
        init_ptr, init_at_ptr = data(6, init_value), data(7, init_at_value)
        out_ptr, out_at_ptr = data(8, out_value), data(9, out_at_value)

        def const(value):
            return ir.Constant(i64, value)

        def vector_at(pointer, offset):
            return builder.bitcast(builder.gep(pointer, [offset]), vector_ptr)

        w_base = builder.gep(w_ptr, [w_off_value])
        if blocks > 1:  # the steps of the whole reduction: the packing's block stride

            def count_steps(s, total):
                return [builder.add(total[0], builder.load(builder.gep(lengths_ptr, [s])))]

            (steps,) = counted_loop(builder, "steps", segments_value, 1, [const(0)], count_steps)
            block_stride = builder.mul(steps, const(MAC_CHANNELS))
        else:
            block_stride = const(0)
        vectors = [(b, h) for b in range(blocks) for h in range(halves)]

        def pixel_base(pointer, at_ptr, p):
            return builder.gep(pointer, [builder.load(builder.gep(at_ptr, [const(p)]))])

        init_bases = [pixel_base(init_ptr, init_at_ptr, p) for p in range(pixels)]
        slots = [(p, b, h) for p in range(pixels) for b, h in vectors]
        initial = [
            builder.load(vector_at(init_bases[p], const(b * MAC_CHANNELS + h * lanes)), align=4)
            for p, b, h in slots
        ]
        undef = ir.Constant(vector, ir.Undefined)
        splat = ir.Constant(ir.VectorType(i32, lanes), [0] * lanes)

        def segment(s, carried):
            done, sums = carried[0], carried[1:]
            length = builder.load(builder.gep(lengths_ptr, [s]))
            first_row = builder.mul(s, const(pixels))
            x_rows = [
                builder.gep(
                    x_ptr, [builder.load(builder.gep(rows_ptr, [builder.add(first_row, const(p))]))]
                )
                for p in range(pixels)
            ]
            w_segment = builder.gep(w_base, [builder.mul(done, const(MAC_CHANNELS))])
            w_blocks = [
                builder.gep(w_segment, [builder.mul(block_stride, const(b))]) for b in range(blocks)
            ]

            def step(t, sums):
                w_step = builder.mul(t, const(MAC_CHANNELS))
                weights = [
                    builder.load(
                        vector_at(builder.gep(w_blocks[b], [w_step]), const(h * lanes)), align=4
                    )
                    for b, h in vectors
                ]
                updated = []
                for p in range(pixels):
                    scalar = builder.load(builder.gep(x_rows[p], [t]), align=4)
                    broadcast = builder.shuffle_vector(
                        builder.insert_element(undef, scalar, ir.Constant(i32, 0)), undef, splat
                    )
                    for v in range(len(vectors)):
                        addend = sums[p * len(vectors) + v]
                        updated.append(builder.call(fmuladd, [broadcast, weights[v], addend]))
                return updated

            sums = counted_loop(builder, "mac", length, 1, sums, step)
            return [builder.add(done, length), *sums]

        carried = counted_loop(builder, "segment", segments_value, 1, [const(0), *initial], segment)
        out_bases = [pixel_base(out_ptr, out_at_ptr, p) for p in range(pixels)]
        for (p, b, h), value in zip(slots, carried[1:]):
            builder.store(
                value, vector_at(out_bases[p], const(b * MAC_CHANNELS + h * lanes)), align=4
            )
        return context.get_dummy_value()

    return codegen


@intrinsic
def mac_tile(typingctx, x, rows, lengths, segments, w, w_off, init, init_at, out, out_at):
    """out[out_at[p] + j] = init[init_at[p] + j] + sum of x[rows[s * MAC_PIXELS + p] + t] *
    w[w_off + (T_s + t) * 16 + j], added one term at a time for each segment s in 0 ..
    segments - 1 and each t in 0 .. lengths[s] - 1 (T_s: the lengths before s), for the
    MAC_PIXELS x MAC_CHANNELS outputs (p, j) at once.

    A segment is a run of the reduction whose inputs are contiguous in x (one input-channel
    block of one kernel tap of a conv, or a whole 1x1 reduction), so a conv reads its inputs
    where they are, with no patch gathered. The accumulators stay in vector registers for the
    whole reduction: each step is one vector load of 16 weights, one broadcast input per
    position, then per output one multiply-add (`llvm.fmuladd`, no fast-math flags), so every
    output's sum is the documented sequential one. Fused or not, the add is the only rounding:
    every caller's factors are f16 values (inputs and weights converted from f16, or the zeros
    of the padding), whose product is exact in fp32 (at most 11 x 11 significant bits, and
    magnitudes in [2^-48, 2^32), subnormal f16 included: far inside fp32's normal range), so
    fma(x, w, acc) = fp32(fp32(x * w) + acc) bit for bit (tests/sim/test_fma_exactness.py).
    Numba cannot express vectors, hence LLVM IR.
    x, w, init, out: float32 C arrays; rows: int64[segments * MAC_PIXELS], offsets into x;
    lengths: int64[segments]; init_at, out_at: int64[MAC_PIXELS], offsets into init and out
    (the accumulators start from init and end in out, which may be one array: all are loaded
    before any is stored)."""
    sig = types.void(x, rows, lengths, segments, w, w_off, init, init_at, out, out_at)
    return sig, mac_tile_codegen(MAC_PIXELS, 1, MAC_CHANNELS)


@intrinsic
def mac_tile_pair(typingctx, x, rows, lengths, segments, w, w_off, init, init_at, out, out_at):
    """mac_tile over two consecutive blocks of MAC_CHANNELS output channels at once: block 1's
    packed weights follow block 0's (w_off + the reduction's steps x MAC_CHANNELS), its outputs
    and accumulators MAC_CHANNELS after block 0's. Twice the independent accumulators of
    mac_tile (2 x MAC_PIXELS vectors), which a chain of 4-cycle multiply-adds needs to keep
    two FMA units busy, and one broadcast input per position for twice the multiply-adds."""
    sig = types.void(x, rows, lengths, segments, w, w_off, init, init_at, out, out_at)
    return sig, mac_tile_codegen(MAC_PIXELS, 1, MAC_CHANNELS, blocks=2)


@intrinsic
def mac_tile_half(typingctx, x, rows, lengths, segments, w, w_off, init, init_at, out, out_at):
    """mac_tile over its MAC_PIXELS positions and only the first LANES of the MAC_CHANNELS
    output channels: the last block of a run of 8 mod 16 channels (24, 40, 56 ... in mobile
    networks), computed straight into the output instead of 16 lanes through a scratch tile."""
    sig = types.void(x, rows, lengths, segments, w, w_off, init, init_at, out, out_at)
    return sig, mac_tile_codegen(MAC_PIXELS, 1)


ROW_BLOCKS = 4
"""Blocks of MAC_CHANNELS output channels of one `mac_tile_row` call."""


@intrinsic
def mac_tile_row(typingctx, x, rows, lengths, segments, w, w_off, init, init_at, out, out_at):
    """mac_tile for one position over ROW_BLOCKS consecutive blocks of MAC_CHANNELS output
    channels (packed as for mac_tile_pair): a matrix's last row, such as a classifier's only
    one, which mac_tile would compute MAC_PIXELS times over. Its ROW_BLOCKS x MAC_CHANNELS
    lanes are enough independent accumulators to hide a multiply-add's latency. rows:
    int64[segments]; init_at, out_at: int64[1]."""
    sig = types.void(x, rows, lengths, segments, w, w_off, init, init_at, out, out_at)
    return sig, mac_tile_codegen(1, 1, MAC_CHANNELS, blocks=ROW_BLOCKS)


@intrinsic
def mac_tile_one(typingctx, x, rows, lengths, segments, w, w_off, init, init_at, out, out_at):
    """mac_tile for one position and one block of MAC_CHANNELS output channels: a last row's
    blocks past mac_tile_row's (a classifier's 125 outputs a tile: 64 by mac_tile_row, then 3
    whole blocks and one of 13), which mac_tile would compute MAC_PIXELS times over. rows:
    int64[segments]; init_at, out_at: int64[1]."""
    sig = types.void(x, rows, lengths, segments, w, w_off, init, init_at, out, out_at)
    return sig, mac_tile_codegen(1, 1, MAC_CHANNELS)


NARROW_PIXELS = 12
"""Output positions of one `mac_tile_narrow` call."""


@intrinsic
def mac_tile_narrow(typingctx, x, rows, lengths, segments, w, w_off, init, init_at, out, out_at):
    """mac_tile for runs of at most LANES output channels (the first LANES of each step's
    MAC_CHANNELS weights): NARROW_PIXELS positions x one vector, so as many multiply-adds a
    step as mac_tile, where mac_tile would compute half its vectors for nothing. rows:
    int64[segments * NARROW_PIXELS]; init_at, out_at: int64[NARROW_PIXELS]."""
    sig = types.void(x, rows, lengths, segments, w, w_off, init, init_at, out, out_at)
    return sig, mac_tile_codegen(NARROW_PIXELS, 1)


@jit
def conv_order(kh_count, kw_count, group_channels):
    """The documented reduction order as indices into an OHWI weight row [KH, KW, Cg]: per
    input-channel block, then kh, kw, ci."""
    tap = np.empty(kh_count * kw_count * group_channels, np.int64)
    t = 0
    for block in range(0, group_channels, CI_BLOCK):
        for kh in range(kh_count):
            for kw in range(kw_count):
                for ci in range(block, min(block + CI_BLOCK, group_channels)):
                    tap[t] = (kh * kw_count + kw) * group_channels + ci
                    t += 1
    return tap


@jit
def gather_patch(row, x, position, c_base, patch):
    """The inputs of every step of output `position`, in the order of conv_order (block, kh,
    kw, then ci), +0.0 where the tap falls outside the window: patch[t] for t < steps."""
    height, width, in_channels = (
        row[CONV_IN_SHAPE + 1],
        row[CONV_IN_SHAPE + 2],
        row[CONV_IN_SHAPE + 3],
    )
    out_rows, out_cols = row[CONV_OUT_SHAPE + 1], row[CONV_OUT_SHAPE + 2]
    kh_count, kw_count = row[CONV_KERNEL], row[CONV_KERNEL + 1]
    group_channels = in_channels // row[CONV_GROUPS]
    n = position // (out_rows * out_cols)
    r = (position // out_cols) % out_rows
    c = position % out_cols
    wr0 = (row[CONV_OROW0] + r) * row[CONV_STRIDE] - row[CONV_PAD] - row[CONV_ROW0]
    iw0 = c * row[CONV_STRIDE + 1] - row[CONV_PAD + 1]
    t = 0
    for block in range(0, group_channels, CI_BLOCK):
        length = min(CI_BLOCK, group_channels - block)
        for kh in range(kh_count):
            wr = wr0 + kh * row[CONV_DILATION]
            for kw in range(kw_count):
                iw = iw0 + kw * row[CONV_DILATION + 1]
                segment = patch[t : t + length]
                if 0 <= wr < height and 0 <= iw < width:
                    base = ((n * height + wr) * width + iw) * in_channels + c_base + block
                    source = x[base : base + length]
                    for ci in range(length):
                        segment[ci] = source[ci]
                else:
                    segment[:] = 0.0
                t += length


@jit
def conv_segments(kh_count, kw_count, group_channels, merged):
    """The lengths of the runs of the documented order whose inputs are contiguous in the
    window (mac_tile's segments): per input-channel block, kh and kw, the block's channels;
    a 1x1 conv's whole reduction is one run (its blocks follow each other in the window);
    `merged` (merges_kernel_rows), per kh the whole kernel row."""
    if merged:
        return np.full(kh_count, kw_count * group_channels, np.int64)
    block_size = group_channels if kh_count * kw_count == 1 else CI_BLOCK
    blocks = (group_channels + block_size - 1) // block_size
    lengths = np.empty(blocks * kh_count * kw_count, np.int64)
    s = 0
    for block in range(0, group_channels, block_size):
        for _ in range(kh_count * kw_count):
            lengths[s] = min(block_size, group_channels - block)
            s += 1
    return lengths


@jit
def merges_kernel_rows(row):
    """Whether a conv's taps of one kernel row are one run of the documented order and of the
    window, once the window has zero columns for the padding (window_columns): one input-
    channel block (groups=1), undilated columns, kw > 1; taken where the row's taps are no
    more than a block (CI_BLOCK), as in a stem over 3 channels, whose segments would
    otherwise be a few steps each (a 7x7 stem: 49 segments of 3 steps, 23 -> 36 GMAC/s)."""
    return (
        row[CONV_GROUPS] == 1
        and row[CONV_IN_SHAPE + 3] * row[CONV_KERNEL + 1] <= CI_BLOCK
        and row[CONV_DILATION + 1] == 1
        and row[CONV_KERNEL + 1] > 1
    )


@jit
def window_columns(row):
    """(left, right): the zero columns a window whose kernel rows merge (merges_kernel_rows)
    gets on each side, so that every tap column of every output position is in it."""
    left = row[CONV_PAD + 1]
    last = (row[CONV_OUT_SHAPE + 2] - 1) * row[CONV_STRIDE + 1] - left + row[CONV_KERNEL + 1] - 1
    return left, max(0, last - (row[CONV_IN_SHAPE + 2] - 1))


@jit_inline
def next_position(n, r, c, out_rows, out_cols):
    """The output position after (n, r, c), in N, rows, columns order: a conv's positions are
    stepped, not divided out of their index (divisions per position cost more than its MACs)."""
    c += 1
    if c == out_cols:
        c = 0
        r += 1
        if r == out_rows:
            r = 0
            n += 1
    return n, r, c


@jit
def segment_rows(row, first, count, c_base, zeros, rows, pixels, left, padded_width, merged):
    """For the `pixels` output positions of one mac_tile call from `first` (those past
    first + count - 1 repeat the last), rows[s * pixels + q] = the offset in the window (of
    `padded_width` columns, the first at `left`) of position q's inputs of segment s
    (conv_segments), or `zeros`, where the window holds zeros, for a tap that falls outside
    the window (padding). One call per tile, scalars and loops only: every array a Numba
    function takes or slices costs an atomic reference count, which per position cost a 1x1
    conv a third of its time."""
    height, width, in_channels = (
        row[CONV_IN_SHAPE + 1],
        row[CONV_IN_SHAPE + 2],
        row[CONV_IN_SHAPE + 3],
    )
    out_rows, out_cols = row[CONV_OUT_SHAPE + 1], row[CONV_OUT_SHAPE + 2]
    kh_count, kw_count = row[CONV_KERNEL], row[CONV_KERNEL + 1]
    stride_h, stride_w = row[CONV_STRIDE], row[CONV_STRIDE + 1]
    dilation_h, dilation_w = row[CONV_DILATION], row[CONV_DILATION + 1]
    top = row[CONV_PAD] + row[CONV_ROW0] - row[CONV_OROW0] * stride_h
    group_channels = in_channels // row[CONV_GROUPS]
    block_size = group_channels if kh_count * kw_count == 1 or merged else CI_BLOCK
    taps_per_row = 1 if merged else kw_count  # a merged segment covers the kernel row
    n = first // (out_rows * out_cols)
    r = (first // out_cols) % out_rows
    c = first % out_cols
    for q in range(pixels):
        if 0 < q < count:
            n, r, c = next_position(n, r, c, out_rows, out_cols)
        wr0 = r * stride_h - top
        iw0 = c * stride_w - row[CONV_PAD + 1]
        s = q
        for block in range(0, group_channels, block_size):
            for kh in range(kh_count):
                wr = wr0 + kh * dilation_h
                inside = 0 <= wr < height
                at = (n * height + wr) * padded_width + left
                for kw in range(taps_per_row):
                    iw = iw0 + kw * dilation_w
                    if inside and (merged or 0 <= iw < width):
                        rows[s] = (at + iw) * in_channels + c_base + block
                    else:
                        rows[s] = zeros
                    s += pixels


@jit
def packed_size(run, steps):
    """float32 elements of the packed weights of `run` output channels (pack_weights)."""
    return (run + MAC_CHANNELS - 1) // MAC_CHANNELS * steps * MAC_CHANNELS


@jit
def pack_weights(w, tap, o_lo, o_hi, packed):
    """The weights of output channels [o_lo, o_hi) as mac_tile reads them, into `packed`
    (packed_size elements): per block of MAC_CHANNELS channels, [steps, MAC_CHANNELS] in step
    order, zeros past o_hi."""
    steps = tap.size
    packed[:] = 0.0
    for o in range(o_hi - o_lo):
        block, j = o // MAC_CHANNELS, o % MAC_CHANNELS
        source = w[(o_lo + o) * steps : (o_lo + o + 1) * steps]
        target = packed[block * steps * MAC_CHANNELS + j :]
        for t in range(steps):
            target[t * MAC_CHANNELS] = source[tap[t]]


@jit
def same_halves(a, b):
    """Whether two uint16 arrays of the same size hold the same values."""
    different = 0
    for i in range(a.size):
        different |= a[i] ^ b[i]
    return different == 0


@jit
def packing_stale(ocm, w_addr, cache):
    """Whether a weight-cache slot (WeightCache) must be packed again from the f16 weights at
    ocm[w_addr:]: a packing of constant weights is used as it is, any other only if the
    weights still equal the bits it was made from."""
    raw, _, filled = cache
    if (filled[0] & PACKED) == 0:
        return True
    if (filled[0] & CONSTANT) != 0:
        return False
    return not same_halves(ocm[w_addr : w_addr + 2 * raw.size].view(np.uint16), raw)


@jit
def repack(ocm, w_addr, tap, outs, cache, lut):
    """Pack the `outs` x tap.size f16 weights at ocm[w_addr:] into the slot, keeping their
    bits for packing_stale."""
    raw, cached, filled = cache
    w = load_f16(ocm, w_addr, outs * tap.size, lut)
    pack_weights(w, tap, 0, outs, cached)
    raw[:] = ocm[w_addr : w_addr + 2 * raw.size].view(np.uint16)
    filled[0] |= PACKED


@jit
def blocked_scratch(row, run, merged):
    """The scratch arrays of conv_run_blocked for a run of `run` output channels, made once
    per conv (a thread's chunks reuse them; making them per chunk was a third of a small
    chunk's fixed cost): the segment lengths (conv_segments), each segment's input offsets
    per position, the accumulator tile and its offsets, and the init and output offsets of
    the tile computed in place."""
    group_channels = row[CONV_IN_SHAPE + 3] // row[CONV_GROUPS]
    lengths = conv_segments(row[CONV_KERNEL], row[CONV_KERNEL + 1], group_channels, merged)
    pixels = NARROW_PIXELS if run <= LANES else MAC_PIXELS
    rows = np.empty(lengths.size * pixels, np.int64)
    acc = np.empty(pixels * MAC_CHANNELS, np.float32)
    acc_at = np.arange(pixels) * MAC_CHANNELS
    return lengths, rows, acc, acc_at, np.empty(pixels, np.int64), np.empty(pixels, np.int64)


@jit
def conv_run_blocked(
    row, x, packed, steps, bias, partial, out, o_lo, o_hi, c_base, start, stop, merged, scratch
):
    """Output channels [o_lo, o_hi) of one group at output positions [start, stop), MAC_PIXELS
    positions x 2 MAC_CHANNELS channels per mac_tile_pair call while two whole blocks remain
    (WIDE_REGISTERS only), else x MAC_CHANNELS per mac_tile call (NARROW_PIXELS x LANES per
    mac_tile_narrow call for a run of at most LANES channels; a last block of at most LANES
    channels by mac_tile_half; a tile of one position by conv_position_blocked), with their
    `packed` weights (from o_lo's block on), reading the inputs in the window `x` in place,
    segment by segment (conv_segments; `merged`: a segment per kernel row, the window having
    the zero columns of window_columns). The window ends with zeros as long as the longest segment, for the taps
    in the padding (load_window). `scratch`: blocked_scratch(row, o_hi - o_lo, merged)."""
    out_channels = row[CONV_OUT_SHAPE + 3]
    blocks = packed.size // (steps * MAC_CHANNELS)
    left, right = window_columns(row) if merged else (0, 0)
    padded_width = row[CONV_IN_SHAPE + 2] + left + right
    lengths, rows, acc, acc_at, init_at, out_at = scratch
    segments = lengths.size
    zeros = x.size - lengths.max()
    narrow = o_hi - o_lo <= LANES  # one vector of channels: mac_tile_narrow
    pixels = NARROW_PIXELS if narrow else MAC_PIXELS
    lanes = LANES if narrow else MAC_CHANNELS
    init = partial if partial.size > 0 else bias
    from_partial = partial.size > 0
    for first in range(start, stop, pixels):
        count = min(pixels, stop - first)
        if count == 1 and not narrow:  # one position: mac_tile_row and mac_tile_one
            segment_rows(row, first, 1, c_base, zeros, rows, 1, left, padded_width, merged)
            conv_position_blocked(
                x, packed, steps, init, from_partial, out, o_lo, o_hi, first, out_channels,
                scratch,
            )  # fmt: skip
            continue
        segment_rows(row, first, count, c_base, zeros, rows, pixels, left, padded_width, merged)
        block = 0
        while block < blocks:
            lo = o_lo + block * MAC_CHANNELS
            width = min(lanes, o_hi - lo)
            w_off = block * steps * MAC_CHANNELS
            half = not narrow and width <= LANES  # the last block, at most LANES channels
            direct = width == lanes or (half and width == LANES)
            if direct and count == pixels:  # from bias or partial straight to out
                for q in range(pixels):
                    out_at[q] = (first + q) * out_channels + lo
                    init_at[q] = out_at[q] if from_partial else lo
                block += 1
                if WIDE_REGISTERS and not narrow and o_hi - lo >= 2 * MAC_CHANNELS:  # two blocks
                    mac_tile_pair(
                        x, rows, lengths, segments, packed, w_off, init, init_at, out, out_at
                    )
                    block += 1
                elif narrow:
                    mac_tile_narrow(
                        x, rows, lengths, segments, packed, w_off, init, init_at, out, out_at
                    )
                elif half:
                    mac_tile_half(
                        x, rows, lengths, segments, packed, w_off, init, init_at, out, out_at
                    )
                else:
                    mac_tile(x, rows, lengths, segments, packed, w_off, init, init_at, out, out_at)
                continue
            for q in range(pixels):  # a partial tile: through acc, zeros past the edges
                at = (first + q) * out_channels + lo if from_partial and q < count else lo
                source = partial if from_partial and q < count else bias
                for j in range(MAC_CHANNELS):
                    acc[q * MAC_CHANNELS + j] = source[at + j] if j < width else 0.0
            if narrow:
                mac_tile_narrow(x, rows, lengths, segments, packed, w_off, acc, acc_at, acc, acc_at)
            elif half:
                mac_tile_half(x, rows, lengths, segments, packed, w_off, acc, acc_at, acc, acc_at)
            else:
                mac_tile(x, rows, lengths, segments, packed, w_off, acc, acc_at, acc, acc_at)
            for q in range(count):
                at = (first + q) * out_channels + lo
                for j in range(width):
                    out[at + j] = acc[q * MAC_CHANNELS + j]
            block += 1


@jit
def conv_position_blocked(
    x, packed, steps, init, from_partial, out, o_lo, o_hi, position, out_channels, scratch
):
    """conv_run_blocked's output channels [o_lo, o_hi) of one output `position` (a tile of one
    position: a squeeze-and-excite conv's only one, the last of 49), whose segments' offsets
    are in scratch's rows (segment_rows with one pixel): ROW_BLOCKS blocks a mac_tile_row
    call, then a block a mac_tile_one call, a last block narrower than MAC_CHANNELS through
    the scratch tile, where mac_tile would compute MAC_PIXELS positions for one."""
    lengths, rows, acc, acc_at, init_at, out_at = scratch
    segments = lengths.size
    base = position * out_channels
    lo = o_lo
    while lo < o_hi:
        w_off = (lo - o_lo) * steps
        width = min(MAC_CHANNELS, o_hi - lo)
        if width == MAC_CHANNELS:  # from bias or partial straight to out
            out_at[0] = base + lo
            init_at[0] = base + lo if from_partial else lo
            if o_hi - lo >= ROW_BLOCKS * MAC_CHANNELS:
                mac_tile_row(x, rows, lengths, segments, packed, w_off, init, init_at, out, out_at)
                lo += ROW_BLOCKS * MAC_CHANNELS
                continue
            mac_tile_one(x, rows, lengths, segments, packed, w_off, init, init_at, out, out_at)
            lo += MAC_CHANNELS
            continue
        at = base + lo if from_partial else lo
        for j in range(MAC_CHANNELS):
            acc[j] = init[at + j] if j < width else 0.0
        mac_tile_one(x, rows, lengths, segments, packed, w_off, acc, acc_at, acc, acc_at)
        for j in range(width):
            out[base + lo + j] = acc[j]
        lo += MAC_CHANNELS


NARROW = 8
"""Runs of fewer output channels than this (depthwise convs) use conv_run_narrow."""
WIDE_PIXELS = 128
"""Output positions computed together by conv_run_narrow."""


@jit
def conv_run_narrow(row, x, w, tap, bias, partial, out, o_lo, o_hi, c_base):
    """Output channels [o_lo, o_hi) of one group, too few to fill mac_tile's vectors: the
    innermost loop runs over WIDE_PIXELS positions instead (step-major patches)."""
    out_channels = row[CONV_OUT_SHAPE + 3]
    positions = row[CONV_OUT_SHAPE] * row[CONV_OUT_SHAPE + 1] * row[CONV_OUT_SHAPE + 2]
    steps = tap.size
    run = o_hi - o_lo
    wide_pixels = min(WIDE_PIXELS, positions)
    wt = np.empty((steps, run), np.float32)  # row t: the run's weights of step t
    for t in range(steps):
        for o in range(run):
            wt[t, o] = w[(o_lo + o) * steps + tap[t]]
    patch = np.empty(steps, np.float32)
    patches_t = np.zeros((steps, wide_pixels), np.float32)
    acc_t = np.empty((run, wide_pixels), np.float32)
    for first in range(0, positions, wide_pixels):
        count = min(wide_pixels, positions - first)
        for q in range(wide_pixels):
            if q < count:
                gather_patch(row, x, first + q, c_base, patch)
                for t in range(steps):
                    patches_t[t, q] = patch[t]
            for o in range(run):
                if partial.size > 0 and q < count:
                    acc_t[o, q] = partial[(first + q) * out_channels + o_lo + o]
                else:
                    acc_t[o, q] = bias[o_lo + o]
        for t in range(steps):
            xs = patches_t[t]
            for o in range(run):
                wo = wt[t, o]
                a = acc_t[o]
                for p in range(wide_pixels):
                    a[p] = a[p] + xs[p] * wo
        for q in range(count):
            base = (first + q) * out_channels + o_lo
            for o in range(run):
                out[base + o] = acc_t[o, q]
