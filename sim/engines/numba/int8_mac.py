"""The Numba engine's int8 multiply-accumulate block, `qmac_tile`: unsigned bytes (the int8
input + 128) times int8 weights, summed four at a time into int32 vector lanes, in LLVM IR
(Numba has no vector types). `int8_conv.py` builds `qconv` from it.

A product of a byte in [0, 255] and a weight in [-128, 127] lies in [-32,640, 32,640], four of
them are exact in int32, and int32 addition wraps modulo 2^32 whatever the order. So the sum
of (x + 128)·w, less (in_zp + 128)·Σw (`int8_conv` adds it to the start of each sum, the window
holds in_zp + 128 in the padding), is the ISA's accumulator (docs/isa.md, "Numerics (int8
mode)") in any order, which leaves the block free to sum four channels at once: x86's VPDPBUSD
where the CPU has AVX-512 VNNI or AVX-VNNI (not VPDPBUSDS, which saturates), AVX2's VPMADDWD
on the bytes widened to int16 where it has only AVX2, else the same arithmetic widened to
int32 (`QMAC_PATHS`).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from mrvl.sim.engines.numba.jit import cpu_features
from mrvl.sim.engines.numba.numerics import counted_loop

QMAC_PIXELS = 6
"""Output positions of one `qmac_tile` call."""
QMAC_VECTORS = 2
"""int32 vectors of QMAC_LANES output channels a `qmac_tile` call holds per position."""
QMAC_LANES = 16
"""int32 lanes of a vector (one AVX-512 register; split in halves on AVX-VNNI, and by LLVM on
narrower machines, with the same results: each lane is computed on its own)."""
QMAC_CHANNELS = QMAC_VECTORS * QMAC_LANES
"""Output channels of one `qmac_tile` call: the block width of the packed weights."""
QMAC_GROUP = 4
"""Input channels a lane sums at once: the window's channels are padded to a multiple."""

QMAC_PATHS = ("avx512vnni", "avxvnni", "avx2", "generic")
"""How `qmac_tile` sums four products into a lane: one 512-bit VPDPBUSD (AVX-512 VNNI and
BW), two 256-bit ones (AVX-VNNI, or AVX-512 VNNI and VL without BW), 256-bit VPMADDWDs on
int16 (AVX2: `_pairs_codegen`), or plain LLVM integer arithmetic (zero- and sign-extend to
int32, multiply, add), which any target compiles."""

PAIR_LANES = 8
"""Output channels of one pass of the avx2 path (`_pairs_codegen`): a 256-bit vector of int32
sums, held as two vectors of half sums while the pass runs."""


def qmac_path(features: str) -> str:
    """The QMAC_PATHS entry for a target with these LLVM `features`."""
    have = {name[1:] for name in features.split(",") if name.startswith("+")}
    if {"avx512vnni", "avx512bw"} <= have:
        return "avx512vnni"
    if "avxvnni" in have or {"avx512vnni", "avx512vl"} <= have:
        return "avxvnni"
    if "avx2" in have:
        return "avx2"
    return "generic"


QMAC_PATH = qmac_path(cpu_features())
"""The path `qmac_tile` is compiled with on this machine."""

QMAC_SPEEDUPS = {"avx512vnni": 4.0, "avxvnni": 2.0, "avx2": 1.0, "generic": 0.125}
"""About how many times the fp16 conv's multiply-adds a second a qconv does on each path (its
blocks, window, start and store: light ResNet-50's int8 pieces on an AVX-512 VNNI host, and
on a 2-core AVX2 one, where a 1x1 piece of 1.6 M runs at about 30 GMAC/s, as fp16's). The
threads share a qconv of as many seconds of work as an fp16 conv (`int8.SHARED_QCONV_MACS`)
and cut it into chunks of as many seconds as an fp16 conv's (`int8_conv.qconv_chunk_size`)."""

QMAC_SPEEDUP = QMAC_SPEEDUPS[QMAC_PATH]
"""This machine's QMAC_SPEEDUPS entry."""

QMAC_WINDOWS = {"avx512vnni": np.uint8, "avxvnni": np.uint8, "avx2": np.uint16, "generic": np.uint8}
"""The type of the window (the inputs + 128) each path reads: bytes, or on the avx2 path
uint16 values, which VPMADDWD takes as they are (a broadcast load of a position's group, not
a load, a widening and a broadcast)."""

