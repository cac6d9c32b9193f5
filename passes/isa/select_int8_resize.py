"""Instruction selection of the int8 resize: `sched.qresize` is one `qresize` (docs/isa.md),
the fields of `resize` plus the zero points, the pair, the clamp and no table.
`convert_sched_to_mlip.py` gathers it into `INSTRUCTION_SELECTIONS`."""

from __future__ import annotations

from mrvl.dialects import sched
from mrvl.passes.isa.convert_sched_to_mlip import InstructionSelection


class SelectQResize(InstructionSelection):
    source = sched.QResizeTaskOp
    opcode = "qresize"

    def fields(self, op: sched.QResizeTaskOp) -> dict:
        return {
            **self.state.resize_fields(op),
            "rq": list(op.rq.get_values()),
            **self.state.int8_fields(op),
        }


INT8_RESIZE_SELECTIONS: tuple[type[InstructionSelection], ...] = (SelectQResize,)
