"""`sched`'s int8 product and table tasks (docs/isa.md `qmul`, and `requant` with a table):
the squeeze-excitation gate, x * sigmoid(x) and HardSwish's product of a quantized model,
and its Sigmoid / HardSigmoid / HardSwish / Tanh / GELU as a 256-entry int8 table."""

from __future__ import annotations

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr
from xdsl.irdl import irdl_op_definition, operand_def, prop_def
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.sched.attributes import BufferType, buffer_type
from mrvl.dialects.sched.int8_tasks import INT8_FORMAT, Int8TaskBase, _int_buffer
from mrvl.dialects.sched.tasks import TaskBase, _check_ocm

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
    assembly_format = (
        "`tile` $tile $lhs `,` $rhs `->` $output `channels` $channels `rhs_zp` $rhs_zp "
        "`rq` $rq " + INT8_FORMAT + " (`after` `(` $deps^ `)`)? attr-dict `:` type($lhs) `,` "
        "type($rhs) `->` type($output)"
    )

    def verify_(self) -> None:
        self.verify_int8()
        _check_ocm(self, self.tile.value.data, self.lhs, self.rhs, self.output)
        for what, value in (("lhs", self.lhs), ("rhs", self.rhs), ("the output", self.output)):
            _int_buffer(self, what, value, 8)
        if not -128 <= self.rhs_zp.value.data <= 127:
            raise VerifyException(f"{self.name}: rhs_zp outside [-128, 127]")
        (count,) = buffer_type(self.lhs).dims
        (rhs,) = buffer_type(self.rhs).dims
        channels = self.channels.value.data
        if buffer_type(self.output).dims != (count,) or rhs != (channels or count):
            raise VerifyException(
                f"{self.name}: lhs and output of one length; rhs of that length, or of `channels`"
            )
        if channels and count % channels:
            raise VerifyException(
                f"{self.name}: {count} elements are not whole pixels of {channels}"
            )


@irdl_op_definition
class QTableTaskOp(TaskBase):
    """An OCM int8 vector looked up in a 256-entry int8 table in OCM: y = table[x + 128]."""

    name = "sched.qtable"
    input = operand_def(BufferType)
    table = operand_def(BufferType)
    output = operand_def(BufferType)
    assembly_format = (
        "`tile` $tile $input `table` $table `->` $output (`after` `(` $deps^ `)`)? attr-dict "
        "`:` type($input) `,` type($table) `->` type($output)"
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.table, self.output)
        for what, value in (("the input", self.input), ("the table", self.table)):
            _int_buffer(self, what, value, 8)
        _int_buffer(self, "the output", self.output, 8)
        if buffer_type(self.table).dims != (TABLE_ENTRIES,):
            raise VerifyException(f"{self.name}: the table holds {TABLE_ENTRIES} entries")
        shapes = {buffer_type(v).dims for v in (self.input, self.output)}
        if len(shapes) != 1 or len(next(iter(shapes))) != 1:
            raise VerifyException(f"{self.name}: input and result must be 1-D of one length")