QMAC_WINDOW = QMAC_WINDOWS[QMAC_PATH]
"""The window type of this machine's path (`int8_conv.fill_window_rows`)."""


def _dot4(builder, path, sums, inputs, weights):
    """<16 x i32> `sums` plus, in lane k, the sum over e < 4 of the unsigned byte inputs[4k + e]
    times the signed byte weights[4k + e] (<64 x i8> each), wrapping modulo 2^32."""
    i8, i32 = ir.IntType(8), ir.IntType(32)
    if path == "avx512vnni":
        v64 = ir.VectorType(i8, 64)
        fn = ir.FunctionType(ir.VectorType(i32, 16), [ir.VectorType(i32, 16), v64, v64])
        callee = builder.module.declare_intrinsic("llvm.x86.avx512.vpdpbusd.512", fnty=fn)
        return builder.call(callee, [sums, inputs, weights])
    if path == "avxvnni":
        v32 = ir.VectorType(i8, 32)
        fn = ir.FunctionType(ir.VectorType(i32, 8), [ir.VectorType(i32, 8), v32, v32])
        callee = builder.module.declare_intrinsic("llvm.x86.avx512.vpdpbusd.256", fnty=fn)
        halves = []
        for h in range(2):
            lanes = ir.Constant(ir.VectorType(i32, 32), list(range(32 * h, 32 * h + 32)))
            sum_lanes = ir.Constant(ir.VectorType(i32, 8), list(range(8 * h, 8 * h + 8)))
            part = builder.shuffle_vector(sums, sums, sum_lanes)
            a = builder.shuffle_vector(inputs, inputs, lanes)
            b = builder.shuffle_vector(weights, weights, lanes)
            halves.append(builder.call(callee, [part, a, b]))
        return builder.shuffle_vector(
            halves[0], halves[1], ir.Constant(ir.VectorType(i32, 16), list(range(16)))
        )
    wide = ir.VectorType(i32, 64)
    products = builder.mul(builder.zext(inputs, wide), builder.sext(weights, wide))
    for e in range(QMAC_GROUP):
        lanes = ir.Constant(ir.VectorType(i32, 16), list(range(e, 64, QMAC_GROUP)))
        sums = builder.add(sums, builder.shuffle_vector(products, products, lanes))
    return sums


def _pmaddwd(builder, a, b):
    """AVX2's VPMADDWD: <8 x i32> lane k = a[2k]·b[2k] + a[2k + 1]·b[2k + 1] of <16 x i16>
    a and b, exact (two int16 products overflow int32 only for 2 x (-32768)², which the
    widened bytes never reach)."""
    i16, i32 = ir.IntType(16), ir.IntType(32)
    v16 = ir.VectorType(i16, 16)
    fn = ir.FunctionType(ir.VectorType(i32, 8), [v16, v16])
    callee = builder.module.declare_intrinsic("llvm.x86.avx2.pmadd.wd", fnty=fn)
    return builder.call(callee, [a, b])


class _Tile:
    """A qmac_tile call's operands as LLVM values, for each path's codegen: the pointers
    (`x`, `taps`, `w`: the weights at w_off, `starts`: at starts_at), each position's window
    offset (`bases`) and output pointer (`outs`), and the loop counts."""

    def __init__(self, context, builder, signature, args, pixels):
        x_value, bases_value, taps_value, self.segments, self.groups, w_value, w_off = args[:7]
        starts_value, starts_at, out_value, out_at_value = args[7:]

        def data(index, value):
            return context.make_array(signature.args[index])(context, builder, value).data

        def load(pointer, p):
            return builder.load(builder.gep(pointer, [const(p)]))

        self.builder = builder
        self.x, self.taps = data(0, x_value), data(2, taps_value)
        self.w = builder.gep(data(5, w_value), [w_off])
        self.starts = builder.gep(data(7, starts_value), [starts_at])
        bases_ptr, out_at_ptr = data(1, bases_value), data(10, out_at_value)
        out_ptr = data(9, out_value)
        self.bases = [load(bases_ptr, p) for p in range(pixels)]
        self.outs = [builder.gep(out_ptr, [load(out_at_ptr, p)]) for p in range(pixels)]

    def segment_rows(self, s, group_type):
        """Each position's pointer to segment `s`'s first channel group (of `group_type`)."""
        builder = self.builder
        tap = builder.load(builder.gep(self.taps, [s]))
        return [
            builder.bitcast(builder.gep(self.x, [builder.add(base, tap)]), group_type.as_pointer())
            for base in self.bases
        ]

    def segment_weights(self, s, block, offset=0):
        """The pointer to segment `s`'s weights (`block` bytes a channel group), plus `offset`."""
        builder = self.builder
        at = builder.mul(builder.mul(s, self.groups), const(block))
        return builder.gep(self.w, [builder.add(at, const(offset))])

    def vectors_at(self, pointer, offsets, vector_type, align):
        """Loads of `vector_type` at each of `offsets` (elements) from `pointer`."""
        builder = self.builder
        return [
            builder.load(
                builder.bitcast(builder.gep(pointer, [const(k)]), vector_type.as_pointer()),
                align=align,
            )
            for k in offsets
        ]


