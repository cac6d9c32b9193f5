"""`mrvl-fold-qdq`'s int8 product of two activations: `quantize(bmm(dequantize(a),
dequantize(b)))` -> `mrvl.qbmm(a, b)` with a's, b's and the result's quantization (the `qbmm`
instruction: the exact int32 sum of (a - z_a)(b - z_b), requantized once by s_a·s_b/s_y, as
onnxruntime's DQ -> MatMul -> Q rounds its fp32 product once). A rank-4 product imports as
reshapes around a rank-3 `bmm`: `MoveIntoInt8` moves the operands' reshapes before their
dequantizes, and the quantize of the result may read it through one reshape, which moves
after the int8 layer (quantizing is elementwise).
"""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from mrvl.dialects import mrvl


def _as_i8(t):
    from xdsl.dialects.builtin import i8

    return mrvl.tensor(mrvl.shape_of(t), i8, mrvl.layout_of(t))


class FoldQuantizedBatchMatMul(RewritePattern):
    """`quantize([reshape](bmm(dequantize(a), dequantize(b))))` -> `[reshape](qbmm(a, b))`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.QuantizeOp, rewriter: PatternRewriter) -> None:
        layer, reshape = op.input.owner, None
        if isinstance(layer, mrvl.ReshapeOp) and op.input.has_one_use():
            reshape, layer = layer, layer.input.owner
        if not isinstance(layer, mrvl.BatchMatMulOp) or not layer.output.has_one_use():
            return
        a, b = layer.lhs.owner, layer.rhs.owner
        if not isinstance(a, mrvl.DequantizeOp) or not isinstance(b, mrvl.DequantizeOp):
            return
        new = mrvl.QuantizedBatchMatMulOp(
            a.input,
            b.input,
            _as_i8(layer.output.type),
            (a.quant, b.quant),
            op.quant,
            trans_a=layer.trans_a is not None,
            trans_b=layer.trans_b is not None,
        )
        new.location = layer.location
        rewriter.insert(new)
        result = new.output
        if reshape is not None:
            moved = mrvl.ReshapeOp(result, _as_i8(reshape.output.type))
            moved.location = reshape.location
            rewriter.insert(moved)
            result = moved.output
        rewriter.replace(op, [], [result])
        if reshape is not None and not reshape.output.uses:
            rewriter.erase(reshape)
        if not layer.output.uses:
            rewriter.erase(layer)
