"""The model binary: one compiled region as bytes, and back.

The encoding is canonical: `decode` accepts exactly what `encode` produces (fixed section order,
zero padding, canonical f32 bits), so `encode(decode(b)) == b` for every accepted `b` and two
binaries can be compared or hashed byte for byte. `docs/isa.md` ("Binary format") has the
byte-by-byte layout; the constants below are that table.

All integers are little-endian. The file is: header, section table, then the IO, CODE, CONST and
SRCMAP sections in that order, each starting at a 4-byte-aligned offset with zero padding between.
"""

from __future__ import annotations

import math
import operator
import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum

from mrvl.errors import MrvlError
from mrvl.isa import (
    DTYPE_BYTES,
    NO_LOC,
    OPCODE_BY_NAME,
    OPCODE_BY_VALUE,
    DType,
    Instruction,
    IOEntry,
    OpcodeSpec,
    Program,
)
from mrvl.isa_rules import broken_rule

MAGIC = b"MLIPBIN\0"
VERSION = (2, 2)
"""2.2 added `dma`'s last field, `dst_tiles` (18 field words; 2.1 had 17). Only this version
is read: reading 2.1 too would break `encode(decode(b)) == b`, since encode writes 2.2."""
TARGET_NAME_BYTES = 16

# magic, version major, minor, target, num_tiles, ddr_size, const_base, total_size,
# num_sections, crc32 of everything after the header.
_HEADER = struct.Struct("<8sHH16sIIIIII")
HEADER_SIZE = _HEADER.size
_SECTION_ENTRY = struct.Struct("<III")  # type, offset, size
_COUNT = struct.Struct("<I")
# is_input, dtype, ndim, reserved (0), ddr_addr; then ndim u32 dims, then the name string.
_IO_ENTRY = struct.Struct("<BBBBI")
# opcode, tile, n_waits, n_words (field words), signal, loc; then the waits as u32, then
# n_words 32-bit field words.
_INSN_HEADER = struct.Struct("<BBBBII")

_U8, _U16, _U32 = (1 << 8) - 1, (1 << 16) - 1, (1 << 32) - 1
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_MAX_NDIM = 8


class BinaryFormatError(MrvlError, ValueError):
    """A model binary (or a Program about to become one) that breaks the format."""


class SectionType(IntEnum):
    IO = 1
    CODE = 2
    CONST = 3
    SRCMAP = 4


SECTION_ORDER = tuple(SectionType)


@dataclass(frozen=True)
class Section:
    type: SectionType
    offset: int
    size: int


@dataclass(frozen=True)
class Header:
    """The fixed header and section table of a binary, as `read_header` validated them."""

    version: tuple[int, int]
    target: str
    num_tiles: int
    ddr_size: int
    const_base: int
    total_size: int
    checksum: int
    sections: tuple[Section, ...]


def _field_struct(spec: OpcodeSpec) -> struct.Struct:
    """One struct for all field words of an opcode, so fields pack in table order."""
    return struct.Struct(
        "<" + "".join("f" if f.kind == "f32" else "i" * f.length for f in spec.fields)
    )


_FIELD_STRUCTS = {spec.name: _field_struct(spec) for spec in OPCODE_BY_NAME.values()}


def _align4(n: int) -> int:
    return (n + 3) & ~3


def _dtype(value: object, what: str) -> DType:
    try:
        return DType(value)
    except ValueError:
        raise BinaryFormatError(f"{what} {value!r} is not a DType") from None


# ----------------------------------------------------------------------------------- encode


def _check_uint(value: object, limit: int, what: str) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        raise BinaryFormatError(f"{what} must be an integer, got {value!r}") from None
    if not 0 <= number <= limit:
        raise BinaryFormatError(f"{what}={number} is outside [0, {limit}]")
    return number


def _check_i32(value: object, what: str) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        raise BinaryFormatError(f"{what} must be an integer, got {value!r}") from None
    if not _I32_MIN <= number <= _I32_MAX:
        raise BinaryFormatError(f"{what}={number} does not fit a signed 32-bit word")
    return number