def const(value):
    """An i64 constant."""
    return ir.Constant(ir.IntType(64), value)


def _pairs_codegen(tile, pixels, vectors):
    """qmac_tile's body on the avx2 path, in passes of PAIR_LANES output channels (a pass's
    `pixels` x PAIR_LANES sums fit AVX2's sixteen registers, the tile's whole width would
    not). A group step sign-extends the pass's 32 weight bytes to int16 and loads each
    position's four inputs as int16 (its window is uint16: QMAC_WINDOWS), repeated across the
    vector by one broadcast load. VPMADDWD then gives each channel two half sums (of inputs
    0-1 and 2-3 of the group: two products (x + 128)·w in [-32,640, 32,640], exact in int32),
    added into two vectors of half sums per position, which the pass adds pairwise at its end.
    int32 addition wraps modulo 2^32 in any order: the other paths' sums, bit for bit."""
    builder = tile.builder
    i16, i32 = ir.IntType(16), ir.IntType(32)
    pass_type = ir.VectorType(i32, PAIR_LANES)
    block = vectors * QMAC_GROUP * QMAC_LANES  # weight bytes of one channel group
    zero = ir.Constant(pass_type, [0] * PAIR_LANES)
    repeat = ir.Constant(ir.VectorType(i32, 16), [e % QMAC_GROUP for e in range(16)])
    even, odd = (ir.Constant(pass_type, list(range(k, 2 * PAIR_LANES, 2))) for k in (0, 1))
    quads = ir.VectorType(ir.IntType(8), 4 * QMAC_GROUP)  # four channels' weights
    for lane0 in range(0, vectors * QMAC_LANES, PAIR_LANES):

        def segment(s, sums, lane0=lane0):
            x_rows = tile.segment_rows(s, ir.IntType(16 * QMAC_GROUP))
            w_segment = tile.segment_weights(s, block, lane0 * QMAC_GROUP)

            def step(j, sums):
                w_step = builder.gep(w_segment, [builder.mul(j, const(block))])
                weights = [
                    builder.sext(quad, ir.VectorType(i16, 4 * QMAC_GROUP))
                    for quad in tile.vectors_at(w_step, (0, 4 * QMAC_GROUP), quads, 1)
                ]
                updated = []
                for p in range(pixels):
                    group = builder.load(builder.gep(x_rows[p], [j]), align=2)
                    four = builder.bitcast(group, ir.VectorType(i16, QMAC_GROUP))
                    inputs = builder.shuffle_vector(four, four, repeat)
                    for h in range(2):
                        product = _pmaddwd(builder, inputs, weights[h])
                        updated.append(builder.add(sums[2 * p + h], product))
                return updated

            return counted_loop(builder, "qpair", tile.groups, 1, sums, step)

        sums = counted_loop(builder, "qsegment", tile.segments, 1, [zero] * (2 * pixels), segment)
        (first,) = tile.vectors_at(tile.starts, (lane0,), pass_type, 4)
        for p in range(pixels):
            low, high = sums[2 * p], sums[2 * p + 1]
            pairs = (builder.shuffle_vector(low, high, lanes) for lanes in (even, odd))
            total = builder.add(first, builder.add(*pairs))
            target = builder.gep(tile.outs[p], [const(lane0)])
            builder.store(total, builder.bitcast(target, pass_type.as_pointer()), align=4)


