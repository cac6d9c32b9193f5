"""`mrvl`'s normalization layers: softmax over a run of consecutive axes."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import ClassVar

from xdsl.dialects.builtin import I64, DenseArrayBase, TensorType
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import NoMemoryEffect
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.mrvl.attributes import _i64_array, layout_of, shape_of


def reduced_view(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, int, int]:
    """(outer, length, inner): `shape` seen as three dimensions, the middle one the product of
    the consecutive `axes` (what `softmax` reduces over)."""
    first, last = axes[0], axes[-1]
    return prod(shape[:first]), prod(shape[first : last + 1]), prod(shape[last + 1 :])


def _check_axes(op: IRDLOperation, axes: Sequence[int], rank: int) -> None:
    if not axes or list(axes) != list(range(axes[0], axes[0] + len(axes))):
        raise VerifyException(f"{op.name}: axes {list(axes)} must be consecutive and increasing")
    if axes[0] < 0 or axes[-1] >= rank:
        raise VerifyException(f"{op.name}: axes {list(axes)} outside a rank-{rank} tensor")


@irdl_op_definition
class SoftmaxOp(IRDLOperation):
    """Softmax over `axes`, a run of consecutive dimensions of the operand in its own layout
    (one axis, or the trailing axes an opset-11 export flattens), of any layout: each row is
    the elements that differ only in those axes."""

    name = "mrvl.softmax"
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    output = result_def(T)
    axes = prop_def(DenseArrayBase[I64])
    assembly_format = "$input `axes` $axes attr-dict `:` type($output)"
    traits = traits_def(NoMemoryEffect())

    def __init__(self, input: SSAValue, axes: Sequence[int]):
        super().__init__(
            operands=[input], result_types=[input.type], properties={"axes": _i64_array(axes)}
        )

    @property
    def axis_list(self) -> tuple[int, ...]:
        return tuple(self.axes.get_values())

    def rows(self) -> tuple[int, int, int]:
        """(outer, length, inner) of the operand around the reduced axes."""
        return reduced_view(shape_of(self.input), self.axis_list)

    def verify_(self) -> None:
        layout_of(self.input)
        _check_axes(self, self.axis_list, len(shape_of(self.input)))
