"""Instruction selection of the int8 product of two activations: `sched.qbmm` is one `qbmm`
(docs/isa.md), `bmm`'s fields with the zero points, the pair and the int8 finish.
`convert_sched_to_mlip.py` gathers these into `INSTRUCTION_SELECTIONS`."""

from __future__ import annotations

from mrvl.dialects import sched
from mrvl.passes.isa.convert_sched_to_mlip import InstructionSelection


class SelectQBatchMatMul(InstructionSelection):
    source = sched.QBatchMatMulTaskOp
    opcode = "qbmm"

    def fields(self, op: sched.QBatchMatMulTaskOp) -> dict:
        return {
            **self.state.bmm_fields(op),
            "a_zp": op.in_zp.value.data,
            "b_zp": op.rhs_zp.value.data,
            "out_zp": op.out_zp.value.data,
            "rq": list(op.rq.get_values()),
            **self.state.finish_fields(op),
            **self.state.accumulator_fields(op),
        }


INT8_BMM_SELECTIONS: tuple[type[InstructionSelection], ...] = (SelectQBatchMatMul,)
