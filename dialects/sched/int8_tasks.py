"""`sched`'s int8 tasks: quantize and dequantize, dense DDR-to-DDR conversions between float
and int8 with a permutation of the dimensions (as `sched.convert`), at the edges of int8 code
(region inputs and outputs, fp16 layers between int8 ones); and the int8 compute tasks, one
per int8 instruction (docs/isa.md, int8 mode), with the geometry of their fp16 kin."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    IntegerAttr,
    IntegerType,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
)
from xdsl.irdl.operations import AttrSizedOperandSegments
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.mrvl import QuantAttr
from mrvl.dialects.sched.attributes import (
    BufferType,
    buffer_type,
)
from mrvl.dialects.sched.tasks import (
    CONV_FORMAT,
    POOL_FORMAT,
    ConvertOp,
    ConvGeometry,
    DdrConversionBase,
    PoolGeometry,
    TaskBase,
    _check_ocm,
    fc_features,
    task_format,
    vector_length,
)


class _QuantConvertBase(DdrConversionBase):
    quant = prop_def(QuantAttr)
    assembly_format = task_format(
        "$source `->` $dest `perm` $perm `quant` $quant", "type($source) `,` type($dest)"
    )

    def __init__(
        self,
        source: SSAValue,
        dest: SSAValue,
        perm: Sequence[int],
        quant: QuantAttr,
        tile: int,
        deps: Sequence[SSAValue] = (),
    ):
        super().__init__(source, dest, perm, tile, deps, quant=quant)

    def verify_(self) -> None:
        super().verify_()
        s, d = buffer_type(self.source), buffer_type(self.dest)
        floats, ints = (s, d) if isinstance(self, QuantizeTaskOp) else (d, s)
        if not isinstance(floats.element_type, Float32Type | Float16Type):
            raise VerifyException(f"{self.name}: the float side is f32 or f16")
        if not (isinstance(ints.element_type, IntegerType) and ints.element_type.width.data == 8):
            raise VerifyException(f"{self.name}: the int8 side is i8")


@irdl_op_definition
class QuantizeTaskOp(_QuantConvertBase):
    """f32 or f16 -> int8 (ONNX QuantizeLinear), dense, DDR to DDR, dims permuted."""

    name = "sched.quantize"


@irdl_op_definition
class DequantizeTaskOp(_QuantConvertBase):
    """int8 -> f32 or f16 (ONNX DequantizeLinear), dense, DDR to DDR, dims permuted."""

    name = "sched.dequantize"


DDR_CONVERSIONS = ConvertOp | QuantizeTaskOp | DequantizeTaskOp
"""The tasks that convert a whole DDR tensor into another (`source` -> `dest`)."""


INT8_FORMAT = "`in_zp` $in_zp `out_zp` $out_zp `clamp` $clamp"
"""An int8 compute task's zero points and saturation bounds (ReLU / ReLU6 / Clip)."""


class Int8TaskBase(TaskBase):
    """What every int8 compute task carries: its input's and result's zero points and the
    saturation bounds [lo, hi] of its int8 result."""

    in_zp = prop_def(IntegerAttr[I64])
    out_zp = prop_def(IntegerAttr[I64])
    clamp = prop_def(DenseArrayBase[I64])

    def verify_int8(self) -> None:
        lo, hi = self.clamp.get_values()
        zps = (self.in_zp.value.data, self.out_zp.value.data)
        if not (-128 <= lo <= hi <= 127) or not all(-128 <= z <= 127 for z in zps):
            raise VerifyException(
                f"{self.name}: zero points {list(zps)} and clamp [{lo}, {hi}] must lie in "
                "[-128, 127], lo <= hi"
            )


def _int_buffer(op, what: str, value: SSAValue, bits: int) -> None:
    et = buffer_type(value).element_type
    if not (isinstance(et, IntegerType) and et.width.data == bits):
        raise VerifyException(f"{op.name}: {what} is i{bits}")


