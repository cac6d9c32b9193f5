"""Lowering of the int8 product (`mrvl.mul` on i8, called by `elementwise.LowerMul`) and of
the table activation (`mrvl.int8_table`): chunks of the flat tensor dealt over the tiles, as
their fp16 kin and the int8 add are cut, in 1-byte elements. A broadcast product is cut per
image, each chunk with that image's C gate values; a table is loaded once per tile that uses
it (256 bytes) and selected as `requant` with the identity pair and the table."""

from __future__ import annotations

from math import prod

import numpy as np
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.passes.sched.lowering.int8_compute import clamp, require_int8
from mrvl.passes.sched.lowering.mul_chunks import MulChunks
from mrvl.passes.sched.lowering.state import LayerLowering, buffer_type, i64_array, int_attr
from mrvl.passes.sched.tiling import plan_elementwise

TABLE_BYTES = 256


def lower_qmul(low, op: mrvl.MulOp) -> None:
    """An int8 product: the exact product of the two zero-point-corrected inputs, requantized
    once to the result's scale (`int8.qmul_params`), the fused ReLU / Clip as the clamp."""
    from mrvl import int8

    require_int8(op)
    (s_a, z_a), (s_b, z_b) = op.quant_of_input(0), op.quant_of_input(1)
    s_y, z_y = op.out_quant.values
    props = {
        "in_zp": int_attr(z_a),
        "rhs_zp": int_attr(z_b),
        "out_zp": int_attr(z_y),
        "rq": i64_array(int8.qmul_params(s_a, s_b, s_y)),
        "clamp": i64_array(clamp(op)),
    }
    plan = MulChunks.plan(low, op, 1)
    et = mrvl.element_type_of(op.output)
    for index, (n, chunk) in enumerate(plan.chunks):
        tile = index % low.num_tiles
        (a, t_a), (b, t_b) = plan.load(low, n, chunk, tile)
        y = low.ocm([chunk.length], et, tile)
        task = sched.QMulTaskOp.make(
            {"tile": int_attr(tile), "channels": int_attr(plan.channels), **props},
            deps=[t_a, t_b],
            lhs=a,
            rhs=b,
            output=y,
        )
        low.store(y, plan.out, [chunk.start], tile, low.emit(task).results[0])


class LowerInt8Table(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.Int8TableOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.Int8TableOp) -> None:
        low = self.low
        require_int8(op)
        count = prod(mrvl.shape_of(op.output))
        et = mrvl.element_type_of(op.output)
        flat = buffer_type("ddr", (count,), et)
        src = low.flat_view(low.ddr_buffer(op.input), flat)
        out = low.flat_view(low.new_ddr(op.output), flat)
        entries = np.array(op.entries(), np.int8)
        table = low.made_constant(f"mrvl_int8_table_{low.made_constants}", entries)
        chunks = plan_elementwise(
            count,
            2,
            low.ocm_bytes(op),
            low.num_tiles,
            low.target.ocm_alignment,
            reserved_bytes=TABLE_BYTES,
            elem_bytes=1,
        )
        loaded: dict[int, tuple] = {}
        for index, chunk in enumerate(chunks):
            tile = index % low.num_tiles
            if tile not in loaded:
                loaded[tile] = low.load(table, [0], [TABLE_BYTES], tile)
            t, t_t = loaded[tile]
            x, t_x = low.load(src, [chunk.start], [chunk.length], tile)
            y = low.ocm([chunk.length], et, tile)
            task = sched.QTableTaskOp.make(
                {"tile": int_attr(tile)}, deps=[t_x, t_t], input=x, table=t, output=y
            )
            low.store(y, out, [chunk.start], tile, low.emit(task).results[0])
