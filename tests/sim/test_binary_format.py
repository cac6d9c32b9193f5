"""The model binary: byte layout, lossless canonical round trip, a named error for every defect."""

from __future__ import annotations

import math
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_builders import copy_bytes, end, fc, instruction

from mrvl.binary import (
    HEADER_SIZE,
    MAGIC,
    BinaryFormatError,
    SectionType,
    decode,
    encode,
    read_header,
)
from mrvl.isa import DTYPE_BYTES, NO_LOC, OPCODES, DType, Instruction, IOEntry, MemSpace, Program


def sample_program() -> Program:
    return Program(
        target="cn10ka",
        num_tiles=2,
        ddr_size=4096,
        io=[
            IOEntry("input", True, (1, 2), DType.F32, 0),
            IOEntry("/fc/Gemm_output_0", False, (1, 3), DType.F32, 64),
        ],
        code=[
            copy_bytes(MemSpace.DDR, 1024, MemSpace.OCM, 0, 12, signal=1, loc=0),
            fc(0, 1, 2, 3, 64, 128, b_addr=-1, act_a=0.5, waits=(1,), signal=2, tile=1, loc=1),
            end(waits=(1, 2)),
        ],
        const_base=1024,
        consts=bytes(range(13)),
        srcmap=["/fc/Gemm", "/fc/Relu"],
    )


def reseal(data: bytes) -> bytes:
    """Recompute the checksum, so a test reaches the validation behind it."""
    data = bytearray(data)
    struct.pack_into("<I", data, HEADER_SIZE - 4, zlib.crc32(bytes(data[HEADER_SIZE:])))
    return bytes(data)


def section(data: bytes, kind: SectionType):
    return next(s for s in read_header(data).sections if s.type == kind)


def patched(data: bytes, offset: int, fmt: str, *values) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return reseal(bytes(out))


# ------------------------------------------------------------------------------------ layout


def test_header_layout():
    data = encode(sample_program())
    assert data[:8] == MAGIC == b"MLIPBIN\0"
    _, major, minor, target, tiles, ddr, const_base, total, n_sections, crc = struct.unpack_from(
        "<8sHH16sIIIIII", data
    )
    assert (major, minor) == (2, 2)
    assert target == b"cn10ka".ljust(16, b"\0")
    assert (tiles, ddr, const_base, total, n_sections) == (2, 4096, 1024, len(data), 4)
    assert crc == zlib.crc32(data[HEADER_SIZE:]) and HEADER_SIZE == 52
    table = [struct.unpack_from("<III", data, HEADER_SIZE + 12 * i) for i in range(4)]
    assert [t for t, _, _ in table] == [1, 2, 3, 4]
    assert table[0][1] == HEADER_SIZE + 48
    assert all(offset % 4 == 0 for _, offset, _ in table)
    _, const_offset, const_size = table[2]
    assert data[const_offset : const_offset + const_size] == bytes(range(13))


def test_instruction_layout():
    data = encode(sample_program())
    code = section(data, SectionType.CODE)
    assert struct.unpack_from("<I", data, code.offset) == (3,)
    first = code.offset + 4
    # dma: opcode, tile, n_waits, n_words, signal, loc; no waits; 18 field words.
    assert struct.unpack_from("<BBBBII", data, first) == (0x01, 0, 0, 18, 1, 0)
    src = (0, 1024, (0, 0, 0, 1))  # DDR, address, strides
    dst = (1, 0, (0, 0, 0, 1))  # OCM
    box, elem_bytes, dst_tiles = (1, 1, 1, 12), 1, 0  # dst_tiles left out: its default, 0
    words = (src[0], src[1], *src[2], dst[0], dst[1], *dst[2], *box, elem_bytes, dst_tiles)
    assert struct.unpack_from("<18i", data, first + 12) == words
    second = first + 12 + 18 * 4
    # fc: one u32 wait; f32 fields as binary32 bits.
    assert struct.unpack_from("<BBBBIII", data, second) == (0x30, 1, 1, 11, 2, 1, 1)
    words = struct.unpack_from("<8iffi", data, second + 16)
    assert words == (0, 1, 2, 3, 64, -1, 128, 0, 0.5, 0.0, -1)
    third = second + 16 + 44
    assert data[third : third + 20] == bytes([0x7F, 0, 2, 0, 0, 0, 0, 0]) + b"\xff" * 4 + bytes(
        [1, 0, 0, 0, 2, 0, 0, 0]
    )


