"""Validation of the int8 instructions (docs/isa.md): every operand they read and write inside
its memory, with its int8, int32 or float type. The field checks (legal ranges: zero points,
clamps, shift ranges, the source and destination types of `quant` and `dequant`) are the ISA
table's and run before these, as for every opcode. `validate.py` registers `INT8_CHECKS`."""

from __future__ import annotations

from mrvl.isa import DType, Instruction, MemSpace
from mrvl.isa_int8 import INT8_LUT_ENTRIES
from mrvl.sim.errors import Fault

DDR, OCM = MemSpace.DDR, MemSpace.OCM


def _finish_operands(ins: Instruction, bounds, channels: int | None) -> None:
    """The requantization pairs (one per channel, when `channels` is given) and the table."""
    f = ins.fields
    if channels is not None:
        bounds.dense(OCM, ins.tile, f["rq_addr"], DType.I32, (channels, 2), "requantization pairs")
    if f["lut_addr"] != -1:
        bounds.dense(OCM, ins.tile, f["lut_addr"], DType.I8, (INT8_LUT_ENTRIES,), "int8 table")


def _bias(ins: Instruction, bounds, count: int) -> None:
    if ins.fields["b_addr"] != -1:
        bounds.dense(OCM, ins.tile, ins.fields["b_addr"], DType.I32, (count,), "bias")


def _check_quant(ins: Instruction, bounds) -> None:
    f = ins.fields
    shape = tuple(f["src_shape"])
    bounds.dense(DDR, ins.tile, f["src_addr"], DType(f["src_dtype"]), shape, "source")
    bounds.dense(DDR, ins.tile, f["dst_addr"], DType.I8, shape, "destination")


def _check_dequant(ins: Instruction, bounds) -> None:
    f = ins.fields
    shape = tuple(f["src_shape"])
    bounds.dense(DDR, ins.tile, f["src_addr"], DType.I8, shape, "source")
    bounds.dense(DDR, ins.tile, f["dst_addr"], DType(f["dst_dtype"]), shape, "destination")


def _check_qconv(ins: Instruction, bounds) -> None:
    f = ins.fields
    tile, out_shape = ins.tile, f["out_shape"]
    out_channels = out_shape[3]
    out_dtype = DType.I32 if f["acc_out"] else DType.I8  # partial sums, or the result
    bounds.dense(OCM, tile, f["out_addr"], out_dtype, out_shape, "output tile")
    bounds.dense(OCM, tile, f["in_addr"], DType.I8, f["in_shape"], "input window")
    if f["acc_addr"] != -1:
        bounds.dense(OCM, tile, f["acc_addr"], DType.I32, out_shape, "partial sums")
    kh, kw = f["kernel"]
    weights = (out_channels, kh, kw, f["in_shape"][3] // f["groups"])
    bounds.dense(OCM, tile, f["w_addr"], DType.I8, weights, "weights")
    _bias(ins, bounds, out_channels)
    if not f["acc_out"]:  # partial sums are written before any requantization
        _finish_operands(ins, bounds, out_channels)


def _check_qfc(ins: Instruction, bounds) -> None:
    f = ins.fields
    rows, inner, outs = f["n"], f["k"], f["o"]
    bounds.dense(OCM, ins.tile, f["out_addr"], DType.I8, (rows, outs), "output")
    bounds.dense(OCM, ins.tile, f["in_addr"], DType.I8, (rows, inner), "input")
    bounds.dense(OCM, ins.tile, f["w_addr"], DType.I8, (outs, inner), "weights")
    _bias(ins, bounds, outs)
    _finish_operands(ins, bounds, outs)


def _vector(ins: Instruction, bounds, *inputs: tuple) -> None:
    """An elementwise int8 instruction: its output [count], each input `(field, name)` of count
    elements or `(field, name, length)`, and its table."""
    f = ins.fields
    count = f["count"]
    bounds.dense(OCM, ins.tile, f["out_addr"], DType.I8, (count,), "output")
    for field, what, *length in inputs:
        bounds.dense(OCM, ins.tile, f[field], DType.I8, (length[0] if length else count,), what)
    _finish_operands(ins, bounds, None)


def _check_qadd(ins: Instruction, bounds) -> None:
    _vector(ins, bounds, ("a_addr", "operand a"), ("b_addr", "operand b"))


def _check_requant(ins: Instruction, bounds) -> None:
    _vector(ins, bounds, ("in_addr", "input"))


def _check_qmul(ins: Instruction, bounds) -> None:
    b_count = ins.fields["channels"] or ins.fields["count"]
    _vector(ins, bounds, ("a_addr", "operand a"), ("b_addr", "operand b", b_count))


def _check_qpool(ins: Instruction, bounds) -> None:
    from mrvl.sim.validate import pool_valid_taps  # validate.py imports this module

    f = ins.fields
    in_shape, out_shape = f["in_shape"], f["out_shape"]
    if in_shape[3] != out_shape[3]:
        raise Fault(f"in_shape C={in_shape[3]} != out_shape C={out_shape[3]}")
    bounds.dense(OCM, ins.tile, f["out_addr"], DType.I8, out_shape, "output tile")
    bounds.dense(OCM, ins.tile, f["in_addr"], DType.I8, in_shape, "input window")
    valid = pool_valid_taps(f)
    if (valid == 0).any():
        row, col = (valid == 0).nonzero()
        raise Fault(f"output tile row {row[0]}, column {col[0]} has no tap inside the input window")


def _check_qresize(ins: Instruction, bounds) -> None:
    """The shapes and every operand in bounds; the tables' indices are data, checked by the
    engines when the instruction runs (as `resize`'s)."""
    f = ins.fields
    _, oh, ow, _ = f["out_shape"]
    bounds.dense(OCM, ins.tile, f["out_addr"], DType.I8, f["out_shape"], "output")
    bounds.dense(OCM, ins.tile, f["in_addr"], DType.I8, f["in_shape"], "input window")
    bounds.dense(OCM, ins.tile, f["ytab_addr"], DType.I32, (oh, 3), "row table")
    bounds.dense(OCM, ins.tile, f["xtab_addr"], DType.I32, (ow, 3), "column table")
    _finish_operands(ins, bounds, None)


def _check_qbmm(ins: Instruction, bounds) -> None:
    from mrvl.isa import bmm_shapes

    f = ins.fields
    a, b, out = bmm_shapes(f)
    out_dtype = DType.I32 if f["acc_out"] else DType.I8  # partial sums, or the result
    bounds.dense(OCM, ins.tile, f["out_addr"], out_dtype, out, "output")
    bounds.dense(OCM, ins.tile, f["a_addr"], DType.I8, a, "operand A")
    bounds.dense(OCM, ins.tile, f["b_addr"], DType.I8, b, "operand B")
    if f["acc_addr"] != -1:
        bounds.dense(OCM, ins.tile, f["acc_addr"], DType.I32, out, "partial sums")
    if not f["acc_out"]:  # partial sums are written before any requantization
        _finish_operands(ins, bounds, None)


INT8_CHECKS = {
    "quant": _check_quant,
    "dequant": _check_dequant,
    "qconv": _check_qconv,
    "qpool": _check_qpool,
    "qfc": _check_qfc,
    "qadd": _check_qadd,
    "requant": _check_requant,
    "qmul": _check_qmul,
    "qresize": _check_qresize,
    "qbmm": _check_qbmm,
}
"""The int8 opcodes' checks, which `validate.py` registers."""
