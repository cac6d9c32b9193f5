"""Lowering of a layer normalization whose row does not fit a tile's OCM beside its f32
scales and shifts (12 bytes an element with its input and result): each group of rows is
loaded whole once for `sched.lnstats` (its f32 mean and rstd, 2 bytes an element), then
normalized a run of columns at a time by `sched.lnapply`, each run loading its input, its
scales and shifts. The result has `layernorm`'s bits (docs/isa.md, `lnstats`). A group of
rows stays on one tile; the groups are dealt round-robin over the tiles.
"""

from __future__ import annotations

from math import ceil
from typing import NamedTuple

from xdsl.dialects.builtin import Float32Type

from mrvl.dialects import mrvl, sched
from mrvl.isa_long_rows import LN_STATS_WORDS
from mrvl.passes.sched.lowering.state import F16_BYTES, buffer_type, int_attr
from mrvl.passes.sched.tiling import DoesNotFit

F32_BYTES = 4
_STATS_BYTES = LN_STATS_WORDS * F32_BYTES


class LongRowGroup(NamedTuple):
    """Rows r0.. (rc of them), normalized in runs of columns (c0, cc)."""

    r0: int
    rc: int
    runs: tuple[tuple[int, int], ...]


def plan_long_rows(
    rows: int, length: int, ocm_bytes: int, num_tiles: int, alignment: int, what: str
) -> list[LongRowGroup]:
    """Groups of whole rows whose f16 input and f32 statistics fit a tile (the `lnstats`
    step), at least one group per tile where there are enough rows, each cut into runs of
    equal width whose input, result, scales and shifts fit beside the statistics (the
    `lnapply` step). A row that does not fit in f16 alone is refused (`DoesNotFit`)."""
    stats_slack = 4 * alignment  # input and statistics, each aligned
    per_row = length * F16_BYTES + _STATS_BYTES
    if per_row + stats_slack > ocm_bytes:
        raise DoesNotFit(what, f"row of {length} elements", per_row + stats_slack, ocm_bytes)
    rc = max(1, min((ocm_bytes - stats_slack) // per_row, ceil(rows / num_tiles)))
    groups = []
    for r0 in range(0, rows, rc):
        count = min(rc, rows - r0)
        # input, result, statistics, scales, shifts: each aligned
        budget = ocm_bytes - 7 * alignment - count * _STATS_BYTES
        widest = budget // (2 * count * F16_BYTES + 2 * F32_BYTES)
        if widest < 1:
            raise DoesNotFit(what, f"{count} rows of statistics", ocm_bytes - budget, ocm_bytes)
        width = ceil(length / ceil(length / widest))
        runs = tuple((c0, min(width, length - c0)) for c0 in range(0, length, width))
        groups.append(LongRowGroup(r0, count, runs))
    return groups


def lower_long_rows(low, op: mrvl.LayerNormOp) -> None:
    """Each group: one load of its rows, an `lnstats` task; then per run, the run's scales,
    shifts and input, an `lnapply` task, one store."""
    rows, length = op.rows()
    groups = plan_long_rows(
        rows, length, low.ocm_bytes(op), low.num_tiles, low.target.ocm_alignment, low.what(op)
    )
    et = mrvl.element_type_of(op.output)
    view = buffer_type("ddr", (rows, length), et)
    src = low.flat_view(low.ddr_buffer(op.input), view)
    out = low.flat_view(low.new_ddr(op.output), view)
    scale, shift = low.ddr_buffer(op.scale), low.ddr_buffer(op.shift)
    for index, group in enumerate(groups):
        tile = index % low.num_tiles
        # the statistics first, below the whole rows: first fit then reuses the rows' bytes
        # for the runs in one piece
        stats = low.ocm([group.rc, LN_STATS_WORDS], Float32Type(), tile)
        x, t_x = low.load(src, [group.r0, 0], [group.rc, length], tile)
        task = sched.LayerNormStatsTaskOp.make(
            {"tile": int_attr(tile), "epsilon": op.epsilon}, deps=[t_x], input=x, output=stats
        )
        t_stats = low.emit(task).results[0]
        for c0, cc in group.runs:
            g, t_g = low.load(scale, [c0], [cc], tile)
            b, t_b = low.load(shift, [c0], [cc], tile)
            xr, t_xr = low.load(src, [group.r0, c0], [group.rc, cc], tile)
            y = low.ocm([group.rc, cc], et, tile)
            task = sched.LayerNormApplyTaskOp.make(
                {"tile": int_attr(tile)},
                deps=[t_stats, t_g, t_b, t_xr], input=xr, stats=stats, scale=g, shift=b, output=y,
            )  # fmt: skip
            low.store(y, out, [group.r0, c0], tile, low.emit(task).results[0])
