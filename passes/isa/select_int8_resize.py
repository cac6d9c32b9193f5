"""Instruction selection of the int8 resize: `sched.qresize` is one `qresize` (docs/isa.md),
the fields of `resize` plus the zero points, the pair, the clamp and no table.
`convert_sched_to_mlip.py` gathers it into `INSTRUCTION_SELECTIONS`."""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import sched
from mrvl.passes.isa.convert_sched_to_mlip import InstructionSelection


class SelectQResize(InstructionSelection):
    opcode = "qresize"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: sched.QResizeTaskOp, rewriter: PatternRewriter) -> None:
        fields = {
            **self.state.resize_fields(op),
            "in_zp": op.in_zp.value.data,
            "out_zp": op.out_zp.value.data,
            "rq": list(op.rq.get_values()),
            "clamp": list(op.clamp.get_values()),
            "lut_addr": -1,
        }
        self.select(op, rewriter, fields)


INT8_RESIZE_SELECTIONS: tuple[type[InstructionSelection], ...] = (SelectQResize,)
