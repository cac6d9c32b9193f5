"""The Numba engine's depthwise convs (one input channel a group): `depthwise_tile`, LLVM IR
vectors over the output channels with every output's sum over its taps in the documented
order, and `conv_depthwise`, which drives it over a conv's output positions. `mac.py` calls
it from the `conv` instruction."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from mrvl.sim.engines.numba.fields import (
    CONV_DILATION,
    CONV_GROUPS,
    CONV_IN_SHAPE,
    CONV_KERNEL,
    CONV_OC0,
    CONV_OC_TOTAL,
    CONV_OROW0,
    CONV_OUT_SHAPE,
    CONV_PAD,
    CONV_ROW0,
    CONV_STRIDE,
)
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.mac_tiles import WIDE_REGISTERS, next_position
from mrvl.sim.engines.numba.numerics import counted_loop

DEPTHWISE_PIXELS = 8
"""Output positions of one `depthwise_tile` call: eight independent accumulators, enough to
cover a fused multiply-add's latency on two ports."""
DEPTHWISE_LANES = 16
"""Output channels of one full `depthwise_tile` call (one AVX-512 register; LLVM splits it on
narrower machines, with the same results: each lane is computed on its own), where
`mac_tiles.WIDE_REGISTERS`; elsewhere 8 (its DEPTHWISE_PIXELS x 16 accumulators would spill
out of AVX2's 16 registers). A conv's last channels, fewer than that, go through the 8-, 4-,
2- and 1-lane variants, so no lane reads or writes past its channels."""


def depthwise_tile_codegen(pixels, lanes):
    """The LLVM IR of a depthwise_tile over `pixels` positions x `lanes` channels."""

    def codegen(context, builder, signature, args):
        x_value, offsets_value, taps_value, c_value, w_value, w_step_value = [
            context.cast(builder, value, signature.args[k], types.int64)
            if k in (2, 3, 5)
            else value
            for k, value in enumerate(args[:6])
        ]
        zero_value, init_value, init_at_value, out_value, out_at_value = args[6:]
        f32, i64 = ir.FloatType(), ir.IntType(64)
        vector = ir.VectorType(f32, lanes)
        vector_ptr = vector.as_pointer()
        fma_type = ir.FunctionType(vector, [vector, vector, vector])
        # fmuladd, as mac_tile: one FMA where the CPU has it, mul and add where not (the
        # product of two f16 values is exact, so the bits are the same either way)
        name = f"llvm.fmuladd.v{lanes}f32"
        fma = cgutils.get_or_insert_function(builder.module, fma_type, name)

        def data(index, value):
            return context.make_array(signature.args[index])(context, builder, value).data

        x_ptr, offsets_ptr, w_ptr = data(0, x_value), data(1, offsets_value), data(4, w_value)
        zero_ptr = builder.bitcast(data(6, zero_value), vector_ptr)
        init_ptr = builder.gep(data(7, init_value), [c_value])
        out_ptr = builder.gep(data(9, out_value), [c_value])
        init_at_ptr, out_at_ptr = data(8, init_at_value), data(10, out_at_value)

        def const(value):
            return ir.Constant(i64, value)

        def vector_at(pointer, offset):
            return builder.bitcast(builder.gep(pointer, [offset]), vector_ptr)

        def pixel_vector(pointer, at_ptr, p):
            return vector_at(pointer, builder.load(builder.gep(at_ptr, [const(p)])))

        sums = [
            builder.load(pixel_vector(init_ptr, init_at_ptr, p), align=4) for p in range(pixels)
        ]
        x_channels = builder.gep(x_ptr, [c_value])
        w_channels = builder.gep(w_ptr, [c_value])

        def tap(t, sums):
            weights = builder.load(vector_at(w_channels, builder.mul(t, w_step_value)), align=4)
            first = builder.mul(t, const(pixels))
            updated = []
            for p in range(pixels):
                offset = builder.load(builder.gep(offsets_ptr, [builder.add(first, const(p))]))
                inside = vector_at(x_channels, offset)
                padding = builder.icmp_signed("<", offset, const(0))
                inputs = builder.load(builder.select(padding, zero_ptr, inside), align=4)
                updated.append(builder.call(fma, [inputs, weights, sums[p]]))
            return updated

        sums = counted_loop(builder, "tap", taps_value, 1, sums, tap)
        for p, value in enumerate(sums):
            builder.store(value, pixel_vector(out_ptr, out_at_ptr, p), align=4)
        return context.get_dummy_value()

    return codegen


def depthwise_tile_intrinsic(lanes):
    """depthwise_tile for `lanes` channels (see depthwise_tile16)."""

    def typer(typingctx, x, offsets, taps, c, w, w_step, zero, init, init_at, out, out_at):
        sig = types.void(x, offsets, taps, c, w, w_step, zero, init, init_at, out, out_at)
        return sig, depthwise_tile_codegen(DEPTHWISE_PIXELS, lanes)

    typer.__name__ = f"depthwise_tile{lanes}"
    return intrinsic(typer)


