"""int8 in the `mrvl` dialect: an activation tensor's quantization, the quantize / dequantize
layers at the edges of int8 code, and the quantization properties of the int8 layers.

int8 is a data type of the existing layers, not a second set of ops: an int8 conv is
`mrvl.conv2d` on `i8` tensors that carries `in_quant`, `out_quant` and `weight_scales`
(`Int8Properties`). An activation's quantization is `#mrvl.quant<scale, zero_point>`:
real = scale * (q - zero_point), q in [-128, 127] (docs/isa.md, int8 mode).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntAttr,
    IntegerType,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, ParametrizedAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    param_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.mrvl.attributes import element_type_of, layout_of, shape_of, tensor


CONSTANT_QUANT_ATTR = "mrvl.constant_quant"
"""Attribute of a `mrvl.constant` whose floats dequantize a per-tensor int8 tensor (a QDQ
model's bias): that tensor's `#mrvl.quant` (`ConstantOp.quant`), set by the importer."""


@irdl_attr_definition
class QuantAttr(ParametrizedAttribute):
    """One int8 tensor's quantization: `#mrvl.quant<scale, zero_point>`."""

    name = "mrvl.quant"
    scale: FloatAttr = param_def()
    zero_point: IntAttr = param_def()

    def __init__(self, scale: float, zero_point: int):
        super().__init__(FloatAttr(float(scale), f32), IntAttr(int(zero_point)))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            scale = parser.parse_float()
            parser.parse_punctuation(",")
            zero = parser.parse_integer()
        return (FloatAttr(scale, f32), IntAttr(zero))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.scale.value.data!r}, {self.zero_point.data}>")

    def verify(self) -> None:
        if not isinstance(self.scale.type, Float32Type):
            raise VerifyException("#mrvl.quant: the scale is f32")
        s = self.scale.value.data
        if not (s > 0 and s < float("inf")):
            raise VerifyException(f"#mrvl.quant: scale {s} must be positive and finite")
        if not -128 <= self.zero_point.data <= 127:
            raise VerifyException(
                f"#mrvl.quant: zero point {self.zero_point.data} outside [-128, 127]"
            )

    @property
    def values(self) -> tuple[float, int]:
        return self.scale.value.data, self.zero_point.data


def is_int8(value_or_type: SSAValue | Attribute) -> bool:
    element = element_type_of(value_or_type)
    return isinstance(element, IntegerType) and element.width.data == 8


def is_int32(value_or_type: SSAValue | Attribute) -> bool:
    element = element_type_of(value_or_type)
    return isinstance(element, IntegerType) and element.width.data == 32


INT8_FORMAT = (
    "(`in_quant` $in_quant^)? (`out_quant` $out_quant^)? (`weight_scales` $weight_scales^)?"
)
"""The syntax of `Int8Properties`, shared by every layer that has them."""


class Int8Properties:
    """Mixin: the quantization of an int8 layer's inputs (`in_quant`, one per activation
    operand), its result (`out_quant`) and its weights (`weight_scales`, one f32 per output
    channel, symmetric). A float layer whose constant weights dequantize int8 ones carries
    `weight_scales` alone (as imported from a QDQ model, before `mrvl-fold-qdq`)."""

    in_quant = opt_prop_def(ArrayAttr[QuantAttr])
    out_quant = opt_prop_def(QuantAttr)
    weight_scales = opt_prop_def(DenseArrayBase[Float32Type])

    def verify_int8(
        self,
        inputs: Sequence[SSAValue],
        output: SSAValue,
        weight: SSAValue | None = None,
        bias: SSAValue | None = None,
    ) -> None:
        op: IRDLOperation = self  # type: ignore[assignment]
        int8 = [is_int8(v) for v in (*inputs, output)]
        if any(int8) and not all(int8):
            raise VerifyException(f"{op.name}: an int8 layer has int8 inputs and result")
        if weight is not None and self.weight_scales is not None:
            channels = shape_of(weight)[0]
            if len(self.weight_scales) != channels:
                raise VerifyException(
                    f"{op.name}: {len(self.weight_scales)} weight scales for {channels} "
                    "output channels"
                )
        if not all(int8):
            if self.in_quant is not None or self.out_quant is not None:
                raise VerifyException(f"{op.name}: in_quant / out_quant on a float layer")
            return
        if self.in_quant is None or self.out_quant is None:
            raise VerifyException(f"{op.name}: an int8 layer needs in_quant and out_quant")
        if len(self.in_quant) != len(inputs):
            raise VerifyException(
                f"{op.name}: {len(self.in_quant)} in_quant for {len(inputs)} inputs"
            )
        if weight is not None:
            if not is_int8(weight) or self.weight_scales is None:
                raise VerifyException(f"{op.name}: an int8 layer has int8 weights and scales")
            if bias is not None and not is_int32(bias):
                raise VerifyException(f"{op.name}: an int8 layer's bias is i32 (at s_x * s_w)")

    def quant_of_input(self, index: int = 0) -> tuple[float, int]:
        return self.in_quant.data[index].values  # type: ignore[union-attr]


