"""Lowering of the elementwise layers (add, mul, scale-shift): chunks of the flat tensor,
dealt round-robin over the tiles, each loaded, computed and stored (`LoweringState.chunk_task`).
"""

from __future__ import annotations

from math import prod

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.passes.sched.lowering.int8_compute import is_int8_layer, lower_qadd
from mrvl.passes.sched.lowering.int8_elementwise import lower_qmul
from mrvl.passes.sched.lowering.mul_chunks import MulChunks
from mrvl.passes.sched.lowering.state import F16_BYTES, LayerLowering, buffer_type, int_attr
from mrvl.passes.sched.tiling import F32, ChannelChunk, plan_elementwise, plan_per_channel


class LowerAdd(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.AddOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.AddOp) -> None:
        """Chunks of the flat sum; with PRELU, chunks of whole pixels (or channel groups of one
        pixel) with their slice of the slopes, cut as scale_shift cuts them."""
        if is_int8_layer(op):
            lower_qadd(self.low, op)
            return
        self.low.require_f16(op)
        count = prod(mrvl.shape_of(op.output))
        et = mrvl.element_type_of(op.output)
        flat = buffer_type("ddr", (count,), et)
        lhs, rhs = (self.low.flat_view(self.low.ddr_buffer(v), flat) for v in (op.lhs, op.rhs))
        dst = self.low.new_ddr(op.output)
        out = self.low.flat_view(dst, flat)
        slopes = self.low.slopes(op)
        ocm, alignment = self.low.ocm_bytes(op), self.low.target.ocm_alignment
        if slopes is None:
            chunks = [
                ChannelChunk(c.start, c.length, 0, 0)
                for c in plan_elementwise(count, 3, ocm, self.low.num_tiles, alignment)
            ]
        else:
            channels = mrvl.shape_of(op.output)[-1]
            chunks = plan_per_channel(
                count, channels, ocm, self.low.num_tiles, alignment, self.low.what(op),
                param_bytes=F32, operands=3,
            )  # fmt: skip
        for index, chunk in enumerate(chunks):
            tile = index % self.low.num_tiles
            a, t_a = self.low.load(lhs, [chunk.start], [chunk.length], tile)
            b, t_b = self.low.load(rhs, [chunk.start], [chunk.length], tile)
            deps, prelu = [t_a, t_b], []
            if slopes is not None:
                sbuf, t_p = self.low.load(slopes, [chunk.c0], [chunk.cs], tile)
                deps.append(t_p)
                prelu = [sbuf]
            self.low.chunk_task(
                op, sched.AddTaskOp, tile, chunk, out, deps, lhs=a, rhs=b, prelu_slopes=prelu
            )


class LowerScaleShift(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.ScaleShiftOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.ScaleShiftOp) -> None:
        """Chunks of whole pixels (all channels), so a chunk's channel is its index mod C; a
        pixel too large for a tile with all C channels' parameters is cut into channel groups,
        each with its slice of scale, shift and slopes."""
        self.low.require_f16(op)
        count, channels = prod(mrvl.shape_of(op.output)), op.channels
        et = mrvl.element_type_of(op.output)
        flat = buffer_type("ddr", (count,), et)
        src = self.low.flat_view(self.low.ddr_buffer(op.input), flat)
        dst = self.low.new_ddr(op.output)
        out = self.low.flat_view(dst, flat)
        chunks = plan_per_channel(
            count,
            channels,
            self.low.ocm_bytes(op),
            self.low.num_tiles,
            self.low.target.ocm_alignment,
            self.low.what(op),
            param_bytes=(3 if op.slopes is not None else 2) * F32,
        )
        slopes = self.low.slopes(op)
        for index, chunk in enumerate(chunks):
            tile = index % self.low.num_tiles
            x, t_x = self.low.load(src, [chunk.start], [chunk.length], tile)
            s, t_s = self.low.load(self.low.ddr_buffer(op.scale), [chunk.c0], [chunk.cs], tile)
            b, t_b = self.low.load(self.low.ddr_buffer(op.shift), [chunk.c0], [chunk.cs], tile)
            deps = [t_x, t_s, t_b]
            prelu = []
            if slopes is not None:
                sbuf, t_p = self.low.load(slopes, [chunk.c0], [chunk.cs], tile)
                deps.append(t_p)
                prelu = [sbuf]
            self.low.chunk_task(
                op, sched.ScaleTaskOp, tile, chunk, out, deps,
                input=x, scale=s, shift=b, prelu_slopes=prelu,
            )  # fmt: skip


class LowerMul(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.MulOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.MulOp) -> None:
        """Chunks of the flat product; a broadcast `rhs` ([N, 1, 1, C]) is cut per image, so a
        chunk takes whole pixels of one image and that image's C gate values."""
        if is_int8_layer(op):
            lower_qmul(self.low, op)
            return
        self.low.require_f16(op)
        plan = MulChunks.plan(self.low, op, F16_BYTES)
        for index, (n, chunk) in enumerate(plan.chunks):
            tile = index % self.low.num_tiles
            (a, t_a), (b, t_b) = plan.load(self.low, n, chunk, tile)
            self.low.chunk_task(
                op, sched.MulTaskOp, tile, chunk, plan.out, [t_a, t_b],
                props={"channels": int_attr(plan.channels)}, lhs=a, rhs=b,
            )  # fmt: skip
