"""The Numba engine: the same machine as the reference interpreter, compiled, bit for bit.

The whole instruction stream runs in one compiled call over the typed rows of a `ValidProgram`
(`words`, `floats`) and the byte arrays of `Memory`; with more threads (`threads`), each runs
that call and they share the large convs, adds and pools (`run_program`, `conv`). Validation
has proved every access in bounds, and Numba does no bounds checking, so nothing here checks
anything.

Numerics, as in docs/isa.md §4 and `mrvl.sim.numerics`:
- f16 is handled as uint16 bit patterns. f16 -> fp32 is integer arithmetic on 8 lanes at a
  time (`widen_f16_vectors`, equal to a 65,536-entry table made by numpy, which does the
  tails); fp32 -> f16 is integer arithmetic on the fp32 bits (saturate to +-65504, round to
  nearest even, NaN -> 0x7E00). Neither uses F16C, so they run on every x86-64 and Arm CPU.
- `fastmath` is off: every fp32 add and multiply rounds on its own (an fp16 x fp16 product is
  exact anyway), and the reductions run in the documented order. The innermost loops run over
  independent outputs (output channels; positions for conv runs of fewer than NARROW output
  channels), which LLVM vectorizes without reordering any sum.
- Memory is read and written through native uint16/float32 views where aligned, and DMA copies
  in the widest unit (8, 4, 2 or 1 bytes) that divides its addresses and strides.

The compiled code is cached on disk (`cache=True`) under `cache_dir()`, so only the first run
on a machine compiles (see `bench/simulator.py` for the cost).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import os
import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba.core import config as _numba_config

from mrvl import isa
from mrvl.isa import (
    ACT_TABLE_ENTRIES,
    CONV_CI_BLOCK,
    OPCODE_BY_NAME,
    TABLE_ACTIVATIONS,
    Activation,
    DType,
    PoolMode,
)
from mrvl.sim.errors import SimulatorError, SimulatorInputError
from mrvl.sim.memory import Memory
from mrvl.sim.stats import RunStats
from mrvl.sim.validate import ValidProgram, describe, encode_words, field_words


def cache_dir() -> Path:
    """Where compiled kernels live: $NUMBA_CACHE_DIR, else the user's cache directory
    (~/.cache/mrvl/numba), in a subdirectory per version of the ISA table and the row layout,
    whose constants the kernels bake in (Numba itself only notices changes to this file)."""
    base = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "mrvl",
        "numba",
    )
    stamp = hashlib.blake2b(digest_size=6)
    for module in ("mrvl.isa", "mrvl.sim.validate"):  # the tables and the row layout
        stamp.update(Path(importlib.import_module(module).__file__).read_bytes())
    return Path(base) / f"isa-{stamp.hexdigest()}"


# Numba reads CACHE_DIR when a function is decorated, so it is set before the first @njit.
_numba_config.CACHE_DIR = str(cache_dir())

import numba  # noqa: E402
from numba import types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

assert sys.byteorder == "little", "the engine reads little-endian memory through native views"

jit = numba.njit(cache=True, fastmath=False, boundscheck=False, nogil=True)

# ---------------------------------------------------------------------- the ISA as constants
# Numba freezes module globals into the compiled code: plain ints, one per opcode and field.

OP_DMA = OPCODE_BY_NAME["dma"].opcode
OP_CVT = OPCODE_BY_NAME["cvt"].opcode
OP_LUT = OPCODE_BY_NAME["lut"].opcode
OP_MUL = OPCODE_BY_NAME["mul"].opcode
OP_RESIZE = OPCODE_BY_NAME["resize"].opcode
OP_CONV = OPCODE_BY_NAME["conv"].opcode
OP_POOL = OPCODE_BY_NAME["pool"].opcode
OP_FC = OPCODE_BY_NAME["fc"].opcode
OP_ADD = OPCODE_BY_NAME["add"].opcode
OP_SCALE = OPCODE_BY_NAME["scale"].opcode
OP_END = OPCODE_BY_NAME["end"].opcode

_dma = field_words(OPCODE_BY_NAME["dma"])
DMA_SRC_SPACE, DMA_SRC_ADDR, DMA_SRC_STRIDES = (
    _dma["src_space"],
    _dma["src_addr"],
    _dma["src_strides"],
)
DMA_DST_SPACE, DMA_DST_ADDR, DMA_DST_STRIDES = (
    _dma["dst_space"],
    _dma["dst_addr"],
    _dma["dst_strides"],
)
DMA_BOX, DMA_ELEM_BYTES = _dma["box"], _dma["elem_bytes"]

_cvt = field_words(OPCODE_BY_NAME["cvt"])
CVT_SRC_ADDR, CVT_SRC_DTYPE, CVT_SRC_SHAPE = _cvt["src_addr"], _cvt["src_dtype"], _cvt["src_shape"]
CVT_DST_ADDR, CVT_DST_DTYPE, CVT_PERM = _cvt["dst_addr"], _cvt["dst_dtype"], _cvt["perm"]

_lut = field_words(OPCODE_BY_NAME["lut"])
LUT_SRC_ADDR = _lut["src_addr"]

_conv = field_words(OPCODE_BY_NAME["conv"])
CONV_IN_ADDR, CONV_IN_SHAPE, CONV_ROW0 = _conv["in_addr"], _conv["in_shape"], _conv["row0"]
CONV_OUT_ADDR, CONV_OUT_SHAPE, CONV_OROW0 = _conv["out_addr"], _conv["out_shape"], _conv["orow0"]
CONV_KERNEL, CONV_STRIDE, CONV_PAD = _conv["kernel"], _conv["stride"], _conv["pad"]
CONV_DILATION, CONV_GROUPS = _conv["dilation"], _conv["groups"]
CONV_OC0, CONV_OC_TOTAL = _conv["oc0"], _conv["oc_total"]
CONV_W_ADDR, CONV_B_ADDR = _conv["w_addr"], _conv["b_addr"]
CONV_ACT, CONV_ACT_A, CONV_ACT_B = _conv["act"], _conv["act_a"], _conv["act_b"]
CONV_ACT_ADDR = _conv["act_addr"]
CONV_ACC_ADDR, CONV_ACC_OUT = _conv["acc_addr"], _conv["acc_out"]

_pool = field_words(OPCODE_BY_NAME["pool"])
POOL_IN_ADDR, POOL_IN_SHAPE, POOL_ROW0 = _pool["in_addr"], _pool["in_shape"], _pool["row0"]
POOL_OUT_ADDR, POOL_OUT_SHAPE, POOL_OROW0 = _pool["out_addr"], _pool["out_shape"], _pool["orow0"]
POOL_KERNEL, POOL_STRIDE, POOL_PAD = _pool["kernel"], _pool["stride"], _pool["pad"]
POOL_MODE, POOL_IN_HW, POOL_PAD_END = _pool["mode"], _pool["in_hw"], _pool["pad_end"]
POOL_COUNT_INCLUDE_PAD = _pool["count_include_pad"]

_resize = field_words(OPCODE_BY_NAME["resize"])
RESIZE_IN_ADDR, RESIZE_IN_SHAPE = _resize["in_addr"], _resize["in_shape"]
RESIZE_ROW0, RESIZE_OUT_ADDR, RESIZE_OUT_SHAPE = (
    _resize["row0"],
    _resize["out_addr"],
    _resize["out_shape"],
)
RESIZE_YTAB_ADDR, RESIZE_XTAB_ADDR = _resize["ytab_addr"], _resize["xtab_addr"]

_fc = field_words(OPCODE_BY_NAME["fc"])
FC_IN_ADDR, FC_N, FC_K, FC_O = _fc["in_addr"], _fc["n"], _fc["k"], _fc["o"]
FC_W_ADDR, FC_B_ADDR, FC_OUT_ADDR = _fc["w_addr"], _fc["b_addr"], _fc["out_addr"]
FC_ACT, FC_ACT_A, FC_ACT_B, FC_ACT_ADDR = _fc["act"], _fc["act_a"], _fc["act_b"], _fc["act_addr"]

_add = field_words(OPCODE_BY_NAME["add"])
ADD_A_ADDR, ADD_B_ADDR, ADD_OUT_ADDR = _add["a_addr"], _add["b_addr"], _add["out_addr"]
ADD_COUNT, ADD_ACT, ADD_ACT_A, ADD_ACT_B = _add["count"], _add["act"], _add["act_a"], _add["act_b"]
ADD_CHANNELS, ADD_ACT_ADDR = _add["channels"], _add["act_addr"]

_scale = field_words(OPCODE_BY_NAME["scale"])
SCALE_IN_ADDR, SCALE_OUT_ADDR = _scale["in_addr"], _scale["out_addr"]
SCALE_COUNT, SCALE_CHANNELS = _scale["count"], _scale["channels"]
SCALE_S_ADDR, SCALE_B_ADDR = _scale["s_addr"], _scale["b_addr"]
SCALE_ACT, SCALE_ACT_A, SCALE_ACT_B = _scale["act"], _scale["act_a"], _scale["act_b"]
SCALE_ACT_ADDR = _scale["act_addr"]

_mul = field_words(OPCODE_BY_NAME["mul"])
MUL_A_ADDR, MUL_B_ADDR, MUL_OUT_ADDR = _mul["a_addr"], _mul["b_addr"], _mul["out_addr"]
MUL_COUNT, MUL_CHANNELS = _mul["count"], _mul["channels"]
MUL_ACT, MUL_ACT_A, MUL_ACT_B = _mul["act"], _mul["act_a"], _mul["act_b"]

DDR = int(isa.MemSpace.DDR)
F32, F16 = int(DType.F32), int(DType.F16)
DTYPE_SIZE = np.array([isa.DTYPE_BYTES[d] for d in sorted(DType)], np.int64)
ACT_NONE, ACT_RELU = int(Activation.NONE), int(Activation.RELU)
ACT_CLIP, ACT_LEAKY_RELU = int(Activation.CLIP), int(Activation.LEAKY_RELU)
ACT_PRELU = int(Activation.PRELU)
IS_TABLE_ACT = np.array([a in TABLE_ACTIVATIONS for a in sorted(Activation)], np.bool_)
POOL_MAX = int(PoolMode.MAX)
CI_BLOCK = CONV_CI_BLOCK

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


@intrinsic
def publish(typingctx, sync, index, value):
    """sync[index] = value as a release store: every write before it is visible to a thread
    that reads the value with `observe`."""
    sig = types.void(sync, index, value)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        builder.store_atomic(
            args[2], builder.gep(array.data, [args[1]]), ordering="release", align=8
        )
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def observe(typingctx, sync, index):
    """sync[index] as an acquire load (read anew at each call; see `publish`)."""
    sig = types.int64(sync, index)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = builder.gep(array.data, [args[1]])
        return builder.load_atomic(pointer, ordering="acquire", align=8)

    return sig, codegen


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


@intrinsic
def round_f16_vectors(typingctx, values, halves, count, tally):
    """halves[i] = f16_bits_from_f32(values[i]) for i < count (a multiple of F16_LANES),
    F16_LANES at a time in 32-bit vector lanes (Numba widens scalar uint32 arithmetic to 64 bits
    and leaves that loop scalar); tally[0] += the values beyond +-65504 (NaN not), tally[1] +=
    the NaNs. The same steps as f16_bits_from_f32, lane by lane; values and halves are C arrays
    (float32, uint16), tally int64."""
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
def finish(acc, act, a, b, slopes, table, buf, addr, tally):
    """The last step of conv, fc, add, scale and mul, from the fp32 accumulator to the f16
    stored at buf[addr:]: a table activation looks f16(acc) up in the tile's table; the others
    act on acc (PRELU with the slope of channel i mod channels), then round to f16. `tally`
    gets the counts of docs/isa.md §4 (for a table: saturated index and entry +-65504, NaN
    entry)."""
    if IS_TABLE_ACT[act]:
        bits = acc.view(np.uint32)
        saturated = 0
        nans = 0
        for i in range(acc.size):
            u = bits[i]
            h = table[f16_bits_from_f32(acc[i])]
            saturated += beyond_f16(u) & np.int64((h & 0x7FFF) == 0x7BFF)
            nans += np.int64((h & 0x7FFF) > 0x7C00)
            buf[addr + 2 * i] = np.uint8(h & 0xFF)
            buf[addr + 2 * i + 1] = np.uint8(h >> 8)
        tally[0] += saturated
        tally[1] += nans
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


# ------------------------------------------------------------------------------- the kernels


@jit
def dma_move(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes):
    """Copy the strided box at src[src_addr:] to the box at dst[dst_addr:] (two distinct
    buffers), in runs as long as both innermost strides allow, in units of `src.itemsize`
    bytes (addresses and strides are multiples of it)."""
    unit = src.itemsize
    if src_strides[3] == elem_bytes and dst_strides[3] == elem_bytes:
        run, inner = box[3] * elem_bytes // unit, 1
    else:
        run, inner = elem_bytes // unit, box[3]
    for i0 in range(box[0]):
        for i1 in range(box[1]):
            for i2 in range(box[2]):
                p = src_addr + i0 * src_strides[0] + i1 * src_strides[1] + i2 * src_strides[2]
                q = dst_addr + i0 * dst_strides[0] + i1 * dst_strides[1] + i2 * dst_strides[2]
                for i3 in range(inner):
                    a = (p + i3 * src_strides[3]) // unit
                    b = (q + i3 * dst_strides[3]) // unit
                    source, target = src[a : a + run], dst[b : b + run]
                    for e in range(run):  # from 0: no negative-index handling, vectorized
                        target[e] = source[e]


@jit
def as_units(buf, unit):
    """The longest prefix of the byte array `buf` that holds whole units, viewed as them."""
    return buf[: buf.size - buf.size % unit]


@intrinsic
def copy_bytes(typingctx, dst, dst_at, src, src_at, nbytes):
    """dst[dst_at : dst_at + nbytes] = src[src_at : src_at + nbytes] for two distinct uint8
    arrays, by LLVM's memcpy (the C library's, for long runs)."""
    sig = types.void(dst, dst_at, src, src_at, nbytes)

    def codegen(context, builder, signature, args):
        dst_value, dst_at_value, src_value, src_at_value, nbytes_value = args
        dst_ptr = context.make_array(signature.args[0])(context, builder, dst_value).data
        src_ptr = context.make_array(signature.args[2])(context, builder, src_value).data
        cgutils.raw_memcpy(
            builder,
            builder.gep(dst_ptr, [dst_at_value]),
            builder.gep(src_ptr, [src_at_value]),
            nbytes_value,
            1,
        )
        return context.get_dummy_value()

    return sig, codegen


MEMCPY_RUN = 16
"""Runs of at least this many bytes are copied by memcpy (dma_runs)."""


@jit
def dma_runs(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes):
    """The copy of dma_move when the innermost dimension is dense in both boxes: one memcpy
    per run, a run spanning the two innermost dimensions when both boxes are dense there."""
    run = box[3] * elem_bytes
    rows = box[2]
    if src_strides[2] == run and dst_strides[2] == run:
        run *= rows
        rows = 1
    for i0 in range(box[0]):
        for i1 in range(box[1]):
            p = src_addr + i0 * src_strides[0] + i1 * src_strides[1]
            q = dst_addr + i0 * dst_strides[0] + i1 * dst_strides[1]
            for i2 in range(rows):
                copy_bytes(dst, q + i2 * dst_strides[2], src, p + i2 * src_strides[2], run)


@jit
def dma_copy(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes):
    """dma_runs when the innermost dimension is dense in both boxes with runs of at least
    MEMCPY_RUN bytes, else dma_move in the widest unit (8, 4, 2 or 1 bytes) that divides every
    address, stride and element size."""
    if (
        src_strides[3] == elem_bytes
        and dst_strides[3] == elem_bytes
        and box[3] * elem_bytes >= MEMCPY_RUN
    ):
        dma_runs(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes)
        return
    bits = src_addr | dst_addr | elem_bytes
    for d in range(4):
        bits |= src_strides[d] | dst_strides[d]
    if bits % 8 == 0:
        s = as_units(src, 8).view(np.uint64)
        t = as_units(dst, 8).view(np.uint64)
        dma_move(s, src_addr, src_strides, t, dst_addr, dst_strides, box, elem_bytes)
    elif bits % 4 == 0:
        s4 = as_units(src, 4).view(np.uint32)
        t4 = as_units(dst, 4).view(np.uint32)
        dma_move(s4, src_addr, src_strides, t4, dst_addr, dst_strides, box, elem_bytes)
    elif bits % 2 == 0:
        s2 = as_units(src, 2).view(np.uint16)
        t2 = as_units(dst, 2).view(np.uint16)
        dma_move(s2, src_addr, src_strides, t2, dst_addr, dst_strides, box, elem_bytes)
    else:
        dma_move(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes)


@jit
def dma(row, ddr, ocm):
    box = row[DMA_BOX : DMA_BOX + 4].astype(np.int64)
    elem_bytes = np.int64(row[DMA_ELEM_BYTES])
    if box[0] == 0 or box[1] == 0 or box[2] == 0 or box[3] == 0:
        return
    src = ddr if row[DMA_SRC_SPACE] == DDR else ocm
    dst = ddr if row[DMA_DST_SPACE] == DDR else ocm
    src_strides = row[DMA_SRC_STRIDES : DMA_SRC_STRIDES + 4].astype(np.int64)
    dst_strides = row[DMA_DST_STRIDES : DMA_DST_STRIDES + 4].astype(np.int64)
    src_addr, dst_addr = np.int64(row[DMA_SRC_ADDR]), np.int64(row[DMA_DST_ADDR])
    if row[DMA_SRC_SPACE] != row[DMA_DST_SPACE]:  # DDR and OCM do not overlap: copy directly
        dma_copy(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes)
        return
    # memmove semantics: the whole source is read before any destination byte is written.
    staged = np.empty(box[0] * box[1] * box[2] * box[3] * elem_bytes, np.uint8)
    dense = np.empty(4, np.int64)
    dense[3] = elem_bytes
    for d in range(2, -1, -1):
        dense[d] = dense[d + 1] * box[d + 1]
    dma_copy(src, src_addr, src_strides, staged, np.int64(0), dense, box, elem_bytes)
    dma_copy(staged, np.int64(0), dense, dst, dst_addr, dst_strides, box, elem_bytes)


@jit
def dense_strides(shape):
    """The element strides of a dense array of 4-d `shape`."""
    strides = np.empty(4, np.int64)
    strides[3] = 1
    for d in range(2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return strides


@jit
def gather_permuted(source, shape, perm, out):
    """out[k] = the k-th element of the dense array `source` of `shape` in the order of its
    dimensions permuted by `perm` (cvt's transposition)."""
    strides = dense_strides(shape)
    s0, s1, s2, s3 = strides[perm[0]], strides[perm[1]], strides[perm[2]], strides[perm[3]]
    k = 0
    for j0 in range(shape[perm[0]]):
        for j1 in range(shape[perm[1]]):
            for j2 in range(shape[perm[2]]):
                base = j0 * s0 + j1 * s1 + j2 * s2
                for j3 in range(shape[perm[3]]):
                    out[k] = source[base + j3 * s3]
                    k += 1


@jit
def cvt(row, ddr, lut_bits, tally):
    src_dtype, dst_dtype = row[CVT_SRC_DTYPE], row[CVT_DST_DTYPE]
    shape = row[CVT_SRC_SHAPE : CVT_SRC_SHAPE + 4].astype(np.int64)
    perm = row[CVT_PERM : CVT_PERM + 4]
    src_size, dst_size = DTYPE_SIZE[src_dtype], DTYPE_SIZE[dst_dtype]
    count = shape[0] * shape[1] * shape[2] * shape[3]
    src_addr = np.int64(row[CVT_SRC_ADDR])
    if src_dtype == F32 and dst_dtype == F16 and src_addr % 4 == 0:  # a model's input, aligned
        values = np.empty(count, np.float32)  # read whole before any byte is written
        gather_permuted(ddr[src_addr : src_addr + 4 * count].view(np.float32), shape, perm, values)
        store_f16(ddr, row[CVT_DST_ADDR], values, tally)
        return
    strides = dense_strides(shape)
    staged = np.empty(count * dst_size, np.uint8)
    k = 0
    for j0 in range(shape[perm[0]]):
        for j1 in range(shape[perm[1]]):
            for j2 in range(shape[perm[2]]):
                for j3 in range(shape[perm[3]]):
                    element = (
                        j0 * strides[perm[0]]
                        + j1 * strides[perm[1]]
                        + j2 * strides[perm[2]]
                        + j3 * strides[perm[3]]
                    )
                    p = src_addr + element * src_size
                    if src_dtype == dst_dtype:
                        for e in range(src_size):
                            staged[k + e] = ddr[p + e]
                    elif src_dtype == F32:  # -> F16
                        u = (
                            np.uint32(ddr[p])
                            | (np.uint32(ddr[p + 1]) << 8)
                            | (np.uint32(ddr[p + 2]) << 16)
                            | (np.uint32(ddr[p + 3]) << 24)
                        )
                        tally[0] += beyond_f16(u)
                        tally[1] += is_nan_f32(u)
                        h = f16_bits_from_f32(f32_from_bits(np.uint32(u)))
                        staged[k] = np.uint8(h & 0xFF)
                        staged[k + 1] = np.uint8(h >> 8)
                    else:  # F16 -> F32, exact
                        u = lut_bits[np.int64(ddr[p]) | (np.int64(ddr[p + 1]) << 8)]
                        for e in range(4):
                            staged[k + e] = np.uint8((u >> (8 * e)) & 0xFF)
                    k += dst_size
    dst_addr = row[CVT_DST_ADDR]
    for i in range(staged.size):
        ddr[dst_addr + i] = staged[i]


# ------------------------------------------------------------------------------------ conv

MAC_PIXELS = 6
"""Output positions of one `mac_tile` call."""
MAC_CHANNELS = 16
"""Output channels of one `mac_tile` call: two vectors of LANES."""
LANES = 8
"""fp32 lanes of the vectors `mac_tile` computes with (one AVX register; LLVM splits them in two
on machines with 128-bit vectors, with the same results)."""


def mac_tile_codegen(pixels, halves):
    """The LLVM IR of a mac_tile kernel over `pixels` positions x `halves` vectors of LANES
    output channels (the weights' packing has MAC_CHANNELS a step whatever `halves`)."""

    def codegen(context, builder, signature, args):
        x_value, rows_value, lengths_value, segments_value, w_value, w_off_value = args[:6]
        init_value, init_at_value, out_value, out_at_value = args[6:]
        f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
        vector = ir.VectorType(f32, LANES)
        vector_ptr = vector.as_pointer()

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

        def pixel_base(pointer, at_ptr, p):
            return builder.gep(pointer, [builder.load(builder.gep(at_ptr, [const(p)]))])

        init_bases = [pixel_base(init_ptr, init_at_ptr, p) for p in range(pixels)]
        slots = [(p, h) for p in range(pixels) for h in range(halves)]
        initial = [
            builder.load(vector_at(init_bases[p], const(h * LANES)), align=4) for p, h in slots
        ]
        undef = ir.Constant(vector, ir.Undefined)
        splat = ir.Constant(ir.VectorType(i32, LANES), [0] * LANES)

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

            def step(t, sums):
                w_step = builder.gep(w_segment, [builder.mul(t, const(MAC_CHANNELS))])
                weights = [
                    builder.load(vector_at(w_step, const(h * LANES)), align=4)
                    for h in range(halves)
                ]
                updated = []
                for p in range(pixels):
                    scalar = builder.load(builder.gep(x_rows[p], [t]), align=4)
                    broadcast = builder.shuffle_vector(
                        builder.insert_element(undef, scalar, ir.Constant(i32, 0)), undef, splat
                    )
                    for h in range(halves):
                        product = builder.fmul(broadcast, weights[h])
                        updated.append(builder.fadd(sums[p * halves + h], product))
                return updated

            sums = counted_loop(builder, "mac", length, 1, sums, step)
            return [builder.add(done, length), *sums]

        carried = counted_loop(builder, "segment", segments_value, 1, [const(0), *initial], segment)
        out_bases = [pixel_base(out_ptr, out_at_ptr, p) for p in range(pixels)]
        for (p, h), value in zip(slots, carried[1:]):
            builder.store(value, vector_at(out_bases[p], const(h * LANES)), align=4)
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
    position, then per output an fp32 multiply and an fp32 add, each rounding (IEEE, no
    fast-math flags, no fused multiply-add), so every output's sum is the documented
    sequential one. Numba cannot express vectors, hence LLVM IR.
    x, w, init, out: float32 C arrays; rows: int64[segments * MAC_PIXELS], offsets into x;
    lengths: int64[segments]; init_at, out_at: int64[MAC_PIXELS], offsets into init and out
    (the accumulators start from init and end in out, which may be one array: all are loaded
    before any is stored)."""
    sig = types.void(x, rows, lengths, segments, w, w_off, init, init_at, out, out_at)
    return sig, mac_tile_codegen(MAC_PIXELS, MAC_CHANNELS // LANES)


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


@jit
def segment_rows(row, position, c_base, zeros, rows, q, pixels, left, padded_width, merged):
    """rows[s * pixels + q] = the offset in the window (of `padded_width` columns, the
    first at `left`) of output `position`'s inputs of segment s (conv_segments), or `zeros`,
    where the window holds zeros, for a tap that falls outside the window (padding)."""
    height, width, in_channels = (
        row[CONV_IN_SHAPE + 1],
        row[CONV_IN_SHAPE + 2],
        row[CONV_IN_SHAPE + 3],
    )
    out_rows, out_cols = row[CONV_OUT_SHAPE + 1], row[CONV_OUT_SHAPE + 2]
    kh_count, kw_count = row[CONV_KERNEL], row[CONV_KERNEL + 1]
    group_channels = in_channels // row[CONV_GROUPS]
    block_size = group_channels if kh_count * kw_count == 1 or merged else CI_BLOCK
    taps_per_row = 1 if merged else kw_count  # a merged segment covers the kernel row
    n = position // (out_rows * out_cols)
    r = (position // out_cols) % out_rows
    c = position % out_cols
    wr0 = (row[CONV_OROW0] + r) * row[CONV_STRIDE] - row[CONV_PAD] - row[CONV_ROW0]
    iw0 = c * row[CONV_STRIDE + 1] - row[CONV_PAD + 1]
    s = 0
    for block in range(0, group_channels, block_size):
        for kh in range(kh_count):
            wr = wr0 + kh * row[CONV_DILATION]
            for kw in range(taps_per_row):
                iw = iw0 + kw * row[CONV_DILATION + 1]
                if 0 <= wr < height and (merged or 0 <= iw < width):
                    column = iw + left
                    rows[s * pixels + q] = (
                        ((n * height + wr) * padded_width + column) * in_channels + c_base + block
                    )
                else:
                    rows[s * pixels + q] = zeros
                s += 1


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
def conv_run_blocked(
    row, x, packed, steps, bias, partial, out, o_lo, o_hi, c_base, start, stop, merged
):
    """Output channels [o_lo, o_hi) of one group at output positions [start, stop), MAC_PIXELS
    positions x MAC_CHANNELS channels per mac_tile call (NARROW_PIXELS x LANES per
    mac_tile_narrow call for a run of at most LANES channels), with their `packed` weights,
    reading the inputs in the window `x` in place, segment by segment (conv_segments;
    `merged`: a segment per kernel row, the window having the zero columns of
    window_columns). The window ends with zeros as long as the longest segment, for the taps
    in the padding (load_window)."""
    out_channels = row[CONV_OUT_SHAPE + 3]
    group_channels = row[CONV_IN_SHAPE + 3] // row[CONV_GROUPS]
    blocks = packed.size // (steps * MAC_CHANNELS)
    left, right = window_columns(row) if merged else (0, 0)
    padded_width = row[CONV_IN_SHAPE + 2] + left + right
    lengths = conv_segments(row[CONV_KERNEL], row[CONV_KERNEL + 1], group_channels, merged)
    segments = lengths.size
    zeros = x.size - lengths.max()
    narrow = o_hi - o_lo <= LANES  # one vector of channels: mac_tile_narrow
    pixels = NARROW_PIXELS if narrow else MAC_PIXELS
    lanes = LANES if narrow else MAC_CHANNELS
    rows = np.empty(segments * pixels, np.int64)
    acc = np.empty(pixels * MAC_CHANNELS, np.float32)
    acc_at = np.arange(pixels) * MAC_CHANNELS
    init_at = np.empty(pixels, np.int64)
    out_at = np.empty(pixels, np.int64)
    for first in range(start, stop, pixels):
        count = min(pixels, stop - first)
        for q in range(pixels):  # positions past the end repeat the last one
            position = first + min(q, count - 1)
            segment_rows(row, position, c_base, zeros, rows, q, pixels, left, padded_width, merged)
        for block in range(blocks):
            lo = o_lo + block * MAC_CHANNELS
            width = min(lanes, o_hi - lo)
            w_off = block * steps * MAC_CHANNELS
            if width == lanes and count == pixels:  # from bias or partial straight to out
                for q in range(pixels):
                    out_at[q] = (first + q) * out_channels + lo
                    init_at[q] = out_at[q] if partial.size > 0 else lo
                init = partial if partial.size > 0 else bias
                if narrow:
                    mac_tile_narrow(
                        x, rows, lengths, segments, packed, w_off, init, init_at, out, out_at
                    )
                else:
                    mac_tile(x, rows, lengths, segments, packed, w_off, init, init_at, out, out_at)
                continue
            for q in range(pixels):  # a partial tile: through acc, zeros past the edges
                tile = acc[q * MAC_CHANNELS : (q + 1) * MAC_CHANNELS]
                if partial.size > 0 and q < count:
                    at = (first + q) * out_channels + lo
                    tile[:width] = partial[at : at + width]
                else:
                    tile[:width] = bias[lo : lo + width]
                tile[width:] = 0.0
            if narrow:
                mac_tile_narrow(x, rows, lengths, segments, packed, w_off, acc, acc_at, acc, acc_at)
            else:
                mac_tile(x, rows, lengths, segments, packed, w_off, acc, acc_at, acc, acc_at)
            for q in range(count):
                at = (first + q) * out_channels + lo
                out[at : at + width] = acc[q * MAC_CHANNELS : q * MAC_CHANNELS + width]


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


@jit
def conv_depthwise(row, x, w, bias, partial, out):
    """A conv whose groups have one input channel each (depthwise): per output position, the
    taps in order (kh, kw), each a multiply-add over all the tile's output channels at once
    (contiguous input channels when each group has one output channel)."""
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
    steps = kh_count * kw_count
    oc0, group_outputs = row[CONV_OC0], row[CONV_OC_TOTAL] // row[CONV_GROUPS]
    wt = np.empty((steps, out_channels), np.float32)  # row t: every channel's weight of tap t
    for o in range(out_channels):
        for t in range(steps):
            wt[t, o] = w[o * steps + t]
    channel = np.empty(out_channels, np.int64)  # the input channel of each output channel
    for o in range(out_channels):
        channel[o] = (oc0 + o) // group_outputs
    contiguous = group_outputs == 1
    taps = np.empty(out_channels, np.float32)
    for n in range(n_count):
        for r in range(out_rows):
            wr0 = (row[CONV_OROW0] + r) * row[CONV_STRIDE] - row[CONV_PAD] - row[CONV_ROW0]
            for c in range(out_cols):
                iw0 = c * row[CONV_STRIDE + 1] - row[CONV_PAD + 1]
                start = ((n * out_rows + r) * out_cols + c) * out_channels
                acc = out[start : start + out_channels]
                if partial.size > 0:
                    acc[:] = partial[start : start + out_channels]
                else:
                    acc[:] = bias
                for kh in range(kh_count):
                    wr = wr0 + kh * row[CONV_DILATION]
                    for kw in range(kw_count):
                        iw = iw0 + kw * row[CONV_DILATION + 1]
                        weights = wt[kh * kw_count + kw]
                        if 0 <= wr < height and 0 <= iw < width:
                            base = ((n * height + wr) * width + iw) * in_channels
                            if contiguous:
                                taps[:] = x[base + oc0 : base + oc0 + out_channels]
                            else:
                                for o in range(out_channels):
                                    taps[o] = x[base + channel[o]]
                        else:
                            taps[:] = 0.0
                        for o in range(out_channels):
                            acc[o] = acc[o] + taps[o] * weights[o]


SHARED_MACS = 1 << 19
"""The fewest multiply-adds of a conv whose output positions the engine's threads share
(`conv`); a smaller one costs less on one thread than the threads' meeting points."""


@jit
def arrive(sync, worker, workers, step):
    """A meeting point of the `workers` threads running one program (`run_program`): this one
    publishes that it reached its `step`-th, then waits for every other to reach it. Returns
    the new step, or -1 if the run was abandoned (sync[workers] != 0) while waiting."""
    step += 1
    publish(sync, worker, step)
    for other in range(workers):
        while observe(sync, other) < step:
            if observe(sync, workers) != 0:
                return -1
    return step


@jit
def conv_macs(row):
    """The multiply-adds of a conv instruction."""
    positions = row[CONV_OUT_SHAPE] * row[CONV_OUT_SHAPE + 1] * row[CONV_OUT_SHAPE + 2]
    group_channels = row[CONV_IN_SHAPE + 3] // row[CONV_GROUPS]
    steps = row[CONV_KERNEL] * row[CONV_KERNEL + 1] * group_channels
    return positions * steps * row[CONV_OUT_SHAPE + 3]


@jit
def shared_conv(row, slot, workers):
    """Whether the threads share this conv's output positions: a cached single run of output
    channels (a weight-cache slot) with at least SHARED_MACS multiply-adds."""
    return workers > 1 and slot >= 0 and conv_macs(row) >= SHARED_MACS


SHARED_VALUES = 1 << 15
"""The fewest output values of an `add` or `pool` whose outputs the engine's threads share."""


@jit
def shared_values(op, row, workers):
    """Whether the threads share this `add` (without PRELU, whose slope follows the index)
    by output values, at least SHARED_VALUES of them, or this `pool` by output positions,
    its outputs times its taps at least SHARED_VALUES."""
    if workers <= 1:
        return False
    if op == OP_ADD:
        return row[ADD_COUNT] >= SHARED_VALUES and row[ADD_ACT] != ACT_PRELU
    if op == OP_POOL:
        outputs = row[POOL_OUT_SHAPE] * row[POOL_OUT_SHAPE + 1] * row[POOL_OUT_SHAPE + 2]
        taps = row[POOL_KERNEL] * row[POOL_KERNEL + 1]
        return outputs * row[POOL_OUT_SHAPE + 3] * taps >= SHARED_VALUES
    return False


@jit
def share(total, unit, worker, workers):
    """[start, stop) of `worker`'s contiguous part of `total` items, in whole units."""
    units = (total + unit - 1) // unit
    start = min(total, units * worker // workers * unit)
    return start, min(total, units * (worker + 1) // workers * unit)


@jit
def load_window(row, ocm, start, stop, lut, merged):
    """The conv's input window as fp32 (float32[N*H*W'*C], then zeros as long as the longest
    segment for the taps in the padding), converted only in the window rows that output
    positions [start, stop) read: a thread sharing the conv converts its own rows (the rest of
    the array is never read). One image only; with several, all of it. W' = W, or with
    `merged` (conv_run_blocked) W plus the zero columns of window_columns on each side."""
    n_count, height, width, in_channels = (
        row[CONV_IN_SHAPE],
        row[CONV_IN_SHAPE + 1],
        row[CONV_IN_SHAPE + 2],
        row[CONV_IN_SHAPE + 3],
    )
    group_channels = in_channels // row[CONV_GROUPS]
    left, right = window_columns(row) if merged else (0, 0)
    tail = row[CONV_KERNEL + 1] * group_channels if merged else group_channels
    out_cols = row[CONV_OUT_SHAPE + 2]
    padded_row = (width + left + right) * in_channels
    size = n_count * height * padded_row
    x = np.empty(size + tail, np.float32)
    x[size:] = 0.0
    lo, hi = 0, n_count * height  # rows of all the images, [N*H, W, C]
    if n_count == 1 and stop > start:
        first = (row[CONV_OROW0] + start // out_cols) * row[CONV_STRIDE] - row[CONV_PAD]
        last = (row[CONV_OROW0] + (stop - 1) // out_cols) * row[CONV_STRIDE] - row[CONV_PAD]
        last += (row[CONV_KERNEL] - 1) * row[CONV_DILATION]
        lo = min(max(first - row[CONV_ROW0], 0), height)
        hi = max(min(last - row[CONV_ROW0] + 1, height), lo)
    elif stop <= start:
        hi = 0
    per_row = width * in_channels
    if left + right == 0:
        load_f16_into(
            ocm, row[CONV_IN_ADDR] + 2 * lo * per_row, x[lo * per_row : hi * per_row], lut
        )
        return x
    for r in range(lo, hi):
        base = r * padded_row
        inside = base + left * in_channels
        x[base:inside] = 0.0
        load_f16_into(ocm, row[CONV_IN_ADDR] + 2 * r * per_row, x[inside : inside + per_row], lut)
        x[inside + per_row : base + padded_row] = 0.0
    return x


@jit
def apart(addr, size, other, other_size):
    """Whether the OCM bytes [addr, addr + size) (none if addr is -1) and [other, other +
    other_size) are disjoint."""
    return addr == -1 or addr + size <= other or other + other_size <= addr


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
def conv(row, frow, ocm, lut, table, tally, cache, sync, worker, workers, step):
    """`cache` is this instruction's slot of the weight cache (WeightCache): empty arrays if it
    has none, else (raw, packed, filled), the f16 bits last packed, their packing, and the
    slot's flag (PACKED, CONSTANT): a packing of constant weights is used as it is, any other
    only if the weights in OCM still equal the bits it was made from.

    A conv with a slot computed by several threads (`workers` > 1, every one calling this)
    is shared by output positions: thread 0 packs the weights, then each computes and stores
    a contiguous span of whole mac_tile calls, each output in the documented order, so the
    bits do not depend on the number of threads. The threads meet (`arrive`) before
    computing, before storing if the output overlaps bytes they read (so no store reaches
    them while another still loads; output_apart), and after storing. Returns the thread's
    step count, or -1 if the run was abandoned."""
    n_count, in_channels = row[CONV_IN_SHAPE], row[CONV_IN_SHAPE + 3]
    out_rows, out_cols, out_channels = (
        row[CONV_OUT_SHAPE + 1],
        row[CONV_OUT_SHAPE + 2],
        row[CONV_OUT_SHAPE + 3],
    )
    kh_count, kw_count = row[CONV_KERNEL], row[CONV_KERNEL + 1]
    groups = row[CONV_GROUPS]
    group_channels = in_channels // groups
    oc0, group_outputs = row[CONV_OC0], row[CONV_OC_TOTAL] // groups
    steps = kh_count * kw_count * group_channels
    positions = n_count * out_rows * out_cols
    raw, cached, _ = cache
    w_addr = row[CONV_W_ADDR]
    # one run of output channels (groups=1) with a weight-cache slot: packed when stale
    if raw.size > 0 and worker == 0 and packing_stale(ocm, w_addr, cache):
        tap = conv_order(kh_count, kw_count, group_channels)
        repack(ocm, w_addr, tap, out_channels, cache, lut)
    start, stop = 0, positions
    if workers > 1:
        step = arrive(sync, worker, workers, step)
        if step < 0:
            return step
        start, stop = share(positions, MAC_PIXELS, worker, workers)  # whole mac_tile calls
    merged = raw.size > 0 and merges_kernel_rows(row)  # a segment per kernel row
    x = load_window(row, ocm, start, stop, lut, merged)
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
    if raw.size > 0:
        conv_run_blocked(
            row, x, cached, steps, bias, partial, out, 0, out_channels, 0, start, stop, merged
        )
    elif group_channels == 1:
        w = load_f16(ocm, w_addr, out_channels * steps, lut)
        conv_depthwise(row, x, w, bias, partial, out)
    else:
        w = load_f16(ocm, w_addr, out_channels * steps, lut)
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
                    0,
                    positions,
                    False,
                )
            o_lo = o_hi
    out_bytes = (4 if row[CONV_ACC_OUT] == 1 else 2) * positions * out_channels
    if workers > 1 and not output_apart(row, out_bytes):  # no store while another thread reads
        step = arrive(sync, worker, workers, step)
        if step < 0:
            return step
    span = out[start * out_channels : stop * out_channels]
    if row[CONV_ACC_OUT] == 1:  # the fp32 accumulator itself, for the next block to continue
        if not direct:
            store_f32(ocm, out_addr + 4 * start * out_channels, span)
    else:
        act = row[CONV_ACT]
        slopes = load_slopes(ocm, act, row[CONV_ACT_ADDR], out_channels)
        addr = out_addr + 2 * start * out_channels
        finish(span, act, frow[CONV_ACT_A], frow[CONV_ACT_B], slopes, table, ocm, addr, tally)
    if workers > 1:
        step = arrive(sync, worker, workers, step)
    return step


@jit
def pool(row, ocm, lut, tally, sync, worker, workers, step):
    """Shared by `workers` > 1 threads (every one calling this) by output positions, like
    conv: each computes and stores its own, meeting before computing, before storing if the
    output overlaps the input, and after. Returns the thread's step count, or -1 if the run
    was abandoned."""
    n_count, height, width, channels = (
        row[POOL_IN_SHAPE],
        row[POOL_IN_SHAPE + 1],
        row[POOL_IN_SHAPE + 2],
        row[POOL_IN_SHAPE + 3],
    )
    out_rows, out_cols = row[POOL_OUT_SHAPE + 1], row[POOL_OUT_SHAPE + 2]
    kh_count, kw_count = row[POOL_KERNEL], row[POOL_KERNEL + 1]
    stride_h, stride_w = row[POOL_STRIDE], row[POOL_STRIDE + 1]
    top, left = row[POOL_PAD], row[POOL_PAD + 1]
    full_h, full_w = row[POOL_IN_HW], row[POOL_IN_HW + 1]
    bottom, right = row[POOL_PAD_END], row[POOL_PAD_END + 1]
    is_max = row[POOL_MODE] == POOL_MAX
    positions = n_count * out_rows * out_cols
    first, stop = 0, positions
    if workers > 1:
        step = arrive(sync, worker, workers, step)
        if step < 0:
            return step
        first, stop = share(positions, 1, worker, workers)
    x = load_f16(ocm, row[POOL_IN_ADDR], n_count * height * width * channels, lut)
    out = np.empty((stop - first) * channels, np.float32)
    initial = np.float32(-np.inf) if is_max else np.float32(0.0)
    for position in range(first, stop):
        n = position // (out_rows * out_cols)
        r = position // out_cols % out_rows
        c = position % out_cols
        ih0 = (row[POOL_OROW0] + r) * stride_h - top  # input-tensor row of tap 0
        iw0 = c * stride_w - left
        base = (position - first) * channels
        acc = out[base : base + channels]
        acc[:] = initial
        valid = 0
        padded = 0
        for kh in range(kh_count):
            ih = ih0 + kh
            wr = ih - row[POOL_ROW0]
            for kw in range(kw_count):
                iw = iw0 + kw
                if -top <= ih < full_h + bottom and -left <= iw < full_w + right:
                    padded += 1
                if not (0 <= wr < height and 0 <= iw < width):
                    continue
                valid += 1
                x_base = ((n * height + wr) * width + iw) * channels
                if is_max:
                    for ch in range(channels):
                        v = x[x_base + ch]
                        if v > acc[ch] or np.isnan(v):
                            acc[ch] = v
                else:
                    for ch in range(channels):
                        acc[ch] = acc[ch] + x[x_base + ch]
        if not is_max:
            count = padded if row[POOL_COUNT_INCLUDE_PAD] != 0 else valid
            divisor = np.float32(count)
            for ch in range(channels):
                acc[ch] = acc[ch] / divisor
    in_bytes = 2 * n_count * height * width * channels
    if workers > 1 and not apart(
        row[POOL_IN_ADDR], in_bytes, row[POOL_OUT_ADDR], 2 * positions * channels
    ):
        step = arrive(sync, worker, workers, step)  # no store while another thread reads
        if step < 0:
            return step
    store_f16(ocm, row[POOL_OUT_ADDR] + 2 * first * channels, out, tally)
    if workers > 1:
        step = arrive(sync, worker, workers, step)
    return step


TABLE_NOT_INTEGER, TABLE_OUTSIDE = 1, 2
"""Faults of a resize table (its indices are data): `resize` returns 0, or one of these plus 2
for the column table."""


@jit
def check_table(table, size, lo):
    """0 if every index of the [rows, 4] table is an integer in [lo, lo + size), else the
    fault, found in the reference interpreter's order (all integers, then all inside)."""
    for i in range(table.shape[0]):
        for k in range(2):
            v = table[i, k]
            if v != np.floor(v):
                return TABLE_NOT_INTEGER
    for i in range(table.shape[0]):
        for k in range(2):
            v = table[i, k]
            if not (lo <= v < lo + size):
                return TABLE_OUTSIDE
    return 0


@jit
def two_tap(a, b, w0, w1):
    """fp32(fp32(w0 * a) + fp32(w1 * b))."""
    p = w0 * a
    q = w1 * b
    return p + q


@jit
def resize(row, ocm, lut, tally):
    n_count, height, width, channels = (
        row[RESIZE_IN_SHAPE],
        row[RESIZE_IN_SHAPE + 1],
        row[RESIZE_IN_SHAPE + 2],
        row[RESIZE_IN_SHAPE + 3],
    )
    out_rows, out_cols = np.int64(row[RESIZE_OUT_SHAPE + 1]), np.int64(row[RESIZE_OUT_SHAPE + 2])
    ytab = load_f32(ocm, row[RESIZE_YTAB_ADDR], out_rows * 4).reshape((out_rows, 4))
    xtab = load_f32(ocm, row[RESIZE_XTAB_ADDR], out_cols * 4).reshape((out_cols, 4))
    row0 = row[RESIZE_ROW0]
    fault = check_table(ytab, height, row0)
    if fault:
        return fault
    fault = check_table(xtab, width, 0)
    if fault:
        return fault + 2
    x = load_f16(ocm, row[RESIZE_IN_ADDR], n_count * height * width * channels, lut)
    out = np.empty(n_count * out_rows * out_cols * channels, np.float32)
    for n in range(n_count):
        for r in range(out_rows):
            y0, y1 = np.int64(ytab[r, 0]) - row0, np.int64(ytab[r, 1]) - row0
            wy0, wy1 = ytab[r, 2], ytab[r, 3]
            for q in range(out_cols):
                x0, x1 = np.int64(xtab[q, 0]), np.int64(xtab[q, 1])
                wx0, wx1 = xtab[q, 2], xtab[q, 3]
                a0 = ((n * height + y0) * width + x0) * channels
                a1 = ((n * height + y0) * width + x1) * channels
                b0 = ((n * height + y1) * width + x0) * channels
                b1 = ((n * height + y1) * width + x1) * channels
                base = ((n * out_rows + r) * out_cols + q) * channels
                for ch in range(channels):
                    top = two_tap(x[a0 + ch], x[a1 + ch], wx0, wx1)
                    bottom = two_tap(x[b0 + ch], x[b1 + ch], wx0, wx1)
                    out[base + ch] = two_tap(top, bottom, wy0, wy1)
    store_f16(ocm, row[RESIZE_OUT_ADDR], out, tally)
    return 0


@jit
def fc(row, frow, ocm, lut, table, tally, cache):
    """With a weight-cache slot (`cache` as for conv), the rows run on mac_tile, MAC_PIXELS
    of them x MAC_CHANNELS outputs at a time, over the slot's packing; without one, on
    weights transposed here."""
    rows, inner, outs = row[FC_N], row[FC_K], row[FC_O]
    x = load_f16(ocm, row[FC_IN_ADDR], rows * inner, lut)
    bias = load_bias(ocm, row[FC_B_ADDR], outs)
    out = np.empty(rows * outs, np.float32)
    if cache[0].size > 0:
        if packing_stale(ocm, row[FC_W_ADDR], cache):
            repack(ocm, row[FC_W_ADDR], np.arange(inner), outs, cache, lut)
        fc_run_blocked(x, cache[1], rows, inner, outs, bias, out)
    else:
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
    act = row[FC_ACT]
    slopes = load_slopes(ocm, act, row[FC_ACT_ADDR], outs)
    finish(out, act, frow[FC_ACT_A], frow[FC_ACT_B], slopes, table, ocm, row[FC_OUT_ADDR], tally)


@jit
def fc_run_blocked(x, packed, rows, inner, outs, bias, out):
    """out[i, j] = bias[j] + sum over k of x[i, k] * w[j, k] in order of k, by mac_tile over
    the packed weights (pack_weights with steps in order): the rows are its positions, the
    reduction one segment; every tile goes through a scratch tile (rows are few)."""
    lengths = np.full(1, inner, np.int64)
    at = np.empty(MAC_PIXELS, np.int64)
    acc = np.empty(MAC_PIXELS * MAC_CHANNELS, np.float32)
    acc_at = np.arange(MAC_PIXELS) * MAC_CHANNELS
    for first in range(0, rows, MAC_PIXELS):
        count = min(MAC_PIXELS, rows - first)
        for q in range(MAC_PIXELS):  # rows past the end repeat the last one
            at[q] = (first + min(q, count - 1)) * inner
        for lo in range(0, outs, MAC_CHANNELS):
            width = min(MAC_CHANNELS, outs - lo)
            for q in range(MAC_PIXELS):
                tile = acc[q * MAC_CHANNELS : (q + 1) * MAC_CHANNELS]
                tile[:width] = bias[lo : lo + width]
                tile[width:] = 0.0
            w_off = lo // MAC_CHANNELS * inner * MAC_CHANNELS
            mac_tile(x, at, lengths, 1, packed, w_off, acc, acc_at, acc, acc_at)
            for q in range(count):
                start = (first + q) * outs + lo
                out[start : start + width] = acc[q * MAC_CHANNELS : q * MAC_CHANNELS + width]


@jit
def add(row, frow, ocm, lut, table, tally, sync, worker, workers, step):
    """Shared by `workers` > 1 threads (every one calling this) by output values, like conv:
    each computes and stores its own, meeting before computing, before storing if an operand
    overlaps the output at another offset, and after. Returns the thread's step count, or -1
    if the run was abandoned."""
    count = row[ADD_COUNT]
    a_addr, b_addr, out_addr, act = (
        row[ADD_A_ADDR],
        row[ADD_B_ADDR],
        row[ADD_OUT_ADDR],
        row[ADD_ACT],
    )
    act_a, act_b = frow[ADD_ACT_A], frow[ADD_ACT_B]
    start, stop = 0, count
    if workers > 1:  # never with PRELU (shared_values): its slope follows the index
        step = arrive(sync, worker, workers, step)
        if step < 0:
            return step
        start, stop = share(count, F16_LANES, worker, workers)
    a = load_f16(ocm, a_addr + 2 * start, stop - start, lut)
    b = load_f16(ocm, b_addr + 2 * start, stop - start, lut)
    for i in range(stop - start):
        a[i] = a[i] + b[i]
    slopes = load_slopes(ocm, act, row[ADD_ACT_ADDR], row[ADD_CHANNELS])
    # each thread reads and writes its own span: only an operand at another offset of the
    # output's bytes needs every thread to have read before any stores
    nbytes = 2 * count
    a_safe = a_addr == out_addr or apart(a_addr, nbytes, out_addr, nbytes)
    b_safe = b_addr == out_addr or apart(b_addr, nbytes, out_addr, nbytes)
    if workers > 1 and not (a_safe and b_safe):
        step = arrive(sync, worker, workers, step)
        if step < 0:
            return step
    finish(a, act, act_a, act_b, slopes, table, ocm, out_addr + 2 * start, tally)
    if workers > 1:
        step = arrive(sync, worker, workers, step)
    return step


@jit
def scale(row, frow, ocm, lut, table, tally):
    count, channels = row[SCALE_COUNT], row[SCALE_CHANNELS]
    x = load_f16(ocm, row[SCALE_IN_ADDR], count, lut)
    s = load_f32(ocm, row[SCALE_S_ADDR], channels)
    b = load_f32(ocm, row[SCALE_B_ADDR], channels)
    for i in range(count):
        c = i % channels
        product = x[i] * s[c]  # rounds to fp32, then the sum rounds again
        x[i] = product + b[c]
    act = row[SCALE_ACT]
    slopes = load_slopes(ocm, act, row[SCALE_ACT_ADDR], channels)
    act_a, act_b = frow[SCALE_ACT_A], frow[SCALE_ACT_B]
    finish(x, act, act_a, act_b, slopes, table, ocm, row[SCALE_OUT_ADDR], tally)


@jit
def mul(row, frow, ocm, lut, table, tally):
    count, channels = row[MUL_COUNT], row[MUL_CHANNELS]
    a = load_f16(ocm, row[MUL_A_ADDR], count, lut)
    b = load_f16(ocm, row[MUL_B_ADDR], channels if channels > 0 else count, lut)
    for i in range(count):
        a[i] = a[i] * b[i % channels if channels > 0 else i]  # exact: two f16 values
    act_a, act_b = frow[MUL_ACT_A], frow[MUL_ACT_B]
    finish(a, row[MUL_ACT], act_a, act_b, NO_SLOPES, table, ocm, row[MUL_OUT_ADDR], tally)


@jit
def load_table(row, ddr, table):
    """`lut`: the 65,536 f16 entries at src_addr into the tile's activation-table memory."""
    src = row[LUT_SRC_ADDR]
    for i in range(ACT_TABLE_ENTRIES):
        table[i] = np.uint16(ddr[src + 2 * i]) | (np.uint16(ddr[src + 2 * i + 1]) << 8)


@jit
def run_program(
    words, floats, ddr, ocm, tables, lut, lut_bits, counts, weights, skip, sync, worker
):
    """Every instruction in order; the rows end with the program's first `end`. Returns -1, or
    index * 8 + fault of the instruction that faulted (only resize can: its tables are data).
    counts[i] gets instruction i's (saturated, nans), zeros on entry. `weights` is the weight
    cache's arrays (WeightCache.arrays); `skip[i]` = 1 skips DMA i (WeightCache.skip).

    Several threads may run one program together, each calling this with its `worker` index
    and its own `counts`, and one `sync` array of workers + 1 zeros (`arrive`): thread 0 runs
    every instruction, and the others join it in the convs, adds and pools it shares
    (`shared_conv`, `shared_values`) and skip the rest. Setting sync[workers] abandons the run
    (thread 0 does on a fault)."""
    slots, raw_at, packed_at, raw, packed, filled = weights
    no_raw, no_packed, no_filled = raw[:0], packed[:0], filled[:0]
    workers = sync.size - 1
    step = 0
    for i in range(words.shape[0]):
        row, frow = words[i], floats[i]
        op, tile = row[0], row[1]
        tally = counts[i]
        if op == OP_CONV:
            shared = shared_conv(row, slots[i], workers)
        else:
            shared = shared_values(op, row, workers)
        together = workers if shared else 1  # the threads computing this instruction
        if worker > 0 and not shared:
            if op == OP_END:
                return -1
            continue
        if op == OP_DMA:
            if skip[i] == 0:
                dma(row, ddr, ocm[tile])
        elif op == OP_CVT:
            cvt(row, ddr, lut_bits, tally)
        elif op == OP_LUT:
            load_table(row, ddr, tables[tile])
        elif op == OP_CONV or op == OP_FC:
            slot = slots[i]
            if slot >= 0:
                cache = (
                    raw[raw_at[slot] : raw_at[slot + 1]],
                    packed[packed_at[slot] : packed_at[slot + 1]],
                    filled[slot : slot + 1],
                )
            else:
                cache = (no_raw, no_packed, no_filled)
            if op == OP_FC:
                fc(row, frow, ocm[tile], lut, tables[tile], tally, cache)
                continue
            step = conv(
                row, frow, ocm[tile], lut, tables[tile], tally, cache, sync, worker, together, step
            )
            if step < 0:
                return -1
        elif op == OP_POOL:
            step = pool(row, ocm[tile], lut, tally, sync, worker, together, step)
            if step < 0:
                return -1
        elif op == OP_RESIZE:
            fault = resize(row, ocm[tile], lut, tally)
            if fault:
                publish(sync, workers, 1)
                return i * 8 + fault
        elif op == OP_ADD:
            step = add(row, frow, ocm[tile], lut, tables[tile], tally, sync, worker, together, step)
            if step < 0:
                return -1
        elif op == OP_SCALE:
            scale(row, frow, ocm[tile], lut, tables[tile], tally)
        elif op == OP_MUL:
            mul(row, frow, ocm[tile], lut, tables[tile], tally)
        elif op == OP_END:
            return -1
    return -1


_KNOWN = {"dma", "cvt", "lut", "conv", "pool", "resize", "fc", "add", "scale", "mul", "end"}
_missing = set(OPCODE_BY_NAME) - _KNOWN
assert not _missing, f"opcodes without a Numba kernel: {sorted(_missing)}"


PACKED, CONSTANT = 1, 2
"""Bits of a weight-cache slot's `filled` flag: its packing is there; its weights are a fixed
slice of the constant pool (constant_weights), so a run need not compare them."""


def weight_shape(ins) -> tuple[int, int] | None:
    """(outputs, steps per output) of a conv's or fc's f16 weights; None for other opcodes."""
    f = ins.fields
    if ins.opcode == "conv":
        return f["out_shape"][3], f["kernel"][0] * f["kernel"][1] * f["in_shape"][3] // f["groups"]
    if ins.opcode == "fc":
        return f["o"], f["k"]
    return None


def weight_bytes(ins) -> tuple[int, int]:
    """[start, stop) of a conv's or fc's f16 weights in its tile's OCM."""
    outs, steps = weight_shape(ins)
    return ins.fields["w_addr"], ins.fields["w_addr"] + 2 * outs * steps


def constant_weights(valid: ValidProgram, accesses: list) -> list:
    """Per instruction, for a conv whose weights are a fixed slice of the constant pool, what
    they are a copy of; else None. They are when, in program order, the bytes of its weights
    in its tile's OCM were last written by one `dma` from the constant pool into a dense OCM
    range (no later write to that tile's OCM touched them) and no instruction writes the pool:
    the pool is the program's own and is loaded before each run, so the weights are the same
    at every run, and the same for every conv with the same copy and offset in it.
    `accesses`: each instruction's (reads, writes) (`mrvl.sim.cycles.operands`)."""
    from mrvl.sim.simulator import memory_use

    program = valid.program
    pool = (program.const_base, program.const_base + len(program.consts))
    found: list = [None] * len(valid.code)
    if not memory_use(valid).pool_kept:
        return found  # the program writes its constant pool
    copies_by_tile: dict[int, list] = {}  # tile -> [(start, stop, the copy)] of OCM bytes
    for index, (ins, (reads, writes)) in enumerate(zip(valid.code, accesses, strict=True)):
        copies = copies_by_tile.setdefault(ins.tile, [])
        if ins.opcode in ("conv", "fc"):
            start, stop = weight_bytes(ins)
            for lo, hi, copy in copies:
                if lo <= start and stop <= hi:
                    found[index] = (copy, start - lo)
        for w in writes:
            if w.space == isa.MemSpace.OCM:
                lo, hi = w.hull
                copies[:] = [c for c in copies if c[1] <= lo or hi <= c[0]]
        if ins.opcode == "dma" and reads and writes:
            (r,), (w,) = reads, writes
            lo, hi = r.hull
            in_pool = r.space == isa.MemSpace.DDR and pool[0] <= lo and hi <= pool[1]
            if in_pool and w.space == isa.MemSpace.OCM and not w.dims:
                f = ins.fields
                copy = (f["src_addr"], tuple(f["src_strides"]), tuple(f["box"]),
                        tuple(f["dst_strides"]), f["elem_bytes"])  # fmt: skip
                copies.append((*w.hull, copy))
    return found


def weight_only_dmas(
    valid: ValidProgram, accesses: list, slots: np.ndarray, constant: np.ndarray
) -> np.ndarray:
    """Per instruction, 1 for a DDR-to-OCM `dma` whose bytes no instruction reads except as
    the weights of convs with a constant slot (`constant_weights`). Once every such slot is
    packed, those convs read their packing and not the bytes, so a run may skip the DMA: no
    instruction can tell, and OCM is not an output. A read of any other kind, even of part of
    the bytes, keeps the DMA. Bytes stop being the DMA's when a dense write covers them (a
    strided write removes none: that only keeps more DMAs); a read counts as its whole hull."""
    weight_only = np.zeros(len(valid.code), np.uint8)
    watched: dict[int, list] = {}  # tile -> [(start, stop, dma index)] of bytes DMAs wrote
    read_otherwise: set[int] = set()
    for index, (ins, (reads, writes)) in enumerate(zip(valid.code, accesses, strict=True)):
        ranges = watched.setdefault(ins.tile, [])
        slot = slots[index]
        weights = weight_bytes(ins) if slot >= 0 and constant[slot] else None
        for r in reads:
            if r.space != isa.MemSpace.OCM or r.hull == weights:
                continue
            lo, hi = r.hull
            read_otherwise.update(d for start, stop, d in ranges if start < hi and lo < stop)
        for w in writes:
            if w.space == isa.MemSpace.OCM and not w.dims:  # bytes it wrote are not the DMAs'
                lo, hi = w.hull
                ranges[:] = [
                    piece
                    for start, stop, d in ranges
                    for piece in ((start, min(stop, lo), d), (max(start, hi), stop, d))
                    if piece[0] < piece[1]
                ]
        loads = ins.opcode == "dma" and reads and reads[0].space == isa.MemSpace.DDR
        if loads and writes and writes[0].space == isa.MemSpace.OCM:
            ranges.append((*writes[0].hull, index))
            weight_only[index] = 1
    for index in read_otherwise:
        weight_only[index] = 0
    return weight_only


def single_tile(valid: ValidProgram) -> tuple[ValidProgram, np.ndarray] | None:
    """None when no `dma` of `valid` multicasts; else the program the compiled call runs
    instead, with each multicast `dma` (`dst_tiles`, docs/isa.md) as one single-tile dma per
    destination tile, in ascending tile order, and per row the index of the instruction of
    `valid` it comes from. The copies read the same DDR bytes, which none of them writes, so
    together they store what the multicast stores; each is a dma that validation accepts on
    its tile, so the kernels and the weight cache (`constant_weights`, `weight_only_dmas`,
    which reason per tile) need no notion of a multicast."""
    if not any(ins.opcode == "dma" and ins.fields["dst_tiles"] for ins in valid.code):
        return None
    code, origin = [], []
    for index, ins in enumerate(valid.code):
        if ins.opcode == "dma" and ins.fields["dst_tiles"]:
            single = {**ins.fields, "dst_tiles": 0}
            copies = [
                dataclasses.replace(ins, tile=t, fields=single) for t in isa.destination_tiles(ins)
            ]
        else:
            copies = [ins]
        code += copies
        origin += [index] * len(copies)
    words = encode_words(code)
    rows = ValidProgram(valid.program, valid.target, tuple(code), words, words.view(np.float32))
    return rows, np.array(origin, np.int64)


class WeightCache:
    """The packed fp32 weights (pack_weights) of a program's convs and fcs, kept from run to
    run.

    Packing reads every weight of every conv and costs more than the multiply-adds of the
    layers with few output positions (and of an fc at batch 1). Each conv with one run of
    output channels (groups=1, at least NARROW channels) and each fc, its weights at an even
    address, gets a slot holding the f16 bits it packed and their packing. Weights that are a
    fixed slice of the constant pool (`constant_weights`: the compiler's case) are packed once
    and used as they are; for any other a run compares the weights in OCM with the bits (one
    vectorized pass over 2-byte values instead of a conversion and a scattered write per
    weight, `packing_stale`) and repacks only if they differ, so the cache is right whatever
    the weights are. Convs of one ONNX node and first
    output channel that read the same OCM range with the same shape and the same copy of the
    pool share a slot, whatever their tile (the row pieces of one slice of a layer's output
    channels, which the tiles compute one after another with the same weights: one packing,
    read while it is still in the CPU's caches); other slices, input-channel blocks and
    layers get their own, or they would repack each other's.

    It also holds what the engine runs, made once per program: `rows`, the program with each
    multicast `dma` as single-tile ones (`single_tile`), and `origin`, the instruction each
    row comes from; both None when the program has no multicast and runs its own rows (the
    cache must not hold the program itself: `_weight_caches` keeps the cache until the
    program dies). Its per-instruction arrays (slots, `weight_only`) are per row."""

    def __init__(self, valid: ValidProgram):
        self.lock = threading.Lock()
        self.rows, self.origin = single_tile(valid) or (None, None)
        if self.rows is not None:
            valid = self.rows
        slots = np.full(len(valid.code), -1, np.int64)
        from mrvl.sim.cycles import operands  # docs/isa.md §3's operands, shared with the model

        raw_at, packed_at, keys, constant = [0], [0], {}, []
        accesses = [operands(ins) for ins in valid.code]
        sources = constant_weights(valid, accesses)
        for index, ins in enumerate(valid.code):
            f = ins.fields
            if ins.opcode == "fc":
                out_channels, steps = weight_shape(ins)
                key = (ins.loc, "fc", f["w_addr"], out_channels, steps, sources[index])
            elif ins.opcode == "conv" and f["groups"] == 1:
                out_channels, steps = weight_shape(ins)
                if out_channels < NARROW:
                    continue
                kernel = tuple(f["kernel"])
                key = (ins.loc, f["w_addr"], f["oc0"], out_channels, kernel, steps, sources[index])
            else:
                continue
            if f["w_addr"] % 2:
                continue
            if key not in keys:
                keys[key] = len(keys)
                constant.append(sources[index] is not None)
                raw_at.append(raw_at[-1] + out_channels * steps)
                packed_at.append(packed_at[-1] + int(packed_size(out_channels, steps)))
            slots[index] = keys[key]
        self.arrays = (
            slots,
            np.array(raw_at, np.int64),
            np.array(packed_at, np.int64),
            np.zeros(raw_at[-1], np.uint16),
            np.zeros(packed_at[-1], np.float32),
            np.array(constant, np.uint8) * np.uint8(CONSTANT),
        )
        self.weight_only = weight_only_dmas(valid, accesses, slots, np.array(constant, np.bool_))
        self.warm = False
        """Whether a whole run has used the cache, packing every slot (programs have no
        branches: each run executes every instruction up to the first `end`)."""

    def skip(self) -> np.ndarray:
        """Per instruction, 1 for a DMA a run may skip: one whose bytes only constant-slot
        convs read (`weight_only_dmas`), once a run has packed every slot."""
        return self.weight_only if self.warm else np.zeros_like(self.weight_only)

    @staticmethod
    def none(valid: ValidProgram) -> tuple:
        """The arrays of an empty cache (every slot -1): for a run while another holds the
        lock."""
        return (
            np.full(len(valid.words), -1, np.int64),
            np.zeros(1, np.int64),
            np.zeros(1, np.int64),
            np.zeros(0, np.uint16),
            np.zeros(0, np.float32),
            np.zeros(0, np.uint8),
        )


_weight_caches: dict[int, tuple[weakref.ref, WeightCache]] = {}
_weight_caches_lock = threading.Lock()


def weight_cache(valid: ValidProgram) -> WeightCache:
    """The WeightCache of `valid`, made on its first run and dropped with it."""
    key = id(valid)
    with _weight_caches_lock:
        entry = _weight_caches.get(key)
        if entry is not None and entry[0]() is valid:
            return entry[1]
        cache = WeightCache(valid)
        _weight_caches[key] = (weakref.ref(valid, lambda _: _weight_caches.pop(key, None)), cache)
        return cache


THREADS_ENV = "MRVL_SIM_THREADS"
"""Environment variable: how many threads a run uses (default: the CPUs this process may use);
read at each run. Any number gives the same bits."""


def threads() -> int:
    """The threads of a run: $MRVL_SIM_THREADS, else the CPUs this process may run on."""
    value = os.environ.get(THREADS_ENV)
    if value is None:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise SimulatorInputError(f"${THREADS_ENV}={value!r} is not a positive number of threads")
    return count


_helpers: ThreadPoolExecutor | None = None
_helpers_lock = threading.Lock()


def _helper_pool(count: int) -> ThreadPoolExecutor:
    """The threads that join thread 0 of a run, kept from run to run."""
    global _helpers
    with _helpers_lock:
        if _helpers is None or _helpers._max_workers < count:
            _helpers = ThreadPoolExecutor(count, thread_name_prefix="mrvl-sim")
        return _helpers


def execute(
    valid: ValidProgram,
    memory: Memory,
    stats: RunStats | None = None,
    *,
    workers: int | None = None,
) -> None:
    """Run a validated program on `memory`; `stats` (reset by the caller) gets each
    instruction's counts. `workers`: the threads to run it on (default: `threads()`)."""
    workers = threads() if workers is None else workers
    cache = weight_cache(valid)
    # valid's instructions, a multicast dma as one dma per tile
    rows = valid if cache.rows is None else cache.rows
    counts = np.zeros((len(rows.words), 2), np.int64)
    owned = cache.lock.acquire(blocking=False)  # another thread's run may be filling it
    arrays = cache.arrays if owned else WeightCache.none(rows)
    skip = cache.skip() if owned else np.zeros(len(rows.words), np.uint8)
    sync = np.zeros(workers + 1, np.int64)
    args = (rows.words, rows.floats, memory.ddr, memory.ocm, memory.tables)
    args += (F16_TO_F32, F16_TO_F32_BITS)
    try:
        joined = []
        if workers > 1:
            pool = _helper_pool(workers - 1)
            for worker in range(1, workers):
                mine = np.zeros_like(counts)
                joined.append(
                    (pool.submit(run_program, *args, mine, arrays, skip, sync, worker), mine)
                )
        try:
            status = run_program(*args, counts, arrays, skip, sync, 0)
            if status < 0:
                cache.warm = owned or cache.warm  # every conv ran: its slot is packed
        finally:
            sync[workers] = 1  # the helpers that wait for thread 0 stop waiting
            for future, mine in joined:
                future.result()
                counts += mine
    finally:
        if owned:
            cache.lock.release()
    if cache.origin is not None:  # rows back to instructions
        counts, per_row = np.zeros((len(valid.code), 2), np.int64), counts
        np.add.at(counts, cache.origin, per_row)
    if stats is not None:
        stats.saturated[:] = counts[:, 0]
        stats.nans[:] = counts[:, 1]
    if status >= 0:
        index, fault = divmod(int(status), 8)
        if cache.origin is not None:
            index = int(cache.origin[index])
        ins = valid.code[index]
        f = ins.fields
        what = "row table" if fault <= 2 else "column table"
        lo, size = (f["row0"], f["in_shape"][1]) if fault <= 2 else (0, f["in_shape"][2])
        if fault in (TABLE_NOT_INTEGER, TABLE_NOT_INTEGER + 2):
            problem = f"{what} indices are not integers"
        else:
            problem = f"{what} indices fall outside [{lo}, {lo + size})"
        raise SimulatorError(f"{describe(valid.program, index, ins)}: {problem}")
