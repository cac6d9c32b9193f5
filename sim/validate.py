"""Validation: every check the ISA asks of a program, done once, before any engine runs it.

`validate(program, target)` walks the instruction stream up to `end` exactly as an engine
would, and checks every field, enumeration and shape, every DDR and OCM byte an instruction
touches against the target, DMA destinations that overlap, and that every waited token was
signalled earlier. The first violation raises `SimulatorError` naming the instruction index,
its opcode and its ONNX node. Nothing here depends on the input values, so a program that
validates cannot fault, with one exception: the row and column tables of `resize` are f32 data
in OCM, whose indices the engines check when the instruction runs. Otherwise the kernels do
arithmetic only, and the Numba engine, which does no bounds checking of its own, never touches
a byte outside its buffers.

The result, `ValidProgram`, also holds the instructions as typed data: one row of int32 words
per instruction (`words`: opcode, tile, then the opcode's fields in table order, f32 fields as
their bit patterns) and the same memory viewed as float32 (`floats`), which a JIT can read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from mrvl.isa import (
    ACT_TABLE_ENTRIES,
    DTYPE_BYTES,
    OPCODE_BY_NAME,
    OPCODES,
    TABLE_ACTIVATIONS,
    Activation,
    DType,
    Instruction,
    MemSpace,
    OpcodeSpec,
    OpcodeTable,
    Program,
    ReduceMode,
    bmm_shapes,
)
from mrvl.isa_rules import broken_rule
from mrvl.sim.errors import Fault, SimulatorError
from mrvl.sim.validate_int8 import INT8_CHECKS
from mrvl.target import Target, UnknownTargetError, get_target

# ------------------------------------------------------------------------- typed instructions

HEADER_WORDS = 2
"""Words before an instruction's fields in its row: the opcode value, then the tile."""

ROW_WORDS = HEADER_WORDS + max(sum(f.length for f in spec.fields) for spec in OPCODES)


def field_words(spec: OpcodeSpec) -> dict[str, int]:
    """Row index of each field's first word: the fields follow the header in table order."""
    offsets, word = {}, HEADER_WORDS
    for f in spec.fields:
        offsets[f.name] = word
        word += f.length
    return offsets


def encode_words(code: Sequence[Instruction]) -> np.ndarray:
    """int32 [len(code), ROW_WORDS]: the rows of already validated instructions."""
    words = np.zeros((len(code), ROW_WORDS), np.int32)
    for row, ins in zip(words, code):
        spec = OPCODE_BY_NAME[ins.opcode]
        row[0], row[1] = spec.opcode, ins.tile
        for f, word in zip(spec.fields, field_words(spec).values()):
            value = ins.fields[f.name]
            if f.kind == "f32":
                row[word] = np.float32(value).view(np.int32)
            elif f.kind == "i32":
                row[word] = value
            else:
                row[word : word + f.length] = value
    return words


@dataclass(frozen=True)
class ValidProgram:
    """A program that passed `validate` for `target`: engines run it without further checks.

    `code` holds the instructions up to and including the first `end`, `words` their rows and
    `floats` the same rows viewed as float32 (for the f32 fields)."""

    program: Program
    target: Target
    code: tuple[Instruction, ...]
    words: np.ndarray
    floats: np.ndarray


# --------------------------------------------------------------------------- check helpers

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def require(condition: bool, message: str) -> None:
    if not condition:
        raise Fault(message)


def enum_value(kind: type[IntEnum], value: int, field: str) -> IntEnum:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(f"{m.name}={m.value}" for m in kind)
        raise Fault(f"{field}={value} is not a valid {kind.__name__} ({choices})") from None


def positive(values: Sequence[int], field: str) -> tuple[int, ...]:
    require(all(v >= 1 for v in values), f"{field} {list(values)} must be positive")
    return tuple(values)


