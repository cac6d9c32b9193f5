"""The reference interpreter: the executable specification of the MLIP ISA (docs/isa.md).

One instruction at a time, in program order, in numpy. It is written to be read next to the
spec, not to be fast: loops run over the reduction (kernel taps, channels) in the documented
order and vectorize only across independent output elements, so every fp32 rounding happens
exactly where the spec says. Other engines must reproduce its outputs bit for bit.

It runs a `ValidProgram`: `mrvl.sim.validate` has checked every field and memory access, so
the kernels here only move and compute data. Each opcode's kernel is registered with
`@implements(opcode)`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from mrvl.isa import (
    ACT_TABLE_ENTRIES,
    CONV_CI_BLOCK,
    DTYPE_NUMPY,
    TABLE_ACTIVATIONS,
    Activation,
    BinaryMode,
    DType,
    Instruction,
    MemSpace,
    OpcodeTable,
    PoolMode,
    ReduceMode,
    bmm_shapes,
    destination_tiles,
)
from mrvl.sim.engines.reference_int8 import INT8_KERNELS
from mrvl.sim.errors import Fault, SimulatorError
from mrvl.sim.memory import Memory
from mrvl.sim.numerics import (
    F16Counts,
    activate,
    exp32,
    f16_counts,
    fp32_mac,
    fp32_max,
    round_to_f16,
    two_tap,
)
from mrvl.sim.stats import RunStats
from mrvl.sim.validate import ValidProgram, broadcast_span, describe

F16 = "float16"
F32 = "float32"

PROGRESS_AFTER_SECONDS = 2.0
"""A run still going after this long shows a progress bar, when stderr is a terminal."""

Kernel = Callable[[Memory, Instruction], F16Counts | None]
"""A kernel returns what its conversion to f16 counted (saturated values, NaNs), or None if it
converts nothing to f16."""
KERNELS = OpcodeTable("a reference kernel")
implements = KERNELS.register


# ------------------------------------------------------------------------------- the opcodes


@implements("dma")
def _dma(memory: Memory, ins: Instruction) -> None:
    f = ins.fields
    box, elem_bytes = tuple(f["box"]), f["elem_bytes"]
    if 0 in box:
        return
    # The whole source is read, once, before any destination byte is written (memmove
    # semantics).
    source = memory.box(
        MemSpace(f["src_space"]), ins.tile, f["src_addr"], tuple(f["src_strides"]), box, elem_bytes
    ).copy()
    # The same addresses in the OCM of every tile of dst_tiles (a multicast from DDR), or
    # the instruction's own tile's OCM or DDR.
    for tile in destination_tiles(ins):
        destination = memory.box(
            MemSpace(f["dst_space"]), tile, f["dst_addr"], tuple(f["dst_strides"]), box, elem_bytes
        )
        destination[...] = source


@implements("cvt")
def _cvt(memory: Memory, ins: Instruction) -> F16Counts | None:
    f = ins.fields
    src_dtype, dst_dtype = DType(f["src_dtype"]), DType(f["dst_dtype"])
    source = memory.read(
        MemSpace.DDR, ins.tile, f["src_addr"], DTYPE_NUMPY[src_dtype], tuple(f["src_shape"])
    )
    values = np.transpose(source, tuple(f["perm"]))
    counts = None
    if src_dtype == dst_dtype:
        result = values
    elif (src_dtype, dst_dtype) == (DType.F32, DType.F16):
        result, counts = round_to_f16(values), f16_counts(values)
    else:
        result = values.astype(np.float32)  # F16 -> F32, exact
    memory.write(MemSpace.DDR, ins.tile, f["dst_addr"], result)
    return counts


@implements("lut")
def _lut(memory: Memory, ins: Instruction) -> None:
    """The table goes into the tile's activation-table memory (validation has checked that the
    compute instructions using it name the same activation)."""
    table = memory.read(MemSpace.DDR, ins.tile, ins.fields["src_addr"], F16, (ACT_TABLE_ENTRIES,))
    memory.tables[ins.tile] = table.view(np.uint16)


class _Window:
    """The geometry shared by conv and pool: which window row/column each output tap reads."""

    def __init__(self, f: dict, dilation: tuple[int, int] = (1, 1)):
        self.in_shape = tuple(f["in_shape"])
        self.out_shape = tuple(f["out_shape"])
        self.kernel = tuple(f["kernel"])
        self.stride = tuple(f["stride"])
        self.dilation = tuple(dilation)
        self.pad = tuple(f["pad"])
        self.out_rows = f["orow0"] + np.arange(self.out_shape[1])  # output-tensor rows
        self.out_cols = np.arange(self.out_shape[2])
        self.row0 = f["row0"]

    def input_rows(self, kh: int) -> np.ndarray:
        """Input-tensor row read by tap row kh, per output row of the tile."""
        return self.out_rows * self.stride[0] - self.pad[0] + kh * self.dilation[0]

    def input_cols(self, kw: int) -> np.ndarray:
        return self.out_cols * self.stride[1] - self.pad[1] + kw * self.dilation[1]

    def tap(self, window: np.ndarray, kh: int, kw: int) -> tuple[np.ndarray, np.ndarray]:
        """The window values under tap (kh, kw) for every output position, +0.0 where the tap
        falls outside the window, and the [rows, cols] mask of taps inside it."""
        _, height, width, _ = window.shape
        rows = self.input_rows(kh) - self.row0
        cols = self.input_cols(kw)
        inside = ((rows >= 0) & (rows < height))[:, None] & ((cols >= 0) & (cols < width))[None, :]
        gathered = window[:, np.clip(rows, 0, height - 1)][:, :, np.clip(cols, 0, width - 1)]
        return np.where(inside[None, :, :, None], gathered, np.float32(0.0)), inside


def _bias(memory: Memory, tile: int, b_addr: int, count: int) -> np.ndarray:
    if b_addr == -1:
        return np.zeros(count, np.float32)
    return memory.read(MemSpace.OCM, tile, b_addr, F32, (count,))


def _activate(
    memory: Memory, ins: Instruction, acc: np.ndarray, channels: int = 0
) -> tuple[np.ndarray, F16Counts]:
    """The f16 result of a compute instruction from its fp32 accumulator (the last step of
    every conv, fc, add, scale and mul), and what it counted: the fused activation then the f16
    rounding, or a lookup in the tile's activation table. The accumulator's last axis is the
    channel, with `channels` PRELU slopes at act_addr."""
    f = ins.fields
    act = Activation(f["act"])
    slopes = table = None
    if act == Activation.PRELU:
        slopes = memory.read(MemSpace.OCM, ins.tile, f["act_addr"], F32, (channels,))
    elif act in TABLE_ACTIVATIONS:
        table = memory.tables[ins.tile].view(np.float16)
    return activate(acc, act, f["act_a"], f["act_b"], table=table, slopes=slopes)


@implements("conv")
def _conv(memory: Memory, ins: Instruction) -> F16Counts | None:
    f = ins.fields
    geometry = _Window(f, tuple(f["dilation"]))
    n, _, _, channels = geometry.in_shape
    _, out_rows, out_cols, out_channels = geometry.out_shape
    kh_count, kw_count = geometry.kernel
    groups, oc0, oc_total = f["groups"], f["oc0"], f["oc_total"]
    group_channels = channels // groups

    window = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, geometry.in_shape)
    window = window.astype(np.float32)
    weights = memory.read(
        MemSpace.OCM, ins.tile, f["w_addr"], F16, (out_channels, kh_count, kw_count, group_channels)
    )
    bias = _bias(memory, ins.tile, f["b_addr"], out_channels)

    # Input channel read by local output channel o at reduction step ci: g(o)*Cg + ci.
    group_of = (oc0 + np.arange(out_channels)) // (oc_total // groups)
    if f["acc_addr"] == -1:
        acc = np.broadcast_to(bias, (n, out_rows, out_cols, out_channels)).copy()
    else:  # fp32 partial sums of the earlier input-channel blocks (the bias is in them)
        acc = memory.read(MemSpace.OCM, ins.tile, f["acc_addr"], F32, geometry.out_shape).copy()
    for block in range(0, group_channels, CONV_CI_BLOCK):
        for kh in range(kh_count):
            for kw in range(kw_count):
                taps, _ = geometry.tap(window, kh, kw)
                for ci in range(block, min(block + CONV_CI_BLOCK, group_channels)):
                    # The input value of each local output channel (one column if groups=1).
                    if groups == 1:
                        x = taps[..., ci, None]
                    else:
                        x = taps[..., group_of * group_channels + ci]
                    acc = fp32_mac(acc, x, weights[:, kh, kw, ci])
    if f["acc_out"]:  # the fp32 accumulator itself, for the next block to continue
        memory.write(MemSpace.OCM, ins.tile, f["out_addr"], acc)
        return None
    result, counts = _activate(memory, ins, acc, out_channels)
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], result)
    return counts


@implements("pool")
def _pool(memory: Memory, ins: Instruction) -> F16Counts:
    f = ins.fields
    geometry = _Window(f)
    mode = PoolMode(f["mode"])
    n, _, _, channels = geometry.in_shape
    _, out_rows, out_cols, _ = geometry.out_shape
    kh_count, kw_count = geometry.kernel
    window = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, geometry.in_shape)
    window = window.astype(np.float32)

    valid_taps = np.zeros((out_rows, out_cols), np.int64)
    start = -np.inf if mode == PoolMode.MAX else 0.0
    acc = np.full((n, out_rows, out_cols, channels), start, np.float32)
    for kh in range(kh_count):
        for kw in range(kw_count):
            taps, inside = geometry.tap(window, kh, kw)
            combined = fp32_max(acc, taps) if mode == PoolMode.MAX else acc + taps
            acc = np.where(inside[None, :, :, None], combined, acc)
            valid_taps += inside

    if mode == PoolMode.AVG:
        if f["count_include_pad"]:
            height, width = f["in_hw"]
            bottom, right = f["pad_end"]
            top, left = geometry.pad
            counts = np.zeros((out_rows, out_cols), np.int64)
            for kh in range(kh_count):
                rows = geometry.input_rows(kh)
                for kw in range(kw_count):
                    cols = geometry.input_cols(kw)
                    counts += ((rows >= -top) & (rows < height + bottom))[:, None] & (
                        (cols >= -left) & (cols < width + right)
                    )[None, :]
        else:
            counts = valid_taps
        acc = acc / counts.astype(np.float32)[None, :, :, None]
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], round_to_f16(acc))
    return f16_counts(acc)


def interpolation_table(table: np.ndarray, size: int, lo: int, what: str) -> tuple:
    """The (i0, i1, w0, w1) columns of a resize table, the indices made relative to `lo` and
    checked to be integers inside [0, size): the one check that depends on data."""
    index = table[:, :2]
    if not np.all(index == np.floor(index)):
        raise Fault(f"{what} indices are not integers")
    with np.errstate(invalid="ignore"):
        i0, i1 = (index[:, k].astype(np.int64) - lo for k in (0, 1))
    inside = (i0 >= 0) & (i0 < size) & (i1 >= 0) & (i1 < size)
    if not np.all(inside):
        raise Fault(f"{what} indices fall outside [{lo}, {lo + size})")
    return i0, i1, table[:, 2], table[:, 3]


@implements("resize")
def _resize(memory: Memory, ins: Instruction) -> F16Counts:
    f = ins.fields
    n, h, w, c = f["in_shape"]
    _, oh, ow, _ = f["out_shape"]
    x = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, (n, h, w, c))
    ytab = memory.read(MemSpace.OCM, ins.tile, f["ytab_addr"], F32, (oh, 4))
    xtab = memory.read(MemSpace.OCM, ins.tile, f["xtab_addr"], F32, (ow, 4))
    y0, y1, wy0, wy1 = interpolation_table(ytab, h, f["row0"], "row table")
    x0, x1, wx0, wx1 = interpolation_table(xtab, w, 0, "column table")
    wx0, wx1 = wx0[None, None, :, None], wx1[None, None, :, None]  # over [N, OH, OW, C]
    top = two_tap(x[:, y0][:, :, x0], x[:, y0][:, :, x1], wx0, wx1)
    bottom = two_tap(x[:, y1][:, :, x0], x[:, y1][:, :, x1], wx0, wx1)
    acc = two_tap(top, bottom, wy0[None, :, None, None], wy1[None, :, None, None])
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], round_to_f16(acc))
    return f16_counts(acc)


@implements("fc")
def _fc(memory: Memory, ins: Instruction) -> F16Counts:
    f = ins.fields
    rows, inner, outs = f["n"], f["k"], f["o"]
    x = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, (rows, inner))
    weights = memory.read(MemSpace.OCM, ins.tile, f["w_addr"], F16, (outs, inner))
    acc = np.broadcast_to(_bias(memory, ins.tile, f["b_addr"], outs), (rows, outs)).copy()
    for kk in range(inner):
        acc = fp32_mac(acc, x[:, kk, None], weights[None, :, kk])
    result, counts = _activate(memory, ins, acc, outs)
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], result)
    return counts


@implements("bmm")
def _bmm(memory: Memory, ins: Instruction) -> F16Counts | None:
    f = ins.fields
    a_shape, b_shape, out_shape = bmm_shapes(f)
    a = memory.read(MemSpace.OCM, ins.tile, f["a_addr"], F16, a_shape)
    b = memory.read(MemSpace.OCM, ins.tile, f["b_addr"], F16, b_shape)
    a = a.transpose(0, 2, 1) if f["trans_a"] else a  # [., M, K]
    b = b.transpose(0, 2, 1) if f["trans_b"] else b  # [., K, N]
    if f["acc_addr"] == -1:
        acc = np.zeros(out_shape, np.float32)
    else:
        acc = memory.read(MemSpace.OCM, ins.tile, f["acc_addr"], F32, out_shape).copy()
    for kk in range(f["k"]):
        acc = fp32_mac(acc, a[:, :, kk, None], b[:, None, kk, :])
    if f["acc_out"]:
        memory.write(MemSpace.OCM, ins.tile, f["out_addr"], acc)
        return None
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], round_to_f16(acc))
    return f16_counts(acc)


@implements("add")
def _add(memory: Memory, ins: Instruction) -> F16Counts:
    f = ins.fields
    count = f["count"]
    a = memory.read(MemSpace.OCM, ins.tile, f["a_addr"], F16, (count,))
    b = memory.read(MemSpace.OCM, ins.tile, f["b_addr"], F16, (count,))
    acc = a.astype(np.float32) + b.astype(np.float32)
    channels = f["channels"]
    if channels:  # NHWC pixels, for PRELU's per-channel slopes
        acc = acc.reshape(count // channels, channels)
    result, counts = _activate(memory, ins, acc, channels)
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], result.reshape(count))
    return counts


@implements("scale")
def _scale(memory: Memory, ins: Instruction) -> F16Counts:
    f = ins.fields
    count, channels = f["count"], f["channels"]
    x = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, (count // channels, channels))
    s = memory.read(MemSpace.OCM, ins.tile, f["s_addr"], F32, (channels,))
    b = memory.read(MemSpace.OCM, ins.tile, f["b_addr"], F32, (channels,))
    acc = x.astype(np.float32) * s + b  # two fp32 roundings: the product, then the sum
    result, counts = _activate(memory, ins, acc, channels)
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], result.reshape(count))
    return counts


@implements("mul")
def _mul(memory: Memory, ins: Instruction) -> F16Counts:
    f = ins.fields
    count, channels = f["count"], f["channels"]
    a = memory.read(MemSpace.OCM, ins.tile, f["a_addr"], F16, (count,))
    b = memory.read(MemSpace.OCM, ins.tile, f["b_addr"], F16, (channels or count,))
    if channels:
        b = np.tile(b, count // channels)
    acc = a.astype(np.float32) * b.astype(np.float32)  # exact: a product of two f16 values
    result, counts = _activate(memory, ins, acc)
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], result)
    return counts


@implements("softmax")
def _softmax(memory: Memory, ins: Instruction) -> F16Counts:
    """Per row (outer index, inner index): the max, exp32(x - max), their sum in fp32 in order
    of the reduced axis, then one division per element (docs/isa.md, `softmax`)."""
    f = ins.fields
    shape = (f["outer"], f["length"], f["inner"])
    x = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, shape).astype(np.float32)
    m = np.full((shape[0], shape[2]), -np.inf, np.float32)
    for i in range(shape[1]):
        m = fp32_max(m, x[:, i])
    e = exp32(x - m[:, None, :])
    total = np.zeros_like(m)
    for i in range(shape[1]):
        total = total + e[:, i]
    y = e / total[:, None, :]
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], round_to_f16(y))
    return f16_counts(y)


@implements("layernorm")
def _layernorm(memory: Memory, ins: Instruction) -> F16Counts:
    """Per row: the mean and the variance in fp32 (two passes, in order of the row), one
    rstd, then each element's (x - mean) * rstd * g + b in fp32 (docs/isa.md, `layernorm`)."""
    f = ins.fields
    rows, length = f["rows"], f["length"]
    x = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, (rows, length)).astype(np.float32)
    g = memory.read(MemSpace.OCM, ins.tile, f["g_addr"], F32, (length,))
    b = memory.read(MemSpace.OCM, ins.tile, f["b_addr"], F32, (length,))
    mean, rstd = _layernorm_stats(x, f["eps"])
    y = ((x - mean[:, None]) * rstd[:, None]) * g + b
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], round_to_f16(y))
    return f16_counts(y)


