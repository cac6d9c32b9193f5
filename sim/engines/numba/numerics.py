"""fp16 numerics of the Numba engine (docs/isa.md §4, `mrvl.sim.numerics`), bit for bit.

- f16 is handled as uint16 bit patterns. f16 -> fp32 is integer arithmetic on 8 lanes at a
  time (`widen_f16_vectors`, equal to a 65,536-entry table made by numpy, which does the
  tails); fp32 -> f16 is integer arithmetic on the fp32 bits (saturate to +-65504, round to
  nearest even, NaN -> 0x7E00). Neither uses F16C, so they run on every x86-64 and Arm CPU.
- `fastmath` is off: every fp32 add and multiply rounds on its own.
- Memory is read and written through native uint16/float32 views where aligned.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from mrvl.sim.engines.numba.fields import (
    ACT_CLIP,
    ACT_LEAKY_RELU,
    ACT_NONE,
    ACT_PRELU,
    ACT_RELU,
    IS_TABLE_ACT,
)
from mrvl.sim.engines.numba.jit import cpu_features, jit

F16_TO_F32 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
F16_TO_F32 = F16_TO_F32.astype(np.float32)
"""fp32 value of every binary16 bit pattern (numpy's exact conversion, NaN payloads kept)."""
F16_TO_F32_BITS = F16_TO_F32.view(np.uint32)

# ------------------------------------------------------------------------- numeric helpers

F16_LANES = 8
"""Values round_f16_vectors and widen_f16_vectors convert at once (one AVX register of
uint32; LLVM splits it on machines with 128-bit vectors, with the same results)."""

F32_F16_MAX_BITS = 0x477FE000
"""Bits of 65504.0: an fp32 magnitude above it (infinity included) saturates."""
F32_INF_BITS = 0x7F800000


@intrinsic
def f32_bits(typingctx, value):
    """The bits of a float32, as a uint32 (LLVM bitcast; Numba has no scalar view)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@intrinsic
def f32_from_bits(typingctx, bits):
    """The float32 with the bits of a uint32."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.uint32), codegen


@jit
def f16_bits_from_f32(value):
    """binary16 bits of the float32 `value`: saturate to +-65504 (infinities too), round to
    nearest even, NaN -> 0x7E00. Branch-free, so that LLVM vectorizes the loops calling it:
    - normal halves: the RNE trick on the clamped magnitude's bits (add 0xFFF plus the lowest
      kept bit, then shift; a carry moves into the exponent as it should);
    - subnormal halves: |value| + 0.5 in fp32, whose rounding (IEEE, nearest even) leaves
      exactly the half's bits in the low mantissa bits of the sum."""
    u = f32_bits(value)
    magnitude = u & np.uint32(0x7FFFFFFF)
    sign = (u >> np.uint32(16)) & np.uint32(0x8000)
    clamped = min(magnitude, np.uint32(F32_F16_MAX_BITS))
    odd = (clamped >> np.uint32(13)) & np.uint32(1)
    normal = (clamped - np.uint32(0x38000000) + np.uint32(0xFFF) + odd) >> np.uint32(13)
    subnormal = f32_bits(abs(value) + np.float32(0.5)) - np.uint32(0x3F000000)
    h = normal if clamped >= np.uint32(0x38800000) else subnormal
    return np.uint16(0x7E00) if magnitude > np.uint32(F32_INF_BITS) else np.uint16(h | sign)


@jit
def activate(acc, act, a, b):
    """The fused activation on one fp32 accumulator (docs/isa.md §4)."""
    if act == ACT_RELU:
        return np.float32(0.0) if acc < 0 else acc
    if act == ACT_CLIP:
        t = max(acc, a)
        return min(t, b)
    if act == ACT_LEAKY_RELU:
        return a * acc if acc < 0 else acc
    return acc


def counted_loop(builder, name, count, step, initial, body):
    """Emit `for i in range(0, count, step)` in LLVM IR, carrying the values `initial` from
    one iteration to the next: `body(i, values)` emits an iteration and returns the new
    values. Leaves the builder after the loop and returns the values it ends with (the shared
    skeleton of the vector kernels below: Numba has no vector types, so they are LLVM IR)."""
    i64 = ir.IntType(64)
    entry = builder.block
    head = builder.append_basic_block(f"{name}.head")
    iteration = builder.append_basic_block(f"{name}.body")
    done = builder.append_basic_block(f"{name}.done")
    builder.branch(head)
    builder.position_at_end(head)
    i = builder.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    values = []
    for value in initial:
        phi = builder.phi(value.type)
        phi.add_incoming(value, entry)
        values.append(phi)
    builder.cbranch(builder.icmp_signed("<", i, count), iteration, done)
    builder.position_at_end(iteration)
    updated = body(i, values)
    latch = builder.block
    i.add_incoming(builder.add(i, ir.Constant(i64, step)), latch)
    for phi, value in zip(values, updated, strict=True):
        phi.add_incoming(value, latch)
    builder.branch(head)
    builder.position_at_end(done)
    return values


@intrinsic
def widen_f16_vectors(typingctx, halves, values, count):
    """values[i] = the fp32 of the f16 bits halves[i] for i < count (a multiple of F16_LANES),
    F16_LANES at a time in 32-bit vector lanes, by integer steps that need no F16C: move the
    exponent and mantissa into place and rebias the exponent; for infinities and NaNs move the
    exponent to 255 (payload kept, as in F16_TO_F32); for zeros and subnormals add 2^-14's
    exponent and subtract 2^-14 in fp32, which is exact. Equal to F16_TO_F32 on all 65,536
    patterns (tests/sim/test_engines.py). halves and values are C arrays (uint16, float32)."""
    for array in (halves, values):
        if not isinstance(array, types.Array) or array.layout != "C":
            raise numba.errors.TypingError("widen_f16_vectors takes C-contiguous arrays")
    sig = types.void(halves, values, count)

    def codegen(context, builder, signature, args):
        halves_value, values_value, count_value = args
        i32, i16, f32 = ir.IntType(32), ir.IntType(16), ir.FloatType()
        v32 = ir.VectorType(i32, F16_LANES)
        vf = ir.VectorType(f32, F16_LANES)
        v16 = ir.VectorType(i16, F16_LANES)
        src = context.make_array(signature.args[0])(context, builder, halves_value).data
        dst = context.make_array(signature.args[1])(context, builder, values_value).data

        def splat(value):
            return ir.Constant(v32, [value] * F16_LANES)

        def widen(i, carried):
            pointer = builder.bitcast(builder.gep(src, [i]), v16.as_pointer())
            h = builder.zext(builder.load(pointer, align=2), v32)
            shifted = builder.shl(builder.and_(h, splat(0x7FFF)), splat(13))
            exponent = builder.and_(shifted, splat(0x0F800000))
            rebiased = builder.add(shifted, splat((127 - 15) << 23))
            special = builder.icmp_unsigned("==", exponent, splat(0x0F800000))
            rebiased = builder.select(
                special, builder.add(rebiased, splat((128 - 16) << 23)), rebiased
            )
            small = builder.fsub(
                builder.bitcast(builder.add(rebiased, splat(1 << 23)), vf),
                ir.Constant(vf, [2.0**-14] * F16_LANES),
            )
            tiny = builder.icmp_unsigned("==", exponent, splat(0))
            magnitude = builder.select(tiny, builder.bitcast(small, v32), rebiased)
            sign = builder.shl(builder.and_(h, splat(0x8000)), splat(16))
            out = builder.bitcast(builder.gep(dst, [i]), v32.as_pointer())
            builder.store(builder.or_(magnitude, sign), out, align=4)
            return carried

        counted_loop(builder, "widen", count_value, F16_LANES, [], widen)
        return context.get_dummy_value()

    return sig, codegen


@jit
def load_f16(buf, addr, count, lut):
    """float32[count] from the f16 values at buf[addr:]."""
    out = np.empty(count, np.float32)
    load_f16_into(buf, addr, out, lut)
    return out


@jit
def load_f16_into(buf, addr, out, lut):
    """out[:] = the fp32 of the out.size f16 values at buf[addr:]."""
    count = out.size
    if addr % 2 == 0:  # aligned (as the compiler places every tensor): read whole halves
        halves = buf[addr : addr + 2 * count].view(np.uint16)
        vectors = count - count % F16_LANES
        widen_f16_vectors(halves, out, vectors)
        for i in range(vectors, count):
            out[i] = lut[halves[i]]
        return
    for i in range(count):
        p = addr + 2 * i
        out[i] = lut[np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8)]


