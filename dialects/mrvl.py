"""The `mrvl` graph dialect: one op per MLIP layer, on tensors with an explicit layout.

Tensor types are builtin tensors whose encoding is a `#mrvl.layout<...>` attribute naming the
dimension order (`NHWC` activations, `OHWI` weights, `NC` for 2-D activations, ...). Layers carry
their fused pieces (padding, bias, activation) as attributes, as the MLIP executes them.
Constants keep the names TVM gave them (`<symbol>_mrvl_const_<i>`), which the Constants-JSON uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import (
    I64,
    AnyFloat,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    UnitAttr,
    f16,
    f32,
    i8,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    param_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import NoMemoryEffect, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from mrvl.dialects.dense_size import oversized_dense
from mrvl.isa import Activation

# ---------------------------------------------------------------------------------------------
# Layouts and tensor types
# ---------------------------------------------------------------------------------------------

KNOWN_LAYOUTS = ("NCHW", "NHWC", "OIHW", "OHWI", "NC", "NCW", "OI", "O")
"""`NCW` is a rank-3 activation in Relax's own order (a detection head's `[N, C, H*W]`)."""


@irdl_attr_definition
class LayoutAttr(ParametrizedAttribute):
    """Dimension order of a tensor, written as one letter per dimension (`NHWC`)."""

    name = "mrvl.layout"
    layout: StringAttr = param_def()

    def __init__(self, layout: str | StringAttr):
        super().__init__(StringAttr(layout) if isinstance(layout, str) else layout)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return (StringAttr(parser.parse_identifier("layout name")),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.layout.data}>")

    def verify(self) -> None:
        if self.layout.data not in KNOWN_LAYOUTS:
            raise VerifyException(
                f"unknown layout '{self.layout.data}', expected one of {', '.join(KNOWN_LAYOUTS)}"
            )

    @property
    def name_str(self) -> str:
        return self.layout.data


def tensor(shape: Sequence[int], element_type: Attribute, layout: str) -> TensorType:
    """A tensor type carrying its layout as encoding."""
    return TensorType(element_type, list(shape), LayoutAttr(layout))


def layout_of(value_or_type: SSAValue | Attribute) -> str:
    t = value_or_type.type if isinstance(value_or_type, SSAValue) else value_or_type
    if not isinstance(t, TensorType) or not isinstance(t.encoding, LayoutAttr):
        raise VerifyException(f"expected a tensor with a #mrvl.layout encoding, got {t}")
    return t.encoding.name_str


def shape_of(value_or_type: SSAValue | Attribute) -> tuple[int, ...]:
    t = value_or_type.type if isinstance(value_or_type, SSAValue) else value_or_type
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def element_type_of(value_or_type: SSAValue | Attribute) -> Attribute:
    t = value_or_type.type if isinstance(value_or_type, SSAValue) else value_or_type
    assert isinstance(t, TensorType)
    return t.element_type


def _check_tensor(op: IRDLOperation, what: str, value: SSAValue, rank: int, layout: str) -> None:
    """Fail verification with a message naming the operand if its type is not as expected."""
    t = value.type
    if not isinstance(t, TensorType) or not isinstance(t.encoding, LayoutAttr):
        raise VerifyException(f"{op.name}: {what} must be a tensor with a #mrvl.layout, got {t}")
    if len(t.get_shape()) != rank:
        raise VerifyException(f"{op.name}: {what} must have rank {rank}, got {t}")
    if t.encoding.name_str != layout:
        raise VerifyException(
            f"{op.name}: {what} must have layout {layout}, got {t.encoding.name_str}"
        )


NUMPY_DTYPES: dict[type, str] = {Float32Type: "float32", Float16Type: "float16"}


def numpy_dtype(element_type: Attribute) -> np.dtype:
    if isinstance(element_type, Float32Type):
        return np.dtype(np.float32)
    if isinstance(element_type, Float16Type):
        return np.dtype(np.float16)
    if isinstance(element_type, IntegerType) and element_type.width.data == 8:
        return np.dtype(np.int8)
    raise VerifyException(f"no numpy equivalent of element type {element_type}")


def element_type_for(dtype: np.dtype) -> Attribute:
    return {"float32": f32, "float16": f16, "int8": i8}[np.dtype(dtype).name]


# ---------------------------------------------------------------------------------------------
# Activation fused into a layer
# ---------------------------------------------------------------------------------------------

ActivationKind = StrEnum(
    "ActivationKind", {a.name: a.name.lower() for a in Activation if a != Activation.NONE}
)
"""The fused activations, by their ISA names (`mrvl.isa.Activation` in lower case)."""


@irdl_attr_definition
class ActivationAttr(EnumAttribute[ActivationKind], SpacedOpaqueSyntaxAttribute):
    """Which activation a layer fuses; prints as a word (`act relu`, `act hard_swish`)."""

    name = "mrvl.activation"

    @property
    def isa(self) -> Activation:
        return Activation[self.data.name]


_ACTIVATION_PARAMETERS: dict[str, tuple[str, ...]] = {
    "clip": ("act_min", "act_max"),
    "leaky_relu": ("alpha",),
    "hard_sigmoid": ("alpha", "beta"),
    "prelu": ("slopes",),
}
"""The parameters each activation needs; the others take none."""


def activation(kind: str, **params: float | Sequence[float]) -> dict[str, Attribute]:
    """The properties of a fused activation: `activation("clip", act_min=0, act_max=6)`,
    `activation("prelu", slopes=[...])`."""
    props: dict[str, Attribute] = {"activation": ActivationAttr(ActivationKind(kind))}
    for key, value in params.items():
        if key == "slopes":
            props[key] = DenseArrayBase.from_list(f32, [float(v) for v in value])  # type: ignore[union-attr]
        else:
            props[key] = FloatAttr(float(value), f32)  # type: ignore[arg-type]
    return props


class FusedActivation:
    """Mixin for layers with an optional fused activation (`act relu`, `act clip min a max b`,
    `act prelu slopes [...]`)."""

    activation = opt_prop_def(ActivationAttr)
    act_min = opt_prop_def(FloatAttr[Float32Type])
    act_max = opt_prop_def(FloatAttr[Float32Type])
    alpha = opt_prop_def(FloatAttr[Float32Type])
    beta = opt_prop_def(FloatAttr[Float32Type])
    slopes = opt_prop_def(DenseArrayBase[Float32Type])

    def verify_activation(self, channels: int | None = None, *, slopes_operand=None) -> None:
        """`channels`: how many PRELU slopes the layer needs (None: PRELU is not allowed).
        A scheduled task holds PRELU slopes in a buffer, `slopes_operand`, not a property."""
        op: IRDLOperation = self  # type: ignore[assignment]
        act = self.activation
        given = {k for k in ("act_min", "act_max", "alpha", "beta", "slopes") if getattr(self, k)}
        if act is None:
            if given:
                raise VerifyException(f"{op.name}: activation parameters without an activation")
            return
        needed = set(_ACTIVATION_PARAMETERS.get(act.data.value, ()))
        if slopes_operand is not None:
            needed.discard("slopes")
            if (act.data.value == "prelu") != (slopes_operand is not False):
                raise VerifyException(f"{op.name}: a slopes buffer goes with act prelu only")
        if given != needed:
            raise VerifyException(
                f"{op.name}: activation {act.data.value} takes "
                f"{', '.join(sorted(needed)) or 'no parameters'}, got "
                f"{', '.join(sorted(given)) or 'none'}"
            )
        if act.data.value == "prelu" and slopes_operand is None:
            if channels is None:
                raise VerifyException(f"{op.name}: prelu needs per-channel slopes here")
            if len(self.slopes) != channels:  # type: ignore[arg-type]
                raise VerifyException(
                    f"{op.name}: prelu has {len(self.slopes)} slopes for {channels} channels"  # type: ignore[arg-type]
                )


ACTIVATION_FORMAT = (
    "(`act` $activation^)? (`min` $act_min^)? (`max` $act_max^)? (`alpha` $alpha^)? "
    "(`beta` $beta^)? (`slopes` $slopes^)?"
)
"""The syntax of `FusedActivation`'s properties, shared by every op that has them."""