def test_io_and_srcmap_layout():
    data = encode(sample_program())
    io = section(data, SectionType.IO)
    assert struct.unpack_from("<IBBBBIII", data, io.offset) == (2, 1, int(DType.F32), 2, 0, 0, 1, 2)
    assert data[io.offset + 20 : io.offset + 32] == struct.pack("<I", 5) + b"input\0\0\0"
    srcmap = section(data, SectionType.SRCMAP)
    assert data[srcmap.offset : srcmap.offset + srcmap.size] == (
        struct.pack("<II", 2, 8) + b"/fc/Gemm" + struct.pack("<I", 8) + b"/fc/Relu"
    )


# --------------------------------------------------------------------------------- round trip


def instructions(srcmap_len: int):
    def fields_for(spec):
        values = {}
        for f in spec.fields:
            if f.kind == "f32":
                values[f.name] = st.floats(width=32, allow_nan=False)
            elif f.kind == "i32":
                values[f.name] = st.integers(-(2**31), 2**31 - 1)
            else:
                values[f.name] = st.tuples(*[st.integers(-(2**31), 2**31 - 1)] * f.length)
        return st.fixed_dictionaries(values)

    locs = (
        st.just(NO_LOC)
        if srcmap_len == 0
        else st.one_of(st.just(NO_LOC), st.integers(0, srcmap_len - 1))
    )
    return st.sampled_from(OPCODES).flatmap(
        lambda spec: st.builds(
            Instruction,
            opcode=st.just(spec.name),
            tile=st.integers(0, 255),
            signal=st.integers(0, 2**32 - 1),
            waits=st.lists(st.integers(0, 2**32 - 1), max_size=5).map(tuple),
            loc=locs,
            fields=fields_for(spec),
        )
    )


@st.composite
def programs(draw) -> Program:
    srcmap = draw(st.lists(st.text(max_size=12), max_size=4))
    consts = draw(st.binary(max_size=40))
    const_base = draw(st.integers(0, 1000))
    io = draw(
        st.lists(
            st.builds(
                IOEntry,
                name=st.text(max_size=10),
                is_input=st.booleans(),
                shape=st.lists(st.integers(0, 6), max_size=4).map(tuple),
                dtype=st.sampled_from(DType),
                ddr_addr=st.integers(0, 1000),
            ),
            max_size=3,
        )
    )
    needed = max(
        [const_base + len(consts)]
        + [e.ddr_addr + math.prod(e.shape) * DTYPE_BYTES[e.dtype] for e in io]
    )
    return Program(
        target=draw(
            st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=16)
        ),
        num_tiles=draw(st.integers(0, 2**32 - 1)),
        ddr_size=needed + draw(st.integers(0, 2**20)),
        io=io,
        code=draw(st.lists(instructions(len(srcmap)), max_size=6)),
        const_base=const_base,
        consts=consts,
        srcmap=srcmap,
    )


@settings(max_examples=150, deadline=None)
@given(programs())
def test_round_trip_is_lossless_and_canonical(program):
    data = encode(program)
    decoded = decode(data)
    assert decoded == program
    assert encode(decoded) == data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.data())
def test_corrupted_body_is_rejected_or_canonical(program, data):
    """Whatever a flipped byte (checksum recomputed) does, decode either names a problem or
    returns a Program that encodes back to exactly those bytes."""
    good = encode(program)
    position = data.draw(st.integers(HEADER_SIZE, len(good) - 1))
    value = data.draw(st.integers(0, 255))
    corrupt = bytearray(good)
    corrupt[position] = value
    corrupt = reseal(bytes(corrupt))
    try:
        decoded = decode(corrupt)
    except BinaryFormatError:
        return
    assert encode(decoded) == corrupt


@given(st.floats(width=32))
def test_f32_fields_keep_their_binary32_bits(value):
    program = sample_program()
    program.code[1].fields["act_b"] = value
    data = encode(program)
    assert encode(decode(data)) == data
    decoded = decode(data).code[1].fields["act_b"]
    assert struct.pack("<f", decoded) == struct.pack("<f", value)


def test_f32_fields_round_to_nearest_binary32():
    program = sample_program()
    program.code[1].fields["act_a"] = 0.1
    assert (
        decode(encode(program)).code[1].fields["act_a"]
        == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    )


def test_signalling_nan_is_rejected():
    data = encode(sample_program())
    code = section(data, SectionType.CODE)
    act_a = code.offset + 4 + 12 + 18 * 4 + 16 + 8 * 4
    assert struct.unpack_from("<f", data, act_a) == (0.5,)
    with pytest.raises(
        BinaryFormatError, match=r"instruction 1 \(fc\): an f32 field holds a signalling NaN"
    ):
        decode(patched(data, act_a, "<I", 0x7F800001))


