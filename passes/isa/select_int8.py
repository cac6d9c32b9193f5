"""Instruction selection of the int8 tasks (docs/isa.md, int8 mode): one pattern per task,
as `convert_sched_to_mlip.py` has for the fp16 ones, which gathers these into
`INSTRUCTION_SELECTIONS`. The compile-time numbers (requantization pairs, clamps) were made
when the tasks were (`passes/sched/lowering/int8_compute.py`); here they become fields."""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import sched
from mrvl.passes.isa.convert_sched_to_mlip import (
    InstructionSelection,
    _dtype,
)


def _quant_fields(state, op: sched.QuantizeTaskOp | sched.DequantizeTaskOp) -> dict:
    scale, zero = op.quant.values
    return {**state.conversion_fields(op), "scale": scale, "zp": zero}


def _int8_fields(op) -> dict:
    return {
        "in_zp": op.in_zp.value.data,
        "out_zp": op.out_zp.value.data,
        "clamp": list(op.clamp.get_values()),
        "lut_addr": -1,
    }


class SelectQuantize(InstructionSelection):
    """A region input (or an fp16 result) quantized to int8 is one `quant`."""

    opcode = "quant"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: sched.QuantizeTaskOp, rewriter: PatternRewriter) -> None:
        fields = _quant_fields(self.state, op)
        fields["src_dtype"] = _dtype(sched.buffer_type(op.source))
        self.select(op, rewriter, fields)


class SelectDequantize(InstructionSelection):
    """An int8 result dequantized (a region output, an fp16 layer's input) is one `dequant`."""

    opcode = "dequant"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: sched.DequantizeTaskOp, rewriter: PatternRewriter) -> None:
        fields = _quant_fields(self.state, op)
        fields["dst_dtype"] = _dtype(sched.buffer_type(op.dest))
        self.select(op, rewriter, fields)


class SelectQConv2D(InstructionSelection):
    opcode = "qconv"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: sched.QConv2DTaskOp, rewriter: PatternRewriter) -> None:
        fields = self.state.conv_fields(op)
        fields.update(rq_addr=self.state.address(op.requant), **_int8_fields(op))
        self.select(op, rewriter, fields)


class SelectQFullyConnected(InstructionSelection):
    opcode = "qfc"

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: sched.QFullyConnectedTaskOp, rewriter: PatternRewriter
    ) -> None:
        fields = {
            **self.state.fc_fields(op),
            "rq_addr": self.state.address(op.requant),
            **_int8_fields(op),
        }
        self.select(op, rewriter, fields)


class SelectQAdd(InstructionSelection):
    opcode = "qadd"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: sched.QAddTaskOp, rewriter: PatternRewriter) -> None:
        fields = {
            **self.state.vector_fields(op),
            "a_zp": op.a_zp.value.data,
            "b_zp": op.b_zp.value.data,
            "out_zp": op.out_zp.value.data,
            "a_rq": list(op.a_rq.get_values()),
            "b_rq": list(op.b_rq.get_values()),
            "out_rq": list(op.out_rq.get_values()),
            "clamp": list(op.clamp.get_values()),
            "lut_addr": -1,
        }
        self.select(op, rewriter, fields)


class SelectRequant(InstructionSelection):
    opcode = "requant"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: sched.RequantTaskOp, rewriter: PatternRewriter) -> None:
        fields = {
            "in_addr": self.state.address(op.input),
            "out_addr": self.state.address(op.output),
            "count": sched.buffer_type(op.output).dims[0],
            "rq": list(op.rq.get_values()),
            **_int8_fields(op),
        }
        self.select(op, rewriter, fields)


class SelectQPool2D(InstructionSelection):
    opcode = "qpool"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: sched.QPool2DTaskOp, rewriter: PatternRewriter) -> None:
        fields = self.state.pool_fields(op)
        fields.update(
            in_zp=op.in_zp.value.data,
            out_zp=op.out_zp.value.data,
            rq=list(op.rq.get_values()),
        )
        self.select(op, rewriter, fields)


INT8_SELECTIONS: tuple[type[InstructionSelection], ...] = (
    SelectQuantize,
    SelectDequantize,
    SelectQConv2D,
    SelectQFullyConnected,
    SelectQAdd,
    SelectQPool2D,
    SelectRequant,
)
