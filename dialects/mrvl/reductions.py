"""`mrvl`'s reductions and broadcasting elementwise ops: `mrvl.reduce` (sum, mean, max or
min over a run of consecutive axes, kept as unit axes) and `mrvl.binary` (add, sub, mul, div,
max or min of two tensors that broadcast), each in its operands' own layout."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import StringAttr, TensorType, f32
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import NoMemoryEffect
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.mrvl.attributes import _i64_array, element_type_of, layout_of, shape_of, tensor
from mrvl.dialects.mrvl.normalization import ReducedAxes, _check_axes

REDUCE_KINDS = ("sum", "mean", "max", "min", "argmax", "l2")
BINARY_KINDS = ("add", "sub", "mul", "div", "max", "min")


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """The shape two same-rank shapes broadcast to (numpy's rule), or None if they do not."""
    if len(a) != len(b) or any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
        return None
    return tuple(max(x, y) for x, y in zip(a, b))


@irdl_op_definition
class ReduceOp(ReducedAxes, IRDLOperation):
    """`kind` (sum, mean, max, min, argmax or l2: the square root of the sum of squares) over
    `axes`, a run of consecutive dimensions of
    the operand in its own layout; the result has the operand's layout and rank, the reduced
    dimensions 1 (a reduction without keepdims is this and a reshape). Argmax's result is the
    indices as exact f32 values, which stay f32 (the CPU converts them to ONNX's int64)."""

    name = "mrvl.reduce"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    kind = prop_def(StringAttr)
    assembly_format = (
        "$kind $input `axes` $axes attr-dict `:` type($input) `->` type($output)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(self, input: SSAValue, axes: Sequence[int], kind: str):
        shape = list(shape_of(input))
        for a in axes:
            shape[a] = 1
        element = f32 if kind == "argmax" else element_type_of(input)
        out = tensor(shape, element, layout_of(input))
        super().__init__(
            operands=[input],
            result_types=[out],
            properties={"axes": _i64_array(axes), "kind": StringAttr(kind)},
        )

    def verify_(self) -> None:
        if self.kind.data not in REDUCE_KINDS:
            raise VerifyException(f"mrvl.reduce: kind {self.kind.data!r} not in {REDUCE_KINDS}")
        shape = shape_of(self.input)
        _check_axes(self, self.axis_list, len(shape))
        want = tuple(1 if d in self.axis_list else n for d, n in enumerate(shape))
        if shape_of(self.output) != want or layout_of(self.output) != layout_of(self.input):
            raise VerifyException(
                f"mrvl.reduce: the result must be {list(want)} in the input's layout"
            )
        if self.kind.data == "argmax" and element_type_of(self.output) != f32:
            raise VerifyException("mrvl.reduce: argmax gives f32 indices")


def holds_indices(value: SSAValue) -> bool:
    """Whether `value` is argmax's f32 indices, as made or relabelled / moved by reshapes and
    layout conversions (which keep them f32: `mrvl-cast-fp16` leaves them, the region hands
    them out as they are)."""
    from mrvl.dialects.mrvl.data_movement import LayoutConvertOp, ReshapeOp

    owner = value.owner
    while isinstance(owner, ReshapeOp | LayoutConvertOp):
        owner = owner.input.owner
    return isinstance(owner, ReduceOp) and owner.kind.data == "argmax"


@irdl_op_definition
class BinaryOp(IRDLOperation):
    """`kind` (add, sub, mul, div, max or min) of two tensors of one rank and layout whose
    shapes broadcast (numpy's rule: a dimension of 1 repeats) to the result's."""

    name = "mrvl.binary"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    output = result_def(TensorType)
    kind = prop_def(StringAttr)
    assembly_format = (
        "$kind $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($output)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(self, lhs: SSAValue, rhs: SSAValue, kind: str):
        shape = broadcast_shape(shape_of(lhs), shape_of(rhs)) or shape_of(lhs)
        out = tensor(shape, element_type_of(lhs), layout_of(lhs))
        super().__init__(
            operands=[lhs, rhs], result_types=[out], properties={"kind": StringAttr(kind)}
        )

    def verify_(self) -> None:
        if self.kind.data not in BINARY_KINDS:
            raise VerifyException(f"mrvl.binary: kind {self.kind.data!r} not in {BINARY_KINDS}")
        layouts = {layout_of(v) for v in (self.lhs, self.rhs, self.output)}
        if len(layouts) != 1:
            raise VerifyException(f"mrvl.binary: operands and result in layouts {sorted(layouts)}")
        shape = broadcast_shape(shape_of(self.lhs), shape_of(self.rhs))
        if shape is None or shape != shape_of(self.output):
            raise VerifyException(
                f"mrvl.binary: {list(shape_of(self.lhs))} and {list(shape_of(self.rhs))} do not "
                f"broadcast to {list(shape_of(self.output))}"
            )
