"""The Numba engine's int8 instructions (docs/isa.md, the int8 instructions and "Numerics
(int8 mode)"): `quant`, `dequant`, `qconv` in plain loops, `requant` and `qmul`, and which
int8 instructions the engine's threads share (`shared_int8`). `qconv` runs on the blocks of
`int8_conv.py`, `qadd`, `qpool` and `qfc` in `int8_spans.py`, `qresize` in `int8_resize.py`.

Integer sums are exact in int64 and wrapped to int32 once, which is the ISA's int32
accumulation modulo 2^32 whatever the order: so these loops run in whatever order is fast and
still give the reference interpreter's bytes. `dispatch.py` registers the kernels (through
`int8_spans.INT8_KERNELS`); each has the dispatch signature.
"""

from __future__ import annotations

import numpy as np

from mrvl.isa import OPCODE_BY_NAME
from mrvl.isa_int8 import RQ_SHIFT_MAX, RQ_SHIFT_MIN
from mrvl.sim.engines.numba.dma import gather_permuted, permute
from mrvl.sim.engines.numba.fields import F32
from mrvl.sim.engines.numba.int8_mac import QMAC_SPEEDUP
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.numerics import load_f16, load_f32, store_f16, store_f32
from mrvl.sim.validate import field_words

_quant = field_words(OPCODE_BY_NAME["quant"])
_dequant = field_words(OPCODE_BY_NAME["dequant"])
_qconv = field_words(OPCODE_BY_NAME["qconv"])
_qpool = field_words(OPCODE_BY_NAME["qpool"])
_qfc = field_words(OPCODE_BY_NAME["qfc"])
_qadd = field_words(OPCODE_BY_NAME["qadd"])
_requant = field_words(OPCODE_BY_NAME["requant"])
_qmul = field_words(OPCODE_BY_NAME["qmul"])

Q_SRC_ADDR, Q_SRC_DTYPE, Q_SRC_SHAPE = _quant["src_addr"], _quant["src_dtype"], _quant["src_shape"]
Q_DST_ADDR, Q_PERM, Q_SCALE, Q_ZP = (
    _quant["dst_addr"],
    _quant["perm"],
    _quant["scale"],
    _quant["zp"],
)
DQ_SRC_ADDR, DQ_SRC_SHAPE, DQ_DST_ADDR = (
    _dequant["src_addr"],
    _dequant["src_shape"],
    _dequant["dst_addr"],
)
DQ_DST_DTYPE, DQ_PERM = _dequant["dst_dtype"], _dequant["perm"]
DQ_SCALE, DQ_ZP = _dequant["scale"], _dequant["zp"]

QC_IN_ADDR, QC_IN_SHAPE, QC_ROW0 = _qconv["in_addr"], _qconv["in_shape"], _qconv["row0"]
QC_OUT_ADDR, QC_OUT_SHAPE, QC_OROW0 = _qconv["out_addr"], _qconv["out_shape"], _qconv["orow0"]
QC_KERNEL, QC_STRIDE, QC_PAD = _qconv["kernel"], _qconv["stride"], _qconv["pad"]
QC_DILATION, QC_GROUPS = _qconv["dilation"], _qconv["groups"]
QC_OC0, QC_OC_TOTAL = _qconv["oc0"], _qconv["oc_total"]
QC_W_ADDR, QC_B_ADDR = _qconv["w_addr"], _qconv["b_addr"]
QC_IN_ZP, QC_OUT_ZP, QC_RQ_ADDR = _qconv["in_zp"], _qconv["out_zp"], _qconv["rq_addr"]
QC_CLAMP, QC_LUT_ADDR = _qconv["clamp"], _qconv["lut_addr"]
QC_ACC_ADDR, QC_ACC_OUT = _qconv["acc_addr"], _qconv["acc_out"]