def _layernorm_stats(x: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Each row's mean and rstd in fp32: the sum, then the squared deviations, in order of
    the row (docs/isa.md, `layernorm` and `lnstats`)."""
    rows, length = x.shape
    count = np.float32(length)
    total = np.zeros(rows, np.float32)
    for i in range(length):
        total = total + x[:, i]
    mean = total / count
    squares = np.zeros(rows, np.float32)
    for i in range(length):
        d = x[:, i] - mean
        squares = squares + d * d
    var = squares / count
    return mean, np.float32(1.0) / np.sqrt(var + np.float32(eps))


@implements("lnstats")
def _lnstats(memory: Memory, ins: Instruction) -> None:
    """`layernorm`'s mean and rstd of each row, written as f32 [rows, 2] (docs/isa.md)."""
    f = ins.fields
    rows, length = f["rows"], f["length"]
    x = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, (rows, length)).astype(np.float32)
    mean, rstd = _layernorm_stats(x, f["eps"])
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], np.stack([mean, rstd], axis=1))
    return None


@implements("lnapply")
def _lnapply(memory: Memory, ins: Instruction) -> F16Counts:
    """`layernorm`'s last step on a run of each row: ((x - mean) * rstd) * g + b in fp32,
    with the rows' (mean, rstd) from `lnstats` (docs/isa.md)."""
    f = ins.fields
    rows, count = f["rows"], f["count"]
    x = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, (rows, count)).astype(np.float32)
    stats = memory.read(MemSpace.OCM, ins.tile, f["stats_addr"], F32, (rows, 2))
    g = memory.read(MemSpace.OCM, ins.tile, f["g_addr"], F32, (count,))
    b = memory.read(MemSpace.OCM, ins.tile, f["b_addr"], F32, (count,))
    y = ((x - stats[:, :1]) * stats[:, 1:]) * g + b
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], round_to_f16(y))
    return f16_counts(y)


