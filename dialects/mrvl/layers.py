"""`mrvl`'s compute layers: conv2d, the 2-D pools, fc, and the elementwise add, mul and
scale-shift, each with its fused activation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    Float32Type,
    TensorType,
    UnitAttr,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import NoMemoryEffect
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.mrvl.attributes import (
    ACTIVATION_FORMAT,
    FusedActivation,
    _check_tensor,
    _i64_array,
    element_type_of,
    layout_of,
    shape_of,
)
from mrvl.dialects.mrvl.quantized import INT8_FORMAT, Int8Properties, is_int8


def _verify_bias(op: IRDLOperation, channels: int) -> None:
    """The optional bias of a conv or fc: `channels` values, f32 (the MLIP adds it in fp32)
    unless the layer is int8 (its i32 bias is checked with `Int8Properties`)."""
    if op.bias is None:
        return
    _check_tensor(op, "bias", op.bias, 1, "O")
    if shape_of(op.bias) != (channels,):
        raise VerifyException(
            f"{op.name}: bias must have {channels} elements, got {shape_of(op.bias)}"
        )
    if not is_int8(op.output) and not isinstance(element_type_of(op.bias), Float32Type):
        raise VerifyException(f"{op.name}: bias must be f32 (the MLIP adds it in fp32)")


@irdl_op_definition
class Conv2DOp(FusedActivation, Int8Properties, IRDLOperation):
    """2-D convolution, NHWC input, OHWI weights, optional f32 bias, fused activation; or
    the same in int8 (i8 tensors, i32 bias, `Int8Properties`).

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
        + " "
        + INT8_FORMAT
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
        self.verify_int8([self.input], self.output, self.weight, self.bias)
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
        _verify_bias(self, o)


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


class Pool2DBase(Int8Properties, IRDLOperation):
    """Shared form of the 2-D pooling layers (NHWC in and out), f16 or int8."""

    input = operand_def(TensorType)
    output = result_def(TensorType)
    kernel = prop_def(DenseArrayBase[I64])
    strides = prop_def(DenseArrayBase[I64], default_value=_i64_array([1, 1]))
    pads = prop_def(DenseArrayBase[I64], default_value=_i64_array([0, 0, 0, 0]))
    ceil_mode = opt_prop_def(UnitAttr)

    assembly_format = (
        "$input `kernel` $kernel (`strides` $strides^)? (`pads` $pads^)? "
        "(`ceil_mode` $ceil_mode^)? " + INT8_FORMAT + " attr-dict `:` type($input) `->` "
        "type($output)"
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
        self.verify_int8([self.input], self.output)
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
        + INT8_FORMAT
        + " attr-dict `:` type($input) `->` type($output)"
    )