QP_IN_ADDR, QP_IN_SHAPE, QP_ROW0 = _qpool["in_addr"], _qpool["in_shape"], _qpool["row0"]
QP_OUT_ADDR, QP_OUT_SHAPE, QP_OROW0 = _qpool["out_addr"], _qpool["out_shape"], _qpool["orow0"]
QP_KERNEL, QP_STRIDE, QP_PAD = _qpool["kernel"], _qpool["stride"], _qpool["pad"]
QP_MODE, QP_IN_HW, QP_PAD_END = _qpool["mode"], _qpool["in_hw"], _qpool["pad_end"]
QP_COUNT_INCLUDE_PAD = _qpool["count_include_pad"]
QP_IN_ZP, QP_OUT_ZP, QP_RQ = _qpool["in_zp"], _qpool["out_zp"], _qpool["rq"]

QF_IN_ADDR, QF_N, QF_K, QF_O = _qfc["in_addr"], _qfc["n"], _qfc["k"], _qfc["o"]
QF_W_ADDR, QF_B_ADDR, QF_OUT_ADDR = _qfc["w_addr"], _qfc["b_addr"], _qfc["out_addr"]
QF_IN_ZP, QF_OUT_ZP, QF_RQ_ADDR = _qfc["in_zp"], _qfc["out_zp"], _qfc["rq_addr"]
QF_CLAMP, QF_LUT_ADDR = _qfc["clamp"], _qfc["lut_addr"]

QA_A_ADDR, QA_B_ADDR, QA_OUT_ADDR = _qadd["a_addr"], _qadd["b_addr"], _qadd["out_addr"]
QA_COUNT, QA_A_ZP, QA_B_ZP, QA_OUT_ZP = (
    _qadd["count"],
    _qadd["a_zp"],
    _qadd["b_zp"],
    _qadd["out_zp"],
)
QA_A_RQ, QA_B_RQ, QA_OUT_RQ = _qadd["a_rq"], _qadd["b_rq"], _qadd["out_rq"]
QA_CLAMP, QA_LUT_ADDR = _qadd["clamp"], _qadd["lut_addr"]

RQ_IN_ADDR, RQ_OUT_ADDR, RQ_COUNT = _requant["in_addr"], _requant["out_addr"], _requant["count"]
RQ_IN_ZP, RQ_OUT_ZP, RQ_RQ = _requant["in_zp"], _requant["out_zp"], _requant["rq"]
RQ_CLAMP, RQ_LUT_ADDR = _requant["clamp"], _requant["lut_addr"]

QM_A_ADDR, QM_B_ADDR, QM_OUT_ADDR = _qmul["a_addr"], _qmul["b_addr"], _qmul["out_addr"]
QM_COUNT, QM_CHANNELS = _qmul["count"], _qmul["channels"]
QM_A_ZP, QM_B_ZP, QM_OUT_ZP = _qmul["a_zp"], _qmul["b_zp"], _qmul["out_zp"]
QM_RQ, QM_CLAMP, QM_LUT_ADDR = _qmul["rq"], _qmul["clamp"], _qmul["lut_addr"]


OP_QCONV = OPCODE_BY_NAME["qconv"].opcode
OP_QADD = OPCODE_BY_NAME["qadd"].opcode
OP_QPOOL = OPCODE_BY_NAME["qpool"].opcode
OP_QFC = OPCODE_BY_NAME["qfc"].opcode
SHARED_QCONV_MACS = int((1 << 19) * QMAC_SPEEDUP)
"""The fewest multiply-adds of a qconv (groups = 1) whose output positions the engine's threads
share (`shared_qconv`): as many seconds of work as sharing.SHARED_MACS (2^19) of the fp16
conv's (`int8_mac.QMAC_SPEEDUP` times as many: 2^21 with VNNI, 2^19 on AVX2)."""
SHARED_QDEPTHWISE_MACS = 1 << 17
"""The fewest multiply-adds of a depthwise qconv whose output positions the threads share."""
SHARED_QVALUES = 1 << 15
"""The fewest output values of a `qadd`, or output values times taps of a `qpool`, that the
threads share."""
SHARED_QFC_MACS = 1 << 16
"""The fewest multiply-adds of a `qfc` whose outputs the threads share."""


@jit
def is_depthwise(row):
    """Whether a qconv is depthwise: one input channel a group, one output channel each."""
    return row[QC_IN_SHAPE + 3] == row[QC_GROUPS] and row[QC_OC_TOTAL] == row[QC_GROUPS]


