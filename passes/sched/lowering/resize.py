"""Lowering of resize (bilinear or nearest, by row and column tables): bands of output rows
and channel groups, each loading the input rows its slice of the row table reads."""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError
from mrvl.passes.sched.lowering.int8_compute import is_int8_layer
from mrvl.passes.sched.lowering.int8_resize import lower_qresize
from mrvl.passes.sched.lowering.state import LayerLowering, int_attr
from mrvl.passes.sched.tiling import plan_resize_layer


class LowerResize(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.ResizeOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.ResizeOp) -> None:
        """Bands of output rows (and channel groups): each loads the input rows its row
        table reads, its slice of the row table and the whole column table."""
        if is_int8_layer(op):
            lower_qresize(self.low, op)
            return
        self.low.require_f16(op)
        n, h, w, c = mrvl.shape_of(op.input)
        _, oh, ow, _ = mrvl.shape_of(op.output)
        ytab_data = self.low.constant_array(op.ytab)
        if ytab_data is None:
            raise CompileError(f"{self.low.what(op)}: the row table must be a constant")
        rows_read = ytab_data.reshape(oh, 4)[:, :2].astype(int)
        pieces = plan_resize_layer(
            n,
            w,
            c,
            ow,
            [(int(min(r)), int(max(r))) for r in rows_read],
            self.low.target.ocm_bytes_per_tile,
            self.low.num_tiles,
            self.low.target.ocm_alignment,
            self.low.what(op),
        )
        et = mrvl.element_type_of(op.output)
        src, dst = self.low.ddr_buffer(op.input), self.low.new_ddr(op.output)
        ytab, xtab = self.low.ddr_buffer(op.ytab), self.low.ddr_buffer(op.xtab)
        f32 = sched.buffer_type(ytab).element_type
        for index, p in enumerate(pieces):
            tile = index % self.low.num_tiles
            window, t_in = self.low.load(src, [0, p.in_row0, 0, p.c0], [n, p.in_rows, w, p.cs], tile)
            ybuf = self.low.ocm([p.rows, 4], f32, tile)
            t_y = self.low.emit(
                sched.DmaOp(
                    ytab, [p.orow0 * 4], ybuf, [0, 0], [p.rows, 4], tile, self.low.writes_to(ytab),
                    src_strides=[4, 1],
                )
            ).token  # fmt: skip
            xbuf = self.low.ocm([ow, 4], f32, tile)
            t_x = self.low.emit(
                sched.DmaOp(
                    xtab, [0], xbuf, [0, 0], [ow, 4], tile, self.low.writes_to(xtab),
                    src_strides=[4, 1],
                )
            ).token  # fmt: skip
            out = self.low.ocm([n, p.rows, ow, p.cs], et, tile)
            task = sched.ResizeTaskOp.make(
                {"tile": int_attr(tile), "row0": int_attr(p.in_row0)},
                deps=[t_in, t_y, t_x],
                input=window,
                ytab=ybuf,
                xtab=xbuf,
                output=out,
            )
            self.low.store(out, dst, [0, p.orow0, 0, p.c0], tile, self.low.emit(task).results[0])
