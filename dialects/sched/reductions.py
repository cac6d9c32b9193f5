"""`sched`'s tasks of the reductions and of broadcasting elementwise ops: `sched.reduce` (a
block [outer, length, inner] reduced over its middle axis, from or to fp32 partials) and
`sched.binary` (two OCM operands broadcast by element strides to a dense 4-D result)."""

from __future__ import annotations

from math import prod

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, StringAttr, UnitAttr
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, opt_prop_def, prop_def
from xdsl.irdl.operations import AttrSizedOperandSegments
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.sched.attributes import BufferType, buffer_type
from mrvl.dialects.sched.tasks import TaskBase, _check_ocm, task_format
from mrvl.isa import BinaryMode, ReduceMode

REDUCE_MODES = tuple(m.name.lower() for m in ReduceMode)
BINARY_MODES = tuple(m.name.lower() for m in BinaryMode)


@irdl_op_definition
class ReduceTaskOp(TaskBase):
    """Reduction of an OCM block [outer, length, inner] over its middle axis into [outer,
    inner]: `mode` sum, mean (divided by `divisor`), max, min or argmax; from the fp32
    partials `acc` if given; the fp32 partials themselves with `acc_out`."""

    name = "sched.reduce"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    input = operand_def(BufferType)
    acc = opt_operand_def(BufferType)
    output = operand_def(BufferType)
    mode = prop_def(StringAttr)
    divisor = prop_def(IntegerAttr[I64])
    acc_out = opt_prop_def(UnitAttr)
    assembly_format = task_format(
        "$input (`acc` `(` $acc^ `:` type($acc) `)`)? `->` $output `mode` $mode "
        "`divisor` $divisor (`acc_out` $acc_out^)?",
        "type($input) `->` type($output)",
    )

    def verify_(self) -> None:
        tile = self.tile.value.data
        _check_ocm(self, tile, self.input, self.output)
        if self.mode.data not in REDUCE_MODES:
            raise VerifyException(f"sched.reduce: mode {self.mode.data!r} not in {REDUCE_MODES}")
        dims = buffer_type(self.input).dims
        if len(dims) != 3:
            raise VerifyException("sched.reduce: the input must be [outer, length, inner]")
        if buffer_type(self.output).dims != (dims[0], dims[2]):
            raise VerifyException("sched.reduce: the result must be [outer, inner]")
        if self.divisor.value.data < 1:
            raise VerifyException("sched.reduce: divisor must be at least 1")
        if self.acc is not None:
            _check_ocm(self, tile, self.acc)
            if buffer_type(self.acc).dims != (dims[0], dims[2]):
                raise VerifyException("sched.reduce: partials must have the result's shape")
        if self.mode.data == "argmax" and (self.acc is not None or self.acc_out is not None):
            raise VerifyException("sched.reduce: argmax takes and gives no partials")


@irdl_op_definition
class BinaryTaskOp(TaskBase):
    """An elementwise operation (`mode`: add, sub, mul, div, max, min) of two OCM operands
    read through element strides (0 repeats: a broadcast) into a dense 4-D OCM result."""

    name = "sched.binary"
    lhs = operand_def(BufferType)
    rhs = operand_def(BufferType)
    output = operand_def(BufferType)
    mode = prop_def(StringAttr)
    lhs_strides = prop_def(DenseArrayBase[I64])
    rhs_strides = prop_def(DenseArrayBase[I64])
    assembly_format = task_format(
        "$lhs `,` $rhs `->` $output `mode` $mode `strides` $lhs_strides `,` $rhs_strides",
        "type($lhs) `,` type($rhs) `->` type($output)",
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.lhs, self.rhs, self.output)
        if self.mode.data not in BINARY_MODES:
            raise VerifyException(f"sched.binary: mode {self.mode.data!r} not in {BINARY_MODES}")
        shape = buffer_type(self.output).dims
        if len(shape) != 4:
            raise VerifyException("sched.binary: the result must be rank 4")
        for what, value, strides in (
            ("lhs", self.lhs, self.lhs_strides),
            ("rhs", self.rhs, self.rhs_strides),
        ):
            steps = strides.get_values()
            if len(steps) != 4 or min(steps) < 0:
                raise VerifyException(f"sched.binary: {what} needs 4 strides >= 0")
            span = 1 + sum((n - 1) * s for n, s in zip(shape, steps))
            if span > prod(buffer_type(value).dims):
                raise VerifyException(f"sched.binary: {what} strides read past its buffer")