@jit
def shared_qconv(row, workers):
    """Whether the `workers` threads share this qconv (`int8_conv.qconv_kernel`): one group,
    or depthwise (`is_depthwise`)."""
    if workers <= 1:
        return False
    positions = row[QC_OUT_SHAPE] * row[QC_OUT_SHAPE + 1] * row[QC_OUT_SHAPE + 2]
    taps = row[QC_KERNEL] * row[QC_KERNEL + 1]
    if row[QC_GROUPS] == 1:
        return positions * taps * row[QC_IN_SHAPE + 3] * row[QC_OUT_SHAPE + 3] >= SHARED_QCONV_MACS
    return is_depthwise(row) and positions * taps * row[QC_OUT_SHAPE + 3] >= SHARED_QDEPTHWISE_MACS


@jit
def shared_int8(op, row, workers):
    """Whether the `workers` threads share this instruction, if it is an int8 one: a qconv
    (`shared_qconv`), a qadd of SHARED_QVALUES values, a qpool of two output positions and
    SHARED_QVALUES values times taps, or a qfc of SHARED_QFC_MACS (`int8_spans.py`)."""
    if workers <= 1:
        return False
    if op == OP_QCONV:
        return shared_qconv(row, workers)
    if op == OP_QADD:
        return row[QA_COUNT] >= SHARED_QVALUES
    if op == OP_QPOOL:
        positions = row[QP_OUT_SHAPE] * row[QP_OUT_SHAPE + 1] * row[QP_OUT_SHAPE + 2]
        values = positions * row[QP_OUT_SHAPE + 3] * row[QP_KERNEL] * row[QP_KERNEL + 1]
        return positions >= 2 and values >= SHARED_QVALUES
    if op == OP_QFC:
        return row[QF_N] * row[QF_K] * row[QF_O] >= SHARED_QFC_MACS
    return False


# ------------------------------------------------------------------------------- arithmetic


@jit
def requantize(v, multiplier, shift):
    """round(v * multiplier / 2^(31 - shift)), ties toward +inf, in int64; shift clamped into
    [RQ_SHIFT_MIN, RQ_SHIFT_MAX] (docs/isa.md §4b)."""
    s = min(max(np.int64(shift), RQ_SHIFT_MIN), RQ_SHIFT_MAX)
    right = 31 - s
    return (np.int64(v) * np.int64(multiplier) + (np.int64(1) << (right - 1))) >> right


@jit
def wrap_int32(v):
    """An int64 sum modulo 2^32, as a two's-complement int32 value (held in int64)."""
    return ((v + (np.int64(1) << 31)) & np.int64(0xFFFFFFFF)) - (np.int64(1) << 31)


@jit
def load_i32(buf, addr, count):
    """int64[count] from the little-endian int32 values at buf[addr:]."""
    out = np.empty(count, np.int64)
    if addr % 4 == 0:
        values = buf[addr : addr + 4 * count].view(np.int32)
        for i in range(count):
            out[i] = values[i]
        return out
    for i in range(count):
        p = addr + 4 * i
        u = (
            np.int64(buf[p])
            | (np.int64(buf[p + 1]) << 8)
            | (np.int64(buf[p + 2]) << 16)
            | (np.int64(buf[p + 3]) << 24)
        )
        out[i] = u - (np.int64(1) << 32) if u >= (np.int64(1) << 31) else u
    return out


@jit
def store_i32(buf, addr, values):
    """Store int64 `values` (already int32 values) at buf[addr:] as little-endian int32."""
    for i in range(values.size):
        u = values[i] & 0xFFFFFFFF
        for e in range(4):
            buf[addr + 4 * i + e] = np.uint8((u >> (8 * e)) & 0xFF)


@jit
def load_i8(buf, addr, count):
    """int64[count] from the int8 values at buf[addr:]."""
    out = np.empty(count, np.int64)
    raw = buf[addr : addr + count].view(np.int8)
    for i in range(count):
        out[i] = raw[i]
    return out