def _i64_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


# ---------------------------------------------------------------------------------------------
# Ops
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A named constant tensor (weights, bias). The name is TVM's constant name."""

    name = "mrvl.constant"
    const_name = prop_def(StringAttr)
    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(self, const_name: str, array: np.ndarray, layout: str):
        array = np.ascontiguousarray(array)
        el = element_type_for(array.dtype)
        value = DenseIntOrFPElementsAttr(
            TensorType(el, list(array.shape)), BytesAttr(array.tobytes())
        )
        super().__init__(
            properties={"const_name": StringAttr(const_name), "value": value},
            result_types=[tensor(array.shape, el, layout)],
        )

    def numpy(self) -> np.ndarray:
        """The constant's data as a (read-only) numpy array of the result's shape."""
        t = self.value.type
        return np.frombuffer(self.value.data.data, dtype=numpy_dtype(t.element_type)).reshape(
            t.get_shape()
        )

    def verify_(self) -> None:
        vt, rt = self.value.type, self.result.type
        assert isinstance(rt, TensorType)
        if tuple(vt.get_shape()) != tuple(rt.get_shape()) or vt.element_type != rt.element_type:
            raise VerifyException(
                f"mrvl.constant '{self.const_name.data}': value type {vt} does not match the "
                f"result type {rt}"
            )
        layout_of(rt)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.const_name.data)
        printer.print_string(" = ")
        printer.print_attribute(self.value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        name = parser.parse_str_literal("constant name")
        parser.parse_punctuation("=")
        text = parser.lexer.input.content
        if isinstance(text, str) and (huge := oversized_dense(text, parser.pos)) is not None:
            parser.raise_error(huge)
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error("mrvl.constant expects a dense<...> value")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        op = cls.create(
            properties={"const_name": StringAttr(name), "value": value},
            result_types=[result_type],
        )
        op.attributes.update(attrs)
        return op


@irdl_op_definition
class Conv2DOp(FusedActivation, IRDLOperation):
    """2-D convolution, NHWC input, OHWI weights, optional f32 bias, fused activation.

    `pads` are [top, left, bottom, right], as the Nodes-JSON writes them.
    """

    name = "mrvl.conv2d"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    output = result_def(TensorType)

    strides = prop_def(DenseArrayBase[I64], default_value=_i64_array([1, 1]))
    pads = prop_def(DenseArrayBase[I64], default_value=_i64_array([0, 0, 0, 0]))
    dilations = prop_def(DenseArrayBase[I64], default_value=_i64_array([1, 1]))
    groups = prop_def(DenseArrayBase[I64], default_value=_i64_array([1]))

    assembly_format = (
        "$input `,` $weight (`bias` $bias^)? (`strides` $strides^)? (`pads` $pads^)? "
        "(`dilations` $dilations^)? (`groups` $groups^)? "
        + ACTIVATION_FORMAT
        + " attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(
        self,
        input: SSAValue,
        weight: SSAValue,
        bias: SSAValue | None,
        output_type: Attribute,
        *,
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        dilations: Sequence[int] = (1, 1),
        groups: int = 1,
        activation: dict[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[input, weight, bias],
            result_types=[output_type],
            properties={
                "strides": _i64_array(strides),
                "pads": _i64_array(pads),
                "dilations": _i64_array(dilations),
                "groups": _i64_array([groups]),
                **(activation or {}),
            },
        )

    @property
    def group_count(self) -> int:
        return self.groups.get_values()[0]

    def verify_(self) -> None:
        _check_tensor(self, "input", self.input, 4, "NHWC")
        _check_tensor(self, "weight", self.weight, 4, "OHWI")
        _check_tensor(self, "output", self.output, 4, "NHWC")
        self.verify_activation(shape_of(self.weight)[0])
        n, h, w, c = shape_of(self.input)
        o, kh, kw, ci = shape_of(self.weight)
        on, oh, ow, oc = shape_of(self.output)
        sh, sw = self.strides.get_values()
        pt, pl, pb, pr = self.pads.get_values()
        dh, dw = self.dilations.get_values()
        g = self.group_count
        if len(self.strides) != 2 or len(self.dilations) != 2 or len(self.pads) != 4:
            raise VerifyException("mrvl.conv2d: strides and dilations take 2 values, pads 4")
        if min(sh, sw, dh, dw, g) < 1 or min(pt, pl, pb, pr) < 0:
            raise VerifyException("mrvl.conv2d: strides, dilations, groups must be >= 1, pads >= 0")
        if c % g or o % g or ci != c // g:
            raise VerifyException(
                f"mrvl.conv2d: weight input channels {ci} must equal input channels {c} / "
                f"groups {g}, and output channels {o} must divide by groups"
            )
        exp_h = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
        exp_w = (w + pl + pr - (kw - 1) * dw - 1) // sw + 1
        if (on, oh, ow, oc) != (n, exp_h, exp_w, o):
            raise VerifyException(
                f"mrvl.conv2d: output shape {[on, oh, ow, oc]} does not match the computed "
                f"{[n, exp_h, exp_w, o]}"
            )
        if self.bias is not None:
            _check_tensor(self, "bias", self.bias, 1, "O")
            if shape_of(self.bias) != (o,):
                raise VerifyException(
                    f"mrvl.conv2d: bias must have {o} elements, got {shape_of(self.bias)}"
                )
            if not isinstance(element_type_of(self.bias), Float32Type):
                raise VerifyException("mrvl.conv2d: bias must be f32 (the MLIP adds it in fp32)")


def pooled_size(
    size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, ceil: bool
) -> int:
    """Output length of a pooling window sweep (ONNX / PyTorch rule): with `ceil`, a last
    partial window counts if it starts inside the input or the leading padding."""
    span = size + pad_begin + pad_end - kernel
    out = (-(-span // stride) if ceil else span // stride) + 1
    if ceil and (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


class Pool2DBase(IRDLOperation):
    """Shared form of the 2-D pooling layers (NHWC in and out)."""

    input = operand_def(TensorType)
    output = result_def(TensorType)
    kernel = prop_def(DenseArrayBase[I64])
    strides = prop_def(DenseArrayBase[I64], default_value=_i64_array([1, 1]))
    pads = prop_def(DenseArrayBase[I64], default_value=_i64_array([0, 0, 0, 0]))
    ceil_mode = opt_prop_def(UnitAttr)

    assembly_format = (
        "$input `kernel` $kernel (`strides` $strides^)? (`pads` $pads^)? "
        "(`ceil_mode` $ceil_mode^)? attr-dict `:` type($input) `->` type($output)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(
        self,
        input: SSAValue,
        output_type: Attribute,
        *,
        kernel: Sequence[int],
        strides: Sequence[int] = (1, 1),
        pads: Sequence[int] = (0, 0, 0, 0),
        **extra: Attribute,
    ):
        super().__init__(
            operands=[input],
            result_types=[output_type],
            properties={
                "kernel": _i64_array(kernel),
                "strides": _i64_array(strides),
                "pads": _i64_array(pads),
                **extra,
            },
        )

    def verify_(self) -> None:
        _check_tensor(self, "input", self.input, 4, "NHWC")
        _check_tensor(self, "output", self.output, 4, "NHWC")
        n, h, w, c = shape_of(self.input)
        on, oh, ow, oc = shape_of(self.output)
        kh, kw = self.kernel.get_values()
        sh, sw = self.strides.get_values()
        pt, pl, pb, pr = self.pads.get_values()
        if min(kh, kw, sh, sw) < 1 or min(pt, pl, pb, pr) < 0:
            raise VerifyException(f"{self.name}: kernel and strides must be >= 1, pads >= 0")
        if pt >= kh or pb >= kh or pl >= kw or pr >= kw:
            raise VerifyException(f"{self.name}: padding must be smaller than the kernel")
        exp_h = pooled_size(h, kh, sh, pt, pb, self.ceil_mode is not None)
        exp_w = pooled_size(w, kw, sw, pl, pr, self.ceil_mode is not None)
        if (on, oh, ow, oc) != (n, exp_h, exp_w, c):
            raise VerifyException(
                f"{self.name}: output shape {[on, oh, ow, oc]} does not match the computed "
                f"{[n, exp_h, exp_w, c]}"
            )


@irdl_op_definition
class MaxPool2DOp(Pool2DBase):
    name = "mrvl.maxpool2d"


@irdl_op_definition
class AvgPool2DOp(Pool2DBase):
    """Average pooling; `count_include_pad` divides by the padded window size."""

    name = "mrvl.avgpool2d"
    count_include_pad = opt_prop_def(UnitAttr)

    assembly_format = (
        "$input `kernel` $kernel (`strides` $strides^)? (`pads` $pads^)? "
        "(`ceil_mode` $ceil_mode^)? (`count_include_pad` $count_include_pad^)? "
        "attr-dict `:` type($input) `->` type($output)"
    )


@irdl_op_definition
class FullyConnectedOp(FusedActivation, IRDLOperation):
    """Fully connected layer: [N, K] input, [O, K] weights (layout OI), optional f32 bias."""

    name = "mrvl.fc"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    output = result_def(TensorType)

    assembly_format = (
        "$input `,` $weight (`bias` $bias^)? "
        + ACTIVATION_FORMAT
        + " attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(
        self,
        input: SSAValue,
        weight: SSAValue,
        bias: SSAValue | None,
        output_type: Attribute,
        *,
        activation: dict[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[input, weight, bias],
            result_types=[output_type],
            properties=dict(activation or {}),
        )

    def verify_(self) -> None:
        _check_tensor(self, "input", self.input, 2, "NC")
        _check_tensor(self, "weight", self.weight, 2, "OI")
        _check_tensor(self, "output", self.output, 2, "NC")
        self.verify_activation(shape_of(self.weight)[0])
        n, k = shape_of(self.input)
        o, wk = shape_of(self.weight)
        if wk != k:
            raise VerifyException(f"mrvl.fc: weight has {wk} input features but the input has {k}")
        if shape_of(self.output) != (n, o):
            raise VerifyException(
                f"mrvl.fc: output shape {list(shape_of(self.output))} does not match [{n}, {o}]"
            )
        if self.bias is not None:
            _check_tensor(self, "bias", self.bias, 1, "O")
            if shape_of(self.bias) != (o,):
                raise VerifyException(f"mrvl.fc: bias must have {o} elements")
            if not isinstance(element_type_of(self.bias), Float32Type):
                raise VerifyException("mrvl.fc: bias must be f32 (the MLIP adds it in fp32)")


@irdl_op_definition
class ReshapeOp(IRDLOperation):
    """Reinterpret a tensor's elements, in its layout's row-major order, with a new shape."""

    name = "mrvl.reshape"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"
    traits = traits_def(Pure())

    def __init__(self, input: SSAValue, output_type: Attribute):
        super().__init__(operands=[input], result_types=[output_type])

    def verify_(self) -> None:
        layout_of(self.input)
        layout_of(self.output)
        if prod(shape_of(self.input)) != prod(shape_of(self.output)):
            raise VerifyException(
                f"mrvl.reshape: {list(shape_of(self.input))} and "
                f"{list(shape_of(self.output))} hold different numbers of elements"
            )
        if element_type_of(self.input) != element_type_of(self.output):
            raise VerifyException("mrvl.reshape: element type must not change")


def layout_permutation(src: str, dst: str) -> tuple[int, ...]:
    """`perm` with dst dimension i = src dimension perm[i] (numpy.transpose order)."""
    return tuple(src.index(d) for d in dst)


@irdl_op_definition
class LayoutConvertOp(IRDLOperation):
    """Change the dimension order of a tensor (`NCHW` <-> `NHWC`); data moves, values do not."""

    name = "mrvl.layout_convert"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"
    traits = traits_def(Pure())

    def __init__(self, input: SSAValue, layout: str):
        src = layout_of(input)
        shape = shape_of(input)
        perm = layout_permutation(src, layout)
        super().__init__(
            operands=[input],
            result_types=[tensor([shape[p] for p in perm], element_type_of(input), layout)],
        )

    @property
    def permutation(self) -> tuple[int, ...]:
        return layout_permutation(layout_of(self.input), layout_of(self.output))

    def verify_(self) -> None:
        src, dst = layout_of(self.input), layout_of(self.output)
        if sorted(src) != sorted(dst):
            raise VerifyException(
                f"mrvl.layout_convert: {src} and {dst} do not name the same dimensions"
            )
        shape = shape_of(self.input)
        expected = [shape[p] for p in layout_permutation(src, dst)]
        if list(shape_of(self.output)) != expected:
            raise VerifyException(
                f"mrvl.layout_convert: {src}->{dst} of {list(shape)} gives {expected}, "
                f"not {list(shape_of(self.output))}"
            )
        if element_type_of(self.input) != element_type_of(self.output):
            raise VerifyException("mrvl.layout_convert: element type must not change")


@irdl_op_definition
class CastOp(IRDLOperation):
    """Change the element type (f32 <-> f16): round to nearest even, saturate at the f16 range."""

    name = "mrvl.cast"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"
    traits = traits_def(Pure())

    def __init__(self, input: SSAValue, element_type: AnyFloat):
        super().__init__(
            operands=[input],
            result_types=[tensor(shape_of(input), element_type, layout_of(input))],
        )

    def verify_(self) -> None:
        if shape_of(self.input) != shape_of(self.output) or layout_of(self.input) != layout_of(
            self.output
        ):
            raise VerifyException("mrvl.cast: only the element type may change")


@irdl_op_definition
class AddOp(FusedActivation, IRDLOperation):
    """Elementwise sum of two tensors of one type (a residual connection), fused activation
    (PRELU with one slope per channel, the innermost dimension of the layout)."""

    name = "mrvl.add"
    T: ClassVar = VarConstraint("T", base(TensorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    output = result_def(T)
    assembly_format = "$lhs `,` $rhs " + ACTIVATION_FORMAT + " attr-dict `:` type($output)"
    traits = traits_def(NoMemoryEffect())

    def __init__(self, lhs: SSAValue, rhs: SSAValue, *, activation=None):
        super().__init__(
            operands=[lhs, rhs], result_types=[lhs.type], properties=dict(activation or {})
        )

    def verify_(self) -> None:
        if not (self.lhs.type == self.rhs.type == self.output.type):
            raise VerifyException(
                f"mrvl.add: operands and result must have one type, got {self.lhs.type}, "
                f"{self.rhs.type} -> {self.output.type}"
            )
        layout_of(self.output)
        self.verify_activation(shape_of(self.output)[-1])


@irdl_op_definition
class MulOp(FusedActivation, IRDLOperation):
    """Elementwise product of two tensors, fused activation. `rhs` has the type of `lhs`, or
    (NHWC only) shape [N, 1, 1, C]: one value per image and channel, broadcast over the plane
    (the squeeze-excitation gate `x * s`)."""

    name = "mrvl.mul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = (
        "$lhs `,` $rhs " + ACTIVATION_FORMAT + " attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(self, lhs: SSAValue, rhs: SSAValue, *, activation=None):
        super().__init__(
            operands=[lhs, rhs], result_types=[lhs.type], properties=dict(activation or {})
        )

    @property
    def broadcasts(self) -> bool:
        """Whether `rhs` is one value per (image, channel)."""
        return self.rhs.type != self.lhs.type

    def verify_(self) -> None:
        layout = layout_of(self.lhs)
        if self.output.type != self.lhs.type or layout not in ("NHWC", "NC"):
            raise VerifyException("mrvl.mul: lhs and result must be one NHWC or NC tensor type")
        if self.broadcasts:
            n, _, _, c = shape_of(self.lhs) if layout == "NHWC" else (0, 0, 0, 0)
            if (
                layout != "NHWC"
                or layout_of(self.rhs) != "NHWC"
                or shape_of(self.rhs) != (n, 1, 1, c)
                or element_type_of(self.rhs) != element_type_of(self.lhs)
            ):
                raise VerifyException(
                    f"mrvl.mul: rhs must have the type of lhs or be [N, 1, 1, C] NHWC, got "
                    f"{self.rhs.type}"
                )
        self.verify_activation()


@irdl_op_definition
class ScaleShiftOp(FusedActivation, IRDLOperation):
    """Per-channel y = act(x * scale[c] + shift[c]): a batch norm no conv absorbs, or a
    standalone activation (scale 1, shift 0). Scale and shift are f32 `[C]` constants."""

    name = "mrvl.scale_shift"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    shift = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = (
        "$input `,` $scale `,` $shift "
        + ACTIVATION_FORMAT
        + " attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(self, input: SSAValue, scale: SSAValue, shift: SSAValue, *, activation=None):
        super().__init__(
            operands=[input, scale, shift],
            result_types=[input.type],
            properties=dict(activation or {}),
        )

    @property
    def channels(self) -> int:
        return shape_of(self.input)[layout_of(self.input).index("C")]

    def verify_(self) -> None:
        layout = layout_of(self.input)
        if layout not in ("NHWC", "NC") or self.input.type != self.output.type:
            raise VerifyException(
                "mrvl.scale_shift: input and result must be one NHWC or NC tensor type"
            )
        for what, value in (("scale", self.scale), ("shift", self.shift)):
            _check_tensor(self, what, value, 1, "O")
            if shape_of(value) != (self.channels,) or not isinstance(
                element_type_of(value), Float32Type
            ):
                raise VerifyException(
                    f"mrvl.scale_shift: {what} must be f32 with {self.channels} elements"
                )
        self.verify_activation(self.channels)


@irdl_op_definition
class ConcatOp(IRDLOperation):
    """Concatenation along dimension `axis` of the layout (the channel dimension `C` when
    `axis` is absent)."""

    name = "mrvl.concat"
    inputs = var_operand_def(TensorType)
    output = result_def(TensorType)
    axis = opt_prop_def(IntegerAttr[I64])
    assembly_format = "$inputs (`axis` $axis^)? attr-dict `:` type($inputs) `->` type($output)"
    traits = traits_def(NoMemoryEffect())

    def __init__(self, inputs: Sequence[SSAValue], output_type: Attribute, axis: int | None = None):
        super().__init__(
            operands=[list(inputs)],
            result_types=[output_type],
            properties={"axis": IntegerAttr(axis, i64)} if axis is not None else {},
        )

    @property
    def concat_axis(self) -> int:
        """The dimension (in the layout's order) the inputs are stacked along."""
        if self.axis is not None:
            return self.axis.value.data
        return layout_of(self.output).index("C")

    @property
    def channel_axis(self) -> int:
        return self.concat_axis

    def verify_(self) -> None:
        layout = layout_of(self.output)
        if len(self.inputs) < 1 or (self.axis is None and "C" not in layout):
            raise VerifyException(
                "mrvl.concat: needs inputs, and an axis or a layout with a C dimension"
            )
        out = shape_of(self.output)
        axis = self.concat_axis
        if not 0 <= axis < len(out):
            raise VerifyException(f"mrvl.concat: axis {axis} is outside rank {len(out)}")
        total = 0
        for i, value in enumerate(self.inputs):
            if layout_of(value) != layout or element_type_of(value) != element_type_of(self.output):
                raise VerifyException(
                    f"mrvl.concat: input {i} must have the result's layout and element type"
                )
            shape = shape_of(value)
            if shape[:axis] + shape[axis + 1 :] != out[:axis] + out[axis + 1 :]:
                raise VerifyException(
                    f"mrvl.concat: input {i} {list(shape)} differs from the result "
                    f"{list(out)} outside dimension {axis}"
                )
            total += shape[axis]
        if total != out[axis]:
            raise VerifyException(
                f"mrvl.concat: inputs hold {total} along dimension {axis}, the result {out[axis]}"
            )


MAX_COPY_DIMS = 6
"""Dimensions of a strided copy; a DMA descriptor has 4, so the lowering issues one DMA per
index of the dimensions beyond those."""


@irdl_op_definition
class StridedCopyOp(IRDLOperation):
    """A layer that only moves data: the result is a strided view of the input, copied.

    Element i (a multi-index over `box`, outermost first) of the result's dense storage (row
    major in its layout) is element `offset + sum(i[d] * strides[d])` of the input's dense
    storage. Strides are in elements and may be 0 (a repeated element: nearest-neighbour
    upsampling). Slices, transposes, reshapes across layouts, channel shuffles and integer
    nearest-neighbour resizes are all such copies; each is one DMA descriptor per piece.
    """

    name = "mrvl.strided_copy"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    offset = prop_def(IntegerAttr[I64])
    strides = prop_def(DenseArrayBase[I64])
    box = prop_def(DenseArrayBase[I64])
    assembly_format = (
        "$input `offset` $offset `strides` $strides `box` $box attr-dict "
        "`:` type($input) `->` type($output)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(
        self,
        input: SSAValue,
        output_type: Attribute,
        *,
        offset: int,
        strides: Sequence[int],
        box: Sequence[int],
    ):
        super().__init__(
            operands=[input],
            result_types=[output_type],
            properties={
                "offset": IntegerAttr(offset, i64),
                "strides": _i64_array(strides),
                "box": _i64_array(box),
            },
        )

    def verify_(self) -> None:
        layout_of(self.input)
        layout_of(self.output)
        box, strides = self.box.get_values(), self.strides.get_values()
        offset = self.offset.value.data
        if not 1 <= len(box) <= MAX_COPY_DIMS or len(strides) != len(box):
            raise VerifyException(
                f"mrvl.strided_copy: box and strides need one value per dimension, 1 to "
                f"{MAX_COPY_DIMS} dimensions, got {list(box)} and {list(strides)}"
            )
        if min(box) < 1 or min(strides) < 0 or offset < 0:
            raise VerifyException(
                "mrvl.strided_copy: box extents must be >= 1, strides and offset >= 0"
            )
        if prod(box) != prod(shape_of(self.output)):
            raise VerifyException(
                f"mrvl.strided_copy: box {list(box)} does not hold the "
                f"{prod(shape_of(self.output))} elements of the result"
            )
        last = offset + sum((b - 1) * s for b, s in zip(box, strides))
        if last >= prod(shape_of(self.input)):
            raise VerifyException(
                f"mrvl.strided_copy: element {last} is outside the input's "
                f"{prod(shape_of(self.input))} elements"
            )
        if element_type_of(self.input) != element_type_of(self.output):
            raise VerifyException("mrvl.strided_copy: element type must not change")


class ResizeCoordinates(StrEnum):
    """The ONNX Resize coordinate transformation modes the tables are computed for."""

    HALF_PIXEL = "half_pixel"
    PYTORCH_HALF_PIXEL = "pytorch_half_pixel"
    ALIGN_CORNERS = "align_corners"
    ASYMMETRIC = "asymmetric"


@irdl_attr_definition
class ResizeCoordinatesAttr(EnumAttribute[ResizeCoordinates], SpacedOpaqueSyntaxAttribute):
    """`mrvl.resize`'s mode; prints as a word (`mode align_corners`)."""

    name = "mrvl.resize_coordinates"


RESIZE_MODES = tuple(ResizeCoordinates)


@irdl_op_definition
class ResizeOp(IRDLOperation):
    """Bilinear resize (NHWC) by interpolation tables: `ytab` holds, for each output row,
    the input rows i0, i1 and fp32 weights w0, w1 (4 f32 per row, indices exact integers);
    `xtab` the same for columns. `mode` records the ONNX coordinate transformation the
    tables were computed with (see `mrvl.strided.interpolation_table`)."""

    name = "mrvl.resize"
    input = operand_def(TensorType)
    ytab = operand_def(TensorType)
    xtab = operand_def(TensorType)
    output = result_def(TensorType)
    mode = prop_def(ResizeCoordinatesAttr)
    assembly_format = (
        "$input `,` $ytab `,` $xtab `mode` $mode attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(
        self, input: SSAValue, ytab: SSAValue, xtab: SSAValue, output_type: Attribute, mode: str
    ):
        super().__init__(
            operands=[input, ytab, xtab],
            result_types=[output_type],
            properties={"mode": ResizeCoordinatesAttr(ResizeCoordinates(mode))},
        )

    def verify_(self) -> None:
        _check_tensor(self, "input", self.input, 4, "NHWC")
        _check_tensor(self, "output", self.output, 4, "NHWC")
        n, _, _, c = shape_of(self.input)
        on, oh, ow, oc = shape_of(self.output)
        if (on, oc) != (n, c):
            raise VerifyException("mrvl.resize: input and result differ in N or C")
        if element_type_of(self.input) != element_type_of(self.output):
            raise VerifyException("mrvl.resize: element type must not change")
        for what, value, size in (("ytab", self.ytab, oh), ("xtab", self.xtab, ow)):
            _check_tensor(self, what, value, 1, "O")
            if shape_of(value) != (4 * size,) or not isinstance(
                element_type_of(value), Float32Type
            ):
                raise VerifyException(
                    f"mrvl.resize: {what} must be f32 with 4 values per output index ({4 * size})"
                )


@irdl_op_definition
class DilateOp(IRDLOperation):
    """Zero insertion (NHWC): `strides - 1` zero rows / columns between input pixels, so
    that a transposed convolution becomes an ordinary one over the result. Element
    [n, h*sh, w*sw, c] of the result is input [n, h, w, c]; every other element is 0."""

    name = "mrvl.dilate"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    strides = prop_def(DenseArrayBase[I64])
    assembly_format = "$input `strides` $strides attr-dict `:` type($input) `->` type($output)"
    traits = traits_def(NoMemoryEffect())

    def __init__(self, input: SSAValue, strides: Sequence[int]):
        n, h, w, c = shape_of(input)
        sh, sw = strides
        super().__init__(
            operands=[input],
            result_types=[
                tensor((n, (h - 1) * sh + 1, (w - 1) * sw + 1, c), element_type_of(input), "NHWC")
            ],
            properties={"strides": _i64_array(strides)},
        )

    def verify_(self) -> None:
        _check_tensor(self, "input", self.input, 4, "NHWC")
        _check_tensor(self, "output", self.output, 4, "NHWC")
        if len(self.strides) != 2 or min(self.strides.get_values()) < 1:
            raise VerifyException("mrvl.dilate: strides take 2 values >= 1")
        n, h, w, c = shape_of(self.input)
        sh, sw = self.strides.get_values()
        expected = (n, (h - 1) * sh + 1, (w - 1) * sw + 1, c)
        if shape_of(self.output) != expected:
            raise VerifyException(
                f"mrvl.dilate: result shape {list(shape_of(self.output))} is not {list(expected)}"
            )
        if element_type_of(self.input) != element_type_of(self.output):
            raise VerifyException("mrvl.dilate: element type must not change")


LAYER_OPS: tuple[type[IRDLOperation], ...] = (
    Conv2DOp,
    MaxPool2DOp,
    AvgPool2DOp,
    FullyConnectedOp,
    AddOp,
    MulOp,
    ConcatOp,
    ScaleShiftOp,
)
"""Ops that are MLIP layers (each becomes a node of the Nodes-JSON)."""

Mrvl = Dialect(
    "mrvl",
    [
        ConstantOp,
        Conv2DOp,
        MaxPool2DOp,
        AvgPool2DOp,
        FullyConnectedOp,
        AddOp,
        MulOp,
        ConcatOp,
        ScaleShiftOp,
        StridedCopyOp,
        DilateOp,
        ResizeOp,
        ReshapeOp,
        LayoutConvertOp,
        CastOp,
    ],
    [LayoutAttr, ActivationAttr, ResizeCoordinatesAttr],
)
