"""Instruction selection of a layer normalization's long rows: `sched.lnstats` is one
`lnstats` and `sched.lnapply` one `lnapply` (docs/isa.md). `convert_sched_to_mlip.py`
gathers them into `INSTRUCTION_SELECTIONS`."""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import sched
from mrvl.passes.isa.convert_sched_to_mlip import InstructionSelection


class SelectLayerNormStats(InstructionSelection):
    opcode = "lnstats"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: sched.LayerNormStatsTaskOp, rewriter: PatternRewriter) -> None:
        rows, length = sched.buffer_type(op.input).dims
        fields = {
            "in_addr": self.state.address(op.input),
            "out_addr": self.state.address(op.output),
            "rows": rows,
            "length": length,
            "eps": op.epsilon.value.data,
        }
        self.select(op, rewriter, fields)


class SelectLayerNormApply(InstructionSelection):
    opcode = "lnapply"

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: sched.LayerNormApplyTaskOp, rewriter: PatternRewriter) -> None:
        rows, count = sched.buffer_type(op.input).dims
        fields = {
            "in_addr": self.state.address(op.input),
            "out_addr": self.state.address(op.output),
            "stats_addr": self.state.address(op.stats),
            "rows": rows,
            "count": count,
            "g_addr": self.state.address(op.scale),
            "b_addr": self.state.address(op.shift),
        }
        self.select(op, rewriter, fields)


LONG_ROW_SELECTIONS: tuple[type[InstructionSelection], ...] = (
    SelectLayerNormStats,
    SelectLayerNormApply,
)