@jit
def load_f32(buf, addr, count):
    if addr % 4 == 0:
        return buf[addr : addr + 4 * count].view(np.float32).copy()
    bits = np.empty(count, np.uint32)
    for i in range(count):
        p = addr + 4 * i
        bits[i] = (
            np.uint32(buf[p])
            | (np.uint32(buf[p + 1]) << 8)
            | (np.uint32(buf[p + 2]) << 16)
            | (np.uint32(buf[p + 3]) << 24)
        )
    return bits.view(np.float32)


@jit
def read_f32(buf, addr, count):
    """The fp32 values at buf[addr:]: a view of buf where aligned, else a copy (load_f32)."""
    if addr % 4 == 0:
        return buf[addr : addr + 4 * count].view(np.float32)
    return load_f32(buf, addr, count)


@jit
def load_bias(buf, b_addr, count):
    if b_addr == -1:
        return np.zeros(count, np.float32)
    return load_f32(buf, b_addr, count)


@jit
def store_f32(buf, addr, values):
    """Store fp32 `values` at buf[addr:], little-endian (a conv's partial sums)."""
    if addr % 4 == 0:
        buf[addr : addr + 4 * values.size].view(np.float32)[:] = values
        return
    bits = values.view(np.uint32)
    for i in range(values.size):
        u = bits[i]
        buf[addr + 4 * i] = np.uint8(u & 0xFF)
        buf[addr + 4 * i + 1] = np.uint8((u >> 8) & 0xFF)
        buf[addr + 4 * i + 2] = np.uint8((u >> 16) & 0xFF)
        buf[addr + 4 * i + 3] = np.uint8(u >> 24)