# ----------------------------------------------------------------------------- corruptions


def test_bad_magic():
    data = encode(sample_program())
    with pytest.raises(BinaryFormatError, match="bad magic"):
        decode(b"ELF\x7f" + data[4:])
    with pytest.raises(BinaryFormatError, match="bad magic"):
        decode(b"MLIPBIX")


def test_unsupported_version():
    data = bytearray(encode(sample_program()))
    data[8] = 3
    with pytest.raises(
        BinaryFormatError, match=r"unsupported format version 3\.2 \(this decoder reads 2\.2\)"
    ):
        decode(bytes(data))


def test_a_format_2_1_binary_is_refused():
    """2.1 had a 17-word dma (no dst_tiles); only 2.2 is read."""
    data = bytearray(encode(sample_program()))
    data[10] = 1
    with pytest.raises(BinaryFormatError, match=r"unsupported format version 2\.1"):
        decode(bytes(data))


def test_checksum_mismatch():
    data = bytearray(encode(sample_program()))
    data[-1] ^= 0x40
    with pytest.raises(BinaryFormatError, match="checksum mismatch"):
        decode(bytes(data))


def test_every_truncation_is_named():
    data = encode(sample_program())
    for length in range(len(data)):
        with pytest.raises(BinaryFormatError, match="truncated file") as info:
            decode(data[:length])
        if length >= HEADER_SIZE:
            assert f"header says {len(data)} bytes, got {length}" in str(info.value)
        elif length >= len(MAGIC):
            assert f"{length} bytes, shorter than the {HEADER_SIZE}-byte header" in str(info.value)


def test_trailing_bytes():
    with pytest.raises(BinaryFormatError, match="4 trailing bytes"):
        decode(encode(sample_program()) + bytes(4))


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (
            lambda d, code: patched(d, code.offset + 4, "<B", 0x55),
            "unknown opcode 0x55 at instruction 0",
        ),
        (
            lambda d, code: patched(d, code.offset + 4 + 3, "<B", 17),
            r"instruction 0 \(dma\): field count wrong: 17 field words, dma has 18",
        ),
        (
            lambda d, code: patched(d, code.offset + 4 + 8, "<I", 2),
            r"instruction 0 \(dma\): loc index 2 out of range \(srcmap has 2 entries\)",
        ),
        (lambda d, code: patched(d, code.offset, "<I", 4), "CODE section truncated"),
        (lambda d, code: patched(d, code.offset, "<I", 2), "CODE section has 20 unused bytes"),
        (
            lambda d, code: patched(d, HEADER_SIZE + 12 + 8, "<I", 1 << 20),
            r"CODE section out of bounds: \[\d+, \d+\) past the file end",
        ),
        (
            lambda d, code: patched(d, HEADER_SIZE + 12 + 4, "<I", code.offset + 4),
            "CODE section at offset .* expected",
        ),
        (
            lambda d, code: patched(d, HEADER_SIZE + 12, "<I", 3),
            r"section 1 has type 3, expected 2 \(CODE\)",
        ),
        (lambda d, code: patched(d, 44, "<I", 5), "5 sections, format 2.2 has 4"),
    ],
)
def test_structural_defects_are_named(corrupt, message):
    data = encode(sample_program())
    with pytest.raises(BinaryFormatError, match=message):
        decode(corrupt(data, section(data, SectionType.CODE)))


def test_io_and_string_defects_are_named():
    data = encode(sample_program())
    io = section(data, SectionType.IO)
    with pytest.raises(BinaryFormatError, match="IO entry 0 dtype 9 is not a DType"):
        decode(patched(data, io.offset + 5, "<B", 9))
    with pytest.raises(BinaryFormatError, match="IO entry 0 name is not UTF-8"):
        decode(patched(data, io.offset + 24, "<B", 0xFF))
    with pytest.raises(
        BinaryFormatError, match="IO section: nonzero padding after IO entry 0 name"
    ):
        decode(patched(data, io.offset + 31, "<B", 1))
    second_entry = io.offset + 4 + 28  # count, then entry 0: 8-byte record, 2 dims, "input"
    with pytest.raises(
        BinaryFormatError,
        match=r"IO entry '/fc/Gemm_output_0' \[0xffa, 0x1006\) does not fit DDR size 0x1000",
    ):
        decode(patched(data, second_entry + 4, "<I", 4090))
    srcmap = section(data, SectionType.SRCMAP)
    with pytest.raises(BinaryFormatError, match="SRCMAP section truncated"):
        decode(patched(data, srcmap.offset, "<I", 3))


