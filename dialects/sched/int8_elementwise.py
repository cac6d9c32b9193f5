"""`sched`'s int8 product and table tasks (docs/isa.md `qmul`, and `requant` with a table):
the squeeze-excitation gate, x * sigmoid(x) and HardSwish's product of a quantized model,
and its Sigmoid / HardSigmoid / HardSwish / Tanh / GELU as a 256-entry int8 table."""

from __future__ import annotations

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr
from xdsl.irdl import irdl_op_definition, operand_def, prop_def
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.sched.attributes import BufferType, buffer_type
from mrvl.dialects.sched.int8_tasks import INT8_FORMAT, Int8TaskBase, _int_buffer
from mrvl.dialects.sched.tasks import (
    TaskBase,
    _check_ocm,
    task_format,
    vector_length,
    verify_channel_product,
)

TABLE_ENTRIES = 256


@irdl_op_definition
class QMulTaskOp(Int8TaskBase):
    """Product of two OCM int8 vectors of their own scales and zero points: the exact product
    of the differences from `in_zp` (lhs) and `rhs_zp`, requantized once by `rq` to the
    result's scale. With `channels` C > 0, `rhs` holds C values and element i takes
    rhs[i mod C] (one image of a squeeze-excitation gate)."""

    name = "sched.qmul"
    lhs = operand_def(BufferType)
    rhs = operand_def(BufferType)
    output = operand_def(BufferType)
    channels = prop_def(IntegerAttr[I64])
    rhs_zp = prop_def(IntegerAttr[I64])
    rq = prop_def(DenseArrayBase[I64])
    assembly_format = task_format(
        "$lhs `,` $rhs `->` $output `channels` $channels `rhs_zp` $rhs_zp `rq` $rq "
        + INT8_FORMAT,
        "type($lhs) `,` type($rhs) `->` type($output)",
    )

    def verify_(self) -> None:
        self.verify_int8()
        verify_channel_product(self)
        for what, value in (("lhs", self.lhs), ("rhs", self.rhs), ("the output", self.output)):
            _int_buffer(self, what, value, 8)
        if not -128 <= self.rhs_zp.value.data <= 127:
            raise VerifyException(f"{self.name}: rhs_zp outside [-128, 127]")


@irdl_op_definition
class QTableTaskOp(TaskBase):
    """An OCM int8 vector looked up in a 256-entry int8 table in OCM: y = table[x + 128]."""

    name = "sched.qtable"
    input = operand_def(BufferType)
    table = operand_def(BufferType)
    output = operand_def(BufferType)
    assembly_format = task_format(
        "$input `table` $table `->` $output",
        "type($input) `,` type($table) `->` type($output)",
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.table, self.output)
        for what, value in (
            ("the input", self.input),
            ("the table", self.table),
            ("the output", self.output),
        ):
            _int_buffer(self, what, value, 8)
        if buffer_type(self.table).dims != (TABLE_ENTRIES,):
            raise VerifyException(f"{self.name}: the table holds {TABLE_ENTRIES} entries")
        vector_length(self, "input and result", self.input, self.output)
