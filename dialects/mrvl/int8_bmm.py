"""The int8 product of two activations in the `mrvl` dialect (attention's Q·Kᵀ and A·V in a
quantized model): `mrvl.bmm`'s batched geometry on `i8` tensors, with each operand's and the
result's quantization.

A layer of its own rather than `mrvl.bmm` on `i8`: its two activations each carry a scale and
zero point (no weights, no bias), and it lowers to its own instruction (`qbmm`, docs/isa.md).
`mrvl-fold-qdq` makes it from `quantize(bmm(dequantize(a), dequantize(b)))`
(`passes/graph/fold_qdq_bmm.py`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, TensorType, UnitAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import NoMemoryEffect
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.mrvl.attributes import layout_of, shape_of
from mrvl.dialects.mrvl.quantized import QuantAttr, is_int8


@irdl_op_definition
class QuantizedBatchMatMulOp(IRDLOperation):
    """int8 batched product of two activations, on rank-3 `NCW` i8 tensors: `lhs` [B or 1, M,
    K] ([.., K, M] with `trans_a`), `rhs` [B or 1, K, N] ([.., N, K] with `trans_b`), result
    [B, M, N]; `in_quant` is (lhs, rhs), `out_quant` the result's. An operand with one matrix
    is shared by every batch."""

    name = "mrvl.qbmm"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    output = result_def(TensorType)
    trans_a = opt_prop_def(UnitAttr)
    trans_b = opt_prop_def(UnitAttr)
    in_quant = prop_def(ArrayAttr[QuantAttr])
    out_quant = prop_def(QuantAttr)
    assembly_format = (
        "$lhs `,` $rhs (`trans_a` $trans_a^)? (`trans_b` $trans_b^)? `in_quant` $in_quant "
        "`out_quant` $out_quant attr-dict `:` functional-type(operands, results)"
    )
    traits = traits_def(NoMemoryEffect())

    def __init__(
        self,
        lhs: SSAValue,
        rhs: SSAValue,
        output_type: Attribute,
        in_quant: tuple[QuantAttr, QuantAttr],
        out_quant: QuantAttr,
        *,
        trans_a: bool = False,
        trans_b: bool = False,
    ):
        properties: dict[str, Attribute] = {
            "in_quant": ArrayAttr(list(in_quant)),
            "out_quant": out_quant,
        }
        if trans_a:
            properties["trans_a"] = UnitAttr()
        if trans_b:
            properties["trans_b"] = UnitAttr()
        super().__init__(operands=[lhs, rhs], result_types=[output_type], properties=properties)

    def dims(self) -> tuple[int, int, int, int]:
        """(batch, M, K, N) of the product."""
        batch, m, n = shape_of(self.output)
        _, l1, l2 = shape_of(self.lhs)
        return batch, m, (l1 if self.trans_a is not None else l2), n

    def quant_of_input(self, index: int = 0) -> tuple[float, int]:
        return self.in_quant.data[index].values

    def verify_(self) -> None:
        values = (("lhs", self.lhs), ("rhs", self.rhs), ("output", self.output))
        for what, value in values:
            if not is_int8(value) or len(shape_of(value)) != 3 or layout_of(value) != "NCW":
                raise VerifyException(f"mrvl.qbmm: {what} must be a rank-3 NCW i8 tensor")
        if len(self.in_quant) != 2:
            raise VerifyException("mrvl.qbmm: two in_quant, one per operand")
        batch, m, n = shape_of(self.output)
        lb, l1, l2 = shape_of(self.lhs)
        rb, r1, r2 = shape_of(self.rhs)
        lm, lk = (l2, l1) if self.trans_a is not None else (l1, l2)
        rk, rn = (r2, r1) if self.trans_b is not None else (r1, r2)
        if lk != rk or (lm, rn) != (m, n) or lb not in (1, batch) or rb not in (1, batch):
            raise VerifyException(
                f"mrvl.qbmm: shapes {[list(shape_of(v)) for _, v in values]} do not make a "
                "batched product"
            )
