"""Whether a plan double-buffers: the OCM a tile needs when `sched-pipeline` loads its next
step during this one's compute, laid out by `sched-allocate`'s own first fit."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from mrvl.passes.sched.allocate import first_fit_offsets
from mrvl.passes.sched.liveness import Span
from mrvl.passes.sched.tiling.geometry import (
    F32,
    REQUANT_BYTES_PER_OC,
    FcLayer,
    WindowLayer,
    WindowPiece,
)
from mrvl.passes.sched.tiling.layout import WindowPlan, _bands

DOUBLE_BUFFER_SLACK = 8
"""Alignments of OCM a plan leaves free when it counts on two pieces' loads fitting at once
(`sched-pipeline` then loads the next piece while this one computes)."""


def _padded(nbytes: int, alignment: int) -> int:
    return -(-nbytes // alignment) * alignment


PIPELINED_MARGIN = 0.03
"""The share of a tile's OCM a double-buffered plan leaves free in `_pipelined_top`'s layout:
it lays out a few bands, the real program all of them, and a plan that misses by a few bytes
loses its overlap entirely (`sched-pipeline` then keeps the layer's order)."""


def _pipelined_room(target) -> int:
    return int(target.ocm_bytes_per_tile * (1 - PIPELINED_MARGIN))


def _pipelined_top(
    steps: list[tuple[tuple[int, ...], int, bool]],
    alignment: int,
    resident: int = 0,
    early_outputs: bool = False,
) -> int:
    """The OCM a tile needs when `sched-pipeline` double-buffers `steps` and `sched-allocate`
    places the buffers first fit (with its own `first_fit_offsets`): as the pipeline orders
    them, the loads of step i+1 are allocated before compute i (after its output), each
    step's loads live until its compute, its output until its store (right after the compute) or, in a chain of input-channel blocks
    (`read_by_next`), until the next compute. `resident` bytes (pinned weights or bias),
    loaded after the first step's other loads, stay live throughout. With `early_outputs`,
    the output of step i+1 is allocated before the store of step i (`early_outputs`). Each
    step is (load sizes, output size, read_by_next)."""
    ranges: list[tuple[int, int, int]] = []  # (start, end, size), in allocation order
    at = 0

    def alloc(size: int) -> int:
        nonlocal at
        at += 1
        ranges.append([at, None, -(-size // alignment) * alignment])
        return len(ranges) - 1

    pending = [alloc(size) for size in steps[0][0]] if steps else []
    if resident:  # loaded after the first step's other loads, and kept
        alloc(resident)
        ranges[-1][1] = 1 << 60
    carried = early = None
    for i, (_, out_size, read_by_next) in enumerate(steps):
        out = alloc(out_size) if early is None else early
        early = None
        following = [alloc(size) for size in steps[i + 1][0]] if i + 1 < len(steps) else []
        at += 1  # the compute
        for index in pending:
            ranges[index][1] = at
        if carried is not None:
            ranges[carried][1] = at
            carried = None
        if read_by_next:
            carried = out
        else:
            if early_outputs and i + 1 < len(steps):
                early = alloc(steps[i + 1][1])
            at += 1  # the store
            ranges[out][1] = at
        pending = following
    spans = [Span(start, start if stop is None else stop, size) for start, stop, size in ranges]
    placed = first_fit_offsets(spans, 0, alignment)
    return max((offset + span.size for span, offset in placed), default=0)


def _window_steps(layer: WindowLayer, plan: WindowPlan, rows: int, in_rows: int, pinned: bool):
    """The buffers of one piece of `rows` output rows reading `in_rows` input rows, step by
    step (`_pipelined_top`)."""
    in_cols = (
        layer.w
        if plan.cols >= layer.ow
        else min((plan.cols - 1) * layer.sw + (layer.kw - 1) * layer.dw + 1, layer.w)
    )
    out = layer.n * rows * plan.cols * plan.ocs
    elem, vectors = layer.elem, layer.vectors
    if plan.cbs and plan.cbs < layer.c:
        blocks = [min(plan.cbs, layer.c - c0) for c0 in range(0, layer.c, plan.cbs)]
        steps = []
        for k, cs in enumerate(blocks):
            last = k == len(blocks) - 1
            if layer.int8:  # the bias first, the requantization pair in every block
                extra = [plan.ocs * F32] * (k == 0 and vectors > 2) + [
                    plan.ocs * REQUANT_BYTES_PER_OC
                ]
                extra = extra if not pinned else []
            else:
                count = (k == 0) + (vectors - 1) * last if vectors and not pinned else 0
                extra = [plan.ocs * F32] * count
            loads = (
                layer.n * in_rows * in_cols * cs * elem,
                plan.ocs * layer.kh * layer.kw * cs * elem,
                *extra,
            )
            steps.append((loads, out * (elem if last else F32), not last))
        return steps, vectors * plan.ocs * F32 if pinned else 0  # pinned: bias and slopes
    if layer.depthwise_channels:
        ics, weights = plan.ocs, ()
    else:
        ics = layer.input_channels(0, plan.ocs)[1]
        weights = (plan.ocs * layer.kh * layer.kw * layer.ic_per_group * elem,) + _vector_loads(
            layer.int8, vectors, plan.ocs
        )
    window = layer.n * in_rows * in_cols * ics * elem
    if pinned:
        return [((window,), out * elem, False)], sum(weights)
    return [((window, *weights), out * elem, False)], 0


def _vector_loads(int8: bool, vectors: int, features: int) -> tuple[int, ...]:
    """The loads of a piece's per-channel vectors: one f32 buffer each (bias, slopes), an
    int8 layer's bias and its requantization pairs in one buffer."""
    if int8:
        return (features * F32,) * (vectors - 2) + (features * REQUANT_BYTES_PER_OC,)
    return (features * F32,) * vectors


def _double_buffers(
    layer: WindowLayer, plan: WindowPlan, target, pinned: bool, early: bool = False
) -> bool:
    """Whether `sched-pipeline` can overlap the loads of each step with the compute of the
    one before, as `_pipelined_top` lays a tile's buffers out for a sequence of bands like
    the plan's (with `early`, each output allocated before the previous store)."""
    return _double_buffers_cached(layer, replace(plan, split="dealt"), target, pinned, early)


def early_outputs(layer: WindowLayer, pieces: list[WindowPiece], target, pinned: bool) -> bool:
    """Whether the lowering allocates each piece's output before its tile's previous store:
    for a plan that double-buffers (`_double_buffers`) even with that extra buffer, not cut
    into input-channel blocks. Otherwise the first-fit allocator gives the output the bytes
    of the previous one, and the compute waits for the store that reads them; with it, the
    store overlaps the next compute, as `_tile_cycles` prices a double-buffered plan."""
    first = pieces[0]
    if first.ci_blocks:
        return False
    plan = WindowPlan(first.ocs, first.rows, first.cols or layer.ow)
    return _double_buffers(layer, plan, target, pinned, early=True)


@cache
def _double_buffers_cached(layer, plan, target, pinned, early=False) -> bool:
    bands = _bands(layer, plan.rows)
    if len(bands) > 5:  # the first bands, the last two, and the next channel group's first
        bands = bands[:3] + bands[-2:]
    sequence = bands + bands[:2]
    steps, resident = [], 0
    for _, rows, _, in_rows in sequence:
        piece, resident = _window_steps(layer, plan, rows, in_rows, pinned)
        steps += piece
    room = _pipelined_room(target)
    if resident and len(layer.channel_pieces(plan.ocs)) > 1:
        # Pinned: where a tile's channel group changes, the next group's weights load during
        # the last compute of this one, next to this group's weights and the two pieces'
        # windows and outputs. `sched-pipeline` gives up the whole layer's double buffering
        # when that moment does not fit.
        align = target.ocm_alignment
        ((loads, out, _),) = steps[-1:]
        loaded = sum(_padded(size, align) for size in loads)
        if 2 * (_padded(resident, align) + loaded) + _padded(out, align) * (1 + early) > room:
            return False
    return _pipelined_top(steps, target.ocm_alignment, resident, early) <= room


@cache
def _fits_twice(layer: WindowLayer, plan: WindowPlan, target, pinned: bool) -> bool:
    """A quick necessary condition for `_double_buffers`: a piece and one more step's loads
    fit a tile, fragmentation aside. (Cached: the search asks it of a plan when it makes the
    candidate and again at each of its two estimates.)"""
    rows = plan.rows
    in_rows = min((rows - 1) * layer.sh + (layer.kh - 1) * layer.dh + 1, layer.h)
    steps, resident = _window_steps(layer, plan, rows, in_rows, pinned)
    held = layer.piece_bytes(rows, plan.ocs, plan.cols, plan.cbs) + resident
    room = target.ocm_bytes_per_tile - DOUBLE_BUFFER_SLACK * target.ocm_alignment
    return held + max(sum(loads) for loads, _, _ in steps) <= room


def _fc_double_buffers(layer: FcLayer, ns: int, os: int, target, pinned: bool) -> bool:
    """As `_double_buffers`, for FC pieces of `ns` rows and `os` features."""
    elem = layer.elem
    weights = (os * layer.k * elem,) + _vector_loads(layer.int8, layer.vectors, os)
    x, out = ns * layer.k * elem, ns * os * elem
    if pinned:
        steps, resident = [((x,), out, False)] * 3, sum(weights)
    else:
        steps, resident = [((x, *weights), out, False)] * 3, 0
    return _pipelined_top(steps, target.ocm_alignment, resident) <= _pipelined_room(target)
