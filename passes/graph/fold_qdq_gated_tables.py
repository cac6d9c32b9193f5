"""`mrvl-fold-qdq`'s gated tables: an int8 product of a tensor and a table of that same tensor,
`mul(x, int8_table(x))` (SiLU as a QDQ model writes it: x * sigmoid(x), the sigmoid quantized
on its own), is a function of one int8 value too, so it becomes one `mrvl.int8_table`: one
pass over the tensor instead of a table pass and a `qmul` pass, each through DDR.

Entry q + 128 is what the QDQ model means for x = q: x and the gate T[q + 128] dequantized in
fp32 (`int8.dequantize_linear`), their fp32 product quantized at the product's scale
(`int8.quantize_linear`): onnxruntime's DequantizeLinear -> Mul -> QuantizeLinear on the
same bits, so the table is exact where the `qmul` it replaces is within one step.
"""

from __future__ import annotations

import numpy as np
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from mrvl import int8
from mrvl.dialects import mrvl


def gated_table(table, x_quant, gate_quant, out_quant) -> np.ndarray:
    """int8 [256]: x * T[x] of each int8 x, in onnxruntime's QDQ arithmetic."""
    q = np.arange(int8.INT8_MIN, int8.INT8_MAX + 1)
    x = int8.dequantize_linear(q, *x_quant)
    gate = int8.dequantize_linear(np.asarray(table, np.int64), *gate_quant)
    return int8.quantize_linear(x * gate, *out_quant)


class FoldGatedTable(RewritePattern):
    """int8 `mul(x, int8_table(x))` (either order, no activation) -> one `int8_table` of x."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.MulOp, rewriter: PatternRewriter) -> None:
        if not mrvl.is_int8(op.output) or op.in_quant is None or op.activation is not None:
            return
        if op.lhs.type != op.rhs.type:
            return  # a broadcast gate [N, 1, 1, C] is a different tensor
        for gate_index, x in ((1, op.lhs), (0, op.rhs)):
            gate = op.operands[gate_index].owner
            if isinstance(gate, mrvl.Int8TableOp) and gate.input == x:
                break
        else:
            return
        quants = op.in_quant.data
        x_quant, gate_quant = quants[1 - gate_index].values, quants[gate_index].values
        if x_quant != gate.quant_of_input():
            return
        table = gated_table(gate.table.get_values(), x_quant, gate_quant, op.out_quant.values)
        new = mrvl.Int8TableOp(
            x, f"x * {gate.function.data}", table, gate.in_quant.data[0], op.out_quant
        )
        new.location = op.location
        rewriter.replace(op, new)
        if not gate.output.uses:
            rewriter.erase(gate)