def box_extent(box: tuple[int, ...], strides: tuple[int, ...], elem_bytes: int) -> tuple[int, int]:
    """Byte offsets [lowest, highest) that a non-empty strided box touches, relative to its
    address; strides may be zero or negative."""
    lowest = sum(min(0, (n - 1) * s) for n, s in zip(box, strides))
    highest = sum(max(0, (n - 1) * s) for n, s in zip(box, strides)) + elem_bytes
    return lowest, highest


MAX_UNNESTED_ELEMENTS = 1 << 20
"""A destination box whose strides are not nested holds at most this many elements: proving its
elements apart takes memory by their number (docs/isa.md, `dma`), which validation keeps
proportional to the program, not to a field's value (a DDR box can span a gigabyte)."""


def overlapping(box: tuple[int, ...], strides: tuple[int, ...], elem_bytes: int) -> bool:
    """Whether two elements of a strided box share a byte (then the write order would matter).
    A Fault for a box of unnested strides with more than MAX_UNNESTED_ELEMENTS."""
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
    require(
        math.prod(box) <= MAX_UNNESTED_ELEMENTS,
        f"box {list(box)} of {math.prod(box)} elements with unnested strides {list(strides)}: "
        f"at most {MAX_UNNESTED_ELEMENTS} elements",
    )
    offsets = np.zeros(1, np.int64)
    for n, s in zip(box, strides):
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64) * s).reshape(-1)
    offsets.sort()
    return bool(np.any(np.diff(offsets) < elem_bytes))


TableKey = tuple[int, int, int]
"""(act, bits of fp32(act_a), bits of fp32(act_b)): which table a `lut` loaded."""


def table_key(f: dict) -> TableKey:
    return (
        int(f["act"]),
        int(np.float32(f["act_a"]).view(np.uint32)),
        int(np.float32(f["act_b"]).view(np.uint32)),
    )


class Bounds:
    """The sizes of DDR, of each tile's OCM and activation-table memory, the checks of byte
    ranges against them, and which activation table each tile holds at this point of the
    program (`tables`, updated as validation walks the stream)."""

    def __init__(self, ddr_size: int, ocm_bytes: int, act_table_bytes: int, num_tiles: int):
        self.ddr_size, self.ocm_bytes = ddr_size, ocm_bytes
        self.act_table_bytes = act_table_bytes
        self.num_tiles = num_tiles
        self.tables: list[TableKey | None] = [None] * num_tiles

    def _space(self, space: MemSpace, tile: int) -> tuple[int, str]:
        if space == MemSpace.DDR:
            return self.ddr_size, "DDR"
        return self.ocm_bytes, f"tile {tile}'s OCM"

    def bytes(self, space: MemSpace, tile: int, start: int, stop: int, what: str) -> None:
        size, name = self._space(space, tile)
        if start < 0 or stop > size:
            raise Fault(f"{what} [{start:#x}, {stop:#x}) is outside {name} of {size:#x} bytes")

    def dense(
        self, space: MemSpace, tile: int, addr: int, dtype: DType, shape: Sequence[int], what: str
    ) -> None:
        """A dense array of `shape` at `addr` lies inside the space."""
        self.bytes(space, tile, addr, addr + math.prod(shape) * DTYPE_BYTES[dtype], what)

    def box(
        self,
        space: MemSpace,
        tile: int,
        addr: int,
        strides: tuple[int, ...],
        box: tuple[int, ...],
        elem_bytes: int,
        what: str,
    ) -> None:
        """Every byte of a non-empty strided box lies inside the space."""
        lowest, highest = box_extent(box, strides, elem_bytes)
        self.bytes(space, tile, addr + lowest, addr + highest, what)


# ------------------------------------------------------------------- the checks per opcode

Check = Callable[[Instruction, Bounds], None]
_CHECKS = OpcodeTable("a validation")
checks = _CHECKS.register


