"""mrvl-fold-flatten-into-fc: flatten NHWC data directly, reordering the FC weights instead.

An ONNX Flatten in front of a Gemm flattens NCHW data, so the importer converts NHWC back to
NCHW first: `layout_convert(NHWC->NCHW)`, `reshape` to [N, C*H*W], `fc`. Reordering the FC
weight columns from (c, h, w) to (h, w, c) order gives the same result from the NHWC bytes
flattened as they are, and the conversion (a full transpose through DDR) disappears. This is
the weight transform the Marvell Nodes-JSON marks as `weights_need_transform`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from mrvl.dialects import mrvl
from mrvl.passes.common import InheritLocation, MrvlModulePass


class FoldFlattenIntoFc(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.ReshapeOp, rewriter: PatternRewriter) -> None:
        convert = op.input.owner
        if not isinstance(convert, mrvl.LayoutConvertOp):
            return
        if (mrvl.layout_of(convert.input), mrvl.layout_of(convert.output)) != ("NHWC", "NCHW"):
            return
        n, c, h, w = mrvl.shape_of(convert.output)
        if mrvl.shape_of(op.output) != (n, c * h * w) or not convert.output.has_one_use():
            return
        users = [u.operation for u in op.output.uses]
        if not users or not all(
            isinstance(u, mrvl.FullyConnectedOp)
            and u.input == op.output
            and isinstance(u.weight.owner, mrvl.ConstantOp)
            and u.weight.has_one_use()
            for u in users
        ):
            return
        for fc in users:
            weight = fc.weight.owner
            data = weight.numpy()
            reordered = data.reshape(-1, c, h, w).transpose(0, 2, 3, 1).reshape(data.shape)
            new_weight = mrvl.ConstantOp(weight.const_name.data, reordered, "OI")
            new_weight.location = weight.location
            rewriter.replace(weight, new_weight)
        flat = mrvl.ReshapeOp(convert.input, op.output.type)
        rewriter.replace(op, flat)
        rewriter.erase(convert)


@dataclass(frozen=True)
class FoldFlattenIntoFcPass(MrvlModulePass):
    name = "mrvl-fold-flatten-into-fc"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(InheritLocation(FoldFlattenIntoFc())).rewrite_module(op)
