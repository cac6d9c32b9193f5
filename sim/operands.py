"""The operands of an instruction: the bytes each one reads and writes (docs/isa.md §3), one
rule per opcode (`operands_of`), for every analysis that reasons about memory: the cycle
model's hazard check and OCM use, the weight cache, and the profiles."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from mrvl.isa import (
    ACT_TABLE_ENTRIES,
    DTYPE_BYTES,
    TABLE_ACTIVATIONS,
    Activation,
    DType,
    Instruction,
    OpcodeTable,
    bmm_shapes,
    destination_tiles,
)
from mrvl.isa_int8 import INT8_LUT_ENTRIES
from mrvl.sim.validate import broadcast_span, reduce_output_dtype

DDR, OCM, TABLE = 0, 1, 2
"""The memories an access can name; TABLE is a tile's activation-table memory."""


@dataclass(frozen=True)
class Access:
    """The bytes one operand touches: runs of `run` contiguous bytes at
    `base + Σ i_d · stride_d` for each index of the outer `dims` ((count, stride) pairs, all
    strides positive). TABLE accesses have base 0 and run 1. `tile`: for OCM and TABLE, the
    tile whose memory it is; None (every access but a multicast dma's writes) means the
    instruction's own."""

    space: int
    base: int
    dims: tuple[tuple[int, int], ...]
    run: int
    tile: int | None = None

    @property
    def runs(self) -> int:
        return math.prod(n for n, _ in self.dims)

    @property
    def nbytes(self) -> int:
        return self.runs * self.run

    @property
    def hull(self) -> tuple[int, int]:
        """[lowest, highest) byte touched."""
        return self.base, self.base + sum((n - 1) * s for n, s in self.dims) + self.run

    def run_starts(self) -> np.ndarray:
        starts = np.full(1, self.base, np.int64)
        for n, s in self.dims:
            starts = (starts[:, None] + np.arange(n, dtype=np.int64) * s).reshape(-1)
        return starts


def strided(space: int, addr: int, box, strides, elem_bytes: int) -> Access | None:
    """The bytes of a `dma` side; None for an empty box. Broadcast (stride 0) and extent-1
    dimensions drop out, negative strides are walked forwards, contiguous dimensions merge."""
    if math.prod(box) == 0:
        return None
    base, dims = addr, []
    for n, s in zip(box, strides):
        if n > 1 and s != 0:
            if s < 0:
                base += (n - 1) * s
            dims.append((n, abs(s)))
    dims.sort(key=lambda d: -d[1])
    run = elem_bytes
    while dims and dims[-1][1] == run:
        run *= dims.pop()[0]
    return Access(space, base, tuple(dims), run)


def dense(space: int, addr: int, dtype: DType, shape) -> Access:
    return Access(space, addr, (), math.prod(shape) * DTYPE_BYTES[dtype])


TABLE_ACCESS = Access(TABLE, 0, (), 1)

Operands = tuple[list[Access], list[Access]]


def _activation_reads(f: dict, channels: int | None) -> list[Access]:
    act = f["act"]
    if act == Activation.PRELU and channels is not None:
        return [dense(OCM, f["act_addr"], DType.F32, (channels,))]
    if act in TABLE_ACTIVATIONS:
        return [TABLE_ACCESS]
    return []


def _bias(f: dict, count: int, dtype: DType = DType.F32) -> list[Access]:
    """The optional bias of `count` values (f32, or i32 for the int8 instructions)."""
    return [dense(OCM, f["b_addr"], dtype, (count,))] if f["b_addr"] != -1 else []


