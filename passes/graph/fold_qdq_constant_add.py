"""`mrvl-fold-qdq`'s int8 add of a constant: `quantize(binary<add>(dequantize(x), c))`, c an
`mrvl.constant` that dequantizes a per-tensor int8 tensor (`mrvl.ConstantOp.quant`, set by
`mrvl_ir/qdq_constants.py`: a transformer's bias after its MatMul, a position embedding) ->
the int8 `add` of x and c's int8 values broadcast to x's shape, a constant of the region.
`qadd` adds them as it adds a residual, within one step of onnxruntime's DQ -> Add -> Q
(docs/isa.md `qadd`). The values are recovered from c's floats exactly, or the pass stops
with a CompileError (the constant was changed since the QDQ model wrote it)."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, i8
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import Rewriter

from mrvl import int8
from mrvl.dialects import mrvl
from mrvl.errors import CompileError
from mrvl.locations import location_name


def int8_values(const: mrvl.ConstantOp, quant: mrvl.QuantAttr, what: str) -> np.ndarray:
    """The int8 values q with fp32(q - z) * s == the constant's floats, exactly."""
    scale, zero = quant.values
    floats = const.numpy().astype(np.float32)
    q = np.rint(floats.astype(np.float64) / scale) + zero
    if (
        not np.all(np.isfinite(q))
        or q.min(initial=0) < -128
        or q.max(initial=0) > 127
        or not np.array_equal(
            int8.dequantize_linear(q, scale, zero), floats
        )
    ):
        raise CompileError(f"{what}: its constant is not int8 at scale {scale}, zero point {zero}")
    return q.astype(np.int8)


class FoldQuantizedConstantAdd(RewritePattern):
    """`quantize(binary<add>(dequantize(x), c))` (either order) -> `add(x, c8)`, c8 the int8
    constant of x's shape and layout."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.QuantizeOp, rewriter: PatternRewriter) -> None:
        layer = op.input.owner
        if not isinstance(layer, mrvl.BinaryOp) or layer.kind.data != "add":
            return
        if not op.input.has_one_use():
            return
        for x, c in ((layer.lhs, layer.rhs), (layer.rhs, layer.lhs)):
            dq = x.owner
            quant = c.owner.quant if isinstance(c.owner, mrvl.ConstantOp) else None
            if isinstance(dq, mrvl.DequantizeOp) and quant is not None:
                break
        else:
            return
        if mrvl.shape_of(x) != mrvl.shape_of(layer.output):
            return  # the constant is the larger operand: not this form
        what = f"{layer.name} at {location_name(layer.location)}"
        values = int8_values(c.owner, quant, what)
        full = np.ascontiguousarray(np.broadcast_to(values, mrvl.shape_of(layer.output)))
        const = mrvl.ConstantOp(c.owner.const_name.data, full, mrvl.layout_of(layer.output))
        const.location = c.owner.location
        rewriter.insert(const)
        add = mrvl.AddOp(dq.input, const.result)
        add.properties["in_quant"] = ArrayAttr([dq.quant, quant])
        add.properties["out_quant"] = op.quant
        add.location = layer.location
        rewriter.insert(add)
        Rewriter.replace_value_with_new_type(
            add.output, mrvl.tensor(mrvl.shape_of(layer.output), i8, mrvl.layout_of(layer.output))
        )
        rewriter.replace(op, [], [add.output])
        if not layer.output.uses:
            rewriter.erase(layer)
