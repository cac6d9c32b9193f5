"""`sched`'s buffer ops: region I/O, constants, allocations and views, each defining a buffer."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    I64,
    DenseIntOrFPElementsAttr,
    IntegerAttr,
    StringAttr,
)
from xdsl.ir import (
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
)
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.sched.attributes import (
    BufferType,
    IOKindAttr,
    _i64_attr,
    buffer_type,
)
from mrvl.isa import IOKind


class BufferDefBase(IRDLOperation):
    """An op that defines a buffer and may carry its allocated byte offset."""

    offset = opt_prop_def(IntegerAttr[I64])
    buffer = result_def(BufferType)

    @property
    def buffer_type(self) -> BufferType:
        return buffer_type(self.buffer)


@irdl_op_definition
class IOOp(BufferDefBase):
    """A region input or output: dense f32 in DDR, in the layout TVM passes (NCHW or NC)."""

    name = "sched.io"
    io_name = prop_def(StringAttr)
    kind = prop_def(IOKindAttr)
    assembly_format = "$io_name $kind (`offset` `(` $offset^ `)`)? attr-dict `:` type($buffer)"

    def __init__(self, io_name: str, is_input: bool, type: BufferType):
        super().__init__(
            properties={
                "io_name": StringAttr(io_name),
                "kind": IOKindAttr(IOKind.INPUT if is_input else IOKind.OUTPUT),
            },
            result_types=[type],
        )

    @property
    def is_input(self) -> bool:
        return self.kind.data == IOKind.INPUT

    def verify_(self) -> None:
        if self.buffer_type.space.data != "ddr":
            raise VerifyException("sched.io: region I/O lives in DDR")


@irdl_op_definition
class ConstOp(BufferDefBase):
    """A constant buffer in DDR; its bytes go to the binary's constant pool."""

    name = "sched.const"
    const_name = prop_def(StringAttr)
    value = prop_def(DenseIntOrFPElementsAttr)
    assembly_format = (
        "$const_name `=` $value (`offset` `(` $offset^ `)`)? attr-dict `:` type($buffer)"
    )

    def __init__(self, const_name: str, value: DenseIntOrFPElementsAttr, type: BufferType):
        super().__init__(
            properties={"const_name": StringAttr(const_name), "value": value},
            result_types=[type],
        )

    def verify_(self) -> None:
        bt = self.buffer_type
        if bt.space.data != "ddr":
            raise VerifyException("sched.const: constants live in DDR")
        if len(self.value.data.data) != bt.size_bytes:
            raise VerifyException(
                f"sched.const '{self.const_name.data}': {len(self.value.data.data)} bytes of "
                f"data for a {bt.size_bytes}-byte buffer"
            )


@irdl_op_definition
class AllocOp(BufferDefBase):
    """A scratch buffer: an intermediate tensor in DDR, or a window in one tile's OCM."""

    name = "sched.alloc"
    tile = opt_prop_def(IntegerAttr[I64])
    assembly_format = (
        "(`tile` `(` $tile^ `)`)? (`offset` `(` $offset^ `)`)? attr-dict `:` type($buffer)"
    )

    def __init__(self, type: BufferType, tile: int | None = None):
        super().__init__(
            properties={"tile": _i64_attr(tile)} if tile is not None else {},
            result_types=[type],
        )

    def verify_(self) -> None:
        is_ocm = self.buffer_type.space.data == "ocm"
        if is_ocm != (self.tile is not None):
            raise VerifyException("sched.alloc: an OCM buffer names its tile, a DDR one does not")


@irdl_op_definition
class ViewOp(IRDLOperation):
    """The same bytes seen with another shape (a reshape of a dense buffer): no data moves."""

    name = "sched.view"
    source = operand_def(BufferType)
    buffer = result_def(BufferType)
    assembly_format = "$source attr-dict `:` type($source) `->` type($buffer)"

    def __init__(self, source: SSAValue, type: BufferType):
        super().__init__(operands=[source], result_types=[type])

    def verify_(self) -> None:
        s, r = buffer_type(self.source), buffer_type(self.buffer)
        if s.size_bytes != r.size_bytes or s.space != r.space:
            raise VerifyException("sched.view: a view keeps the memory space and the byte size")
