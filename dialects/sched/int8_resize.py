"""`sched`'s int8 resize task (docs/isa.md `qresize`): `sched.resize`'s window and tables on
int8 data, with fixed-point tables and one requantization."""

from __future__ import annotations

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr
from xdsl.irdl import irdl_op_definition, operand_def, prop_def

from mrvl.dialects.sched.attributes import BufferType
from mrvl.dialects.sched.int8_tasks import INT8_FORMAT, Int8TaskBase, _int_buffer
from mrvl.dialects.sched.tasks import task_format, verify_resize

QRESIZE_TABLE_COLUMNS = 3
"""A `qresize` table row: i0, i1 and the weight w1 of i1 in 2^-11 units (int32)."""


@irdl_op_definition
class QResizeTaskOp(Int8TaskBase):
    """Two-tap interpolation of an OCM int8 window (NHWC, input rows from `row0`) into an
    int8 tile by an int32 row table [OH, 3] and column table [OW, 3] (i0, i1, w1), the exact
    sum requantized once by `rq`."""

    name = "sched.qresize"
    input = operand_def(BufferType)
    ytab = operand_def(BufferType)
    xtab = operand_def(BufferType)
    output = operand_def(BufferType)
    row0 = prop_def(IntegerAttr[I64])
    rq = prop_def(DenseArrayBase[I64])
    assembly_format = task_format(
        "$input `,` $ytab `,` $xtab `->` $output `in_row` $row0 `rq` $rq " + INT8_FORMAT,
        "type($input) `,` type($ytab) `,` type($xtab) `->` type($output)",
    )

    def verify_(self) -> None:
        self.verify_int8()
        verify_resize(self, QRESIZE_TABLE_COLUMNS)
        _int_buffer(self, "the input", self.input, 8)
        _int_buffer(self, "the output", self.output, 8)
        _int_buffer(self, "the row table", self.ytab, 32)
        _int_buffer(self, "the column table", self.xtab, 32)