@implements("reduce")
def _reduce(memory: Memory, ins: Instruction) -> F16Counts | None:
    """Per row (outer index, inner index), in order of the reduced axis: the fp32 sum (MEAN
    then divides it once), the fp32 sum of squares (L2 then takes its square root once), the
    max or min by the pool MAX rule, or the index of the first maximum (docs/isa.md,
    `reduce`)."""
    f = ins.fields
    outer, length, inner = f["outer"], f["length"], f["inner"]
    x = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, (outer, length, inner))
    x = x.astype(np.float32)
    mode = ReduceMode(f["mode"])
    if mode == ReduceMode.ARGMAX:
        m = np.full((outer, inner), -np.inf, np.float32)
        index = np.zeros((outer, inner), np.float32)
        for i in range(length):
            take = (x[:, i] > m) | (np.isnan(x[:, i]) & ~np.isnan(m))
            m, index = np.where(take, x[:, i], m), np.where(take, np.float32(i), index)
        memory.write(MemSpace.OCM, ins.tile, f["out_addr"], index)
        return None
    if f["acc_addr"] != -1:
        acc = memory.read(MemSpace.OCM, ins.tile, f["acc_addr"], F32, (outer, inner)).copy()
    else:
        start = {ReduceMode.MAX: -np.inf, ReduceMode.MIN: np.inf}.get(mode, 0.0)
        acc = np.full((outer, inner), start, np.float32)
    for i in range(length):
        if mode == ReduceMode.MAX:
            acc = fp32_max(acc, x[:, i])
        elif mode == ReduceMode.MIN:
            acc = np.where((x[:, i] < acc) | np.isnan(x[:, i]), x[:, i], acc)
        elif mode == ReduceMode.L2:
            acc = acc + x[:, i] * x[:, i]  # the product of two f16 values is exact in fp32
        else:
            acc = acc + x[:, i]
    if f["acc_out"]:
        memory.write(MemSpace.OCM, ins.tile, f["out_addr"], acc)
        return None
    if mode == ReduceMode.MEAN:
        acc = acc / np.float32(f["divisor"])
    elif mode == ReduceMode.L2:
        acc = np.sqrt(acc)  # IEEE fp32 square root, correctly rounded
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], round_to_f16(acc))
    return f16_counts(acc)


