"""`mrvl`'s normalization layers: softmax over a run of consecutive axes, and layer
normalization over the trailing axes."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import ClassVar

from xdsl.dialects.builtin import I64, DenseArrayBase, Float32Type, FloatAttr, TensorType, f32
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

from mrvl.dialects.mrvl.attributes import (
    _check_tensor,
    _i64_array,
    element_type_of,
    layout_of,
    shape_of,
)


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


class ReducedAxes:
    """Mixin: the run of consecutive `axes` a layer reduces over (softmax, reduce), and the
    operand seen around them as (outer, length, inner)."""

    axes = prop_def(DenseArrayBase[I64])

    @property
    def axis_list(self) -> tuple[int, ...]:
        return tuple(self.axes.get_values())

    def rows(self) -> tuple[int, int, int]:
        """(outer, length, inner) of the operand around the reduced axes."""
        return reduced_view(shape_of(self.input), self.axis_list)


@irdl_op_definition
class SoftmaxOp(ReducedAxes, IRDLOperation):
    """Softmax over `axes`, a run of consecutive dimensions of the operand in its own layout
    (one axis, or the trailing axes an opset-11 export flattens), of any layout: each row is
    the elements that differ only in those axes."""

    name = "mrvl.softmax"
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    output = result_def(T)
    assembly_format = "$input `axes` $axes attr-dict `:` type($output)"
    traits = traits_def(NoMemoryEffect())

    def __init__(self, input: SSAValue, axes: Sequence[int]):
        super().__init__(
            operands=[input], result_types=[input.type], properties={"axes": _i64_array(axes)}
        )

    def verify_(self) -> None:
        layout_of(self.input)
        _check_axes(self, self.axis_list, len(shape_of(self.input)))


@irdl_op_definition
class LayerNormOp(IRDLOperation):
    """Layer normalization over `axes`, the trailing dimensions of the operand in its layout
    (each row: the elements that differ only in them), with f32 scale and shift constants of
    one value per element of a row (the row's elements in order), and `epsilon`."""

    name = "mrvl.layernorm"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    shift = operand_def(TensorType)
    output = result_def(TensorType)
    axes = prop_def(DenseArrayBase[I64])
    epsilon = prop_def(FloatAttr[Float32Type])
    assembly_format = (
        "$input `,` $scale `,` $shift `axes` $axes `epsilon` $epsilon attr-dict "
        "`:` functional-type(operands, results)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(
        self, input: SSAValue, scale: SSAValue, shift: SSAValue, axes: Sequence[int], eps: float
    ):
        super().__init__(
            operands=[input, scale, shift],
            result_types=[input.type],
            properties={"axes": _i64_array(axes), "epsilon": FloatAttr(float(eps), f32)},
        )

    @property
    def axis_list(self) -> tuple[int, ...]:
        return tuple(self.axes.get_values())

    def rows(self) -> tuple[int, int]:
        """(rows, length): the operand as [rows, length], a row the normalized elements."""
        outer, length, _ = reduced_view(shape_of(self.input), self.axis_list)
        return outer, length

    def verify_(self) -> None:
        layout_of(self.input)
        rank = len(shape_of(self.input))
        _check_axes(self, self.axis_list, rank)
        if self.axis_list[-1] != rank - 1:
            raise VerifyException(
                f"mrvl.layernorm: axes {list(self.axis_list)} must end with the last axis"
            )
        if self.output.type != self.input.type:
            raise VerifyException("mrvl.layernorm: input and result must have one type")
        length = self.rows()[1]
        for what, value in (("scale", self.scale), ("shift", self.shift)):
            _check_tensor(self, what, value, 1, "O")
            if shape_of(value) != (length,) or not isinstance(element_type_of(value), Float32Type):
                raise VerifyException(
                    f"mrvl.layernorm: {what} must be f32 with {length} elements (a row)"
                )
