"""The reference interpreter's int8 kernels (docs/isa.md, the int8 instructions and "Numerics
(int8 mode)"), in numpy, as the specification reads.

Integer arithmetic is exact and, wrapped to 32 bits, associative: so unlike the fp16 kernels
these need not follow a reduction order, and they sum whole tensors at once in int64 before
wrapping. `reference.py` registers `INT8_KERNELS` with its other kernels.
"""

from __future__ import annotations

import numpy as np

from mrvl.int8 import dequantize_linear, quantize_linear, requantize
from mrvl.isa import DTYPE_NUMPY, DType, Instruction, MemSpace, PoolMode
from mrvl.isa_int8 import INT8_LUT_ENTRIES, QADD_LEFT_SHIFT
from mrvl.sim.engines.reference_int8_bmm import qbmm
from mrvl.sim.engines.reference_int8_resize import qresize
from mrvl.sim.memory import Memory
from mrvl.sim.numerics import F16Counts, f16_counts, round_to_f16

OCM = MemSpace.OCM
I8, I32 = "int8", "int32"


def wrap_int32(values: np.ndarray) -> np.ndarray:
    """int64 values modulo 2^32 as two's-complement int32 (the accumulator's wrap-around)."""
    return ((values + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def _finish(memory: Memory, ins: Instruction, values: np.ndarray) -> np.ndarray:
    """int8: the last steps of every int8 result from its requantized value plus out_zp:
    saturation to the clamp [lo, hi] (inside [-128, 127]), then the int8 table at lut_addr."""
    f = ins.fields
    lo, hi = f["clamp"]
    y = np.clip(values, lo, hi)
    if f["lut_addr"] != -1:
        table = memory.read(OCM, ins.tile, f["lut_addr"], I8, (INT8_LUT_ENTRIES,))
        y = table[y + 128]
    return y.astype(np.int8)


def _pairs(memory: Memory, ins: Instruction, count: int) -> tuple[np.ndarray, np.ndarray]:
    pairs = memory.read(OCM, ins.tile, ins.fields["rq_addr"], I32, (count, 2))
    return pairs[:, 0], pairs[:, 1]


def _bias(memory: Memory, ins: Instruction, count: int) -> np.ndarray:
    b_addr = ins.fields["b_addr"]
    if b_addr == -1:
        return np.zeros(count, np.int64)
    return memory.read(OCM, ins.tile, b_addr, I32, (count,)).astype(np.int64)


def _quant(memory: Memory, ins: Instruction) -> None:
    f = ins.fields
    dtype = DTYPE_NUMPY[DType(f["src_dtype"])]
    source = memory.read(MemSpace.DDR, ins.tile, f["src_addr"], dtype, tuple(f["src_shape"]))
    values = np.transpose(source, tuple(f["perm"])).astype(np.float32)  # f16 -> fp32 exact
    memory.write(
        MemSpace.DDR, ins.tile, f["dst_addr"], quantize_linear(values, f["scale"], f["zp"])
    )


def _dequant(memory: Memory, ins: Instruction) -> F16Counts | None:
    f = ins.fields
    source = memory.read(MemSpace.DDR, ins.tile, f["src_addr"], I8, tuple(f["src_shape"]))
    values = dequantize_linear(np.transpose(source, tuple(f["perm"])), f["scale"], f["zp"])
    if DType(f["dst_dtype"]) == DType.F32:
        memory.write(MemSpace.DDR, ins.tile, f["dst_addr"], values)
        return None
    memory.write(MemSpace.DDR, ins.tile, f["dst_addr"], round_to_f16(values))
    return f16_counts(values)


def _window_taps(f: dict, window: np.ndarray, dilation, fill: int):
    """For every tap (kh, kw): the window values [N, OHt, OWt, C] under it, `fill` where the
    tap falls outside the window, and the [OHt, OWt] mask of taps inside it."""
    _, height, width, _ = window.shape
    _, out_rows, out_cols, _ = f["out_shape"]
    (sh, sw), (top, left) = f["stride"], f["pad"]
    rows0 = (f["orow0"] + np.arange(out_rows)) * sh - top - f["row0"]
    cols0 = np.arange(out_cols) * sw - left
    for kh in range(f["kernel"][0]):
        rows = rows0 + kh * dilation[0]
        for kw in range(f["kernel"][1]):
            cols = cols0 + kw * dilation[1]
            inside = ((rows >= 0) & (rows < height))[:, None] & ((cols >= 0) & (cols < width))
            taps = window[:, np.clip(rows, 0, height - 1)][:, :, np.clip(cols, 0, width - 1)]
            yield kh, kw, np.where(inside[None, :, :, None], taps, fill), inside


def _qconv(memory: Memory, ins: Instruction) -> None:
    """acc = (P or bias) + sum over taps and the group's channels of (x - in_zp) * w, exact,
    wrapped to int32; then the int32 accumulator (acc_out) or the requantized int8 result."""
    f = ins.fields
    n, _, _, channels = f["in_shape"]
    out_shape = tuple(f["out_shape"])
    out_channels = out_shape[3]
    kh_count, kw_count = f["kernel"]
    groups, in_zp = f["groups"], f["in_zp"]
    cg = channels // groups
    window = memory.read(OCM, ins.tile, f["in_addr"], I8, tuple(f["in_shape"])).astype(np.int64)
    weights = memory.read(OCM, ins.tile, f["w_addr"], I8, (out_channels, kh_count, kw_count, cg))
    weights = weights.astype(np.int64)
    if f["acc_addr"] == -1:
        acc = np.broadcast_to(_bias(memory, ins, out_channels), out_shape).copy()
    else:
        acc = memory.read(OCM, ins.tile, f["acc_addr"], I32, out_shape).astype(np.int64)
    group_of = (f["oc0"] + np.arange(out_channels)) // (f["oc_total"] // groups)
    for kh, kw, taps, _ in _window_taps(f, window, f["dilation"], in_zp):
        x = taps - in_zp  # a padding tap reads in_zp: it contributes 0
        for g in np.unique(group_of):
            outs = np.flatnonzero(group_of == g)
            acc[..., outs] += x[..., g * cg : (g + 1) * cg] @ weights[outs, kh, kw, :].T
    acc = wrap_int32(acc)
    if f["acc_out"]:
        memory.write(OCM, ins.tile, f["out_addr"], acc)
        return None
    multiplier, shift = _pairs(memory, ins, out_channels)
    y = f["out_zp"] + requantize(acc, multiplier, shift)
    memory.write(OCM, ins.tile, f["out_addr"], _finish(memory, ins, y))
    return None


def _qfc(memory: Memory, ins: Instruction) -> None:
    f = ins.fields
    rows, inner, outs = f["n"], f["k"], f["o"]
    x = memory.read(OCM, ins.tile, f["in_addr"], I8, (rows, inner)).astype(np.int64)
    w = memory.read(OCM, ins.tile, f["w_addr"], I8, (outs, inner)).astype(np.int64)
    acc = wrap_int32(_bias(memory, ins, outs) + (x - f["in_zp"]) @ w.T)
    multiplier, shift = _pairs(memory, ins, outs)
    y = f["out_zp"] + requantize(acc, multiplier, shift)
    memory.write(OCM, ins.tile, f["out_addr"], _finish(memory, ins, y))


def _qadd(memory: Memory, ins: Instruction) -> None:
    f = ins.fields
    count = f["count"]
    a = memory.read(OCM, ins.tile, f["a_addr"], I8, (count,)).astype(np.int64)
    b = memory.read(OCM, ins.tile, f["b_addr"], I8, (count,)).astype(np.int64)
    scaled_a = requantize((a - f["a_zp"]) << QADD_LEFT_SHIFT, *f["a_rq"])
    scaled_b = requantize((b - f["b_zp"]) << QADD_LEFT_SHIFT, *f["b_rq"])
    y = f["out_zp"] + requantize(scaled_a + scaled_b, *f["out_rq"])
    memory.write(OCM, ins.tile, f["out_addr"], _finish(memory, ins, y))


def _requant(memory: Memory, ins: Instruction) -> None:
    f = ins.fields
    x = memory.read(OCM, ins.tile, f["in_addr"], I8, (f["count"],)).astype(np.int64)
    y = f["out_zp"] + requantize(x - f["in_zp"], *f["rq"])
    memory.write(OCM, ins.tile, f["out_addr"], _finish(memory, ins, y))


def _qmul(memory: Memory, ins: Instruction) -> None:
    """The exact product (a - a_zp) * (b[j] - b_zp) (at most 255 * 255 in magnitude),
    requantized once; with `channels` = C, element i reads b[i mod C]."""
    f = ins.fields
    count, channels = f["count"], f["channels"]
    a = memory.read(OCM, ins.tile, f["a_addr"], I8, (count,)).astype(np.int64)
    b = memory.read(OCM, ins.tile, f["b_addr"], I8, (channels or count,)).astype(np.int64)
    if channels:
        b = np.tile(b, count // channels)
    y = f["out_zp"] + requantize((a - f["a_zp"]) * (b - f["b_zp"]), *f["rq"])
    memory.write(OCM, ins.tile, f["out_addr"], _finish(memory, ins, y))


def _pool_divisors(f: dict, valid: np.ndarray) -> np.ndarray:
    """int [OHt, OWt]: an average's divisor, the valid taps or (count_include_pad) the taps
    inside the padded input."""
    if not f["count_include_pad"]:
        return valid
    (height, width), (bottom, right), (top, left) = f["in_hw"], f["pad_end"], f["pad"]
    _, out_rows, out_cols, _ = f["out_shape"]
    rows = (f["orow0"] + np.arange(out_rows)) * f["stride"][0] - top
    cols = np.arange(out_cols) * f["stride"][1] - left
    kh, kw = f["kernel"]
    row_taps = np.minimum(rows + kh, height + bottom) - np.maximum(rows, -top)
    col_taps = np.minimum(cols + kw, width + right) - np.maximum(cols, -left)
    return row_taps[:, None] * col_taps[None, :]


def _qpool(memory: Memory, ins: Instruction) -> None:
    """MAX: the largest valid tap; AVG: the sum of the valid taps' differences from in_zp,
    divided by the divisor rounding half away from zero. Then rescaled and out_zp added."""
    f = ins.fields
    window = memory.read(OCM, ins.tile, f["in_addr"], I8, tuple(f["in_shape"])).astype(np.int64)
    mode, in_zp = PoolMode(f["mode"]), f["in_zp"]
    fill = -(1 << 40) if mode == PoolMode.MAX else in_zp
    out = np.full(tuple(f["out_shape"]), fill if mode == PoolMode.MAX else 0, np.int64)
    valid = np.zeros(tuple(f["out_shape"][1:3]), np.int64)
    for _, _, taps, inside in _window_taps(f, window, (1, 1), fill):
        out = np.maximum(out, taps) if mode == PoolMode.MAX else out + (taps - in_zp)
        valid += inside
    if mode == PoolMode.MAX:
        value = out - in_zp
    else:
        divisor = _pool_divisors(f, valid)[None, :, :, None]
        magnitude = (np.abs(out) + divisor // 2) // divisor
        value = np.sign(out) * magnitude
    y = np.clip(f["out_zp"] + requantize(value, *f["rq"]), -128, 127)
    memory.write(OCM, ins.tile, f["out_addr"], y.astype(np.int8))


INT8_KERNELS = {
    "quant": _quant,
    "dequant": _dequant,
    "qconv": _qconv,
    "qpool": _qpool,
    "qfc": _qfc,
    "qadd": _qadd,
    "requant": _requant,
    "qmul": _qmul,
    "qresize": lambda memory, ins: qresize(memory, ins, _finish),
    "qbmm": lambda memory, ins: qbmm(memory, ins, _finish, wrap_int32),
}
"""The int8 opcodes' reference kernels, which `reference.py` registers."""