@jit
def finish(y, lo, hi, ocm, lut_addr):
    """An int8 result's last steps: the clamp [lo, hi], then the table at lut_addr (or -1)."""
    if y < lo:
        y = np.int64(lo)
    elif y > hi:
        y = np.int64(hi)
    if lut_addr != -1:
        t = np.int64(ocm[lut_addr + y + 128])
        y = t - 256 if t >= 128 else t
    return y


@jit
def table_copy(ocm, lut_addr):
    """(the 256-entry table at lut_addr, copied, and 0), or (an empty array, -1) with
    lut_addr = -1: the reference interpreter reads an instruction's table before it stores
    any result, so a result that overwrites the table must not change later lookups. For
    `finish(y, lo, hi, table, lut)` after `table, lut = table_copy(ocm, lut_addr)`."""
    if lut_addr == -1:
        return np.zeros(0, np.uint8), np.int64(-1)
    return ocm[lut_addr : lut_addr + 256].copy(), np.int64(0)


@jit
def store_i8(buf, addr, value):
    buf[addr] = np.uint8(value & 0xFF)


# ------------------------------------------------------------------------- the instructions


ROUND_HALF_EVEN = np.float32(1.5 * 2**23)
"""Added to and taken from an fp32 value of size at most 2^22, it rounds it to the nearest
integer, ties to even (the fp32 addition's own rounding): `np.rint` without a call."""


@jit
def quantize_value(x, scale, zp):
    """The `quant` rule on one fp32 value: saturate(round_half_even(x / scale) + zp); NaN ->
    -128. No branch and no call (a NaN fails both comparisons and takes -1024), so a loop of
    it vectorizes."""
    q = x / scale  # both float32: one IEEE fp32 division
    q = q if q >= np.float32(-1024.0) else np.float32(-1024.0)
    q = q if q <= np.float32(1024.0) else np.float32(1024.0)
    v = np.int64(np.int32((q + ROUND_HALF_EVEN) - ROUND_HALF_EVEN)) + zp  # an fp32 -> int32
    return min(max(v, -128), 127)


