"""Instruction selection of the int8 product and table tasks: `sched.qmul` is one `qmul`;
`sched.qtable` is one `requant` with zero points 0, the identity pair (2^30, 1) (exact for
every int8 value: requantize(v) = v), the full clamp and the table at `lut_addr`, so that
y = T[x + 128] (docs/isa.md `requant` and §4b). `convert_sched_to_mlip.py` gathers these
into `INSTRUCTION_SELECTIONS`."""

from __future__ import annotations

from mrvl.dialects import sched
from mrvl.passes.isa.convert_sched_to_mlip import InstructionSelection

IDENTITY_PAIR = (1 << 30, 1)
"""The requantization pair of the factor 1: (v * 2^30 + 2^29) >> 30 = v for every int32 v."""


class SelectQMul(InstructionSelection):
    source = sched.QMulTaskOp
    opcode = "qmul"

    def fields(self, op: sched.QMulTaskOp) -> dict:
        return {
            **self.state.vector_fields(op),
            "channels": op.channels.value.data,
            "a_zp": op.in_zp.value.data,
            "b_zp": op.rhs_zp.value.data,
            "out_zp": op.out_zp.value.data,
            "rq": list(op.rq.get_values()),
            **self.state.finish_fields(op),
        }


class SelectQTable(InstructionSelection):
    source = sched.QTableTaskOp
    opcode = "requant"

    def fields(self, op: sched.QTableTaskOp) -> dict:
        return {
            **self.state.unary_fields(op),
            "in_zp": 0,
            "out_zp": 0,
            "rq": list(IDENTITY_PAIR),
            "clamp": [-128, 127],
            "lut_addr": self.state.address(op.table),
        }


INT8_ELEMENTWISE_SELECTIONS: tuple[type[InstructionSelection], ...] = (SelectQMul, SelectQTable)