def broadcast_read(memory: Memory, tile: int, addr: int, strides, shape) -> np.ndarray:
    """A `binary` operand as fp32 values of the result's `shape`: element (i0..i3) is the f16
    at element offset sum(i_d * strides[d]) (a stride of 0 repeats)."""
    flat = memory.read(MemSpace.OCM, tile, addr, F16, (broadcast_span(shape, strides),))
    offsets = np.zeros(shape, np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        offsets += (np.arange(n) * s).reshape([n if k == d else 1 for k in range(len(shape))])
    return flat[offsets].astype(np.float32)


@implements("binary")
def _binary(memory: Memory, ins: Instruction) -> F16Counts:
    """One fp32 operation per result element (IEEE, round to nearest even), then f16."""
    f = ins.fields
    shape = tuple(f["shape"])
    a = broadcast_read(memory, ins.tile, f["a_addr"], f["a_strides"], shape)
    b = broadcast_read(memory, ins.tile, f["b_addr"], f["b_strides"], shape)
    mode = BinaryMode(f["mode"])
    if mode == BinaryMode.ADD:
        y = a + b
    elif mode == BinaryMode.SUB:
        y = a - b
    elif mode == BinaryMode.MUL:
        y = a * b
    elif mode == BinaryMode.DIV:
        y = a / b
    elif mode == BinaryMode.MAX:
        y = np.where((a > b) | np.isnan(a), a, b)
    else:
        y = np.where((a < b) | np.isnan(a), a, b)
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], round_to_f16(y))
    return f16_counts(y)