def check_fields(ins: Instruction) -> dict:
    """The instruction's fields against the opcode table (an in-memory Program never went
    through decode): names, vector lengths, and every word within int32."""
    spec = OPCODE_BY_NAME[ins.opcode]
    names = {f.name for f in spec.fields}
    if set(ins.fields) != names:
        raise Fault(f"fields {sorted(ins.fields)} do not match the opcode's {sorted(names)}")
    for f in spec.fields:
        value = ins.fields[f.name]
        if f.kind == "f32":
            require(
                isinstance(value, (int, float, np.integer, np.floating)),
                f"field {f.name} must be a number, got {value!r}",
            )
            continue
        if f.kind.startswith("i32x"):
            if not isinstance(value, (tuple, list)) or len(value) != f.length:
                raise Fault(f"field {f.name} must hold {f.length} integers, got {value!r}")
            items = value
        else:
            items = (value,)
        for item in items:
            require(
                isinstance(item, (int, np.integer)) and I32_MIN <= item <= I32_MAX,
                f"field {f.name} must hold 32-bit integers, got {value!r}",
            )
    return ins.fields


def check_legal(ins: Instruction, machine: dict[str, int]) -> None:
    """Every field within its legal range as the ISA table states it (`isa.FieldSpec.legal`),
    and every enumeration field a member of its enumeration."""
    spec = OPCODE_BY_NAME[ins.opcode]
    for f in spec.fields:
        if f.enum is not None:
            enum_value(f.enum, ins.fields[f.name], f.name)
    broken = broken_rule(spec, ins.fields, machine)
    if broken is not None:
        raise Fault(broken)


def check_activation(ins: Instruction, bounds: Bounds, channels: int | None) -> None:
    """The fused activation: a valid kind; PRELU's slopes (one f32 per channel, `channels` of
    them; None for an instruction without channels) inside the OCM; a table kind's table
    loaded on the tile by a `lut` with the same (act, act_a, act_b)."""
    f = ins.fields
    act = enum_value(Activation, f["act"], "act")
    if act == Activation.PRELU:
        require(channels is not None, f"{ins.opcode} has no channels for PRELU slopes")
        bounds.dense(MemSpace.OCM, ins.tile, f["act_addr"], DType.F32, (channels,), "slopes")
    elif act in TABLE_ACTIVATIONS:
        loaded = bounds.tables[ins.tile]
        if loaded != table_key(f):
            if loaded is None:
                holds = f"no lut loaded a table on tile {ins.tile}"
            else:
                holds = f"tile {ins.tile}'s table memory holds {Activation(loaded[0]).name}"
            raise Fault(
                f"act {act.name} (act_a={f['act_a']!r}, act_b={f['act_b']!r}) needs its table, "
                f"but {holds}"
            )


