"""`mrvl`'s attributes and tensor helpers: layouts, element types, fused activations, resize
coordinate modes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f16,
    f32,
    i8,
    i32,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, ParametrizedAttribute, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    opt_prop_def,
    param_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from mrvl.isa import Activation

KNOWN_LAYOUTS = ("NCHW", "NHWC", "OIHW", "OHWI", "NC", "NCW", "NCDHW", "NCTDHW", "OI", "O")
"""`NCW`, `NCDHW` and `NCTDHW` are activations of rank 3, 5 and 6 in Relax's own order (a
detection head's `[N, C, H*W]`; attention's `[B, T, 3, heads, d]`, a window partition's
`[B, H/w, w, W/w, w, C]`), which only data movement reads and writes."""

RELAX_LAYOUT = {4: "NCHW", 3: "NCW", 2: "NC", 5: "NCDHW", 6: "NCTDHW"}
"""The layout of a Relax tensor of each rank, in Relax's own order (NCHW at rank 4): what
the importers give a tensor that is not converted to NHWC."""


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
    if isinstance(element_type, IntegerType) and element_type.width.data in (8, 32):
        return np.dtype(np.int8 if element_type.width.data == 8 else np.int32)
    raise VerifyException(f"no numpy equivalent of element type {element_type}")


def element_type_for(dtype: np.dtype) -> Attribute:
    return {"float32": f32, "float16": f16, "int8": i8, "int32": i32}[np.dtype(dtype).name]


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
    "pow": ("alpha",),  # the exponent
    "leaky_floor": ("alpha", "beta"),  # the negative slope, the floor
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