def _conv_inputs(f: dict, dtype: DType, bias: DType) -> list[Access]:
    """The window, the weights [OCt, KH, KW, C/groups] (both `dtype`) and the optional bias
    of a `conv` or `qconv`."""
    out_channels = f["out_shape"][3]
    kh, kw = f["kernel"]
    weights = (out_channels, kh, kw, f["in_shape"][3] // f["groups"])
    return [
        dense(OCM, f["in_addr"], dtype, f["in_shape"]),
        dense(OCM, f["w_addr"], dtype, weights),
        *_bias(f, out_channels, bias),
    ]


def _fc_inputs(f: dict, dtype: DType, bias: DType) -> list[Access]:
    """The rows [N, K], the weights [O, K] (both `dtype`) and the optional bias of an `fc` or
    `qfc`."""
    n, k, o = f["n"], f["k"], f["o"]
    return [
        dense(OCM, f["in_addr"], dtype, (n, k)),
        dense(OCM, f["w_addr"], dtype, (o, k)),
        *_bias(f, o, bias),
    ]




OPERANDS = OpcodeTable("an operand rule")
"""Per opcode, its (reads, writes) from its fields and the instruction (docs/isa.md §3)."""
operands_of = OPERANDS.register


@operands_of("dma")
def _dma(f: dict, ins: Instruction) -> Operands:
    src = strided(f["src_space"], f["src_addr"], f["box"], f["src_strides"], f["elem_bytes"])
    dst = strided(f["dst_space"], f["dst_addr"], f["box"], f["dst_strides"], f["elem_bytes"])
    if dst is None:
        return ([src] if src else [], [])
    if f["dst_tiles"]:  # a multicast: the same OCM bytes on each destination tile
        return [src], [dataclasses.replace(dst, tile=t) for t in destination_tiles(ins)]
    return [src], [dst]


def _ddr_conversion(f: dict, src_dtype: DType, dst_dtype: DType) -> Operands:
    """A dense DDR-to-DDR conversion (`cvt`, `quant`, `dequant`): the whole source read, the
    whole destination written (nothing for an empty tensor)."""
    shape = f["src_shape"]
    if math.prod(shape) == 0:
        return [], []
    return (
        [dense(DDR, f["src_addr"], src_dtype, shape)],
        [dense(DDR, f["dst_addr"], dst_dtype, shape)],
    )


@operands_of("cvt")
def _cvt(f: dict, ins: Instruction) -> Operands:
    return _ddr_conversion(f, f["src_dtype"], f["dst_dtype"])


@operands_of("lut")
def _lut(f: dict, ins: Instruction) -> Operands:
    return [dense(DDR, f["src_addr"], DType.F16, (ACT_TABLE_ENTRIES,))], [TABLE_ACCESS]


@operands_of("conv")
def _conv(f: dict, ins: Instruction) -> Operands:
    out_channels = f["out_shape"][3]
    reads = _conv_inputs(f, DType.F16, DType.F32) + _activation_reads(f, out_channels)
    if f["acc_addr"] != -1:
        reads.append(dense(OCM, f["acc_addr"], DType.F32, f["out_shape"]))
    out_dtype = DType.F32 if f["acc_out"] else DType.F16
    return reads, [dense(OCM, f["out_addr"], out_dtype, f["out_shape"])]


def _window(f: dict, dtype: DType) -> Operands:
    """The input window and the output tile of a `pool` or `qpool` (of `dtype`)."""
    return (
        [dense(OCM, f["in_addr"], dtype, f["in_shape"])],
        [dense(OCM, f["out_addr"], dtype, f["out_shape"])],
    )


@operands_of("pool")
def _pool(f: dict, ins: Instruction) -> Operands:
    return _window(f, DType.F16)


def _resize_window(f: dict, dtype: DType, table: DType, columns: int) -> Operands:
    """The window, the row and column tables ([OH, columns] and [OW, columns] of `table`)
    and the output tile of a `resize` or `qresize` of `dtype` data."""
    _, rows, cols, _ = f["out_shape"]
    (window,), writes = _window(f, dtype)
    reads = [
        window,
        dense(OCM, f["ytab_addr"], table, (rows, columns)),
        dense(OCM, f["xtab_addr"], table, (cols, columns)),
    ]
    return reads, writes


@operands_of("resize")
def _resize(f: dict, ins: Instruction) -> Operands:
    return _resize_window(f, DType.F16, DType.F32, 4)


@operands_of("fc")
def _fc(f: dict, ins: Instruction) -> Operands:
    reads = _fc_inputs(f, DType.F16, DType.F32) + _activation_reads(f, f["o"])
    return reads, [dense(OCM, f["out_addr"], DType.F16, (f["n"], f["o"]))]


@operands_of("bmm")
def _bmm(f: dict, ins: Instruction) -> Operands:
    a, b, out = bmm_shapes(f)
    reads = [dense(OCM, f["a_addr"], DType.F16, a), dense(OCM, f["b_addr"], DType.F16, b)]
    if f["acc_addr"] != -1:
        reads.append(dense(OCM, f["acc_addr"], DType.F32, out))
    out_dtype = DType.F32 if f["acc_out"] else DType.F16
    return reads, [dense(OCM, f["out_addr"], out_dtype, out)]


@operands_of("add")
def _add(f: dict, ins: Instruction) -> Operands:
    count = f["count"]
    reads = [dense(OCM, f[a], DType.F16, (count,)) for a in ("a_addr", "b_addr")]
    return reads + _activation_reads(f, None), [dense(OCM, f["out_addr"], DType.F16, (count,))]


@operands_of("scale")
def _scale(f: dict, ins: Instruction) -> Operands:
    count, channels = f["count"], f["channels"]
    reads = [
        dense(OCM, f["in_addr"], DType.F16, (count,)),
        dense(OCM, f["s_addr"], DType.F32, (channels,)),
        dense(OCM, f["b_addr"], DType.F32, (channels,)),
        *_activation_reads(f, channels),
    ]
    return reads, [dense(OCM, f["out_addr"], DType.F16, (count,))]


@operands_of("mul")
def _mul(f: dict, ins: Instruction) -> Operands:
    count = f["count"]
    reads = [
        dense(OCM, f["a_addr"], DType.F16, (count,)),
        dense(OCM, f["b_addr"], DType.F16, (f["channels"] or count,)),
        *_activation_reads(f, None),
    ]
    return reads, [dense(OCM, f["out_addr"], DType.F16, (count,))]


@operands_of("softmax")
def _softmax(f: dict, ins: Instruction) -> Operands:
    shape = (f["outer"], f["length"], f["inner"])
    return (
        [dense(OCM, f["in_addr"], DType.F16, shape)],
        [dense(OCM, f["out_addr"], DType.F16, shape)],
    )


@operands_of("layernorm")
def _layernorm(f: dict, ins: Instruction) -> Operands:
    shape = (f["rows"], f["length"])
    return (
        [
            dense(OCM, f["in_addr"], DType.F16, shape),
            dense(OCM, f["g_addr"], DType.F32, (f["length"],)),
            dense(OCM, f["b_addr"], DType.F32, (f["length"],)),
        ],
        [dense(OCM, f["out_addr"], DType.F16, shape)],
    )


@operands_of("lnstats")
def _lnstats(f: dict, ins: Instruction) -> Operands:
    return (
        [dense(OCM, f["in_addr"], DType.F16, (f["rows"], f["length"]))],
        [dense(OCM, f["out_addr"], DType.F32, (f["rows"], 2))],
    )


@operands_of("lnapply")
def _lnapply(f: dict, ins: Instruction) -> Operands:
    shape = (f["rows"], f["count"])
    return (
        [
            dense(OCM, f["in_addr"], DType.F16, shape),
            dense(OCM, f["stats_addr"], DType.F32, (f["rows"], 2)),
            dense(OCM, f["g_addr"], DType.F32, (f["count"],)),
            dense(OCM, f["b_addr"], DType.F32, (f["count"],)),
        ],
        [dense(OCM, f["out_addr"], DType.F16, shape)],
    )


def _int8_finish(f: dict, channels: int | None) -> list[Access]:
    """What an int8 result reads besides its inputs: the requantization pairs (per channel,
    when `channels` is given) and the int8 table."""
    reads = [dense(OCM, f["rq_addr"], DType.I32, (channels, 2))] if channels is not None else []
    if f["lut_addr"] != -1:
        reads.append(dense(OCM, f["lut_addr"], DType.I8, (INT8_LUT_ENTRIES,)))
    return reads


@operands_of("quant")
def _quant(f: dict, ins: Instruction) -> Operands:
    return _ddr_conversion(f, f["src_dtype"], DType.I8)


@operands_of("dequant")
def _dequant(f: dict, ins: Instruction) -> Operands:
    return _ddr_conversion(f, DType.I8, f["dst_dtype"])


@operands_of("qconv")
def _qconv(f: dict, ins: Instruction) -> Operands:
    out_channels = f["out_shape"][3]
    reads = _conv_inputs(f, DType.I8, DType.I32)
    if f["acc_addr"] != -1:
        reads.append(dense(OCM, f["acc_addr"], DType.I32, f["out_shape"]))
    if f["acc_out"]:
        return reads, [dense(OCM, f["out_addr"], DType.I32, f["out_shape"])]
    reads += _int8_finish(f, out_channels)
    return reads, [dense(OCM, f["out_addr"], DType.I8, f["out_shape"])]


@operands_of("qpool")
def _qpool(f: dict, ins: Instruction) -> Operands:
    return _window(f, DType.I8)


@operands_of("qfc")
def _qfc(f: dict, ins: Instruction) -> Operands:
    reads = _fc_inputs(f, DType.I8, DType.I32) + _int8_finish(f, f["o"])
    return reads, [dense(OCM, f["out_addr"], DType.I8, (f["n"], f["o"]))]


@operands_of("qadd")
def _qadd(f: dict, ins: Instruction) -> Operands:
    count = (f["count"],)
    reads = [dense(OCM, f[a], DType.I8, count) for a in ("a_addr", "b_addr")]
    return reads + _int8_finish(f, None), [dense(OCM, f["out_addr"], DType.I8, count)]


@operands_of("requant")
def _requant(f: dict, ins: Instruction) -> Operands:
    count = (f["count"],)
    reads = [dense(OCM, f["in_addr"], DType.I8, count), *_int8_finish(f, None)]
    return reads, [dense(OCM, f["out_addr"], DType.I8, count)]


@operands_of("qmul")
def _qmul(f: dict, ins: Instruction) -> Operands:
    count = (f["count"],)
    reads = [
        dense(OCM, f["a_addr"], DType.I8, count),
        dense(OCM, f["b_addr"], DType.I8, (f["channels"],) if f["channels"] else count),
        *_int8_finish(f, None),
    ]
    return reads, [dense(OCM, f["out_addr"], DType.I8, count)]


@operands_of("qresize")
def _qresize(f: dict, ins: Instruction) -> Operands:
    reads, writes = _resize_window(f, DType.I8, DType.I32, 3)
    return reads + _int8_finish(f, None), writes


@operands_of("qbmm")
def _qbmm(f: dict, ins: Instruction) -> Operands:
    a, b, out = bmm_shapes(f)
    reads = [dense(OCM, f["a_addr"], DType.I8, a), dense(OCM, f["b_addr"], DType.I8, b)]
    if f["acc_addr"] != -1:
        reads.append(dense(OCM, f["acc_addr"], DType.I32, out))
    if f["acc_out"]:
        return reads, [dense(OCM, f["out_addr"], DType.I32, out)]
    return reads + _int8_finish(f, None), [dense(OCM, f["out_addr"], DType.I8, out)]


@operands_of("reduce")
def _reduce(f: dict, ins: Instruction) -> Operands:
    out = (f["outer"], f["inner"])
    reads = [dense(OCM, f["in_addr"], DType.F16, (f["outer"], f["length"], f["inner"]))]
    if f["acc_addr"] != -1:
        reads.append(dense(OCM, f["acc_addr"], DType.F32, out))
    return reads, [dense(OCM, f["out_addr"], reduce_output_dtype(f), out)]


@operands_of("binary")
def _binary(f: dict, ins: Instruction) -> Operands:
    shape = f["shape"]
    reads = [
        dense(OCM, f[f"{x}_addr"], DType.F16, (broadcast_span(shape, f[f"{x}_strides"]),))
        for x in ("a", "b")
    ]
    return reads, [dense(OCM, f["out_addr"], DType.F16, shape)]


@operands_of("end")
def _end(f: dict, ins: Instruction) -> Operands:
    return [], []


OPERANDS.require_complete()


def operands(ins: Instruction) -> Operands:
    """(reads, writes) of one instruction, as docs/isa.md §3 defines its operands."""
    return OPERANDS[ins.opcode](ins.fields, ins)
