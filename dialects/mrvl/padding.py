"""`mrvl`'s standalone constant padding: `mrvl.pad`, a Pad that no conv absorbed, in its
operand's own layout."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, DenseArrayBase, Float32Type, FloatAttr, TensorType, f32
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


@irdl_op_definition
class PadOp(IRDLOperation):
    """The operand surrounded by `value`: `pads` holds the elements added before each
    dimension, then those added after each (ONNX's order), in the operand's layout."""

    name = "mrvl.pad"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    pads = prop_def(DenseArrayBase[I64])
    value = prop_def(FloatAttr[Float32Type])
    assembly_format = (
        "$input `pads` $pads `value` $value attr-dict `:` type($input) `->` type($output)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(self, input: SSAValue, pads: Sequence[int], value: float):
        rank = len(shape_of(input))
        shape = [n + pads[d] + pads[rank + d] for d, n in enumerate(shape_of(input))]
        super().__init__(
            operands=[input],
            result_types=[tensor(shape, element_type_of(input), layout_of(input))],
            properties={"pads": _i64_array(pads), "value": FloatAttr(float(value), f32)},
        )

    def before_after(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        pads = tuple(self.pads.get_values())
        rank = len(pads) // 2
        return pads[:rank], pads[rank:]

    def verify_(self) -> None:
        shape = shape_of(self.input)
        pads = self.pads.get_values()
        if len(pads) != 2 * len(shape) or min(pads) < 0:
            raise VerifyException(
                f"mrvl.pad: pads {list(pads)} must be {2 * len(shape)} values >= 0 (before, after)"
            )
        before, after = self.before_after()
        want = tuple(n + b + a for n, b, a in zip(shape, before, after))
        if shape_of(self.output) != want or layout_of(self.output) != layout_of(self.input):
            raise VerifyException(f"mrvl.pad: the result must be {list(want)} in the input's layout")
