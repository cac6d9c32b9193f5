"""Lowering of `mrvl.requantize`: an int8 tensor at another scale and zero point, in chunks
of the flat tensor dealt over the tiles (as the int8 add is cut), one `sched.requant` each."""

from __future__ import annotations

from math import prod

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.passes.sched.lowering.state import LayerLowering, buffer_type, i64_array, int_attr

FULL_RANGE = (-128, 127)
"""A requantization alone saturates to int8 and clamps nothing else."""


class LowerRequantize(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.RequantizeOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.RequantizeOp) -> None:
        from mrvl import int8
        from mrvl.passes.sched.tiling import plan_elementwise

        (s_x, z_x), (s_y, z_y) = op.quant_of_input(0), op.out_quant.values
        props = {
            "in_zp": int_attr(z_x),
            "out_zp": int_attr(z_y),
            "clamp": i64_array(FULL_RANGE),
            "rq": i64_array(int8.requant_params(s_x, s_y)),
        }
        count = prod(mrvl.shape_of(op.output))
        flat = buffer_type("ddr", (count,), mrvl.element_type_of(op.output))
        src = self.low.flat_view(self.low.ddr_buffer(op.input), flat)
        out = self.low.flat_view(self.low.new_ddr(op.output), flat)
        chunks = plan_elementwise(
            count, 2, self.low.ocm_bytes(op), self.low.num_tiles, self.low.target.ocm_alignment
        )
        for index, chunk in enumerate(chunks):
            tile = index % self.low.num_tiles
            x, t_x = self.low.load(src, [chunk.start], [chunk.length], tile)
            y = self.low.ocm([chunk.length], mrvl.element_type_of(op.output), tile)
            task = sched.RequantTaskOp.make(
                {"tile": int_attr(tile), **props}, deps=[t_x], input=x, output=y
            )
            self.low.store(y, out, [chunk.start], tile, self.low.emit(task).results[0])