@irdl_op_definition
class QConv2DTaskOp(ConvGeometry, Int8TaskBase):
    """int8 convolution of an OCM input window with OCM int8 weights (output channels
    oc0...), exact int32 accumulation from the int32 bias (or the partial sums `acc`), then
    per-channel requantization by the (multiplier, shift) pairs of `requant`; or the int32
    accumulator itself (`acc_out`)."""

    name = "sched.qconv2d"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    input = operand_def(BufferType)
    output = operand_def(BufferType)
    weight = operand_def(BufferType)
    bias = opt_operand_def(BufferType)
    requant = operand_def(BufferType)
    acc = opt_operand_def(BufferType)
    assembly_format = task_format(
        "$input `,` $weight (`bias` $bias^)? `requant` $requant "
        "(`acc` `(` $acc^ `:` type($acc) `)`)? `->` $output (`acc_out` $acc_out^)? "
        + CONV_FORMAT
        + " "
        + INT8_FORMAT,
        "type($input) `,` type($weight) `,` type($requant) (`,` `bias` type($bias)^)? "
        "`->` type($output)",
    )

    def verify_(self) -> None:
        self.verify_int8()
        _check_ocm(self, self.tile.value.data, self.input, self.output, self.weight, self.requant)
        _int_buffer(self, "the input", self.input, 8)
        _int_buffer(self, "the weight", self.weight, 8)
        _int_buffer(self, "the output", self.output, 32 if self.acc_out else 8)
        _int_buffer(self, "requant", self.requant, 32)
        if buffer_type(self.requant).dims != (buffer_type(self.output).dims[-1], 2):
            raise VerifyException(f"{self.name}: requant holds a pair per output channel")
        for value, what in ((self.bias, "the bias"), (self.acc, "acc")):
            if value is not None:
                _check_ocm(self, self.tile.value.data, value)
                _int_buffer(self, what, value, 32)


@irdl_op_definition
class QFullyConnectedTaskOp(Int8TaskBase):
    """int8 fully connected layer on OCM rows for the output features held by `weight`:
    exact int32 accumulation from the bias, requantized per feature (`requant` pairs)."""

    name = "sched.qfc"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    input = operand_def(BufferType)
    weight = operand_def(BufferType)
    bias = opt_operand_def(BufferType)
    requant = operand_def(BufferType)
    output = operand_def(BufferType)
    assembly_format = task_format(
        "$input `,` $weight (`bias` $bias^)? `requant` $requant `->` $output " + INT8_FORMAT,
        "type($input) `,` type($weight) `,` type($requant) (`,` `bias` type($bias)^)? "
        "`->` type($output)",
    )

    def verify_(self) -> None:
        self.verify_int8()
        _check_ocm(self, self.tile.value.data, self.input, self.output, self.weight, self.requant)
        if buffer_type(self.requant).dims != (fc_features(self), 2):
            raise VerifyException("sched.qfc: requant holds a pair per output feature")


@irdl_op_definition
class QAddTaskOp(TaskBase):
    """Sum of two OCM int8 vectors of their own scales and zero points, rescaled to the
    result's (fixed-point pairs `a_rq`, `b_rq`, `out_rq`, isa.md `qadd`)."""

    name = "sched.qadd"
    lhs = operand_def(BufferType)
    rhs = operand_def(BufferType)
    output = operand_def(BufferType)
    a_zp = prop_def(IntegerAttr[I64])
    b_zp = prop_def(IntegerAttr[I64])
    out_zp = prop_def(IntegerAttr[I64])
    a_rq = prop_def(DenseArrayBase[I64])
    b_rq = prop_def(DenseArrayBase[I64])
    out_rq = prop_def(DenseArrayBase[I64])
    clamp = prop_def(DenseArrayBase[I64])
    assembly_format = task_format(
        "$lhs `,` $rhs `->` $output `zp` `(` $a_zp `,` $b_zp `,` $out_zp `)` "
        "`rq` `(` $a_rq `,` $b_rq `,` $out_rq `)` `clamp` $clamp",
        "type($lhs) `,` type($rhs) `->` type($output)",
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.lhs, self.rhs, self.output)
        vector_length(self, "operands and result", self.lhs, self.rhs, self.output)


@irdl_op_definition
class RequantTaskOp(Int8TaskBase):
    """An OCM int8 vector rescaled to another scale and zero point by one (multiplier,
    shift) pair `rq` (isa.md `requant`): a concat input of another scale, a requantization."""

    name = "sched.requant"
    input = operand_def(BufferType)
    output = operand_def(BufferType)
    rq = prop_def(DenseArrayBase[I64])
    assembly_format = task_format(
        "$input `->` $output `rq` $rq " + INT8_FORMAT, "type($input) `->` type($output)"
    )

    def verify_(self) -> None:
        self.verify_int8()
        _check_ocm(self, self.tile.value.data, self.input, self.output)
        _int_buffer(self, "the input", self.input, 8)
        _int_buffer(self, "the output", self.output, 8)
        vector_length(self, "input and result", self.input, self.output)


@irdl_op_definition
class QPool2DTaskOp(PoolGeometry, TaskBase):
    """int8 max or average pooling of an OCM window (the `sched.pool2d` geometry), the pooled
    value rescaled to the result's scale and zero point by one (multiplier, shift) pair."""

    name = "sched.qpool2d"
    input = operand_def(BufferType)
    output = operand_def(BufferType)
    in_zp = prop_def(IntegerAttr[I64])
    out_zp = prop_def(IntegerAttr[I64])
    rq = prop_def(DenseArrayBase[I64])
    assembly_format = task_format(
        POOL_FORMAT + " `in_zp` $in_zp `out_zp` $out_zp `rq` $rq",
        "type($input) `->` type($output)",
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.output)
