"""The Numba engine's int8 multiply-accumulate block, `qmac_tile`: int16 inputs (int8 less
the zero point) times int8 weights (held as int16), summed two at a time into int32 vector
lanes, in LLVM IR (Numba has no vector types). `int8_conv.py` builds `qconv` from it.

An int8 product (x - in_zp)·w lies in [-32,640, 32,640], so a pair of them is exact in int32,
and int32 addition wraps modulo 2^32 whatever the order: the ISA's accumulator (docs/isa.md,
"Numerics (int8 mode)") in any order, which leaves the block free to sum channel pairs at once
(x86's PMADDWD, fused with the add into VPDPWSSD where the CPU has VNNI).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from mrvl.sim.engines.numba.numerics import counted_loop

QMAC_PIXELS = 6
"""Output positions of one `qmac_tile` call."""
QMAC_VECTORS = 2
"""int32 vectors of QMAC_LANES output channels a `qmac_tile` call holds per position."""
QMAC_LANES = 16
"""int32 lanes of a vector (one AVX-512 register; LLVM splits it on narrower machines, with
the same results: each lane is computed on its own)."""
QMAC_CHANNELS = QMAC_VECTORS * QMAC_LANES
"""Output channels of one `qmac_tile` call: the block width of the packed weights."""


def _pair_products(context, builder, inputs, weights):
    """<16 x i32>: lane k = inputs[2k]·weights[2k] + inputs[2k+1]·weights[2k+1], from two
    <32 x i16>: x86's PMADDWD where the target has it (the sum of two products of 16-bit
    values cannot wrap unless both are -32,768², which int8 data never gives), else the same
    arithmetic widened to int32."""
    features = getattr(context.codegen(), "_tm_features", "") or ""
    i16, i32 = ir.IntType(16), ir.IntType(32)
    if "+avx512bw" in features:
        v32 = ir.VectorType(i16, 32)
        fn = ir.FunctionType(ir.VectorType(i32, 16), [v32, v32])
        callee = builder.module.declare_intrinsic("llvm.x86.avx512.pmaddw.d.512", fnty=fn)
        return builder.call(callee, [inputs, weights])
    if "+avx2" in features:
        v16 = ir.VectorType(i16, 16)
        fn = ir.FunctionType(ir.VectorType(i32, 8), [v16, v16])
        callee = builder.module.declare_intrinsic("llvm.x86.avx2.pmadd.wd", fnty=fn)
        undef = ir.Constant(ir.VectorType(i16, 32), ir.Undefined)
        halves = []
        for h in range(2):
            lanes = ir.Constant(ir.VectorType(i32, 16), list(range(16 * h, 16 * h + 16)))
            a = builder.shuffle_vector(inputs, undef, lanes)
            b = builder.shuffle_vector(weights, undef, lanes)
            halves.append(builder.call(callee, [a, b]))
        return builder.shuffle_vector(
            halves[0], halves[1], ir.Constant(ir.VectorType(i32, 16), list(range(16)))
        )
    wide = ir.VectorType(i32, 32)
    products = builder.mul(builder.sext(inputs, wide), builder.sext(weights, wide))
    undef = ir.Constant(wide, ir.Undefined)
    even = ir.Constant(ir.VectorType(i32, 16), list(range(0, 32, 2)))
    odd = ir.Constant(ir.VectorType(i32, 16), list(range(1, 32, 2)))
    return builder.add(
        builder.shuffle_vector(products, undef, even), builder.shuffle_vector(products, undef, odd)
    )


def qmac_tile_codegen(pixels, vectors):
    """The LLVM IR of qmac_tile over `pixels` positions x `vectors` vectors of QMAC_LANES
    int32 output channels."""

    def codegen(context, builder, signature, args):
        x_value, bases_value, taps_value, segments, pairs, w_value, w_off = args[:7]
        out_value, out_at_value = args[7:]
        i16, i32, i64 = ir.IntType(16), ir.IntType(32), ir.IntType(64)
        acc_type = ir.VectorType(i32, QMAC_LANES)
        w_type = ir.VectorType(i16, 2 * QMAC_LANES)
        block = vectors * 2 * QMAC_LANES  # int16 weights of one channel pair of the block

        def data(index, value):
            return context.make_array(signature.args[index])(context, builder, value).data

        x_ptr, bases_ptr, taps_ptr = data(0, x_value), data(1, bases_value), data(2, taps_value)
        w_ptr, out_ptr, out_at_ptr = data(5, w_value), data(7, out_value), data(8, out_at_value)

        def const(value):
            return ir.Constant(i64, value)

        bases = [builder.load(builder.gep(bases_ptr, [const(p)])) for p in range(pixels)]
        zero = ir.Constant(acc_type, [0] * QMAC_LANES)
        splat = ir.Constant(ir.VectorType(i32, QMAC_LANES), [0] * QMAC_LANES)
        undef = ir.Constant(acc_type, ir.Undefined)
        w_base = builder.gep(w_ptr, [w_off])

        def segment(s, sums):
            tap = builder.load(builder.gep(taps_ptr, [s]))
            x_rows = [
                builder.bitcast(builder.gep(x_ptr, [builder.add(bases[p], tap)]), i32.as_pointer())
                for p in range(pixels)
            ]
            w_segment = builder.gep(w_base, [builder.mul(builder.mul(s, pairs), const(block))])

            def step(j, sums):
                w_step = builder.gep(w_segment, [builder.mul(j, const(block))])
                weights = [
                    builder.load(
                        builder.bitcast(
                            builder.gep(w_step, [const(h * 2 * QMAC_LANES)]), w_type.as_pointer()
                        ),
                        align=2,
                    )
                    for h in range(vectors)
                ]
                updated = []
                for p in range(pixels):
                    pair = builder.load(builder.gep(x_rows[p], [j]), align=4)
                    broadcast = builder.shuffle_vector(
                        builder.insert_element(undef, pair, ir.Constant(i32, 0)), undef, splat
                    )
                    inputs = builder.bitcast(broadcast, w_type)
                    for h in range(vectors):
                        product = _pair_products(context, builder, inputs, weights[h])
                        updated.append(builder.add(sums[p * vectors + h], product))
                return updated

            return counted_loop(builder, "qmac", pairs, 1, sums, step)

        sums = counted_loop(builder, "qsegment", segments, 1, [zero] * (pixels * vectors), segment)
        for p in range(pixels):
            at = builder.gep(out_ptr, [builder.load(builder.gep(out_at_ptr, [const(p)]))])
            for h in range(vectors):
                target = builder.bitcast(
                    builder.gep(at, [const(h * QMAC_LANES)]), acc_type.as_pointer()
                )
                builder.store(sums[p * vectors + h], target, align=4)
        return context.get_dummy_value()

    return codegen


@intrinsic
def qmac_tile(typingctx, x, bases, taps, segments, pairs, w, w_off, out, out_at):
    """out[out_at[p] + j] = the int32 sum (modulo 2^32) over segments s < `segments` and
    channel pairs t < `pairs` of x[bases[p] + taps[s] + 2t + e] · w[w_off + ((s·pairs + t)·
    QMAC_CHANNELS + j)·2 + e], e in {0, 1}, for the QMAC_PIXELS x QMAC_CHANNELS outputs (p, j)
    at once: a position's window at bases[p], its segments (runs of contiguous inputs: a
    kernel row or a tap of channel pairs) at taps[s] from it, and one block of packed weights
    (`int8_conv.pack_qweights`). The accumulators stay in vector registers for the whole
    reduction; each pair step is a vector load of the weights, one broadcast 32-bit load of
    an input pair per position, and a pair product added per output.
    x, w: int16 C arrays, every x offset even (4-byte aligned pairs); bases, out_at:
    int64[QMAC_PIXELS]; taps: int64[segments]; out: int32 C array."""
    sig = types.void(x, bases, taps, segments, pairs, w, w_off, out, out_at)
    return sig, qmac_tile_codegen(QMAC_PIXELS, QMAC_VECTORS)