@irdl_op_definition
class FullyConnectedOp(FusedActivation, Int8Properties, IRDLOperation):
    """Fully connected layer: [N, K] input, [O, K] weights (layout OI), optional f32 bias;
    or the same in int8 (i8 tensors, i32 bias, `Int8Properties`)."""

    name = "mrvl.fc"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    output = result_def(TensorType)

    assembly_format = (
        "$input `,` $weight (`bias` $bias^)? "
        + ACTIVATION_FORMAT
        + " "
        + INT8_FORMAT
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
        self.verify_int8([self.input], self.output, self.weight, self.bias)
        n, k = shape_of(self.input)
        o, wk = shape_of(self.weight)
        if wk != k:
            raise VerifyException(f"mrvl.fc: weight has {wk} input features but the input has {k}")
        if shape_of(self.output) != (n, o):
            raise VerifyException(
                f"mrvl.fc: output shape {list(shape_of(self.output))} does not match [{n}, {o}]"
            )
        _verify_bias(self, o)


@irdl_op_definition
class AddOp(FusedActivation, Int8Properties, IRDLOperation):
    """Elementwise sum of two tensors of one type (a residual connection), fused activation
    (PRELU with one slope per channel, the innermost dimension of the layout); in int8, each
    operand has its own quantization (`in_quant`)."""

    name = "mrvl.add"
    T: ClassVar = VarConstraint("T", base(TensorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    output = result_def(T)
    assembly_format = (
        "$lhs `,` $rhs " + ACTIVATION_FORMAT + " " + INT8_FORMAT + " attr-dict `:` type($output)"
    )
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
        self.verify_int8([self.lhs, self.rhs], self.output)


@irdl_op_definition
class MulOp(FusedActivation, Int8Properties, IRDLOperation):
    """Elementwise product of two tensors, fused activation. `rhs` has the type of `lhs`, or
    (NHWC only) shape [N, 1, 1, C]: one value per image and channel, broadcast over the plane
    (the squeeze-excitation gate `x * s`); in int8, each operand has its own quantization
    (`in_quant`)."""

    name = "mrvl.mul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    output = result_def(TensorType)
    assembly_format = (
        "$lhs `,` $rhs "
        + ACTIVATION_FORMAT
        + " "
        + INT8_FORMAT
        + " attr-dict `:` functional-type(operands, results)"
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
        self.verify_int8([self.lhs, self.rhs], self.output)


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


class BatchedProduct:
    """The shape rule that `mrvl.bmm` and `sched.bmm` share: `lhs` [B or 1, M, K] ([.., K, M]
    with `trans_a`), `rhs` [B or 1, K, N] ([.., N, K] with `trans_b`), `output` [B, M, N].
    The op says how to read a value's shape: a tensor's, or a buffer's (`value_shape`)."""

    def value_shape(self, value: SSAValue) -> tuple[int, ...]:
        raise NotImplementedError

    def dims(self) -> tuple[int, int, int, int]:
        """(batch, M, K, N) of the product."""
        batch, m, n = self.value_shape(self.output)
        _, l1, l2 = self.value_shape(self.lhs)
        return batch, m, (l1 if self.trans_a is not None else l2), n

    def verify_product_shapes(self) -> None:
        """The operands' matrices make the result's, and each holds one matrix or B."""
        batch, m, n = self.value_shape(self.output)
        lb, l1, l2 = self.value_shape(self.lhs)
        rb, r1, r2 = self.value_shape(self.rhs)
        lm, lk = (l2, l1) if self.trans_a is not None else (l1, l2)
        rk, rn = (r2, r1) if self.trans_b is not None else (r1, r2)
        if lk != rk:
            raise VerifyException(f"{self.name}: lhs reduces over {lk} elements but rhs over {rk}")
        if (lm, rn) != (m, n):
            raise VerifyException(
                f"{self.name}: result matrices are [{m}, {n}] but the operands make [{lm}, {rn}]"
            )
        for what, b in (("lhs", lb), ("rhs", rb)):
            if b not in (1, batch):
                raise VerifyException(
                    f"{self.name}: {what} holds {b} matrices; the result has {batch} "
                    "(1 broadcasts)"
                )


@irdl_op_definition
class BatchMatMulOp(BatchedProduct, IRDLOperation):
    """Batched product of two activations (attention's Q·Kᵀ and A·V), on rank-3 `NCW`
    tensors in Relax's row-major order: `lhs` [B or 1, M, K] ([.., K, M] with `trans_a`),
    `rhs` [B or 1, K, N] ([.., N, K] with `trans_b`), result [B, M, N]. An operand with one
    matrix is shared by every batch (a broadcast)."""

    name = "mrvl.bmm"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    output = result_def(TensorType)
    trans_a = opt_prop_def(UnitAttr)
    trans_b = opt_prop_def(UnitAttr)
    assembly_format = (
        "$lhs `,` $rhs (`trans_a` $trans_a^)? (`trans_b` $trans_b^)? "
        "attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(
        self, lhs: SSAValue, rhs: SSAValue, output_type: Attribute, *, trans_a=False, trans_b=False
    ):
        properties = {}
        if trans_a:
            properties["trans_a"] = UnitAttr()
        if trans_b:
            properties["trans_b"] = UnitAttr()
        super().__init__(operands=[lhs, rhs], result_types=[output_type], properties=properties)

    def value_shape(self, value: SSAValue) -> tuple[int, ...]:
        return shape_of(value)

    def verify_(self) -> None:
        for what, value in (("lhs", self.lhs), ("rhs", self.rhs), ("output", self.output)):
            _check_tensor(self, what, value, 3, "NCW")
        types = {element_type_of(v) for v in (self.lhs, self.rhs, self.output)}
        if len(types) != 1:
            raise VerifyException("mrvl.bmm: operands and result must have one element type")
        self.verify_product_shapes()