@jit
def is_nan_f32(u):
    """1 if the fp32 with bits `u` is a NaN, else 0."""
    return np.int64((u & np.uint32(0x7FFFFFFF)) > np.uint32(F32_INF_BITS))


@jit
def beyond_f16(u):
    """1 if the fp32 with bits `u` is beyond +-65504 (+-inf included, NaN not), else 0."""
    return np.int64((u & np.uint32(0x7FFFFFFF)) > np.uint32(F32_F16_MAX_BITS)) - is_nan_f32(u)


def has_f16c() -> bool:
    """Whether Numba compiles for a CPU with F16C (x86's vector conversions between fp32 and
    f16; `jit.cpu_features`)."""
    return "+f16c" in cpu_features().split(",")


@intrinsic
def round_f16_vectors(typingctx, values, halves, count, tally):
    """halves[i] = f16_bits_from_f32(values[i]) for i < count (a multiple of F16_LANES),
    F16_LANES at a time in 32-bit vector lanes (Numba widens scalar uint32 arithmetic to 64 bits
    and leaves that loop scalar); tally[0] += the values beyond +-65504 (NaN not), tally[1] +=
    the NaNs. The same steps as f16_bits_from_f32, lane by lane; where the CPU has F16C
    (`has_f16c`), the magnitude clamped to 65504 is rounded by the CPU's conversion instead
    (VCVTPS2PH: IEEE round to nearest even, subnormal halves included, the same bits; 0.28 ->
    0.17 ns a value on an AMD EPYC). values and halves are C arrays (float32, uint16), tally
    int64."""
    for array in (values, halves):
        if not isinstance(array, types.Array) or array.layout != "C":
            raise numba.errors.TypingError("round_f16_vectors takes C-contiguous arrays")
    sig = types.void(values, halves, count, tally)

    def codegen(context, builder, signature, args):
        values_value, halves_value, count_value, tally_value = args
        i32, i64, i16, f32 = ir.IntType(32), ir.IntType(64), ir.IntType(16), ir.FloatType()
        v32 = ir.VectorType(i32, F16_LANES)
        vf = ir.VectorType(f32, F16_LANES)
        v16 = ir.VectorType(i16, F16_LANES)
        f16c = has_f16c()

        def data(index, value):
            return context.make_array(signature.args[index])(context, builder, value).data

        src, dst, tal = data(0, values_value), data(1, halves_value), data(3, tally_value)

        def splat(value):
            return ir.Constant(v32, [value] * F16_LANES)

        def round_lanes(i, counts):
            sat, nan = counts
            pointer = builder.bitcast(builder.gep(src, [i]), vf.as_pointer())
            u = builder.bitcast(builder.load(pointer, align=4), v32)
            magnitude = builder.and_(u, splat(0x7FFFFFFF))
            sign = builder.and_(builder.lshr(u, splat(16)), splat(0x8000))
            beyond = builder.icmp_unsigned(">", magnitude, splat(F32_F16_MAX_BITS))
            clamped = builder.select(beyond, splat(F32_F16_MAX_BITS), magnitude)
            if f16c:  # 65504 at most: the conversion rounds, and never overflows
                signed = builder.bitcast(builder.or_(clamped, builder.shl(sign, splat(16))), vf)
                converted = builder.fptrunc(signed, ir.VectorType(ir.HalfType(), F16_LANES))
                h = builder.zext(builder.bitcast(converted, v16), v32)
            else:
                odd = builder.and_(builder.lshr(clamped, splat(13)), splat(1))
                normal = builder.lshr(
                    builder.add(
                        builder.add(builder.sub(clamped, splat(0x38000000)), splat(0xFFF)), odd
                    ),
                    splat(13),
                )
                half = ir.Constant(vf, [0.5] * F16_LANES)
                shifted = builder.fadd(builder.bitcast(clamped, vf), half)
                subnormal = builder.sub(builder.bitcast(shifted, v32), splat(0x3F000000))
                is_normal = builder.icmp_unsigned(">=", clamped, splat(0x38800000))
                h = builder.or_(builder.select(is_normal, normal, subnormal), sign)
            is_nan = builder.icmp_unsigned(">", magnitude, splat(F32_INF_BITS))
            h = builder.select(is_nan, splat(0x7E00), h)
            out = builder.bitcast(builder.gep(dst, [i]), v16.as_pointer())
            builder.store(builder.trunc(h, v16), out, align=2)
            saturated = builder.and_(beyond, builder.not_(is_nan))
            return [
                builder.add(sat, builder.zext(saturated, v32)),
                builder.add(nan, builder.zext(is_nan, v32)),
            ]

        sat, nan = counted_loop(
            builder, "f16", count_value, F16_LANES, [splat(0), splat(0)], round_lanes
        )
        for slot, vector in ((0, sat), (1, nan)):
            total = builder.extract_element(vector, ir.Constant(i32, 0))
            for lane in range(1, F16_LANES):
                total = builder.add(total, builder.extract_element(vector, ir.Constant(i32, lane)))
            pointer = builder.gep(tal, [ir.Constant(i64, slot)])
            builder.store(builder.add(builder.load(pointer), builder.zext(total, i64)), pointer)
        return context.get_dummy_value()

    return sig, codegen