@implements("end")
def _end(memory: Memory, ins: Instruction) -> None:
    pass


for _opcode, _kernel in INT8_KERNELS.items():  # quant, dequant, qconv, ... (reference_int8.py)
    implements(_opcode)(_kernel)

KERNELS.require_complete()


# --------------------------------------------------------------------------------- the machine


def _progress(total: int):
    """A progress bar over the instructions, shown only on a terminal and only for runs that
    take a while (tqdm's `delay`)."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc="mrvl-sim (interp)",
        unit="instr",
        delay=PROGRESS_AFTER_SECONDS,
        disable=not sys.stderr.isatty(),
        leave=False,
    )


def execute(valid: ValidProgram, memory: Memory, stats: RunStats | None = None) -> None:
    """Run the instructions of a validated program in order; `stats` (reset by the caller)
    gets each instruction's counts."""
    with _progress(len(valid.code)) as bar:
        for index, ins in enumerate(valid.code):
            # Overflow to inf and NaN results are defined IEEE behaviour here, not faults.
            try:
                with np.errstate(all="ignore"):
                    counts = KERNELS[ins.opcode](memory, ins)
            except Fault as e:  # only resize's tables, which are data, can fault here
                raise SimulatorError(f"{describe(valid.program, index, ins)}: {e}") from None
            if counts is not None and stats is not None:
                stats.saturated[index], stats.nans[index] = counts
            bar.update()