def _check_f32(value: object, what: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
        struct.pack("<f", number)
    except (TypeError, ValueError):
        raise BinaryFormatError(f"{what} must be a float, got {value!r}") from None
    except OverflowError:
        raise BinaryFormatError(f"{what}={value!r} is beyond the binary32 range") from None
    return number


def _encode_string(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise BinaryFormatError(f"{what} must be a str, got {text!r}")
    raw = text.encode("utf-8")
    return _COUNT.pack(len(raw)) + raw + bytes(_align4(len(raw)) - len(raw))


def _encode_io(io: list[IOEntry]) -> bytes:
    parts = [_COUNT.pack(len(io))]
    for index, entry in enumerate(io):
        what = f"IO entry {index} ({entry.name!r})"
        dtype = _dtype(entry.dtype, f"{what} dtype")
        if len(entry.shape) > _MAX_NDIM:
            raise BinaryFormatError(f"{what}: {len(entry.shape)} dimensions, at most {_MAX_NDIM}")
        dims = [_check_uint(d, _U32, f"{what} shape dimension") for d in entry.shape]
        parts.append(
            _IO_ENTRY.pack(
                1 if entry.is_input else 0,
                dtype,
                len(dims),
                0,
                _check_uint(entry.ddr_addr, _U32, f"{what} ddr_addr"),
            )
        )
        parts.append(struct.pack(f"<{len(dims)}I", *dims))
        parts.append(_encode_string(entry.name, f"{what} name"))
    return b"".join(parts)


def _field_words(
    instruction: str, ins: Instruction, spec: OpcodeSpec, legal: bool
) -> list[int | float]:
    """The fields of one instruction flattened in table order, each checked against its kind
    and, with `legal`, against the legal ranges of the ISA table that need no target."""
    names = [f.name for f in spec.fields]
    if set(ins.fields) != set(names):
        missing = sorted(set(names) - set(ins.fields))
        extra = sorted(set(ins.fields) - set(names))
        raise BinaryFormatError(
            f"{instruction}: field count wrong: missing {missing}, unknown {extra}"
        )
    words: list[int | float] = []
    for f in spec.fields:
        value = ins.fields[f.name]
        what = f"{instruction} field {f.name}"
        if f.kind == "f32":
            words.append(_check_f32(value, what))
        elif f.kind == "i32":
            words.append(_check_i32(value, what))
        else:
            if not isinstance(value, (tuple, list)) or len(value) != f.length:
                raise BinaryFormatError(f"{what} must be {f.length} integers, got {value!r}")
            words.extend(_check_i32(v, what) for v in value)
    if legal and (broken := broken_rule(spec, ins.fields)) is not None:
        raise BinaryFormatError(f"{instruction}: {broken}")
    return words


def _encode_instruction(index: int, ins: Instruction, srcmap: list[str], legal: bool) -> bytes:
    srcmap_len = len(srcmap)
    spec = OPCODE_BY_NAME.get(ins.opcode)
    if spec is None:
        raise BinaryFormatError(f"instruction {index}: unknown opcode {ins.opcode!r}")
    what = f"instruction {index} ({ins.opcode})"
    if isinstance(ins.loc, int) and 0 <= ins.loc < srcmap_len:
        what = f"instruction {index} ({ins.opcode}, ONNX node '{srcmap[ins.loc]}')"
    waits = [_check_uint(t, _U32, f"{what} wait token") for t in ins.waits]
    if len(waits) > _U8:
        raise BinaryFormatError(f"{what}: {len(waits)} wait tokens, at most {_U8}")
    loc = _check_uint(ins.loc, _U32, f"{what} loc")
    if loc != NO_LOC and loc >= srcmap_len:
        raise BinaryFormatError(
            f"{what}: loc index {loc} out of range (srcmap has {srcmap_len} entries)"
        )
    header = _INSN_HEADER.pack(
        spec.opcode,
        _check_uint(ins.tile, _U8, f"{what} tile"),
        len(waits),
        sum(f.length for f in spec.fields),
        _check_uint(ins.signal, _U32, f"{what} signal"),
        loc,
    )
    return (
        header
        + struct.pack(f"<{len(waits)}I", *waits)
        + _FIELD_STRUCTS[spec.name].pack(*_field_words(what, ins, spec, legal))
    )


def _encode_target(name: str) -> bytes:
    if not isinstance(name, str) or not name or not name.isascii() or "\0" in name:
        raise BinaryFormatError(f"target {name!r} must be a non-empty ASCII name")
    raw = name.encode("ascii")
    if len(raw) > TARGET_NAME_BYTES:
        raise BinaryFormatError(f"target {name!r} is longer than {TARGET_NAME_BYTES} bytes")
    return raw


def _check_ddr_layout(program: Program) -> None:
    """Constants and I/O tensors must lie inside the DDR the binary declares."""
    end = program.const_base + len(program.consts)
    if end > program.ddr_size:
        raise BinaryFormatError(
            f"constants [{program.const_base:#x}, {end:#x}) "
            f"do not fit DDR size {program.ddr_size:#x}"
        )
    for entry in program.io:
        nbytes = math.prod(entry.shape) * DTYPE_BYTES[DType(entry.dtype)]
        if entry.ddr_addr + nbytes > program.ddr_size:
            raise BinaryFormatError(
                f"IO entry {entry.name!r} [{entry.ddr_addr:#x}, {entry.ddr_addr + nbytes:#x}) "
                f"does not fit DDR size {program.ddr_size:#x}"
            )


def encode(program: Program, *, legal: bool = False) -> bytes:
    """Serialize a Program; raises BinaryFormatError naming the first value it cannot encode.

    With `legal` (as the compiler calls it) it also refuses a field outside its legal range
    (`isa.FieldSpec.legal`, the ranges that need no target). Without, it writes any field the
    format can carry, so that `encode(decode(b)) == b` for every `b` that `decode` accepts and
    the simulator's validation, which refuses the rest, can be tested (and fuzzed:
    scripts/mutate_binaries.py)."""
    target = _encode_target(program.target)
    num_tiles = _check_uint(program.num_tiles, _U32, "num_tiles")
    ddr_size = _check_uint(program.ddr_size, _U32, "ddr_size")
    const_base = _check_uint(program.const_base, _U32, "const_base")
    if not isinstance(program.consts, (bytes, bytearray)):
        raise BinaryFormatError(f"consts must be bytes, got {type(program.consts).__name__}")
    payloads = {
        SectionType.IO: _encode_io(program.io),
        SectionType.CODE: _COUNT.pack(len(program.code))
        + b"".join(
            _encode_instruction(i, ins, program.srcmap, legal) for i, ins in enumerate(program.code)
        ),
        SectionType.CONST: bytes(program.consts),
        SectionType.SRCMAP: _COUNT.pack(len(program.srcmap))
        + b"".join(
            _encode_string(name, f"srcmap entry {i}") for i, name in enumerate(program.srcmap)
        ),
    }
    _check_ddr_layout(program)

    offset = HEADER_SIZE + len(SECTION_ORDER) * _SECTION_ENTRY.size
    table, body = [], []
    for kind in SECTION_ORDER:
        aligned = _align4(offset)
        body.append(bytes(aligned - offset))
        table.append(_SECTION_ENTRY.pack(kind, aligned, len(payloads[kind])))
        body.append(payloads[kind])
        offset = aligned + len(payloads[kind])
    after_header = b"".join(table) + b"".join(body)
    if offset > _U32:
        raise BinaryFormatError(f"binary of {offset} bytes exceeds the 4 GiB format limit")
    header = _HEADER.pack(
        MAGIC,
        *VERSION,
        target,
        num_tiles,
        ddr_size,
        const_base,
        offset,
        len(SECTION_ORDER),
        zlib.crc32(after_header),
    )
    return header + after_header


# ----------------------------------------------------------------------------------- decode


class _Reader:
    """Sequential little-endian reads inside one section, failing with the section's name."""

    def __init__(self, data: bytes, section: Section):
        self.data = data
        self.pos = section.offset
        self.end = section.offset + section.size
        self.name = section.type.name

    def take(self, layout: struct.Struct, what: str) -> tuple:
        if self.pos + layout.size > self.end:
            raise BinaryFormatError(
                f"{self.name} section truncated: {what} needs {layout.size} bytes at offset "
                f"{self.pos}, the section ends at {self.end}"
            )
        values = layout.unpack_from(self.data, self.pos)
        self.pos += layout.size
        return values

    def take_bytes(self, size: int, what: str) -> bytes:
        if self.pos + size > self.end:
            raise BinaryFormatError(
                f"{self.name} section truncated: {what} needs {size} bytes at offset {self.pos}, "
                f"the section ends at {self.end}"
            )
        raw = self.data[self.pos : self.pos + size]
        self.pos += size
        return raw

    def take_padding(self, size: int, what: str) -> None:
        if any(self.take_bytes(size, what)):
            raise BinaryFormatError(f"{self.name} section: nonzero padding after {what}")

    def take_string(self, what: str) -> str:
        (length,) = self.take(_COUNT, f"{what} length")
        raw = self.take_bytes(length, what)
        self.take_padding(_align4(length) - length, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BinaryFormatError(
                f"{self.name} section: {what} is not UTF-8 ({e.reason})"
            ) from None

    def finish(self) -> None:
        if self.pos != self.end:
            raise BinaryFormatError(
                f"{self.name} section has {self.end - self.pos} unused bytes at its end"
            )


def _decode_target(raw: bytes) -> str:
    name, _, rest = raw.partition(b"\0")
    if not name or any(rest) or not name.isascii():
        raise BinaryFormatError(f"bad target name {raw!r}: expected ASCII padded with NUL bytes")
    return name.decode("ascii")


def read_header(data: bytes) -> Header:
    """Validate the header, checksum and section table (not the section contents)."""
    data = bytes(data)
    if data[: len(MAGIC)] != MAGIC[: len(data)]:
        raise BinaryFormatError(
            f"bad magic {data[: len(MAGIC)]!r}: not an MLIP model binary (expected {MAGIC!r})"
        )
    if len(data) < HEADER_SIZE:
        raise BinaryFormatError(
            f"truncated file: {len(data)} bytes, shorter than the {HEADER_SIZE}-byte header"
        )
    (
        _,
        major,
        minor,
        raw_target,
        num_tiles,
        ddr_size,
        const_base,
        total_size,
        num_sections,
        checksum,
    ) = _HEADER.unpack_from(data)
    if (major, minor) != VERSION:
        raise BinaryFormatError(
            f"unsupported format version {major}.{minor} "
            f"(this decoder reads {VERSION[0]}.{VERSION[1]})"
        )
    if len(data) < total_size:
        raise BinaryFormatError(f"truncated file: header says {total_size} bytes, got {len(data)}")
    if len(data) > total_size:
        raise BinaryFormatError(
            f"{len(data) - total_size} trailing bytes: "
            f"header says {total_size} bytes, got {len(data)}"
        )
    actual = zlib.crc32(data[HEADER_SIZE:])
    if actual != checksum:
        raise BinaryFormatError(
            f"checksum mismatch: header says {checksum:#010x}, contents give {actual:#010x}"
        )
    target = _decode_target(raw_target)
    if num_sections != len(SECTION_ORDER):
        raise BinaryFormatError(
            f"{num_sections} sections, format {VERSION[0]}.{VERSION[1]} has {len(SECTION_ORDER)}"
        )
    table_end = HEADER_SIZE + num_sections * _SECTION_ENTRY.size
    if table_end > total_size:
        raise BinaryFormatError(
            f"section table [{HEADER_SIZE}, {table_end}) "
            f"runs past the end of the file ({total_size})"
        )

    sections = []
    expected_offset = table_end
    for index, kind in enumerate(SECTION_ORDER):
        type_value, offset, size = _SECTION_ENTRY.unpack_from(
            data, HEADER_SIZE + index * _SECTION_ENTRY.size
        )
        if type_value != kind:
            raise BinaryFormatError(
                f"section {index} has type {type_value}, expected {kind.value} ({kind.name})"
            )
        if offset + size > total_size:
            raise BinaryFormatError(
                f"{kind.name} section out of bounds: [{offset}, {offset + size}) "
                f"past the file end {total_size}"
            )
        if offset != _align4(expected_offset):
            raise BinaryFormatError(
                f"{kind.name} section at offset {offset}, expected {_align4(expected_offset)} "
                "(sections are packed in order at 4-byte alignment)"
            )
        if any(data[expected_offset:offset]):
            raise BinaryFormatError(f"nonzero padding before the {kind.name} section")
        sections.append(Section(kind, offset, size))
        expected_offset = offset + size
    if expected_offset != total_size:
        raise BinaryFormatError(
            f"{total_size - expected_offset} bytes after the last section (total size {total_size})"
        )
    return Header(
        (major, minor),
        target,
        num_tiles,
        ddr_size,
        const_base,
        total_size,
        checksum,
        tuple(sections),
    )


def _decode_io(reader: _Reader) -> list[IOEntry]:
    (count,) = reader.take(_COUNT, "entry count")
    io = []
    for index in range(count):
        what = f"IO entry {index}"
        is_input, dtype, ndim, reserved, ddr_addr = reader.take(_IO_ENTRY, what)
        if is_input not in (0, 1):
            raise BinaryFormatError(f"{what}: is_input={is_input}, expected 0 or 1")
        dtype = _dtype(dtype, f"{what} dtype")
        if ndim > _MAX_NDIM:
            raise BinaryFormatError(f"{what}: {ndim} dimensions, at most {_MAX_NDIM}")
        if reserved:
            raise BinaryFormatError(f"{what}: reserved byte is {reserved}, expected 0")
        shape = reader.take(struct.Struct(f"<{ndim}I"), f"{what} shape")
        name = reader.take_string(f"{what} name")
        io.append(IOEntry(name, bool(is_input), tuple(shape), dtype, ddr_addr))
    reader.finish()
    return io


def _decode_instruction(reader: _Reader, index: int, srcmap_len: int) -> Instruction:
    opcode, tile, n_waits, n_words, signal, loc = reader.take(
        _INSN_HEADER, f"instruction {index} header"
    )
    spec = OPCODE_BY_VALUE.get(opcode)
    if spec is None:
        raise BinaryFormatError(f"unknown opcode {opcode:#04x} at instruction {index}")
    what = f"instruction {index} ({spec.name})"
    layout = _FIELD_STRUCTS[spec.name]
    if n_words * 4 != layout.size:
        raise BinaryFormatError(
            f"{what}: field count wrong: {n_words} field words, {spec.name} has {layout.size // 4}"
        )
    if loc != NO_LOC and loc >= srcmap_len:
        raise BinaryFormatError(
            f"{what}: loc index {loc} out of range (srcmap has {srcmap_len} entries)"
        )
    waits = reader.take(struct.Struct(f"<{n_waits}I"), f"{what} waits")
    raw_fields = reader.take_bytes(layout.size, f"{what} fields")
    words = layout.unpack(raw_fields)
    if layout.pack(*words) != raw_fields:
        raise BinaryFormatError(
            f"{what}: an f32 field holds a signalling NaN, which does not survive decoding"
        )
    fields: dict[str, int | float | tuple[int, ...]] = {}
    position = 0
    for f in spec.fields:
        if f.kind.startswith("i32x"):
            fields[f.name] = tuple(words[position : position + f.length])
        else:
            fields[f.name] = words[position]
        position += f.length
    return Instruction(spec.name, tile, signal, tuple(waits), loc, fields)


def decode(data: bytes) -> Program:
    """Parse and validate a model binary; every defect raises BinaryFormatError naming it."""
    data = bytes(data)
    header = read_header(data)
    sections = {s.type: s for s in header.sections}

    srcmap_reader = _Reader(data, sections[SectionType.SRCMAP])
    (count,) = srcmap_reader.take(_COUNT, "entry count")
    srcmap = [srcmap_reader.take_string(f"srcmap entry {i}") for i in range(count)]
    srcmap_reader.finish()

    io = _decode_io(_Reader(data, sections[SectionType.IO]))

    code_reader = _Reader(data, sections[SectionType.CODE])
    (count,) = code_reader.take(_COUNT, "instruction count")
    code = [_decode_instruction(code_reader, i, len(srcmap)) for i in range(count)]
    code_reader.finish()

    const = sections[SectionType.CONST]
    program = Program(
        target=header.target,
        num_tiles=header.num_tiles,
        ddr_size=header.ddr_size,
        io=io,
        code=code,
        const_base=header.const_base,
        consts=data[const.offset : const.offset + const.size],
        srcmap=srcmap,
    )
    _check_ddr_layout(program)
    return program
