"""Instruction selection of a layer normalization's long rows: `sched.lnstats` is one
`lnstats` and `sched.lnapply` one `lnapply` (docs/isa.md). `convert_sched_to_mlip.py`
gathers them into `INSTRUCTION_SELECTIONS`."""

from __future__ import annotations

from mrvl.dialects import sched
from mrvl.passes.isa.convert_sched_to_mlip import InstructionSelection


class SelectLayerNormStats(InstructionSelection):
    source = sched.LayerNormStatsTaskOp
    opcode = "lnstats"

    def fields(self, op: sched.LayerNormStatsTaskOp) -> dict:
        rows, length = sched.buffer_type(op.input).dims
        return {
            "in_addr": self.state.address(op.input),
            "out_addr": self.state.address(op.output),
            "rows": rows,
            "length": length,
            "eps": op.epsilon.value.data,
        }


class SelectLayerNormApply(InstructionSelection):
    source = sched.LayerNormApplyTaskOp
    opcode = "lnapply"

    def fields(self, op: sched.LayerNormApplyTaskOp) -> dict:
        rows, count = sched.buffer_type(op.input).dims
        return {
            "in_addr": self.state.address(op.input),
            "out_addr": self.state.address(op.output),
            "stats_addr": self.state.address(op.stats),
            "rows": rows,
            "count": count,
            "g_addr": self.state.address(op.scale),
            "b_addr": self.state.address(op.shift),
        }


LONG_ROW_SELECTIONS: tuple[type[InstructionSelection], ...] = (
    SelectLayerNormStats,
    SelectLayerNormApply,
)