@checks("dma")
def _check_dma(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    src_space = enum_value(MemSpace, f["src_space"], "src_space")
    dst_space = enum_value(MemSpace, f["dst_space"], "dst_space")
    box, elem_bytes = tuple(f["box"]), f["elem_bytes"]
    src_strides, dst_strides = tuple(f["src_strides"]), tuple(f["dst_strides"])
    check_dst_tiles(ins, src_space, dst_space, bounds.num_tiles)
    if math.prod(box) == 0:
        return
    bounds.box(src_space, ins.tile, f["src_addr"], src_strides, box, elem_bytes, "source box")
    # A multicast writes the same addresses in every destination tile's OCM, and every OCM has
    # the same size: the check on the instruction's tile holds for all of them.
    bounds.box(dst_space, ins.tile, f["dst_addr"], dst_strides, box, elem_bytes, "destination box")
    require(
        not overlapping(box, dst_strides, elem_bytes),
        f"destination strides {list(dst_strides)} make elements of box {list(box)} overlap",
    )


def check_dst_tiles(ins: Instruction, src: MemSpace, dst: MemSpace, num_tiles: int) -> None:
    """A `dma`'s multicast mask: 0 (the instruction's tile alone), or a copy from DDR to OCM
    onto tiles < num_tiles that include the instruction's own."""
    mask = ins.fields["dst_tiles"] & 0xFFFFFFFF  # the word's 32 bits: bit 31 names tile 31
    if mask == 0:
        return
    if (src, dst) != (MemSpace.DDR, MemSpace.OCM):
        raise Fault(
            f"dst_tiles={mask:#x}: only a dma from DDR to OCM may write several tiles' OCM, "
            f"this one copies from {src.name} to {dst.name}"
        )
    if mask >> num_tiles:
        tile = next(t for t in range(num_tiles, 32) if mask >> t & 1)
        raise Fault(f"dst_tiles={mask:#x} names tile {tile} >= num_tiles {num_tiles}")
    require(
        mask >> ins.tile & 1,
        f"dst_tiles={mask:#x} does not include the instruction's own tile {ins.tile}",
    )


CONVERSIONS = frozenset({(DType.F32, DType.F16), (DType.F16, DType.F32)})
"""The type changes `cvt` performs besides a plain copy (same type)."""


@checks("cvt")
def _check_cvt(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    src_dtype = enum_value(DType, f["src_dtype"], "src_dtype")
    dst_dtype = enum_value(DType, f["dst_dtype"], "dst_dtype")
    shape = tuple(f["src_shape"])
    bounds.dense(MemSpace.DDR, ins.tile, f["src_addr"], src_dtype, shape, "source")
    require(
        src_dtype == dst_dtype or (src_dtype, dst_dtype) in CONVERSIONS,
        f"no conversion from {src_dtype.name} to {dst_dtype.name}",
    )
    bounds.dense(MemSpace.DDR, ins.tile, f["dst_addr"], dst_dtype, shape, "destination")


@checks("lut")
def _check_lut(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    nbytes = ACT_TABLE_ENTRIES * DTYPE_BYTES[DType.F16]
    require(
        bounds.act_table_bytes >= nbytes,
        f"a table of {nbytes} bytes does not fit the tile's {bounds.act_table_bytes}-byte "
        "activation-table memory",
    )
    bounds.dense(MemSpace.DDR, ins.tile, f["src_addr"], DType.F16, (ACT_TABLE_ENTRIES,), "table")
    bounds.tables[ins.tile] = table_key(f)


def check_bias(bounds: Bounds, tile: int, b_addr: int, count: int) -> None:
    if b_addr != -1:
        bounds.dense(MemSpace.OCM, tile, b_addr, DType.F32, (count,), "bias")


@checks("conv")
def _check_conv(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    _, _, _, channels = f["in_shape"]
    _, _, _, out_channels = f["out_shape"]
    groups, acc_out = f["groups"], f["acc_out"]
    tile = ins.tile
    out_dtype = DType.F32 if acc_out else DType.F16  # partial sums, or the result
    bounds.dense(MemSpace.OCM, tile, f["out_addr"], out_dtype, f["out_shape"], "output tile")
    bounds.dense(MemSpace.OCM, tile, f["in_addr"], DType.F16, f["in_shape"], "input window")
    if f["acc_addr"] != -1:
        bounds.dense(MemSpace.OCM, tile, f["acc_addr"], DType.F32, f["out_shape"], "partial sums")
    kh, kw = f["kernel"]
    weights = (out_channels, kh, kw, channels // groups)
    bounds.dense(MemSpace.OCM, tile, f["w_addr"], DType.F16, weights, "weights")
    check_bias(bounds, tile, f["b_addr"], out_channels)
    check_activation(ins, bounds, out_channels)


def pool_valid_taps(f: dict) -> np.ndarray:
    """int [OHt, OWt]: the taps of each output position that lie inside the input window.
    Counted as the overlap of each output's kernel span with the window, so it costs memory by
    the output tile (which the caller bounded), never by the kernel."""
    _, height, width, _ = f["in_shape"]
    _, out_rows, out_cols, _ = f["out_shape"]
    kh, kw = (int(k) for k in f["kernel"])
    rows = (f["orow0"] + np.arange(out_rows, dtype=np.int64)) * f["stride"][0]
    rows -= f["pad"][0] + f["row0"]  # window row of each output row's first tap
    cols = np.arange(out_cols, dtype=np.int64) * f["stride"][1] - f["pad"][1]
    row_taps = np.clip(np.minimum(rows + kh, height) - np.maximum(rows, 0), 0, None)
    col_taps = np.clip(np.minimum(cols + kw, width) - np.maximum(cols, 0), 0, None)
    return row_taps[:, None] * col_taps[None, :]


@checks("pool")
def _check_pool(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    in_shape, out_shape = f["in_shape"], f["out_shape"]
    require(in_shape[3] == out_shape[3], f"in_shape C={in_shape[3]} != out_shape C={out_shape[3]}")
    bounds.dense(MemSpace.OCM, ins.tile, f["out_addr"], DType.F16, out_shape, "output tile")
    bounds.dense(MemSpace.OCM, ins.tile, f["in_addr"], DType.F16, in_shape, "input window")
    valid = pool_valid_taps(f)
    if np.any(valid == 0):
        row, col = np.argwhere(valid == 0)[0]
        raise Fault(f"output tile row {row}, column {col} has no tap inside the input window")


@checks("resize")
def _check_resize(ins: Instruction, bounds: Bounds) -> None:
    """The shapes and every operand in bounds. The row and column tables are data (f32 in
    OCM): their indices are checked by the engines when the instruction runs."""
    f = ins.fields
    _, oh, ow, _ = f["out_shape"]
    tile = ins.tile
    bounds.dense(MemSpace.OCM, tile, f["out_addr"], DType.F16, f["out_shape"], "output")
    bounds.dense(MemSpace.OCM, tile, f["in_addr"], DType.F16, f["in_shape"], "input window")
    bounds.dense(MemSpace.OCM, tile, f["ytab_addr"], DType.F32, (oh, 4), "row table")
    bounds.dense(MemSpace.OCM, tile, f["xtab_addr"], DType.F32, (ow, 4), "column table")


@checks("fc")
def _check_fc(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    rows, inner, outs = f["n"], f["k"], f["o"]
    tile = ins.tile
    bounds.dense(MemSpace.OCM, tile, f["out_addr"], DType.F16, (rows, outs), "output")
    bounds.dense(MemSpace.OCM, tile, f["in_addr"], DType.F16, (rows, inner), "input")
    bounds.dense(MemSpace.OCM, tile, f["w_addr"], DType.F16, (outs, inner), "weights")
    check_bias(bounds, tile, f["b_addr"], outs)
    check_activation(ins, bounds, outs)


@checks("bmm")
def _check_bmm(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    a, b, out = bmm_shapes(f)
    tile = ins.tile
    out_dtype = DType.F32 if f["acc_out"] else DType.F16
    bounds.dense(MemSpace.OCM, tile, f["out_addr"], out_dtype, out, "output")
    bounds.dense(MemSpace.OCM, tile, f["a_addr"], DType.F16, a, "operand A")
    bounds.dense(MemSpace.OCM, tile, f["b_addr"], DType.F16, b, "operand B")
    if f["acc_addr"] != -1:
        bounds.dense(MemSpace.OCM, tile, f["acc_addr"], DType.F32, out, "partial sums")


@checks("add")
def _check_add(ins: Instruction, bounds: Bounds) -> None:
    _check_vectors(ins, bounds, ins.fields["count"])
    check_activation(ins, bounds, ins.fields["channels"] or None)


def _check_vectors(ins: Instruction, bounds: Bounds, b_count: int) -> None:
    """The f16 output and operand a of `count` elements of an `add` or `mul`, and its
    operand b of `b_count`."""
    f = ins.fields
    count = f["count"]
    bounds.dense(MemSpace.OCM, ins.tile, f["out_addr"], DType.F16, (count,), "output")
    bounds.dense(MemSpace.OCM, ins.tile, f["a_addr"], DType.F16, (count,), "operand a")
    bounds.dense(MemSpace.OCM, ins.tile, f["b_addr"], DType.F16, (b_count,), "operand b")


@checks("scale")
def _check_scale(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    count, channels = f["count"], f["channels"]
    tile = ins.tile
    bounds.dense(MemSpace.OCM, tile, f["out_addr"], DType.F16, (count,), "output")
    bounds.dense(MemSpace.OCM, tile, f["in_addr"], DType.F16, (count,), "input")
    bounds.dense(MemSpace.OCM, tile, f["s_addr"], DType.F32, (channels,), "scales")
    bounds.dense(MemSpace.OCM, tile, f["b_addr"], DType.F32, (channels,), "shifts")
    check_activation(ins, bounds, channels)


@checks("mul")
def _check_mul(ins: Instruction, bounds: Bounds) -> None:
    _check_vectors(ins, bounds, ins.fields["channels"] or ins.fields["count"])
    check_activation(ins, bounds, None)


@checks("softmax")
def _check_softmax(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    shape = (f["outer"], f["length"], f["inner"])
    bounds.dense(MemSpace.OCM, ins.tile, f["out_addr"], DType.F16, shape, "output")
    bounds.dense(MemSpace.OCM, ins.tile, f["in_addr"], DType.F16, shape, "input")


@checks("layernorm")
def _check_layernorm(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    shape, tile = (f["rows"], f["length"]), ins.tile
    bounds.dense(MemSpace.OCM, tile, f["out_addr"], DType.F16, shape, "output")
    bounds.dense(MemSpace.OCM, tile, f["in_addr"], DType.F16, shape, "input")
    bounds.dense(MemSpace.OCM, tile, f["g_addr"], DType.F32, (f["length"],), "scales")
    bounds.dense(MemSpace.OCM, tile, f["b_addr"], DType.F32, (f["length"],), "shifts")


@checks("lnstats")
def _check_lnstats(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    bounds.dense(MemSpace.OCM, ins.tile, f["out_addr"], DType.F32, (f["rows"], 2), "statistics")
    bounds.dense(MemSpace.OCM, ins.tile, f["in_addr"], DType.F16, (f["rows"], f["length"]), "input")


@checks("lnapply")
def _check_lnapply(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    shape, tile = (f["rows"], f["count"]), ins.tile
    bounds.dense(MemSpace.OCM, tile, f["out_addr"], DType.F16, shape, "output")
    bounds.dense(MemSpace.OCM, tile, f["in_addr"], DType.F16, shape, "input")
    bounds.dense(MemSpace.OCM, tile, f["stats_addr"], DType.F32, (f["rows"], 2), "statistics")
    bounds.dense(MemSpace.OCM, tile, f["g_addr"], DType.F32, (f["count"],), "scales")
    bounds.dense(MemSpace.OCM, tile, f["b_addr"], DType.F32, (f["count"],), "shifts")


def reduce_output_dtype(f: dict) -> DType:
    """What `reduce` writes: fp32 partials (acc_out) or argmax's indices, else f16."""
    return DType.F32 if f["acc_out"] or f["mode"] == ReduceMode.ARGMAX else DType.F16


@checks("reduce")
def _check_reduce(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    shape, out, tile = (f["outer"], f["length"], f["inner"]), (f["outer"], f["inner"]), ins.tile
    bounds.dense(MemSpace.OCM, tile, f["out_addr"], reduce_output_dtype(f), out, "output")
    bounds.dense(MemSpace.OCM, tile, f["in_addr"], DType.F16, shape, "input")
    if f["acc_addr"] != -1:
        bounds.dense(MemSpace.OCM, tile, f["acc_addr"], DType.F32, out, "partials")


def broadcast_span(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements from the first to the last one a `binary` operand of element `strides` reads."""
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


@checks("binary")
def _check_binary(ins: Instruction, bounds: Bounds) -> None:
    f = ins.fields
    shape, tile = tuple(f["shape"]), ins.tile
    bounds.dense(MemSpace.OCM, tile, f["out_addr"], DType.F16, shape, "output")
    for name, what in (("a", "operand a"), ("b", "operand b")):
        span = broadcast_span(shape, f[f"{name}_strides"])
        bounds.dense(MemSpace.OCM, tile, f[f"{name}_addr"], DType.F16, (span,), what)


@checks("end")
def _check_end(ins: Instruction, bounds: Bounds) -> None:
    pass


for _opcode, _check in INT8_CHECKS.items():  # quant, dequant, qconv, ... (validate_int8.py)
    checks(_opcode)(_check)

_CHECKS.require_complete()


# ---------------------------------------------------------------------------- the program


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


def describe(program: Program, index: int, ins: Instruction) -> str:
    if isinstance(ins.loc, int) and 0 <= ins.loc < len(program.srcmap):
        node = f"ONNX node {program.srcmap[ins.loc]!r}"
    else:
        node = "no ONNX node"
    return f"instruction {index} ({ins.opcode}, {node})"


def _check_io(program: Program, bounds: Bounds) -> None:
    """The constant pool and every I/O tensor lie inside DDR."""
    try:
        bounds.bytes(
            MemSpace.DDR,
            0,
            program.const_base,
            program.const_base + len(program.consts),
            "constants",
        )
        for entry in program.inputs:
            bounds.dense(
                MemSpace.DDR, 0, entry.ddr_addr, entry.dtype, entry.shape, f"input {entry.name!r}"
            )
    except Fault as e:
        raise SimulatorError(f"loading the program: {e}") from None
    try:
        for entry in program.outputs:
            bounds.dense(
                MemSpace.DDR, 0, entry.ddr_addr, entry.dtype, entry.shape, f"output {entry.name!r}"
            )
    except Fault as e:
        raise SimulatorError(f"reading the outputs: {e}") from None


def validate(program: Program, target: Target | str | None = None) -> ValidProgram:
    """Check `program` for `target` (default: the one it names); see the module docstring."""
    machine = resolve_target(program, target)
    bounds = Bounds(
        program.ddr_size,
        machine.ocm_bytes_per_tile,
        machine.act_table_bytes_per_tile,
        program.num_tiles,
    )
    _check_io(program, bounds)
    machine_sizes = {
        "ocm": machine.ocm_bytes_per_tile,
        "ddr": program.ddr_size,
        "tiles": program.num_tiles,
    }
    signalled: set[int] = set()
    for index, ins in enumerate(program.code):
        try:
            require(ins.opcode in OPCODE_BY_NAME, f"unknown opcode {ins.opcode!r}")
            require(
                0 <= ins.tile < program.num_tiles,
                f"tile {ins.tile} >= num_tiles {program.num_tiles}",
            )
            for token in ins.waits:
                require(
                    token in signalled,
                    f"waits on token {token}, which no earlier instruction signalled",
                )
            check_fields(ins)
            check_legal(ins, machine_sizes)
            _CHECKS[ins.opcode](ins, bounds)
        except Fault as e:
            raise SimulatorError(f"{describe(program, index, ins)}: {e}") from None
        if ins.opcode == "end":
            code = tuple(program.code[: index + 1])
            words = encode_words(code)
            return ValidProgram(program, machine, code, words, words.view(np.float32))
        if ins.signal:
            signalled.add(ins.signal)
    raise SimulatorError(
        f"instruction {len(program.code)}: ran past the last instruction, the program has no end"
    )
