"""The Numba engine's int8 multiply-accumulate block, `qmac_tile`: unsigned bytes (the int8
input + 128) times int8 weights, summed four at a time into int32 vector lanes, in LLVM IR
(Numba has no vector types). `int8_conv.py` builds `qconv` from it.

A product of a byte in [0, 255] and a weight in [-128, 127] lies in [-32,640, 32,640], four of
them are exact in int32, and int32 addition wraps modulo 2^32 whatever the order. So the sum
of (x + 128)·w, less (in_zp + 128)·Σw (`int8_conv` adds it to the start of each sum, the window
holds in_zp + 128 in the padding), is the ISA's accumulator (docs/isa.md, "Numerics (int8
mode)") in any order, which leaves the block free to sum four channels at once: x86's VPDPBUSD
where the CPU has AVX-512 VNNI or AVX-VNNI (not VPDPBUSDS, which saturates), else the same
arithmetic widened to int32 (`QMAC_PATHS`).
"""

from __future__ import annotations

from llvmlite import binding, ir
from numba import types
from numba.core import config
from numba.extending import intrinsic

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

QMAC_PATHS = ("avx512vnni", "avxvnni", "generic")
"""How `qmac_tile` sums four products into a lane: one 512-bit VPDPBUSD (AVX-512 VNNI and
BW), two 256-bit ones (AVX-VNNI, or AVX-512 VNNI and VL without BW), or plain LLVM integer
arithmetic (zero- and sign-extend to int32, multiply, add), which any target compiles."""


def cpu_features() -> str:
    """The CPU features Numba compiles for, as LLVM spells them ("+avx2,-avx512vnni,..."), by
    Numba's rule: $NUMBA_CPU_FEATURES if set, else the host's as llvmlite reads them (none if
    LLVM cannot tell), every AVX feature off if $NUMBA_ENABLE_AVX is 0."""
    if config.CPU_FEATURES is not None:
        return config.CPU_FEATURES
    try:
        features = binding.get_host_cpu_features()
    except RuntimeError:
        return ""
    if not config.ENABLE_AVX:
        for name in features:
            if name.startswith("avx"):
                features[name] = False
    return features.flatten()


def qmac_path(features: str) -> str:
    """The QMAC_PATHS entry for a target with these LLVM `features`."""
    have = {name[1:] for name in features.split(",") if name.startswith("+")}
    if {"avx512vnni", "avx512bw"} <= have:
        return "avx512vnni"
    if "avxvnni" in have or {"avx512vnni", "avx512vl"} <= have:
        return "avxvnni"
    return "generic"


QMAC_PATH = qmac_path(cpu_features())
"""The path `qmac_tile` is compiled with on this machine."""


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


def qmac_tile_codegen(pixels, vectors, path):
    """The LLVM IR of qmac_tile over `pixels` positions x `vectors` vectors of QMAC_LANES
    int32 output channels, summing on `path` (QMAC_PATHS)."""

    def codegen(context, builder, signature, args):
        x_value, bases_value, taps_value, segments, groups, w_value, w_off = args[:7]
        starts_value, starts_at, out_value, out_at_value = args[7:]
        i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
        acc_type = ir.VectorType(i32, QMAC_LANES)
        w_type = ir.VectorType(i8, QMAC_GROUP * QMAC_LANES)
        block = vectors * QMAC_GROUP * QMAC_LANES  # weight bytes of one channel group

        def data(index, value):
            return context.make_array(signature.args[index])(context, builder, value).data

        x_ptr, bases_ptr, taps_ptr = data(0, x_value), data(1, bases_value), data(2, taps_value)
        w_ptr, starts_ptr = data(5, w_value), data(7, starts_value)
        out_ptr, out_at_ptr = data(9, out_value), data(10, out_at_value)

        def const(value):
            return ir.Constant(i64, value)

        bases = [builder.load(builder.gep(bases_ptr, [const(p)])) for p in range(pixels)]
        first_sums = [
            builder.load(
                builder.bitcast(
                    builder.gep(starts_ptr, [builder.add(starts_at, const(h * QMAC_LANES))]),
                    acc_type.as_pointer(),
                ),
                align=4,
            )
            for h in range(vectors)
        ]
        splat = ir.Constant(ir.VectorType(i32, QMAC_LANES), [0] * QMAC_LANES)
        undef = ir.Constant(acc_type, ir.Undefined)
        w_base = builder.gep(w_ptr, [w_off])

        def segment(s, sums):
            tap = builder.load(builder.gep(taps_ptr, [s]))
            x_rows = [
                builder.bitcast(builder.gep(x_ptr, [builder.add(bases[p], tap)]), i32.as_pointer())
                for p in range(pixels)
            ]
            w_segment = builder.gep(w_base, [builder.mul(builder.mul(s, groups), const(block))])

            def step(j, sums):
                w_step = builder.gep(w_segment, [builder.mul(j, const(block))])
                weights = [
                    builder.load(
                        builder.bitcast(
                            builder.gep(w_step, [const(h * QMAC_GROUP * QMAC_LANES)]),
                            w_type.as_pointer(),
                        ),
                        align=1,
                    )
                    for h in range(vectors)
                ]
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

            return counted_loop(builder, "qmac", groups, 1, sums, step)

        sums = counted_loop(builder, "qsegment", segments, 1, first_sums * pixels, segment)
        for p in range(pixels):
            at = builder.gep(out_ptr, [builder.load(builder.gep(out_at_ptr, [const(p)]))])
            for h in range(vectors):
                target = builder.bitcast(
                    builder.gep(at, [const(h * QMAC_LANES)]), acc_type.as_pointer()
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
"""out[out_at[p] + j] = starts[starts_at + j] + the int32 sum (modulo 2^32) over segments s < `segments`, channel groups
t < `groups` and e < QMAC_GROUP of x[bases[p] + taps[s] + 4t + e] · w[w_off + ((s·groups + t)·
QMAC_CHANNELS + j)·4 + e], for the QMAC_PIXELS x QMAC_CHANNELS outputs (p, j) at once: a
position's window at bases[p], its segments (runs of contiguous inputs: a kernel row or a tap
of channel groups) at taps[s] from it, and one block of packed weights
(`int8_conv.pack_qweights`). The accumulators stay in vector registers for the whole
reduction; each group step is a vector load of the weights, one broadcast 32-bit load of an
input group per position, and a four-product sum added per output (QMAC_PATH).
x: uint8 C array (the input bytes + 128); w: int8 C array; bases, out_at: int64[QMAC_PIXELS];
taps: int64[segments]; starts, out: int32 C arrays."""