@jit
def store_f16(buf, addr, values, tally):
    """Round fp32 `values` to f16 and store them at buf[addr:]; add to `tally` the values that
    saturated and the NaNs (in the same pass). At an even address, round_f16_vectors does all
    but the last few."""
    bits = values.view(np.uint32)
    saturated = 0
    nans = 0
    if addr % 2 == 0:
        halves = buf[addr : addr + 2 * values.size].view(np.uint16)
        vectors = values.size - values.size % F16_LANES
        round_f16_vectors(values, halves, vectors, tally)
        for i in range(vectors, values.size):
            saturated += beyond_f16(bits[i])
            nans += is_nan_f32(bits[i])
            halves[i] = f16_bits_from_f32(values[i])
    else:
        for i in range(values.size):
            saturated += beyond_f16(bits[i])
            nans += is_nan_f32(bits[i])
            h = f16_bits_from_f32(values[i])
            buf[addr + 2 * i] = np.uint8(h & 0xFF)
            buf[addr + 2 * i + 1] = np.uint8(h >> 8)
    tally[0] += saturated
    tally[1] += nans


NO_SLOPES = np.zeros(0, np.float32)


@jit
def load_slopes(ocm, act, act_addr, channels):
    """PRELU's f32 slopes, one per channel (none for any other activation)."""
    if act == ACT_PRELU:
        return load_f32(ocm, act_addr, channels)
    return np.zeros(0, np.float32)