@jit
def _quant_kernel(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    """`quant`: every value quantized in the source's order (a loop that vectorizes), then the
    bytes moved into the destination's order (`dma.permute`; the source is read whole
    first)."""
    ddr = machine[0]
    shape = row[Q_SRC_SHAPE : Q_SRC_SHAPE + 4].astype(np.int64)
    perm = row[Q_PERM : Q_PERM + 4]
    count = shape[0] * shape[1] * shape[2] * shape[3]
    src = np.int64(row[Q_SRC_ADDR])
    source = (
        load_f32(ddr, src, count)
        if row[Q_SRC_DTYPE] == F32
        else load_f16(ddr, src, count, machine[3])
    )
    scale, zp, dst = frow[Q_SCALE], np.int64(row[Q_ZP]), np.int64(row[Q_DST_ADDR])
    quantized = np.empty(count, np.uint8)
    for k in range(count):
        quantized[k] = np.uint8(quantize_value(source[k], scale, zp) & 0xFF)
    permute(quantized, shape, perm, ddr[dst : dst + count])
    return 0


@jit
def _dequant_kernel(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    ddr = machine[0]
    shape = row[DQ_SRC_SHAPE : DQ_SRC_SHAPE + 4].astype(np.int64)
    perm = row[DQ_PERM : DQ_PERM + 4]
    count = shape[0] * shape[1] * shape[2] * shape[3]
    source = load_i8(ddr, np.int64(row[DQ_SRC_ADDR]), count)
    permuted = np.empty(count, np.int64)
    gather_permuted(source, shape, perm, permuted)
    scale, zp = frow[DQ_SCALE], np.int64(row[DQ_ZP])
    values = np.empty(count, np.float32)
    for k in range(count):
        values[k] = np.float32(permuted[k] - zp) * scale  # one fp32 multiply
    if row[DQ_DST_DTYPE] == F32:
        store_f32(ddr, np.int64(row[DQ_DST_ADDR]), values)
    else:
        store_f16(ddr, np.int64(row[DQ_DST_ADDR]), values, tally)
    return 0


@jit
def _accumulate_taps(x, wt, acc, geometry, group_base, broadcast):
    """acc[pixel, o] += sum over the taps inside the window and the group's channels of
    x * wt, in int32 arrays that wrap modulo 2^32 (the ISA's accumulator exactly, in any
    order). Vectorized across output channels: each (tap, channel) step adds a row of
    weights, scaled by one input value when `broadcast` (one group), else by the value of
    each channel's group (gathered through `group_base`)."""
    n, ih, iw, c, oh, ow, kh_count, kw_count, sh, sw, rows_at, cols_at, dh, dw, cg = geometry
    oc = acc.shape[1]
    for b in range(n):
        for r in range(oh):
            rows0 = r * sh + rows_at
            for q in range(ow):
                cols0 = q * sw + cols_at
                out = acc[(b * oh + r) * ow + q]
                for kh in range(kh_count):
                    wr = rows0 + kh * dh
                    if wr < 0 or wr >= ih:
                        continue
                    for kw in range(kw_count):
                        wc = cols0 + kw * dw
                        if wc < 0 or wc >= iw:
                            continue
                        pixel = ((b * ih + wr) * iw + wc) * c
                        taps = wt[kh, kw]
                        for ci in range(cg):
                            weights = taps[ci]
                            if broadcast:
                                v = x[pixel + ci]
                                for o in range(oc):
                                    out[o] += v * weights[o]
                            else:
                                for o in range(oc):
                                    out[o] += x[pixel + group_base[o] + ci] * weights[o]


@jit
def qconv_kernel_loops(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    """`qconv` in plain loops, for any grouping (`int8_conv.py` runs groups = 1 on its
    blocks, and the others here): the window less in_zp (a padding tap would read in_zp and add 0, so it is skipped),
    the weights as [KH, KW, Cg, OCt], the int32 start (partial sums or bias), the taps
    (`_accumulate_taps`), then the int32 result or its requantization per channel."""
    ocm = machine[1][row[1]]
    n, ih, iw, c = (
        row[QC_IN_SHAPE],
        row[QC_IN_SHAPE + 1],
        row[QC_IN_SHAPE + 2],
        row[QC_IN_SHAPE + 3],
    )
    oh, ow, oc = row[QC_OUT_SHAPE + 1], row[QC_OUT_SHAPE + 2], row[QC_OUT_SHAPE + 3]
    kh_count, kw_count = row[QC_KERNEL], row[QC_KERNEL + 1]
    groups, in_zp = row[QC_GROUPS], np.int32(row[QC_IN_ZP])
    cg = c // groups
    per_group = row[QC_OC_TOTAL] // groups
    raw = ocm[row[QC_IN_ADDR] : row[QC_IN_ADDR] + n * ih * iw * c].view(np.int8)
    x = np.empty(raw.size, np.int32)
    for k in range(raw.size):
        x[k] = np.int32(raw[k]) - in_zp
    w = ocm[row[QC_W_ADDR] : row[QC_W_ADDR] + oc * kh_count * kw_count * cg].view(np.int8)
    wt = np.empty((kh_count, kw_count, cg, oc), np.int32)
    for o in range(oc):
        for kh in range(kh_count):
            for kw in range(kw_count):
                for ci in range(cg):
                    wt[kh, kw, ci, o] = w[((o * kh_count + kh) * kw_count + kw) * cg + ci]
    pixels = n * oh * ow
    acc = np.empty((pixels, oc), np.int32)
    acc_addr, b_addr = row[QC_ACC_ADDR], row[QC_B_ADDR]
    if acc_addr != -1:
        start = load_i32(ocm, np.int64(acc_addr), pixels * oc)
        for k in range(pixels * oc):
            acc[k // oc, k % oc] = start[k]
    else:
        bias = load_i32(ocm, np.int64(b_addr), oc) if b_addr != -1 else np.zeros(oc, np.int64)
        for p in range(pixels):
            for o in range(oc):
                acc[p, o] = bias[o]
    group_base = np.empty(oc, np.int64)
    for o in range(oc):
        group_base[o] = ((row[QC_OC0] + o) // per_group) * cg
    rows_at = row[QC_OROW0] * row[QC_STRIDE] - row[QC_PAD] - row[QC_ROW0]
    geometry = (
        n, ih, iw, c, oh, ow, kh_count, kw_count, row[QC_STRIDE], row[QC_STRIDE + 1],
        rows_at, -row[QC_PAD + 1], row[QC_DILATION], row[QC_DILATION + 1], cg,
    )  # fmt: skip
    _accumulate_taps(x, wt, acc, geometry, group_base, groups == 1)
    out = np.int64(row[QC_OUT_ADDR])
    flat = acc.reshape(pixels * oc)
    if row[QC_ACC_OUT]:
        if out % 4 == 0:
            ocm[out : out + 4 * flat.size].view(np.int32)[:] = flat
        else:
            store_i32(ocm, out, flat.astype(np.int64))
        return 0
    pairs = load_i32(ocm, np.int64(row[QC_RQ_ADDR]), 2 * oc)
    lo, hi, lut, out_zp = row[QC_CLAMP], row[QC_CLAMP + 1], row[QC_LUT_ADDR], row[QC_OUT_ZP]
    table, lut = table_copy(ocm, lut)
    for k in range(flat.size):
        o = k % oc
        y = out_zp + requantize(flat[k], pairs[2 * o], pairs[2 * o + 1])
        store_i8(ocm, out + k, finish(y, lo, hi, table, lut))
    return 0


@jit
def rescale_terms(multiplier, shift):
    """(multiplier, 2^(r - 1), r) with which an operand's term `requantize((v - zp) <<
    QADD_LEFT_SHIFT, multiplier, shift)` is `(((v - zp) << QADD_LEFT_SHIFT) * multiplier +
    2^(r - 1)) >> r`: both factors are int32 values ((v - zp)·2^20 < 2^28, a multiplier below
    2^31), so their product is one signed 32 x 32 -> 64-bit multiply (VPMULDQ a lane pair on
    AVX2, which has no 64-bit multiply), exact in int64."""
    right = 31 - min(max(np.int64(shift), RQ_SHIFT_MIN), RQ_SHIFT_MAX)
    return np.int64(np.int32(multiplier)), np.int64(1) << (right - 1), right


@jit
def _requant_kernel(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    ocm = machine[1][row[1]]
    count = row[RQ_COUNT]
    x = load_i8(ocm, np.int64(row[RQ_IN_ADDR]), count)
    in_zp, out_zp = np.int64(row[RQ_IN_ZP]), row[RQ_OUT_ZP]
    lo, hi, lut = row[RQ_CLAMP], row[RQ_CLAMP + 1], row[RQ_LUT_ADDR]
    table, lut = table_copy(ocm, lut)
    out = np.int64(row[RQ_OUT_ADDR])
    for k in range(count):
        y = out_zp + requantize(x[k] - in_zp, row[RQ_RQ], row[RQ_RQ + 1])
        store_i8(ocm, out + k, finish(y, lo, hi, table, lut))
    return 0


@jit
def _qmul_kernel(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    ocm = machine[1][row[1]]
    count, channels = row[QM_COUNT], row[QM_CHANNELS]
    a = load_i8(ocm, np.int64(row[QM_A_ADDR]), count)
    b = load_i8(ocm, np.int64(row[QM_B_ADDR]), channels if channels > 0 else count)
    a_zp, b_zp, out_zp = np.int64(row[QM_A_ZP]), np.int64(row[QM_B_ZP]), row[QM_OUT_ZP]
    lo, hi, lut = row[QM_CLAMP], row[QM_CLAMP + 1], row[QM_LUT_ADDR]
    table, lut = table_copy(ocm, lut)
    out = np.int64(row[QM_OUT_ADDR])
    for k in range(count):
        j = k % channels if channels > 0 else k
        y = out_zp + requantize((a[k] - a_zp) * (b[j] - b_zp), row[QM_RQ], row[QM_RQ + 1])
        store_i8(ocm, out + k, finish(y, lo, hi, table, lut))
    return 0


INT8_KERNELS = {
    "quant": _quant_kernel,
    "dequant": _dequant_kernel,
    "requant": _requant_kernel,
    "qmul": _qmul_kernel,
}
"""The kernels of the int8 opcodes no two threads share; `int8_spans.INT8_KERNELS` adds
`qadd`, `qpool` and `qfc` to them."""
