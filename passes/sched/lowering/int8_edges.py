"""Lowering of the edges of int8 code: a quantize or dequantize is one `sched.quantize` /
`sched.dequantize` on tile 0, DDR to DDR (into the region's output buffer when it produces
an output), as a cast is one `sched.convert`. `sched-fuse-converts` folds a layout change
of the float side into it (its permutation)."""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.passes.sched.lowering.data_movement import _LowerConvert


class _LowerQuantConvert(_LowerConvert):
    """A quantize or dequantize: `_LowerConvert`'s buffers and tokens, its own task."""

    def task(self, op: mrvl.QuantizeOp | mrvl.DequantizeOp, src, dest, deps) -> sched.TaskBase:
        task = sched.QuantizeTaskOp if isinstance(op, mrvl.QuantizeOp) else sched.DequantizeTaskOp
        perm = list(range(len(mrvl.shape_of(op.input))))
        return task(src, dest, perm, op.quant, 0, deps)


class LowerQuantize(_LowerQuantConvert):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.QuantizeOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerDequantize(_LowerQuantConvert):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.DequantizeOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)