@jit
def negative_part(acc, act, a):
    """RELU or LEAKY_RELU (activate) over `acc` in place, choosing by an integer mask of the
    lanes with acc < 0 (Numba's conditional expression leaves this loop scalar; the mask
    vectorizes, 5x faster). NaN and -0.0 are not < 0 and stay."""
    bits = acc.view(np.uint32)
    leaky = act == ACT_LEAKY_RELU
    for i in range(acc.size):
        v = acc[i]
        negative = np.uint32(0) - np.uint32(v < np.float32(0.0))
        scaled = f32_bits(a * v) if leaky else np.uint32(0)
        bits[i] = (bits[i] & ~negative) | (scaled & negative)


@jit
def table_lookup(acc, table, buf, addr, tally):
    """A table activation (finish): the f16 of each fp32 in `acc` looked up in the tile's
    table, stored at buf[addr:]; tally gets the saturated (index beyond +-65504 and entry
    +-65504) and the NaN entries. The indices are rounded first, round_f16_vectors'
    vectors at a time (its own counts, of the indices, are not the table's and are dropped),
    then looked up: one scalar rounding a value cost MobileNetV3's hardswish convs 7 ns an
    output. The lookups are a loop of their own (a gather), and the counts another over the
    stored entries, which vectorizes (in the lookup loop they and the store's branch cost a
    third of the lookup: 1.66 -> 1.20 ns a value on 6,720 values)."""
    bits = acc.view(np.uint32)
    count = np.uint64(acc.size)
    index = np.empty(acc.size, np.uint16)
    vectors = acc.size - acc.size % F16_LANES
    round_f16_vectors(acc, index, vectors, np.zeros(2, np.int64))
    for i in range(vectors, acc.size):
        index[i] = f16_bits_from_f32(acc[i])
    aligned = addr % 2 == 0
    # the entries go straight to OCM where aligned, else over their indices, then by bytes
    entries = buf[addr : addr + 2 * acc.size].view(np.uint16) if aligned else index
    for i in range(count):
        entries[i] = table[index[i]]
    saturated = np.uint32(0)
    nans = np.uint32(0)
    for i in range(count):  # beyond_f16(bits[i]) & (entry is +-65504); entry is a NaN
        entry = np.uint32(entries[i]) & np.uint32(0x7FFF)
        magnitude = bits[i] & np.uint32(0x7FFFFFFF)
        beyond = np.uint32(magnitude > np.uint32(F32_F16_MAX_BITS))
        beyond &= np.uint32(magnitude <= np.uint32(F32_INF_BITS))
        saturated += beyond & np.uint32(entry == np.uint32(0x7BFF))
        nans += np.uint32(entry > np.uint32(0x7C00))
    if not aligned:
        for i in range(acc.size):
            buf[addr + 2 * i] = np.uint8(entries[i] & 0xFF)
            buf[addr + 2 * i + 1] = np.uint8(entries[i] >> 8)
    tally[0] += np.int64(saturated)
    tally[1] += np.int64(nans)


@jit
def finish(acc, act, a, b, slopes, table, buf, addr, tally):
    """The last step of conv, fc, add, scale and mul, from the fp32 accumulator to the f16
    stored at buf[addr:]: a table activation looks f16(acc) up in the tile's table; the others
    act on acc (PRELU with the slope of channel i mod channels), then round to f16. `tally`
    gets the counts of docs/isa.md §4 (for a table: saturated index and entry +-65504, NaN
    entry)."""
    if IS_TABLE_ACT[act]:
        table_lookup(acc, table, buf, addr, tally)
        return
    if act == ACT_PRELU:
        channels = slopes.size
        for i in range(acc.size):
            v = acc[i]
            if v < 0:
                acc[i] = slopes[i % channels] * v
    elif act == ACT_RELU or act == ACT_LEAKY_RELU:
        negative_part(acc, act, a)
    elif act != ACT_NONE:
        for i in range(acc.size):
            acc[i] = activate(acc[i], act, a, b)
    store_f16(buf, addr, acc, tally)
