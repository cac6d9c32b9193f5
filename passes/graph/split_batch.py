"""mrvl-split-batch: a conv, pool or resize over more than `BATCH_GROUP` images becomes one
layer per group of at most `BATCH_GROUP` images, on a strided copy of the group's images,
and a concat of the groups' results on the batch axis.

The window tiling of these layers cuts rows, columns and channels, but every piece holds all
N images of its rows, so a large batch makes every piece large (attention folds heads or
windows into batches of 128 and more). A group's layer sees its images only: the same taps
and sums per image, the same bits. The slices and the concat are DDR-to-DDR copies, one pass
each over the tensors; only layers beyond the bound pay them.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.rewriter import InsertPoint, Rewriter

from mrvl.dialects import mrvl
from mrvl.passes.common import MrvlModulePass

BATCH_GROUP = 8
"""Images a conv, pool or resize layer takes at once (`pattern_checks.MAX_BATCH`)."""

SPLIT_LAYERS = (mrvl.Conv2DOp, mrvl.Pool2DBase, mrvl.ResizeOp)


def _located(op: Operation, like: Operation) -> Operation:
    op.location = like.location
    return op


def split_layer(op: Operation) -> None:
    """Replace `op` (batch N > BATCH_GROUP, NHWC) by its groups and their concat."""
    n, h, w, c = mrvl.shape_of(op.input)
    out_shape = mrvl.shape_of(op.output)
    element = mrvl.element_type_of(op.input)
    image = h * w * c
    results = []
    for first in range(0, n, BATCH_GROUP):
        count = min(BATCH_GROUP, n - first)
        images = mrvl.tensor((count, h, w, c), element, "NHWC")
        strides = (image, w * c, c, 1)
        piece = _located(
            mrvl.StridedCopyOp(
                op.input, images, offset=first * image, strides=strides, box=(count, h, w, c)
            ),
            op,
        )
        out_type = mrvl.tensor((count, *out_shape[1:]), mrvl.element_type_of(op.output), "NHWC")
        group = _located(
            type(op).create(
                operands=[piece.output, *op.operands[1:]],
                result_types=[out_type],
                properties=dict(op.properties),
                attributes=dict(op.attributes),
            ),
            op,
        )
        Rewriter.insert_op([piece, group], InsertPoint.before(op))
        results.append(group.results[0])
    concat = _located(mrvl.ConcatOp(results, op.output.type, axis=0), op)
    Rewriter.insert_op(concat, InsertPoint.before(op))
    op.output.replace_all_uses_with(concat.output)
    Rewriter.erase_op(op)


@dataclass(frozen=True)
class SplitBatchPass(MrvlModulePass):
    name = "mrvl-split-batch"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for layer in list(op.walk()):
            if isinstance(layer, SPLIT_LAYERS) and mrvl.shape_of(layer.input)[0] > BATCH_GROUP:
                if prod(mrvl.shape_of(layer.input)) and mrvl.layout_of(layer.input) == "NHWC":
                    split_layer(layer)