def _quant_properties(scale: float, zero_point: int) -> dict[str, Attribute]:
    return {"quant": QuantAttr(scale, zero_point)}


class QuantConversionBase(IRDLOperation):
    """A tensor converted elementwise between float and int8 by one (scale, zero point),
    its shape and layout kept (`quantize`, `dequantize`)."""

    input = operand_def(TensorType)
    output = result_def(TensorType)
    quant = prop_def(QuantAttr)
    assembly_format = "$input `quant` $quant attr-dict `:` type($input) `->` type($output)"
    traits = traits_def(Pure())

    def __init__(self, input: SSAValue, scale: float, zero_point: int, output_type=None):
        output_type = output_type or tensor(
            shape_of(input), self.default_element_type(), layout_of(input)
        )
        super().__init__(
            operands=[input],
            result_types=[output_type],
            properties=_quant_properties(scale, zero_point),
        )

    @staticmethod
    def default_element_type() -> Attribute:
        """The result's element type when no `output_type` is given."""
        raise NotImplementedError


@irdl_op_definition
class QuantizeOp(QuantConversionBase):
    """f32 or f16 -> int8, as ONNX QuantizeLinear: q = saturate(round_half_even(x / scale) +
    zero_point). Where float data enters int8 code (a region input)."""

    name = "mrvl.quantize"

    @staticmethod
    def default_element_type() -> Attribute:
        from xdsl.dialects.builtin import i8

        return i8

    def verify_(self) -> None:
        _same_tensor(self)
        if not isinstance(element_type_of(self.input), Float32Type | Float16Type):
            raise VerifyException("mrvl.quantize: the input is f32 or f16")
        if not is_int8(self.output):
            raise VerifyException("mrvl.quantize: the result is i8")


@irdl_op_definition
class DequantizeOp(QuantConversionBase):
    """int8 -> f32 or f16, as ONNX DequantizeLinear: y = fp32(q - zero_point) * scale (then
    rounded to f16 for an f16 result). Where int8 data leaves int8 code."""

    name = "mrvl.dequantize"

    @staticmethod
    def default_element_type() -> Attribute:
        return f32

    def verify_(self) -> None:
        _same_tensor(self)
        if not is_int8(self.input):
            raise VerifyException("mrvl.dequantize: the input is i8")
        if not isinstance(element_type_of(self.output), Float32Type | Float16Type):
            raise VerifyException("mrvl.dequantize: the result is f32 or f16")


@irdl_op_definition
class RequantizeOp(IRDLOperation):
    """int8 -> int8 at another scale and zero point: what `quantize(dequantize(x))` with
    different parameters means (a concat input whose scale is not the result's). One
    `requant` instruction: y = saturate(out_zp + requantize(x - in_zp, s_in / s_out))."""

    name = "mrvl.requantize"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    in_quant = prop_def(ArrayAttr[QuantAttr])
    out_quant = prop_def(QuantAttr)
    assembly_format = (
        "$input `from` $in_quant `to` $out_quant attr-dict `:` type($input) `->` type($output)"
    )
    traits = traits_def(Pure())

    def __init__(self, input: SSAValue, in_quant: QuantAttr, out_quant: QuantAttr):
        super().__init__(
            operands=[input],
            result_types=[input.type],
            properties={"in_quant": ArrayAttr([in_quant]), "out_quant": out_quant},
        )

    def verify_(self) -> None:
        _same_tensor(self)
        if not is_int8(self.input) or not is_int8(self.output):
            raise VerifyException("mrvl.requantize: the input and the result are i8")
        if len(self.in_quant) != 1:
            raise VerifyException("mrvl.requantize: one in_quant, for its one input")

    def quant_of_input(self, index: int = 0) -> tuple[float, int]:
        return self.in_quant.data[index].values


def _same_tensor(op: QuantizeOp | DequantizeOp | RequantizeOp) -> None:
    if shape_of(op.input) != shape_of(op.output) or layout_of(op.input) != layout_of(op.output):
        raise VerifyException(f"{op.name}: only the element type may change")
