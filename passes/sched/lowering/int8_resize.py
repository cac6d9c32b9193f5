"""Lowering of an int8 resize (`mrvl.resize` on i8, called by `resize.LowerResize`): the fp16
resize's bands of output rows and channel groups, with `qresize`'s int32 tables (i0, i1, w1;
made by `mrvl-fold-qdq`) and one requantization pair."""

from __future__ import annotations

from xdsl.dialects.builtin import i32

from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError
from mrvl.passes.sched.lowering.int8_compute import require_int8
from mrvl.passes.sched.lowering.state import i64_array, int_attr
from mrvl.passes.sched.tiling import plan_resize_layer

COLUMNS = sched.QRESIZE_TABLE_COLUMNS


def lower_qresize(low, op: mrvl.ResizeOp) -> None:
    """Each band loads the input rows its row table reads, its rows of the row table and
    the whole column table (int32 [rows, 3]); `rq` takes the exact interpolated sum (at
    s_in / 2^22) to the result's scale. Planned as the fp16 resize is, in 2-byte elements
    and 4-column tables: room to spare for 1-byte data."""
    from mrvl import int8
    from mrvl.isa_int8_resize import RESIZE_WEIGHT_BITS

    require_int8(op)
    n, h, w, c = mrvl.shape_of(op.input)
    _, oh, ow, _ = mrvl.shape_of(op.output)
    ytab = low.constant_array(op.ytab)
    if ytab is None:
        raise CompileError(f"{low.what(op)}: the row table must be a constant")
    (s_in, z_in), (s_out, z_out) = op.quant_of_input(0), op.out_quant.values
    props = {
        "in_zp": int_attr(z_in),
        "out_zp": int_attr(z_out),
        "clamp": i64_array([-128, 127]),
        "rq": i64_array(int8.requant_params(s_in * 2.0 ** (-2 * RESIZE_WEIGHT_BITS), s_out)),
    }
    pieces = plan_resize_layer(
        n,
        w,
        c,
        ow,
        [(int(min(r)), int(max(r))) for r in ytab.reshape(oh, COLUMNS)[:, :2]],
        low.ocm_bytes(op),
        low.num_tiles,
        low.target.ocm_alignment,
        low.what(op),
    )
    et = mrvl.element_type_of(op.output)
    src, dst = low.ddr_buffer(op.input), low.new_ddr(op.output)
    ydata, xdata = low.ddr_buffer(op.ytab), low.ddr_buffer(op.xtab)
    for number, p in enumerate(pieces):
        tile = number % low.num_tiles
        window, t_in = low.load(src, [0, p.in_row0, 0, p.c0], [n, p.in_rows, w, p.cs], tile)
        tables = []
        for data, first, rows in ((ydata, p.orow0, p.rows), (xdata, 0, ow)):
            buf = low.ocm([rows, COLUMNS], i32, tile)
            dma = sched.DmaOp(
                data, [first * COLUMNS], buf, [0, 0], [rows, COLUMNS], tile,
                low.writes_to(data), src_strides=[COLUMNS, 1],
            )  # fmt: skip
            tables.append((buf, low.emit(dma).token))
        (ybuf, t_y), (xbuf, t_x) = tables
        out = low.ocm([n, p.rows, ow, p.cs], et, tile)
        task = sched.QResizeTaskOp.make(
            {"tile": int_attr(tile), "row0": int_attr(p.in_row0), **props},
            deps=[t_in, t_y, t_x],
            input=window,
            ytab=ybuf,
            xtab=xbuf,
            output=out,
        )
        low.store(out, dst, [0, p.orow0, 0, p.c0], tile, low.emit(task).results[0])
