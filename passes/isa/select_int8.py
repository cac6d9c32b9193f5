"""Instruction selection of the int8 tasks (docs/isa.md, int8 mode): one pattern per task,
as `convert_sched_to_mlip.py` has for the fp16 ones, which gathers these into
`INSTRUCTION_SELECTIONS`. The compile-time numbers (requantization pairs, clamps) were made
when the tasks were (`passes/sched/lowering/int8_compute.py`); here they become fields."""

from __future__ import annotations

from mrvl.dialects import sched
from mrvl.passes.isa.convert_sched_to_mlip import (
    InstructionSelection,
    _dtype,
)


def _quant_fields(state, op: sched.QuantizeTaskOp | sched.DequantizeTaskOp) -> dict:
    scale, zero = op.quant.values
    return {**state.conversion_fields(op), "scale": scale, "zp": zero}


class SelectQuantize(InstructionSelection):
    """A region input (or an fp16 result) quantized to int8 is one `quant`."""

    source = sched.QuantizeTaskOp
    opcode = "quant"

    def fields(self, op: sched.QuantizeTaskOp) -> dict:
        return {
            **_quant_fields(self.state, op),
            "src_dtype": _dtype(sched.buffer_type(op.source)),
        }


class SelectDequantize(InstructionSelection):
    """An int8 result dequantized (a region output, an fp16 layer's input) is one `dequant`."""

    source = sched.DequantizeTaskOp
    opcode = "dequant"

    def fields(self, op: sched.DequantizeTaskOp) -> dict:
        return {**_quant_fields(self.state, op), "dst_dtype": _dtype(sched.buffer_type(op.dest))}


class SelectQConv2D(InstructionSelection):
    source = sched.QConv2DTaskOp
    opcode = "qconv"

    def fields(self, op: sched.QConv2DTaskOp) -> dict:
        return {
            **self.state.conv_fields(op),
            "rq_addr": self.state.address(op.requant),
            **self.state.int8_fields(op),
        }


class SelectQFullyConnected(InstructionSelection):
    source = sched.QFullyConnectedTaskOp
    opcode = "qfc"

    def fields(self, op: sched.QFullyConnectedTaskOp) -> dict:
        return {
            **self.state.fc_fields(op),
            "rq_addr": self.state.address(op.requant),
            **self.state.int8_fields(op),
        }


class SelectQAdd(InstructionSelection):
    source = sched.QAddTaskOp
    opcode = "qadd"

    def fields(self, op: sched.QAddTaskOp) -> dict:
        return {
            **self.state.vector_fields(op),
            "a_zp": op.a_zp.value.data,
            "b_zp": op.b_zp.value.data,
            "out_zp": op.out_zp.value.data,
            "a_rq": list(op.a_rq.get_values()),
            "b_rq": list(op.b_rq.get_values()),
            "out_rq": list(op.out_rq.get_values()),
            **self.state.finish_fields(op),
        }


class SelectRequant(InstructionSelection):
    source = sched.RequantTaskOp
    opcode = "requant"

    def fields(self, op: sched.RequantTaskOp) -> dict:
        return {
            **self.state.unary_fields(op),
            "rq": list(op.rq.get_values()),
            **self.state.int8_fields(op),
        }


class SelectQPool2D(InstructionSelection):
    source = sched.QPool2DTaskOp
    opcode = "qpool"

    def fields(self, op: sched.QPool2DTaskOp) -> dict:
        return {
            **self.state.pool_fields(op),
            "in_zp": op.in_zp.value.data,
            "out_zp": op.out_zp.value.data,
            "rq": list(op.rq.get_values()),
        }


INT8_SELECTIONS: tuple[type[InstructionSelection], ...] = (
    SelectQuantize,
    SelectDequantize,
    SelectQConv2D,
    SelectQFullyConnected,
    SelectQAdd,
    SelectQPool2D,
    SelectRequant,
)
