"""`mrvl-fold-qdq`'s int8 Sub: `quantize(binary<sub>(dequantize(a), dequantize(b)))` of two
tensors of one type is the int8 `add` of a and of b negated. The MLIP has no int8 subtract,
and `qadd`'s rescales are multipliers of at least 0 (docs/isa.md), so b is negated exactly
first, as a table: -s(q - z) = s((-q - 1) - (-z - 1)), so the int8 value -q - 1 (every int8
value has one: -128 <-> 127) at zero point -z - 1 (in [-128, 127] for every z) is -b, with
b's scale. `qadd` then adds as it adds a residual, within one step of
round((s_a(a - z_a) - s_b(b - z_b)) / s_y) + z_y, onnxruntime's DQ -> Sub -> Q.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ArrayAttr
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import Rewriter

from mrvl import int8
from mrvl.dialects import mrvl

NEGATION = np.arange(int8.INT8_MIN, int8.INT8_MAX + 1, dtype=np.int64) * -1 - 1
"""Entry q + 128 of the negation table: -q - 1."""


def negated_quant(quant: mrvl.QuantAttr) -> mrvl.QuantAttr:
    """The quantization at which the negation table's result means -x: b's scale, zero point
    -z - 1."""
    scale, zero = quant.values
    return mrvl.QuantAttr(scale, -zero - 1)


class FoldQuantizedSub(RewritePattern):
    """`quantize(binary<sub>(dequantize(a), dequantize(b)))`, a and b of one type -> int8
    `add(a, int8_table<negate>(b))`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.QuantizeOp, rewriter: PatternRewriter) -> None:
        layer = op.input.owner
        if not isinstance(layer, mrvl.BinaryOp) or layer.kind.data != "sub":
            return
        if not op.input.has_one_use() or layer.lhs.type != layer.rhs.type:
            return
        a, b = layer.lhs.owner, layer.rhs.owner
        if not isinstance(a, mrvl.DequantizeOp) or not isinstance(b, mrvl.DequantizeOp):
            return
        negated = negated_quant(b.quant)
        negate = mrvl.Int8TableOp(b.input, "-x", NEGATION, b.quant, negated)
        negate.location = layer.location
        rewriter.insert(negate)
        add = mrvl.AddOp(a.input, negate.output)
        add.properties["in_quant"] = ArrayAttr([a.quant, negated])
        add.properties["out_quant"] = op.quant
        add.location = layer.location
        rewriter.insert(add)
        Rewriter.replace_value_with_new_type(add.output, a.input.type)
        rewriter.replace(op, [], [add.output])
        if not layer.output.uses:
            rewriter.erase(layer)
