"""The reference interpreter: the executable specification of the MLIP ISA (docs/isa.md).

One instruction at a time, in program order, in numpy. It is written to be read next to the
spec, not to be fast: loops run over the reduction (kernel taps, channels) in the documented
order and vectorize only across independent output elements, so every fp32 rounding happens
exactly where the spec says. Faster engines must reproduce its outputs bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from enum import IntEnum

import numpy as np

from mrvl.binary import decode
from mrvl.isa import (
    ACT_TABLE_ENTRIES,
    CONV_CI_BLOCK,
    DTYPE_NUMPY,
    OPCODE_BY_NAME,
    TABLE_ACTIVATIONS,
    Activation,
    DType,
    Instruction,
    MemSpace,
    PoolMode,
    Program,
)
from mrvl.sim.errors import Fault, SimulatorError, SimulatorInputError
from mrvl.sim.memory import Memory, box_extent
from mrvl.sim.numerics import activate, fp32_mac, round_to_f16, two_tap
from mrvl.target import Target, UnknownTargetError, get_target

F16 = "float16"
F32 = "float32"


# ------------------------------------------------------------------------------ field access


def _fields(ins: Instruction) -> dict:
    """The instruction's fields, checked against the opcode table: in-memory Programs never
    went through decode."""
    spec = OPCODE_BY_NAME[ins.opcode]
    names = {f.name for f in spec.fields}
    if set(ins.fields) != names:
        raise Fault(f"fields {sorted(ins.fields)} do not match the opcode's {sorted(names)}")
    for f in spec.fields:
        value = ins.fields[f.name]
        if f.kind.startswith("i32x") and (
            not isinstance(value, (tuple, list)) or len(value) != f.length
        ):
            raise Fault(f"field {f.name} must hold {f.length} integers, got {value!r}")
    return ins.fields


def _enum(kind: type[IntEnum], value: int, field: str) -> IntEnum:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(f"{m.name}={m.value}" for m in kind)
        raise Fault(f"{field}={value} is not a valid {kind.__name__} ({choices})") from None


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise Fault(message)


def _positive(values: Sequence[int], field: str) -> tuple[int, ...]:
    _require(all(v >= 1 for v in values), f"{field} {list(values)} must be positive")
    return tuple(values)


def _activated(
    memory: Memory, ins: Instruction, f: dict, acc: np.ndarray, channels: int | None
) -> np.ndarray:
    """The f16 result of a compute instruction from its fp32 accumulator, whose last axis is
    the channel (`channels` of them; None for an instruction without per-channel slopes)."""
    act = _enum(Activation, f["act"], "act")
    slopes = table = None
    if act == Activation.PRELU:
        _require(channels is not None, f"{ins.opcode} has no channels for PRELU slopes")
        slopes = memory.read(MemSpace.OCM, ins.tile, f["act_addr"], F32, (channels,), "slopes")
    elif act in TABLE_ACTIVATIONS:
        loaded = memory.act_tables[ins.tile]
        key = (int(act), f["act_a"], f["act_b"])
        _require(
            loaded is not None and loaded[0] == key,
            f"act {act.name} (act_a={f['act_a']!r}, act_b={f['act_b']!r}) needs its table, but "
            + (
                f"tile {ins.tile}'s table memory holds {Activation(loaded[0][0]).name} "
                f"(act_a={loaded[0][1]!r}, act_b={loaded[0][2]!r})"
                if loaded is not None
                else f"no lut loaded a table on tile {ins.tile}"
            ),
        )
        table = loaded[1]
    return activate(acc, act, f["act_a"], f["act_b"], table=table, slopes=slopes)


# ------------------------------------------------------------------------------- the opcodes


def _overlapping(box: tuple[int, ...], strides: tuple[int, ...], elem_bytes: int) -> bool:
    """Whether two elements of a strided box share a byte (then the write order would matter)."""
    lowest, highest = box_extent(box, strides, elem_bytes)
    if math.prod(box) * elem_bytes > highest - lowest:
        return True  # more bytes than the span holds
    dims = sorted((abs(s), n) for n, s in zip(box, strides) if n > 1)
    span = elem_bytes
    for stride, count in dims:
        if stride < span:
            break
        span = stride * (count - 1) + span
    else:
        return False  # nested strides: each dimension steps past everything inside it
    offsets = np.zeros(1, np.int64)
    for n, s in zip(box, strides):
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64) * s).reshape(-1)
    offsets.sort()
    return bool(np.any(np.diff(offsets) < elem_bytes))


def _dma(memory: Memory, ins: Instruction) -> None:
    f = _fields(ins)
    src_space = _enum(MemSpace, f["src_space"], "src_space")
    dst_space = _enum(MemSpace, f["dst_space"], "dst_space")
    box, elem_bytes = tuple(f["box"]), f["elem_bytes"]
    src_strides, dst_strides = tuple(f["src_strides"]), tuple(f["dst_strides"])
    _require(all(n >= 0 for n in box), f"box {list(box)} has a negative extent")
    _require(elem_bytes >= 1, f"elem_bytes={elem_bytes} must be positive")
    if math.prod(box) == 0:
        return
    source = memory.box(
        src_space, ins.tile, f["src_addr"], src_strides, box, elem_bytes, "source box"
    )
    destination = memory.box(
        dst_space, ins.tile, f["dst_addr"], dst_strides, box, elem_bytes, "destination box"
    )
    _require(
        not _overlapping(box, dst_strides, elem_bytes),
        f"destination strides {list(dst_strides)} make elements of box {list(box)} overlap",
    )
    # The whole source is read before any destination byte is written (memmove semantics).
    destination[...] = source.copy()


def _convert(values: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    if src == dst:
        return values
    if (src, dst) == (DType.F32, DType.F16):
        return round_to_f16(values)
    if (src, dst) == (DType.F16, DType.F32):
        return values.astype(np.float32)  # exact
    raise Fault(f"no conversion from {src.name} to {dst.name}")


def _cvt(memory: Memory, ins: Instruction) -> None:
    f = _fields(ins)
    src_dtype = _enum(DType, f["src_dtype"], "src_dtype")
    dst_dtype = _enum(DType, f["dst_dtype"], "dst_dtype")
    shape, perm = tuple(f["src_shape"]), tuple(f["perm"])
    _require(all(n >= 0 for n in shape), f"src_shape {list(shape)} has a negative extent")
    _require(sorted(perm) == [0, 1, 2, 3], f"perm {list(perm)} is not a permutation of 0..3")
    source = memory.read(
        MemSpace.DDR, ins.tile, f["src_addr"], DTYPE_NUMPY[src_dtype], shape, "source"
    )
    result = _convert(np.transpose(source, perm), src_dtype, dst_dtype)
    memory.write(MemSpace.DDR, ins.tile, f["dst_addr"], result, "destination")


def _lut(memory: Memory, ins: Instruction) -> None:
    f = _fields(ins)
    act = _enum(Activation, f["act"], "act")
    _require(act in TABLE_ACTIVATIONS, f"act {act.name} is not a table activation")
    nbytes = ACT_TABLE_ENTRIES * 2
    _require(
        memory.act_table_bytes >= nbytes,
        f"a table of {nbytes} bytes does not fit the tile's {memory.act_table_bytes}-byte "
        "activation-table memory",
    )
    table = memory.read(MemSpace.DDR, ins.tile, f["src_addr"], F16, (ACT_TABLE_ENTRIES,), "table")
    memory.act_tables[ins.tile] = ((int(act), f["act_a"], f["act_b"]), table.astype(np.float16))


class _Window:
    """The geometry shared by conv and pool: which window row/column each output tap reads."""

    def __init__(self, f: dict, dilation: tuple[int, int] = (1, 1)):
        self.in_shape = _positive(f["in_shape"], "in_shape")
        self.out_shape = _positive(f["out_shape"], "out_shape")
        self.kernel = _positive(f["kernel"], "kernel")
        self.stride = _positive(f["stride"], "stride")
        self.dilation = _positive(dilation, "dilation")
        self.pad = tuple(f["pad"])
        _require(
            self.in_shape[0] == self.out_shape[0],
            f"in_shape N={self.in_shape[0]} != out_shape N={self.out_shape[0]}",
        )
        rows, cols = self.out_shape[1], self.out_shape[2]
        self.out_rows = f["orow0"] + np.arange(rows)  # output-tensor rows of the tile
        self.out_cols = np.arange(cols)
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


def _conv(memory: Memory, ins: Instruction) -> None:
    f = _fields(ins)
    geometry = _Window(f, tuple(f["dilation"]))
    n, _, _, channels = geometry.in_shape
    _, out_rows, out_cols, out_channels = geometry.out_shape
    kh_count, kw_count = geometry.kernel
    groups, oc0, oc_total = f["groups"], f["oc0"], f["oc_total"]
    _require(
        groups >= 1 and channels % groups == 0 and oc_total % groups == 0,
        f"groups={groups} must divide input channels {channels} and oc_total={oc_total}",
    )
    _require(
        0 <= oc0 <= oc_total - out_channels,
        f"tile channels [{oc0}, {oc0 + out_channels}) are outside oc_total={oc_total}",
    )
    group_channels = channels // groups
    acc_out = f["acc_out"]
    _require(acc_out in (0, 1), f"acc_out={acc_out} is not 0 or 1")
    memory.check_dense(
        MemSpace.OCM, ins.tile, f["out_addr"], F32 if acc_out else F16, geometry.out_shape,
        "output tile",
    )  # fmt: skip

    window = memory.read(
        MemSpace.OCM, ins.tile, f["in_addr"], F16, geometry.in_shape, "input window"
    ).astype(np.float32)
    weights = memory.read(
        MemSpace.OCM,
        ins.tile,
        f["w_addr"],
        F16,
        (out_channels, kh_count, kw_count, group_channels),
        "weights",
    )
    if f["b_addr"] == -1:
        bias = np.zeros(out_channels, np.float32)
    else:
        bias = memory.read(MemSpace.OCM, ins.tile, f["b_addr"], F32, (out_channels,), "bias")

    # Input channel read by local output channel o at reduction step ci: g(o)*Cg + ci.
    group_of = (oc0 + np.arange(out_channels)) // (oc_total // groups)
    if f["acc_addr"] == -1:
        acc = np.broadcast_to(bias, (n, out_rows, out_cols, out_channels)).copy()
    else:  # fp32 partial sums of the earlier input channels (the bias is already in them)
        acc = memory.read(
            MemSpace.OCM, ins.tile, f["acc_addr"], F32, geometry.out_shape, "partial sums"
        ).copy()
    for block in range(0, group_channels, CONV_CI_BLOCK):
        for kh in range(kh_count):
            for kw in range(kw_count):
                taps, _ = geometry.tap(window, kh, kw)
                for ci in range(block, min(block + CONV_CI_BLOCK, group_channels)):
                    # The input each local output channel takes (one shared column if groups=1).
                    if groups == 1:
                        x = taps[..., ci, None]
                    else:
                        x = taps[..., group_of * group_channels + ci]
                    acc = fp32_mac(acc, x, weights[:, kh, kw, ci])
    if acc_out:
        memory.write(MemSpace.OCM, ins.tile, f["out_addr"], acc, "output tile")
        return
    result = _activated(memory, ins, f, acc, out_channels)
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], result, "output tile")


def _pool(memory: Memory, ins: Instruction) -> None:
    f = _fields(ins)
    geometry = _Window(f)
    mode = _enum(PoolMode, f["mode"], "mode")
    _require(
        geometry.in_shape[3] == geometry.out_shape[3],
        f"in_shape C={geometry.in_shape[3]} != out_shape C={geometry.out_shape[3]}",
    )
    _, out_rows, out_cols, _ = geometry.out_shape
    kh_count, kw_count = geometry.kernel
    memory.check_dense(
        MemSpace.OCM, ins.tile, f["out_addr"], F16, geometry.out_shape, "output tile"
    )
    window = memory.read(
        MemSpace.OCM, ins.tile, f["in_addr"], F16, geometry.in_shape, "input window"
    ).astype(np.float32)

    valid_taps = np.zeros((out_rows, out_cols), np.int64)
    if mode == PoolMode.MAX:
        acc = np.full(
            (geometry.in_shape[0], out_rows, out_cols, geometry.in_shape[3]), -np.inf, np.float32
        )
    else:
        acc = np.zeros((geometry.in_shape[0], out_rows, out_cols, geometry.in_shape[3]), np.float32)
    for kh in range(kh_count):
        for kw in range(kw_count):
            taps, inside = geometry.tap(window, kh, kw)
            combined = np.maximum(acc, taps) if mode == PoolMode.MAX else acc + taps
            acc = np.where(inside[None, :, :, None], combined, acc)
            valid_taps += inside
    if np.any(valid_taps == 0):
        row, col = np.argwhere(valid_taps == 0)[0]
        raise Fault(f"output tile row {row}, column {col} has no tap inside the input window")

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
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], round_to_f16(acc), "output tile")


def _fc(memory: Memory, ins: Instruction) -> None:
    f = _fields(ins)
    rows, inner, outs = _positive((f["n"], f["k"], f["o"]), "[n, k, o]")
    memory.check_dense(MemSpace.OCM, ins.tile, f["out_addr"], F16, (rows, outs), "output")
    x = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, (rows, inner), "input")
    weights = memory.read(MemSpace.OCM, ins.tile, f["w_addr"], F16, (outs, inner), "weights")
    if f["b_addr"] == -1:
        bias = np.zeros(outs, np.float32)
    else:
        bias = memory.read(MemSpace.OCM, ins.tile, f["b_addr"], F32, (outs,), "bias")
    acc = np.broadcast_to(bias, (rows, outs)).copy()
    for kk in range(inner):
        acc = fp32_mac(acc, x[:, kk, None], weights[None, :, kk])
    result = _activated(memory, ins, f, acc, outs)
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], result, "output")


def _add(memory: Memory, ins: Instruction) -> None:
    f = _fields(ins)
    (count,) = _positive((f["count"],), "count")
    memory.check_dense(MemSpace.OCM, ins.tile, f["out_addr"], F16, (count,), "output")
    a = memory.read(MemSpace.OCM, ins.tile, f["a_addr"], F16, (count,), "operand a")
    b = memory.read(MemSpace.OCM, ins.tile, f["b_addr"], F16, (count,), "operand b")
    acc = a.astype(np.float32) + b.astype(np.float32)
    result = _activated(memory, ins, f, acc, None)
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], result, "output")


def _scale(memory: Memory, ins: Instruction) -> None:
    f = _fields(ins)
    count, channels = _positive((f["count"], f["channels"]), "[count, channels]")
    _require(count % channels == 0, f"count {count} is not a multiple of channels {channels}")
    memory.check_dense(MemSpace.OCM, ins.tile, f["out_addr"], F16, (count,), "output")
    x = memory.read(
        MemSpace.OCM, ins.tile, f["in_addr"], F16, (count // channels, channels), "input"
    )
    s = memory.read(MemSpace.OCM, ins.tile, f["s_addr"], F32, (channels,), "scales")
    b = memory.read(MemSpace.OCM, ins.tile, f["b_addr"], F32, (channels,), "shifts")
    acc = x.astype(np.float32) * s + b  # two fp32 roundings: the product, then the sum
    result = _activated(memory, ins, f, acc, channels)
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], result.reshape(count), "output")


def _mul(memory: Memory, ins: Instruction) -> None:
    f = _fields(ins)
    (count,) = _positive((f["count"],), "count")
    channels = f["channels"]
    _require(channels >= 0, f"channels={channels} must be 0 or positive")
    _require(
        channels == 0 or count % channels == 0,
        f"count {count} is not a multiple of channels {channels}",
    )
    memory.check_dense(MemSpace.OCM, ins.tile, f["out_addr"], F16, (count,), "output")
    a = memory.read(MemSpace.OCM, ins.tile, f["a_addr"], F16, (count,), "operand a")
    b = memory.read(MemSpace.OCM, ins.tile, f["b_addr"], F16, (channels or count,), "operand b")
    if channels:
        b = np.tile(b, count // channels)
    acc = a.astype(np.float32) * b.astype(np.float32)  # exact: a product of two f16 values
    result = _activated(memory, ins, f, acc, None)
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], result, "output")


def _interpolation_table(table: np.ndarray, size: int, lo: int, what: str) -> tuple:
    """The (i0, i1, w0, w1) columns of a resize table, the indices made relative to `lo` and
    checked to be integers inside [0, size)."""
    index = table[:, :2]
    _require(bool(np.all(index == np.floor(index))), f"{what} indices are not integers")
    i0, i1 = (index[:, k].astype(np.int64) - lo for k in (0, 1))
    inside = (i0 >= 0) & (i0 < size) & (i1 >= 0) & (i1 < size)
    _require(bool(np.all(inside)), f"{what} indices fall outside [{lo}, {lo + size})")
    return i0, i1, table[:, 2], table[:, 3]


def _resize(memory: Memory, ins: Instruction) -> None:
    f = _fields(ins)
    n, h, w, c = _positive(f["in_shape"], "in_shape")
    on, oh, ow, oc = _positive(f["out_shape"], "out_shape")
    _require((on, oc) == (n, c), f"out_shape {[on, oh, ow, oc]} differs from in_shape in N or C")
    memory.check_dense(MemSpace.OCM, ins.tile, f["out_addr"], F16, (on, oh, ow, oc), "output")
    x = memory.read(MemSpace.OCM, ins.tile, f["in_addr"], F16, (n, h, w, c), "input window")
    ytab = memory.read(MemSpace.OCM, ins.tile, f["ytab_addr"], F32, (oh, 4), "row table")
    xtab = memory.read(MemSpace.OCM, ins.tile, f["xtab_addr"], F32, (ow, 4), "column table")
    y0, y1, wy0, wy1 = _interpolation_table(ytab, h, f["row0"], "row table")
    x0, x1, wx0, wx1 = _interpolation_table(xtab, w, 0, "column table")
    wx0, wx1 = wx0[None, None, :, None], wx1[None, None, :, None]  # over [N, OH, OW, C]
    top = two_tap(x[:, y0][:, :, x0], x[:, y0][:, :, x1], wx0, wx1)
    bottom = two_tap(x[:, y1][:, :, x0], x[:, y1][:, :, x1], wx0, wx1)
    acc = two_tap(top, bottom, wy0[None, :, None, None], wy1[None, :, None, None])
    memory.write(MemSpace.OCM, ins.tile, f["out_addr"], round_to_f16(acc), "output")


_EXECUTE: dict[str, Callable[[Memory, Instruction], None]] = {
    "dma": _dma,
    "cvt": _cvt,
    "lut": _lut,
    "conv": _conv,
    "pool": _pool,
    "resize": _resize,
    "fc": _fc,
    "add": _add,
    "scale": _scale,
    "mul": _mul,
}


# --------------------------------------------------------------------------------- the machine


def resolve_target(program: Program, target: Target | str | None) -> Target:
    """The machine to simulate: `target` if given, else the one the binary names."""
    if isinstance(target, Target):
        chosen = target
    else:
        try:
            chosen = get_target(target or program.target)
        except UnknownTargetError as e:
            raise SimulatorError(str(e)) from None
    if not 1 <= program.num_tiles <= chosen.max_tiles:
        raise SimulatorError(
            f"program uses {program.num_tiles} tiles, {chosen.name} has 1..{chosen.max_tiles}"
        )
    if program.ddr_size > chosen.ddr_bytes:
        raise SimulatorError(
            f"program needs {program.ddr_size} bytes of DDR, {chosen.name} has {chosen.ddr_bytes}"
        )
    return chosen


def check_inputs(program: Program, inputs: Sequence[np.ndarray]) -> None:
    """Inputs must match the input table exactly: converting silently would hide caller bugs."""
    entries = program.inputs
    if len(inputs) != len(entries):
        names = ", ".join(repr(e.name) for e in entries)
        raise SimulatorInputError(f"expected {len(entries)} inputs ({names}), got {len(inputs)}")
    for entry, value in zip(entries, inputs):
        dtype = np.dtype(DTYPE_NUMPY[DType(entry.dtype)])
        expected = f"{dtype} array of shape {tuple(entry.shape)}"
        if not isinstance(value, np.ndarray):
            raise SimulatorInputError(
                f"input {entry.name!r}: expected a {expected}, got {type(value).__name__}"
            )
        if value.dtype != dtype:
            raise SimulatorInputError(
                f"input {entry.name!r}: expected dtype {dtype}, got {value.dtype}"
            )
        if value.shape != tuple(entry.shape):
            raise SimulatorInputError(
                f"input {entry.name!r}: expected shape {tuple(entry.shape)}, got {value.shape}"
            )


def load_memory(program: Program, target: Target, inputs: Sequence[np.ndarray]) -> Memory:
    """DDR with the constants at const_base and each input dense at its ddr_addr; zeroed OCMs."""
    memory = Memory(
        program.ddr_size,
        program.num_tiles,
        target.ocm_bytes_per_tile,
        target.act_table_bytes_per_tile,
    )
    try:
        memory.write(
            MemSpace.DDR,
            0,
            program.const_base,
            np.frombuffer(bytes(program.consts), np.uint8),
            "constants",
        )
        for entry, value in zip(program.inputs, inputs):
            memory.write(MemSpace.DDR, 0, entry.ddr_addr, value, f"input {entry.name!r}")
    except Fault as e:
        raise SimulatorError(f"loading the program: {e}") from None
    return memory


def read_outputs(program: Program, memory: Memory) -> list[np.ndarray]:
    outputs = []
    for entry in program.outputs:
        dtype = DTYPE_NUMPY[DType(entry.dtype)]
        try:
            value = memory.read(
                MemSpace.DDR, 0, entry.ddr_addr, dtype, tuple(entry.shape), f"output {entry.name!r}"
            )
        except Fault as e:
            raise SimulatorError(f"reading the outputs: {e}") from None
        outputs.append(value.astype(dtype))  # native byte order for the caller
    return outputs


def _describe(program: Program, index: int, ins: Instruction) -> str:
    if ins.loc < len(program.srcmap):
        node = f"ONNX node {program.srcmap[ins.loc]!r}"
    else:
        node = "no ONNX node"
    return f"instruction {index} ({ins.opcode}, {node})"


def execute(program: Program, memory: Memory) -> None:
    """Run the instruction stream in order until `end`, checking tiles and tokens first."""
    signalled: set[int] = set()
    for index, ins in enumerate(program.code):
        try:
            _require(ins.opcode in OPCODE_BY_NAME, f"unknown opcode {ins.opcode!r}")
            _require(
                0 <= ins.tile < program.num_tiles,
                f"tile {ins.tile} >= num_tiles {program.num_tiles}",
            )
            for token in ins.waits:
                _require(
                    token in signalled,
                    f"waits on token {token}, which no earlier instruction signalled",
                )
            if ins.opcode == "end":
                return
            # Overflow to inf and NaN results are defined IEEE behaviour here, not faults.
            with np.errstate(all="ignore"):
                _EXECUTE[ins.opcode](memory, ins)
        except Fault as e:
            raise SimulatorError(f"{_describe(program, index, ins)}: {e}") from None
        if ins.signal:
            signalled.add(ins.signal)
    raise SimulatorError(
        f"instruction {len(program.code)}: ran past the last instruction, the program has no end"
    )


def run(
    program_or_bytes: Program | bytes,
    inputs: Sequence[np.ndarray],
    *,
    target: Target | str | None = None,
) -> list[np.ndarray]:
    """Simulate a program (or a model binary) on `inputs`; returns the outputs in I/O-table order.

    `target` overrides the machine description (a Target or an mcpu name); by default it is the
    one the program was compiled for.
    """
    if isinstance(program_or_bytes, (bytes, bytearray, memoryview)):
        program = decode(bytes(program_or_bytes))
    else:
        program = program_or_bytes
    check_inputs(program, inputs)
    machine = resolve_target(program, target)
    memory = load_memory(program, machine, inputs)
    execute(program, memory)
    return read_outputs(program, memory)
