"""Instruction selection of the int8 product and table tasks: `sched.qmul` is one `qmul`;
`sched.qtable` is one `requant` with zero points 0, the identity pair (2^30, 1) (exact for
every int8 value: requantize(v) = v), the full clamp and the table at `lut_addr`, so that
y = T[x + 128] (docs/isa.md `requant` and §4b). `convert_sched_to_mlip.py` gathers these
into `INSTRUCTION_SELECTIONS`."""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import sched
from mrvl.passes.isa.convert_sched_to_mlip import InstructionSelection

IDENTITY_PAIR = (1 << 30, 1)
"""The requantization pair of the factor 1: (v * 2^30 + 2^29) >> 30 = v for every int32 v."""


class SelectQMul(InstructionSelection):
    opcode = "qmul"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: sched.QMulTaskOp, rewriter: PatternRewriter) -> None:
        fields = {
            "a_addr": self.state.address(op.lhs),
            "b_addr": self.state.address(op.rhs),
            "out_addr": self.state.address(op.output),
            "count": sched.buffer_type(op.output).dims[0],
            "channels": op.channels.value.data,
            "a_zp": op.in_zp.value.data,
            "b_zp": op.rhs_zp.value.data,
            "out_zp": op.out_zp.value.data,
            "rq": list(op.rq.get_values()),
            "clamp": list(op.clamp.get_values()),
            "lut_addr": -1,
        }
        self.select(op, rewriter, fields)


class SelectQTable(InstructionSelection):
    opcode = "requant"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: sched.QTableTaskOp, rewriter: PatternRewriter) -> None:
        fields = {
            "in_addr": self.state.address(op.input),
            "out_addr": self.state.address(op.output),
            "count": sched.buffer_type(op.output).dims[0],
            "in_zp": 0,
            "out_zp": 0,
            "rq": list(IDENTITY_PAIR),
            "clamp": [-128, 127],
            "lut_addr": self.state.address(op.table),
        }
        self.select(op, rewriter, fields)


INT8_ELEMENTWISE_SELECTIONS: tuple[type[InstructionSelection], ...] = (SelectQMul, SelectQTable)