def test_header_defects_are_named():
    data = encode(sample_program())
    with pytest.raises(BinaryFormatError, match="bad target name"):
        decode(data[:12] + b"cn10ka\0x".ljust(16, b"\0") + data[28:])
    with pytest.raises(
        BinaryFormatError, match=r"constants \[0x400, 0x40d\) do not fit DDR size 0x400"
    ):
        decode(data[:32] + struct.pack("<I", 1024) + data[36:])


# ------------------------------------------------------------------------------ encode errors


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda p: setattr(p.code[0], "opcode", "nop"), "instruction 0: unknown opcode 'nop'"),
        (
            lambda p: p.code[1].fields.pop("act_b"),
            r"instruction 1 \(fc, ONNX node '/fc/Relu'\): field count wrong: missing \['act_b'\]",
        ),
        (
            lambda p: p.code[1].fields.update(n=2**31),
            r"instruction 1 \(fc, ONNX node '/fc/Relu'\) field n=2147483648 does not fit",
        ),
        (
            lambda p: p.code[1].fields.update(act_a=1e39),
            r"instruction 1 \(fc, ONNX node '/fc/Relu'\) field act_a=1e\+39 is beyond",
        ),
        (
            lambda p: p.code[0].fields.update(box=(1, 2, 3)),
            r"instruction 0 \(dma, ONNX node '/fc/Gemm'\) field box must be 4 integers",
        ),
        (lambda p: setattr(p.code[1], "loc", 5), r"instruction 1 \(fc\): loc index 5 out of range"),
        (
            lambda p: setattr(p.code[1], "tile", 256),
            r"instruction 1 \(fc, ONNX node '/fc/Relu'\) tile=256 is outside \[0, 255\]",
        ),
        (lambda p: setattr(p, "target", "cn10ka-with-a-long-name"), "longer than 16 bytes"),
        (lambda p: setattr(p, "ddr_size", 1030), "constants .* do not fit DDR"),
    ],
)
def test_encode_names_what_cannot_be_encoded(mutate, message):
    program = sample_program()
    mutate(program)
    with pytest.raises(BinaryFormatError, match=message):
        encode(program)


def test_wait_lists_of_every_parity_round_trip():
    for count in range(4):
        program = sample_program()
        program.code[1].waits = tuple(range(1, count + 1))
        assert decode(encode(program)) == program


def test_extra_fields_are_refused_not_dropped():
    program = sample_program()
    program.code[-1] = instruction("end", extra=1)
    with pytest.raises(BinaryFormatError, match=r"unknown \['extra'\]"):
        encode(program)


def multicast_program() -> Program:
    """sample_program on 4 tiles, its dma a multicast from tile 1 to tiles 0, 1 and 3."""
    program = sample_program()
    program.num_tiles = 4
    program.code[0] = copy_bytes(
        MemSpace.DDR, 1024, MemSpace.OCM, 0, 12, tile=1, signal=1, loc=0, dst_tiles=0b1011
    )
    return program


def test_a_multicast_dma_round_trips_through_the_binary_and_the_mlip_text():
    """dst_tiles is the dma's 18th word; decode gives it back, the disassembler prints it (and
    leaves it out of a dma that has 0), and the text assembles to the same bytes."""
    import io

    from xdsl.parser import Parser
    from xdsl.printer import Printer

    from mrvl.assembler import assemble, disassemble
    from mrvl.dialects import mrvl_context

    program = multicast_program()
    data = encode(program)
    code = section(data, SectionType.CODE)
    assert struct.unpack_from("<B", data, code.offset + 4 + 3) == (18,)
    assert struct.unpack_from("<i", data, code.offset + 4 + 12 + 17 * 4) == (0b1011,)
    decoded = decode(data)
    assert decoded == program and decoded.code[0].fields["dst_tiles"] == 0b1011
    module = disassemble(decoded)
    module.verify()
    stream = io.StringIO()
    Printer(stream, print_debuginfo=True).print_op(module)
    text = stream.getvalue()
    assert "elem_bytes 1, dst_tiles 11 loc(" in text
    assert encode(assemble(module)) == data
    assert encode(assemble(Parser(mrvl_context(), text).parse_module())) == data
    single = disassemble(decode(encode(sample_program())))
    assert "dst_tiles" not in str(single) and "elem_bytes 1\n" in str(single)
