"""sched-fuse-converts: one DDR pass instead of two for back-to-back conversions.

A region input is cast (f32 -> f16) and then reordered (NCHW -> NHWC); an output the other
way round. When a conversion's only reader is another conversion, the two become one
`sched.convert` with the composed permutation, and the intermediate buffer disappears. Only
chains that round once are fused (the intermediate element type equals the first source's
or the last destination's), so the result is bit-identical.

A quantize or dequantize (int8 code's edges) takes a reorder before or after it in the same
way, when that reorder changes no element type: it becomes the quantize's permutation.
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

from mrvl.dialects import sched
from mrvl.passes.common import InheritLocation, MrvlModulePass

_CONVERSIONS = (sched.ConvertOp, sched.QuantizeTaskOp, sched.DequantizeTaskOp)


class FuseConvertChain(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(
        self,
        op: sched.ConvertOp | sched.QuantizeTaskOp | sched.DequantizeTaskOp,
        rewriter: PatternRewriter,
    ) -> None:
        middle = op.source
        alloc = middle.owner
        if not isinstance(alloc, sched.AllocOp):
            return
        users = [u.operation for u in middle.uses]
        writers = [u for u in users if isinstance(u, _CONVERSIONS) and u.dest == middle]
        if len(users) != 2 or len(writers) != 1 or op not in users:
            return
        first = writers[0]
        src_t, mid_t, dst_t = (
            sched.buffer_type(first.source).element_type,
            sched.buffer_type(middle).element_type,
            sched.buffer_type(op.dest).element_type,
        )
        quantizing = [c for c in (first, op) if not isinstance(c, sched.ConvertOp)]
        if len(quantizing) > 1:
            return
        if quantizing:
            reorder = first if isinstance(first, sched.ConvertOp) else op
            if sched.buffer_type(reorder.source).element_type != sched.buffer_type(
                reorder.dest
            ).element_type:
                return  # a cast and a (de)quantize round twice
        elif mid_t != src_t and mid_t != dst_t:
            return  # two roundings: fusing would change the result
        p1, p2 = first.perm.get_values(), op.perm.get_values()
        deps = [d for d in op.deps if d != first.token] + list(first.deps)
        perm, tile = [p1[i] for i in p2], op.tile.value.data
        if quantizing:
            fused = type(quantizing[0])(
                first.source, op.dest, perm, quantizing[0].quant, tile, deps
            )
        else:
            fused = sched.ConvertOp(first.source, op.dest, perm, tile, deps)
        fused.location = (quantizing[0] if quantizing else first).location
        rewriter.replace(op, fused)
        if not first.token.uses:
            rewriter.erase(first)
        if not alloc.buffer.uses:
            rewriter.erase(alloc)


@dataclass(frozen=True)
class FuseConvertsPass(MrvlModulePass):
    name = "sched-fuse-converts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # The walker visits every op of the program (tens of thousands at 8 tiles) and finds
        # a chain only where a conversion reads an `alloc`: without one, nothing can change
        # (no sched op is free of side effects, so its dead-code pass erases nothing either).
        if not any(
            isinstance(o, _CONVERSIONS) and isinstance(o.source.owner, sched.AllocOp)
            for o in op.walk()
        ):
            return
        PatternRewriteWalker(InheritLocation(FuseConvertChain())).rewrite_module(op)
