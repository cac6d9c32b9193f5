"""Plan search: the block sizes worth pricing for a window layer, and the cheapest plan
among them and the fixed rule's."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from math import ceil

from mrvl.isa import CONV_CI_BLOCK
from mrvl.passes.sched.tiling.double_buffering import _double_buffers, _fits_twice
from mrvl.passes.sched.tiling.fit import plan_window_layer
from mrvl.passes.sched.tiling.geometry import WindowLayer, WindowPiece
from mrvl.passes.sched.tiling.layout import SPLITS, WindowPlan, grid_splits, splits, window_pieces
from mrvl.passes.sched.tiling.pricing import _estimate, window_plan_cycles


def _largest(fits, high: int) -> int:
    """The largest value in [1, high] for which `fits` holds (it holds for 1 and is
    monotone), by bisection."""
    low = 1
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def window_candidates(
    layer: WindowLayer, target, num_tiles: int, *, split_columns: bool, pinned: bool = False
) -> list[WindowPlan]:
    """Block sizes worth pricing, each fitting a tile's OCM (in the `dealt` split): output
    channel widths halving from all of them; for a conv without groups over more than
    `CONV_CI_BLOCK` input channels, input-channel blocks of 64, 128, 256 ... channels (the
    fp32 partial-sum chain follows the conv's accumulation order, so any of them gives the
    same bits); for a conv over several tiles, half the output columns; and for each, the
    tallest band that fits, the tallest that can be double-buffered, and bands that give
    every tile its share."""
    budget = target.ocm_bytes_per_tile - 4 * target.ocm_alignment
    widths, ocs = [], layer.oc
    while True:
        widths.append(ocs)
        if ocs <= 1:
            break
        ocs = layer.channel_step(ceil(ocs / 2))
    blocks: list[int | None] = [None]
    if split_columns and not layer.depthwise_channels and layer.groups == 1:
        cbs = CONV_CI_BLOCK
        while cbs < layer.c:
            blocks.append(cbs)
            cbs *= 2
    columns = [layer.ow]
    if split_columns and num_tiles > 1 and layer.ow > 1:
        columns.append(ceil(layer.ow / 2))
    plans = []
    for cbs in blocks:
        for cols in columns:
            for ocs in widths:
                if layer.piece_bytes(1, ocs, cols, cbs) > budget:
                    continue
                tallest = _largest(
                    lambda r, o=ocs, c=cols, b=cbs: layer.piece_bytes(r, o, c, b) <= budget,
                    layer.oh,
                )
                heights = {tallest}
                plan = WindowPlan(ocs, 1, cols, cbs)
                if _fits_twice(layer, plan, target, pinned):
                    heights.add(
                        _largest(
                            lambda r, p=plan: _fits_twice(
                                layer, replace(p, rows=r), target, pinned
                            ),
                            tallest,
                        )
                    )
                others = len(layer.channel_pieces(ocs)) * ceil(layer.ow / cols)
                for share in (1, 2, 4):
                    bands = ceil(share * num_tiles / others)
                    heights.add(min(tallest, max(1, ceil(layer.oh / bands))))
                plans += [replace(plan, rows=r) for r in sorted(heights)]
                if (
                    tallest == layer.oh
                    and len(layer.channel_pieces(ocs)) >= 2 * num_tiles
                    and (not layer.int8 or _fits_twice(layer, plan, target, pinned))
                ):
                    # narrower channel pieces would only add loads; but an int8 layer,
                    # whose MACs are twice as fast, tries them until its pieces can be
                    # double-buffered (an fp16 plan search is kept as it was)
                    break
    return plans


def plan_window_layer_priced(
    layer: WindowLayer,
    target,
    num_tiles: int,
    what: str,
    *,
    split_columns: bool = False,
    pinned: bool = False,
) -> list[WindowPiece]:
    """The cheapest plan of a conv/pool layer that fits, with its pieces' tiles.

    `window_candidates` are priced by `_estimate`; the few cheapest are laid out in every
    split (`SPLITS`) and priced piece by piece (`window_plan_cycles`, with `pinned` for
    `wb_pin_ocm`). `plan_window_layer`'s fixed rule is one more contender, and raises
    `DoesNotFit` when nothing fits."""
    fixed = plan_window_layer(
        layer, target.ocm_bytes_per_tile, num_tiles, target.ocm_alignment, what,
        split_columns=split_columns,
    )  # fmt: skip
    best = _cheapest_window_plan(layer, target, num_tiles, split_columns, pinned)
    fixed_cycles = window_plan_cycles(layer, fixed, num_tiles, target, pinned=pinned)
    if best is None or best[1] >= fixed_cycles * (1 - SAVING):
        return fixed
    return list(best[0])


def plan_window_reads(
    layer: WindowLayer,
    target,
    num_tiles: int,
    what: str,
    *,
    split_columns: bool = False,
    pinned: bool = False,
) -> tuple[WindowLayer, list[WindowPiece]]:
    """`plan_window_layer_priced` of the layer as it is and, for a 1x1 conv with strides, of
    the layer that loads only the rows and columns it reads (`WindowLayer.subsampled`):
    the cheaper of the two (narrow pixels read with strides cost a DDR burst each), with
    the geometry its pieces are in."""
    options = []
    for geometry in dict.fromkeys((layer.subsampled(), layer)):
        pieces = plan_window_layer_priced(
            geometry, target, num_tiles, what, split_columns=split_columns, pinned=pinned
        )
        cycles = window_plan_cycles(geometry, pieces, num_tiles, target, pinned=pinned)
        options.append((cycles, len(options), geometry, pieces))
    _, _, geometry, pieces = min(options)
    return geometry, pieces


@cache
def _cheapest_window_plan(
    layer: WindowLayer, target, num_tiles: int, split_columns: bool, pinned: bool
) -> tuple[tuple[WindowPiece, ...], int] | None:
    candidates = window_candidates(
        layer, target, num_tiles, split_columns=split_columns, pinned=pinned
    )
    if not candidates:
        return None
    priced = sorted(candidates, key=lambda p: _estimate(layer, p, num_tiles, target, pinned))
    shortlist = priced[:SHORTLIST]
    tried = [(plan, splits(num_tiles) if num_tiles > 1 or pinned else SPLITS[:1])
             for plan in _overlapping(layer, shortlist, target, pinned)]  # fmt: skip
    if grid_splits(num_tiles) and not pinned:  # and the cheapest if laid out in a grid
        in_grid = sorted(
            candidates, key=lambda p: _estimate(layer, p, num_tiles, target, pinned, True)
        )
        extra = [p for p in in_grid[:SHORTLIST] if p not in shortlist]
        tried += [
            (plan, grid_splits(num_tiles)) for plan in _overlapping(layer, extra, target, pinned)
        ]
    priced = []
    for plan, ways in tried:
        for split in ways:
            pieces = window_pieces(layer, replace(plan, split=split), num_tiles)
            cycles = window_plan_cycles(layer, pieces, num_tiles, target, pinned=pinned)
            priced.append((cycles, len(pieces), len(priced), tuple(pieces)))
    # within FEWER_PIECES of the cheapest, the plan with the fewest pieces
    cheapest = min(priced)[0]
    cycles, _, _, best = min(
        (p for p in priced if p[0] <= cheapest * (1 + FEWER_PIECES)),
        key=lambda p: (p[1], p[0], p[2]),
    )
    return best, cycles


SHORTLIST = 4
"""How many of the analytically cheapest plans are laid out and priced piece by piece."""

FEWER_PIECES = 0.05
"""Among the laid-out plans, the one with the fewest pieces is taken if it is within this
share of the cheapest: the difference is within the model's error, and every piece is
instructions to compile and to issue."""

SAVING = 0.02
"""The share of the fixed rule's modelled cycles a searched plan must save to replace it:
smaller differences are within the model's error, and the fixed plan is the simpler one."""


def _overlapping(layer: WindowLayer, plans: list[WindowPlan], target, pinned: bool):
    """`plans`, each followed, when its pieces would fit twice but the allocator's first fit
    would not place them (`_double_buffers`), by the same plan with the tallest band below
    it (of up to four tried) that does double-buffer."""
    for plan in plans:
        yield plan
        keep = pinned and not plan.cbs
        if not _fits_twice(layer, plan, target, keep) or _double_buffers(layer, plan, target, keep):
            continue
        for rows in sorted({plan.rows - 1, plan.rows * 3 // 4, plan.rows // 2, plan.rows // 3}):
            shorter = replace(plan, rows=rows)
            if rows >= 1 and rows < plan.rows and _double_buffers(layer, shorter, target, keep):
                yield shorter
                break