depthwise_tile16 = depthwise_tile_intrinsic(16)
"""depthwise_tile16(x, offsets, taps, c, w, w_step, zero, init, init_at, out, out_at):
out[out_at[p] + c + j] = init[init_at[p] + c + j] + the sum over t in 0 .. taps - 1, in order, of
x[offsets[t * DEPTHWISE_PIXELS + p] + c + j] * w[t * w_step + c + j] (an offset below zero:
a tap in the padding, whose input is zero[j], +0.0), for the DEPTHWISE_PIXELS x 16 outputs
(p, j) at once. Each step is one fused multiply-add, which rounds once: the product of two
f16 values is exact in fp32, so that is the documented multiply then add, bit for bit (x and
w hold f16 values; zero holds +0.0). The accumulators stay in registers over all the taps,
and all of init is read before any of out is written. Float32 and int64 C arrays."""
depthwise_tile8 = depthwise_tile_intrinsic(8)
depthwise_tile4 = depthwise_tile_intrinsic(4)
depthwise_tile2 = depthwise_tile_intrinsic(2)
depthwise_tile1 = depthwise_tile_intrinsic(1)


@jit
def depthwise_tables(row, w):
    """What conv_depthwise reads besides the window, made once per conv and thread: the
    weights tap-major (wt[t * C + o]), the input channel of each output channel, and
    DEPTHWISE_LANES zeros, the input of a tap in the padding."""
    out_channels = row[CONV_OUT_SHAPE + 3]
    steps = row[CONV_KERNEL] * row[CONV_KERNEL + 1]
    oc0, group_outputs = row[CONV_OC0], row[CONV_OC_TOTAL] // row[CONV_GROUPS]
    wt = np.empty(steps * out_channels, np.float32)
    for o in range(out_channels):
        for t in range(steps):
            wt[t * out_channels + o] = w[o * steps + t]
    channel = np.empty(out_channels, np.uint64)
    for o in range(out_channels):
        channel[o] = np.uint64((oc0 + o) // group_outputs)
    return wt, channel, np.zeros(DEPTHWISE_LANES, np.float32)


NO_DEPTHWISE_TABLES = (
    np.zeros(0, np.float32),
    np.zeros(0, np.uint64),
    np.zeros(0, np.float32),
)
"""depthwise_tables' types, for a conv that is not depthwise."""


@jit
def conv_depthwise(row, x, tables, bias, partial, out, first_row, stop_row):
    """A conv whose groups have one input channel each (depthwise), at the output rows
    [first_row, stop_row) of the N*OH rows (a thread's share). `tables`:
    depthwise_tables(row, w). With one output channel per group (output channel o reads
    input channel oc0 + o), DEPTHWISE_PIXELS positions at a time by depthwise_tile, channel
    block by channel block; else (several outputs a group) by conv_depthwise_multiplier."""
    out_rows, out_cols = row[CONV_OUT_SHAPE + 1], row[CONV_OUT_SHAPE + 2]
    if row[CONV_OC_TOTAL] != row[CONV_GROUPS]:
        conv_depthwise_multiplier(row, x, tables, bias, partial, out, first_row, stop_row)
        return
    n_count, height, width, in_channels = (
        row[CONV_IN_SHAPE],
        row[CONV_IN_SHAPE + 1],
        row[CONV_IN_SHAPE + 2],
        row[CONV_IN_SHAPE + 3],
    )
    channels = row[CONV_OUT_SHAPE + 3]
    kh_count, kw_count = row[CONV_KERNEL], row[CONV_KERNEL + 1]
    stride_h, stride_w = row[CONV_STRIDE], row[CONV_STRIDE + 1]
    dilation_h, dilation_w = row[CONV_DILATION], row[CONV_DILATION + 1]
    top = row[CONV_PAD] + row[CONV_ROW0] - row[CONV_OROW0] * stride_h
    shift = row[CONV_OC0]  # output channel o reads input channel oc0 + o
    taps = kh_count * kw_count
    wt, _, zero = tables
    pixels = DEPTHWISE_PIXELS
    offsets = np.empty(taps * pixels, np.int64)
    init_at = np.empty(pixels, np.int64)
    out_at = np.empty(pixels, np.int64)
    span_h, span_w = (kh_count - 1) * dilation_h, (kw_count - 1) * dilation_w
    delta = np.empty(taps, np.int64)  # each tap's offset from the first, in the window
    for kh in range(kh_count):
        for kw in range(kw_count):
            delta[kh * kw_count + kw] = (kh * dilation_h * width + kw * dilation_w) * in_channels
    start = first_row * out_cols
    stop = min(stop_row, n_count * out_rows) * out_cols
    init = partial if partial.size > 0 else bias
    from_partial = partial.size > 0
    n = start // (out_rows * out_cols)
    r = (start // out_cols) % out_rows
    c = start % out_cols
    for first in range(start, stop, pixels):
        count = min(pixels, stop - first)
        # every tap's input offset per position (those past count repeat the last), or -1
        for q in range(pixels):
            if 0 < q < count:
                n, r, c = next_position(n, r, c, out_rows, out_cols)
            wr0 = r * stride_h - top
            iw0 = c * stride_w - row[CONV_PAD + 1]
            if 0 <= wr0 and wr0 + span_h < height and 0 <= iw0 and iw0 + span_w < width:
                base = ((n * height + wr0) * width + iw0) * in_channels + shift
                for t in range(taps):  # every tap inside: the offsets of `delta`
                    offsets[t * pixels + q] = base + delta[t]
            else:  # some taps in the padding (-1); inline: a call costs reference counts
                s = q
                for kh in range(kh_count):
                    wr = wr0 + kh * dilation_h
                    inside = 0 <= wr < height
                    at = (n * height + wr) * width
                    for kw in range(kw_count):
                        iw = iw0 + kw * dilation_w
                        if inside and 0 <= iw < width:
                            offsets[s] = (at + iw) * in_channels + shift
                        else:
                            offsets[s] = -1
                        s += pixels
            last = min(q, count - 1)
            out_at[q] = (first + last) * channels
            init_at[q] = out_at[q] if from_partial else 0
        n, r, c = next_position(n, r, c, out_rows, out_cols)  # the next call's first
        lo = 0
        while lo < channels:
            left = channels - lo
            if WIDE_REGISTERS and left >= 16:
                depthwise_tile16(
                    x, offsets, taps, lo, wt, channels, zero, init, init_at, out, out_at
                )
                lo += 16
            elif left >= 8:
                depthwise_tile8(
                    x, offsets, taps, lo, wt, channels, zero, init, init_at, out, out_at
                )
                lo += 8
            elif left >= 4:
                depthwise_tile4(
                    x, offsets, taps, lo, wt, channels, zero, init, init_at, out, out_at
                )
                lo += 4
            elif left >= 2:
                depthwise_tile2(
                    x, offsets, taps, lo, wt, channels, zero, init, init_at, out, out_at
                )
                lo += 2
            else:
                depthwise_tile1(
                    x, offsets, taps, lo, wt, channels, zero, init, init_at, out, out_at
                )
                lo += 1


@jit
def conv_depthwise_multiplier(row, x, tables, bias, partial, out, first_row, stop_row):
    """conv_depthwise for several output channels a group (output channel o reads input
    channel `tables`[1][o]): output row by output row, the row starts from the bias or the
    partial sums, then each tap in order (kh, kw) adds its multiply-adds to every output of
    the row, so each output's sum runs over its taps in the documented order (a tap in the
    padding adds +0.0 times its weight, as the window's zeros would)."""
    n_count, height, width, in_channels = (
        row[CONV_IN_SHAPE],
        row[CONV_IN_SHAPE + 1],
        row[CONV_IN_SHAPE + 2],
        row[CONV_IN_SHAPE + 3],
    )
    out_rows, out_cols, out_channels = (
        row[CONV_OUT_SHAPE + 1],
        row[CONV_OUT_SHAPE + 2],
        row[CONV_OUT_SHAPE + 3],
    )
    kh_count, kw_count = row[CONV_KERNEL], row[CONV_KERNEL + 1]
    stride_w, pad_w, dilation_w = row[CONV_STRIDE + 1], row[CONV_PAD + 1], row[CONV_DILATION + 1]
    channels = np.uint64(out_channels)
    row_size = np.uint64(out_cols) * channels
    wt, channel, _ = tables
    zero = np.float32(0.0)
    for image_row in range(first_row, min(stop_row, n_count * out_rows)):
        n, r = image_row // out_rows, image_row % out_rows
        wr0 = (row[CONV_OROW0] + r) * row[CONV_STRIDE] - row[CONV_PAD] - row[CONV_ROW0]
        at = np.uint64(image_row * out_cols * out_channels)
        if partial.size > 0:
            for e in range(row_size):
                out[at + e] = partial[at + e]
        else:
            for c in range(np.uint64(out_cols)):
                for o in range(channels):
                    out[at + c * channels + o] = bias[o]
        for kh in range(kh_count):
            wr = wr0 + kh * row[CONV_DILATION]
            inside = 0 <= wr < height
            for kw in range(kw_count):
                t = np.uint64(kh * kw_count + kw)
                offset = kw * dilation_w - pad_w
                for c in range(out_cols):
                    a = at + np.uint64(c * out_channels)
                    iw = c * stride_w + offset
                    if inside and 0 <= iw < width:
                        b = np.uint64(((n * height + wr) * width + iw) * in_channels)
                        for o in range(channels):
                            x_o = x[b + channel[o]]
                            out[a + o] = out[a + o] + x_o * wt[t * channels + o]
                    else:  # the padding: +0.0 times the weight
                        for o in range(channels):
                            out[a + o] = out[a + o] + zero * wt[t * channels + o]
