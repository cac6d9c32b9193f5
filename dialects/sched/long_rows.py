"""`sched`'s tasks of a layer normalization whose row does not fit a tile beside its f32
scales and shifts: `sched.lnstats` (each row's f32 mean and rstd) and `sched.lnapply` (a run
of each row normalized with them), the `lnstats` and `lnapply` instructions."""

from __future__ import annotations

from xdsl.dialects.builtin import Float32Type, FloatAttr
from xdsl.irdl import irdl_op_definition, operand_def, prop_def
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.sched.attributes import BufferType, buffer_type
from mrvl.dialects.sched.tasks import TaskBase, _check_ocm, task_format


@irdl_op_definition
class LayerNormStatsTaskOp(TaskBase):
    """Each row's f32 (mean, rstd) of an OCM block [rows, length] into an OCM block
    [rows, 2]."""

    name = "sched.lnstats"
    input = operand_def(BufferType)
    output = operand_def(BufferType)
    epsilon = prop_def(FloatAttr[Float32Type])
    assembly_format = task_format(
        "$input `->` $output `epsilon` $epsilon", "type($input) `->` type($output)"
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.output)
        dims = buffer_type(self.input).dims
        if len(dims) != 2 or buffer_type(self.output).dims != (dims[0], 2):
            raise VerifyException("sched.lnstats: input [rows, length] and output [rows, 2]")


@irdl_op_definition
class LayerNormApplyTaskOp(TaskBase):
    """A run of each row, an OCM block [rows, count], normalized with the rows' (mean, rstd)
    [rows, 2] and the run's f32 scales and shifts [count], into an OCM block [rows, count]."""

    name = "sched.lnapply"
    input = operand_def(BufferType)
    stats = operand_def(BufferType)
    scale = operand_def(BufferType)
    shift = operand_def(BufferType)
    output = operand_def(BufferType)
    assembly_format = task_format(
        "$input `,` $stats `,` $scale `,` $shift `->` $output",
        "type($input) `,` type($stats) `,` type($scale) `,` type($shift) `->` type($output)",
    )

    def verify_(self) -> None:
        _check_ocm(
            self, self.tile.value.data, self.input, self.stats, self.scale, self.shift, self.output
        )
        dims = buffer_type(self.input).dims
        if len(dims) != 2 or buffer_type(self.output).dims != dims:
            raise VerifyException("sched.lnapply: input and output must be one [rows, count]")
        if buffer_type(self.stats).dims != (dims[0], 2):
            raise VerifyException(f"sched.lnapply: stats must be [{dims[0]}, 2]")
        for what, value in (("scale", self.scale), ("shift", self.shift)):
            if buffer_type(value).dims != (dims[1],):
                raise VerifyException(f"sched.lnapply: {what} must hold {dims[1]} values")