def qmac_tile_codegen(pixels, vectors, path):
    """The LLVM IR of qmac_tile over `pixels` positions x `vectors` vectors of QMAC_LANES
    int32 output channels, summing on `path` (QMAC_PATHS)."""

    def codegen(context, builder, signature, args):
        tile = _Tile(context, builder, signature, args, pixels)
        if path == "avx2":
            _pairs_codegen(tile, pixels, vectors)
            return context.get_dummy_value()
        i8, i32 = ir.IntType(8), ir.IntType(32)
        acc_type = ir.VectorType(i32, QMAC_LANES)
        w_type = ir.VectorType(i8, QMAC_GROUP * QMAC_LANES)
        block = vectors * QMAC_GROUP * QMAC_LANES  # weight bytes of one channel group
        vector_starts = [h * QMAC_LANES for h in range(vectors)]
        first_sums = tile.vectors_at(tile.starts, vector_starts, acc_type, 4)
        splat = ir.Constant(ir.VectorType(i32, QMAC_LANES), [0] * QMAC_LANES)
        undef = ir.Constant(acc_type, ir.Undefined)

        def segment(s, sums):
            x_rows = tile.segment_rows(s, i32)
            w_segment = tile.segment_weights(s, block)

            def step(j, sums):
                w_step = builder.gep(w_segment, [builder.mul(j, const(block))])
                w_starts = [h * QMAC_GROUP for h in vector_starts]
                weights = tile.vectors_at(w_step, w_starts, w_type, 1)
                updated = []
                for p in range(pixels):
                    group = builder.load(builder.gep(x_rows[p], [j]), align=1)
                    broadcast = builder.shuffle_vector(
                        builder.insert_element(undef, group, ir.Constant(i32, 0)), undef, splat
                    )
                    inputs = builder.bitcast(broadcast, w_type)
                    for h in range(vectors):
                        updated.append(
                            _dot4(builder, path, sums[p * vectors + h], inputs, weights[h])
                        )
                return updated

            return counted_loop(builder, "qmac", tile.groups, 1, sums, step)

        sums = counted_loop(builder, "qsegment", tile.segments, 1, first_sums * pixels, segment)
        for p in range(pixels):
            for h in range(vectors):
                target = builder.bitcast(
                    builder.gep(tile.outs[p], [const(vector_starts[h])]), acc_type.as_pointer()
                )
                builder.store(sums[p * vectors + h], target, align=4)
        return context.get_dummy_value()

    return codegen


def _qmac_tile_intrinsic(path):
    """qmac_tile compiled on `path` (QMAC_PATHS)."""

    def qmac_tile(
        typingctx, x, bases, taps, segments, groups, w, w_off, starts, starts_at, out, out_at
    ):
        sig = types.void(x, bases, taps, segments, groups, w, w_off, starts, starts_at, out, out_at)
        return sig, qmac_tile_codegen(QMAC_PIXELS, QMAC_VECTORS, path)

    qmac_tile.__name__ = qmac_tile.__qualname__ = f"qmac_tile_{path}"
    qmac_tile.__doc__ = f"""qmac_tile on the {path!r} path (QMAC_PATHS)."""
    return intrinsic(qmac_tile)


QMAC_TILES = {path: _qmac_tile_intrinsic(path) for path in QMAC_PATHS}
"""qmac_tile on each path: the tests compare them on this machine."""

qmac_tile = QMAC_TILES[QMAC_PATH]
"""out[out_at[p] + j] = starts[starts_at + j] + the int32 sum (modulo 2^32) over segments
s < `segments`, channel groups t < `groups` and e < QMAC_GROUP of x[bases[p] + taps[s] + 4t +
e] · w[w_off + ((s·groups + t)·QMAC_CHANNELS + j)·4 + e], for the QMAC_PIXELS x
QMAC_CHANNELS outputs (p, j) at once: a position's window at bases[p], its segments (runs of
contiguous inputs: a kernel row or a tap of channel groups) at taps[s] from it, and one block
of packed weights (`int8_conv.pack_qweights`). The accumulators stay in vector registers for
the whole reduction (on the avx2 path, those of one pass of PAIR_LANES channels); each group
step is a vector load of the weights, one broadcast load of an input group per position, and
a four-product sum added per output (QMAC_PATH).
x: C array of QMAC_WINDOW (the input bytes + 128); w: int8 C array; bases, out_at:
int64[QMAC_PIXELS]; taps: int64[segments]; starts, out: int32 C arrays."""
