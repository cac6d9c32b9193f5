"""`mrvl`'s constants and the layers that move data: reshape, layout conversion, cast, concat,
strided copy, resize and dilation."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import numpy as np
from xdsl.dialects.builtin import (
    I64,
    AnyFloat,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float32Type,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import NoMemoryEffect, Pure
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.dense_size import oversized_dense
from mrvl.dialects.mrvl.attributes import (
    RELAX_LAYOUT,
    ResizeCoordinates,
    ResizeCoordinatesAttr,
    _check_tensor,
    _i64_array,
    element_type_for,
    element_type_of,
    layout_of,
    numpy_dtype,
    shape_of,
    tensor,
)
from mrvl.dialects.mrvl.quantized import CONSTANT_QUANT_ATTR, INT8_FORMAT, Int8Properties, QuantAttr


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

    @property
    def quant(self) -> QuantAttr | None:
        """The int8 tensor this constant's floats dequantize (`CONSTANT_QUANT_ATTR`), or None."""
        quant = self.attributes.get(CONSTANT_QUANT_ATTR)
        return quant if isinstance(quant, QuantAttr) else None

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


DATA_LAYOUTS = frozenset(RELAX_LAYOUT.values()) | {"NHWC"}
"""The layouts of activations. A constant in one of them is data a layer reads as it reads
an activation (a binary op's constant operand, a concat's constant input): in DDR with the
other constants, in f16 after `mrvl-cast-fp16`."""


def is_data_constant(value: SSAValue) -> bool:
    """Whether `value` is a constant in an activation layout (`DATA_LAYOUTS`)."""
    return isinstance(value.owner, ConstantOp) and layout_of(value) in DATA_LAYOUTS


def verify_element_type_kept(op: IRDLOperation) -> None:
    """An op that moves or reshapes values (not a cast) keeps its input's element type."""
    if element_type_of(op.input) != element_type_of(op.output):
        raise VerifyException(f"{op.name}: element type must not change")


class TensorMoveBase(IRDLOperation):
    """A pure op from one tensor to another that moves or converts its values (reshape,
    layout change, cast): `input`, `output` and their types."""

    input = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"
    traits = traits_def(Pure())


@irdl_op_definition
class ReshapeOp(TensorMoveBase):
    """Reinterpret a tensor's elements, in its layout's row-major order, with a new shape."""

    name = "mrvl.reshape"

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
        verify_element_type_kept(self)


def box_span(offset: int, box: Sequence[int], strides: Sequence[int]) -> tuple[int, int]:
    """The first and last element (inclusive) that a box of at least one element per
    dimension reaches from `offset` by element `strides` (0 or negative allowed): what
    `mrvl.strided_copy` and a strided `sched.dma` side check against their buffer."""
    first = offset + sum((b - 1) * s for b, s in zip(box, strides) if s < 0)
    last = offset + sum((b - 1) * s for b, s in zip(box, strides) if s > 0)
    return first, last


def layout_permutation(src: str, dst: str) -> tuple[int, ...]:
    """`perm` with dst dimension i = src dimension perm[i] (numpy.transpose order)."""
    return tuple(src.index(d) for d in dst)


@irdl_op_definition
class LayoutConvertOp(TensorMoveBase):
    """Change the dimension order of a tensor (`NCHW` <-> `NHWC`); data moves, values do not."""

    name = "mrvl.layout_convert"

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
        verify_element_type_kept(self)


@irdl_op_definition
class CastOp(TensorMoveBase):
    """Change the element type (f32 <-> f16): round to nearest even, saturate at the f16 range."""

    name = "mrvl.cast"

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
    upsampling) or negative (a slice with a negative step: a reversed sequence). Slices, transposes, reshapes across layouts, channel shuffles and integer
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
        if min(box) < 1:
            raise VerifyException("mrvl.strided_copy: box extents must be >= 1")
        if prod(box) != prod(shape_of(self.output)):
            raise VerifyException(
                f"mrvl.strided_copy: box {list(box)} does not hold the "
                f"{prod(shape_of(self.output))} elements of the result"
            )
        first, last = box_span(offset, box, strides)
        if first < 0 or last >= prod(shape_of(self.input)):
            raise VerifyException(
                f"mrvl.strided_copy: elements {first} to {last} are outside the input's "
                f"{prod(shape_of(self.input))} elements"
            )
        verify_element_type_kept(self)


@irdl_op_definition
class ResizeOp(Int8Properties, IRDLOperation):
    """Bilinear resize (NHWC) by interpolation tables: `ytab` holds, for each output row,
    the input rows i0, i1 and fp32 weights w0, w1 (4 f32 per row, indices exact integers);
    `xtab` the same for columns. `mode` records the ONNX coordinate transformation the
    tables were computed with (see `mrvl.strided.interpolation_table`). On i8 tensors it
    carries `in_quant` and `out_quant`, and its tables are `qresize`'s: i32, 3 per output
    index (i0, i1 and w1 in 2^-11 units, `mrvl.isa_int8_resize.fixed_point_table`)."""

    name = "mrvl.resize"
    input = operand_def(TensorType)
    ytab = operand_def(TensorType)
    xtab = operand_def(TensorType)
    output = result_def(TensorType)
    mode = prop_def(ResizeCoordinatesAttr)
    assembly_format = (
        "$input `,` $ytab `,` $xtab `mode` $mode " + INT8_FORMAT + " attr-dict `:` "
        "functional-type(operands, results)"
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
        verify_element_type_kept(self)
        self.verify_int8([self.input], self.output)
        int8 = self.out_quant is not None
        per_index, kind = (3, IntegerType) if int8 else (4, Float32Type)
        for what, value, size in (("ytab", self.ytab, oh), ("xtab", self.xtab, ow)):
            _check_tensor(self, what, value, 1, "O")
            element = element_type_of(value)
            if shape_of(value) != (per_index * size,) or not isinstance(element, kind):
                raise VerifyException(
                    f"mrvl.resize: {what} must be {'i32' if int8 else 'f32'} with {per_index} "
                    f"values per output index ({per_index * size})"
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
        verify_element_type_kept(self)
