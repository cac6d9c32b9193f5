"""mrvl-canonicalize: remove data movement that does nothing.

A layout conversion followed by its inverse, and a reshape or cast to the type it already
has, are dropped; a layout conversion that moves only unit dimensions becomes a reshape, and
chains of reshapes collapse; dead ops go with xDSL's dead-code elimination.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from mrvl.dialects import mrvl
from mrvl.passes.common import InheritLocation, MrvlModulePass


class FoldInverseLayoutConverts(RewritePattern):
    """layout_convert(layout_convert(x, A->B), B->A) -> x"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.LayoutConvertOp, rewriter: PatternRewriter) -> None:
        producer = op.input.owner
        if isinstance(producer, mrvl.LayoutConvertOp) and producer.input.type == op.output.type:
            rewriter.replace(op, [], [producer.input])


class FoldIdentityDataOps(RewritePattern):
    """reshape / cast / layout_convert whose result type equals its input type -> input"""

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if isinstance(op, mrvl.ReshapeOp | mrvl.CastOp | mrvl.LayoutConvertOp):
            if op.input.type == op.output.type:
                rewriter.replace(op, [], [op.input])


class UnitDimConvertToReshape(RewritePattern):
    """layout_convert that moves only size-1 dimensions -> reshape (the bytes do not move):
    NHWC [N,1,1,C] and NCHW [N,C,1,1] hold the same bytes in the same order."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.LayoutConvertOp, rewriter: PatternRewriter) -> None:
        shape = mrvl.shape_of(op.input)
        moved = [p for p in op.permutation if shape[p] != 1]
        if moved == sorted(moved):
            rewriter.replace(op, mrvl.ReshapeOp(op.input, op.output.type))


class FoldReshapeChains(RewritePattern):
    """reshape(reshape(x)) -> reshape(x)"""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.ReshapeOp, rewriter: PatternRewriter) -> None:
        producer = op.input.owner
        if isinstance(producer, mrvl.ReshapeOp):
            rewriter.replace(op, mrvl.ReshapeOp(producer.input, op.output.type))


@dataclass(frozen=True)
class CanonicalizePass(MrvlModulePass):
    name = "mrvl-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = [
            FoldInverseLayoutConverts(),
            FoldIdentityDataOps(),
            UnitDimConvertToReshape(),
            FoldReshapeChains(),
        ]
        PatternRewriteWalker(
            GreedyRewritePatternApplier([InheritLocation(p) for p in patterns])
        ).rewrite_module(op)
