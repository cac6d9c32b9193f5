"""FC plans: an FC layer's pieces priced as a window layer's are (`pricing`), and the
cheapest plan among feature widths and row bands."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from functools import cache
from math import ceil

from mrvl import cost
from mrvl.passes.sched.pin_weights import LastSlices
from mrvl.passes.sched.tiling.double_buffering import _fc_double_buffers, _vector_loads
from mrvl.passes.sched.tiling.fit import plan_fc_layer
from mrvl.passes.sched.tiling.geometry import FcLayer, FcPiece
from mrvl.passes.sched.tiling.layout import FC_SPLITS, fc_grid
from mrvl.passes.sched.tiling.pricing import (
    _contended,
    _dense_box_dma,
    _laid_out_cycles,
    _layer_cycles,
    _PieceCost,
    _sharing,
    _Step,
    _tail,
    _tile_cycles,
)
from mrvl.passes.sched.tiling.search import SAVING, SHORTLIST, _largest


@cache
def _fc_piece_cost(layer: FcLayer, target, ns: int, os: int, sharing: int) -> _PieceCost:
    """One FC piece, DMA by DMA as the lowering emits it: its rows of the input, its
    features' weights, bias and slopes, the compute, the store of its outputs."""
    e = layer.elem
    x = _dense_box_dma(target, (ns, layer.k), (layer.k,), reads=True, elem=e)
    w = _dense_box_dma(target, (os, layer.k), (layer.k,), reads=True, elem=e)
    vectors = [
        cost.dma(target, nbytes, reads_ddr=True)
        for nbytes in _vector_loads(layer.int8, layer.vectors, os)
    ]  # bias, slopes (an int8 fc's bias and requantization pairs)
    store = _dense_box_dma(target, (ns, os), (layer.o,), elem=e)
    const_cycles = _contended(w, target, sharing) + sum(
        _contended(v, target, sharing) for v in vectors
    )
    const_ddr = w.ddr_bytes + sum(v.ddr_bytes for v in vectors)
    work = cost.mac(target, ns * layer.k * os, int8=layer.int8).cycles
    step = _Step(
        _contended(x, target, sharing) + const_cycles, const_cycles, work,
        _contended(store, target, sharing),
    )  # fmt: skip
    return _PieceCost((step,), x.ddr_bytes + const_ddr + store.ddr_bytes, const_ddr)


def fc_plan_cycles(
    layer: FcLayer,
    pieces: list[FcPiece],
    num_tiles: int,
    target,
    *,
    pinned: bool = False,
    overlapped: bool | None = None,
) -> int:
    """Modelled cycles of an FC layer cut into `pieces`, as `window_plan_cycles` prices a
    window layer's."""
    steps: dict[int, list[_Step]] = {}
    held = LastSlices()  # the weights each tile loaded last
    port = 0
    pins = False
    sharing = _sharing(len({p.tile for p in pieces}))
    for p in pieces:
        piece = _fc_piece_cost(layer, target, p.ns, p.os, sharing)
        kept = pinned and held.repeated(p.tile, "weights", (p.o0, p.os)) is not None
        s = piece.steps[0]
        steps.setdefault(p.tile, []).append(
            replace(s, load=s.load - s.weights, weights=0) if kept else s
        )
        port += piece.ddr - (piece.weight_ddr if kept else 0)
        pins = pins or kept
    if overlapped is None:
        overlapped = _fc_double_buffers(layer, pieces[0].ns, pieces[0].os, target, pins)
    times = {t: _tile_cycles(s, overlapped) for t, s in steps.items()}
    return _laid_out_cycles(target, steps, times, port)


def _fc_estimate(layer: FcLayer, ns: int, os: int, num_tiles: int, target, pinned: bool) -> int:
    rows = Counter(min(ns, layer.n - n0) for n0 in range(0, layer.n, ns))
    feats = Counter(min(os, layer.o - o0) for o0 in range(0, layer.o, os))
    dma = work = ddr = weights = weight_ddr = 0
    sharing = _sharing(min(num_tiles, sum(rows.values()) * sum(feats.values())))
    for r, nr in rows.items():
        for f, nf in feats.items():
            piece = _fc_piece_cost(layer, target, r, f, sharing)
            s = piece.steps[0]
            dma += nr * nf * (s.load + s.store)
            work += nr * nf * s.work
            ddr += nr * nf * piece.ddr
            weights += nr * nf * s.weights
            weight_ddr += nr * nf * piece.weight_ddr
    pieces = sum(rows.values()) * sum(feats.values())
    if pinned:
        loads = min(pieces, sum(feats.values()) + min(pieces, num_tiles) - 1)
        saved = 1 - loads / pieces
        dma -= int(weights * saved)
        ddr -= int(weight_ddr * saved)
    share = -(-pieces // num_tiles) / pieces
    dma, work = dma * share, work * share
    if _fc_double_buffers(layer, ns, os, target, pinned):
        tile = max(dma, work) + min(dma, work) / max(1, pieces * share)
    else:
        tile = dma + work
    tail = _tail(target, work / max(1, pieces * share))
    return _layer_cycles(target, int(tile), ddr, tail)


def plan_fc_layer_priced(
    n: int,
    k: int,
    o: int,
    target,
    num_tiles: int,
    what: str,
    *,
    slopes: bool = False,
    bias: bool = True,
    pinned: bool = False,
    int8: bool = False,
) -> list[FcPiece]:
    """The cheapest plan of an FC layer that fits: feature widths halving from all of them
    and from one tile's share, each with the most rows that fit and the most that can be
    double-buffered, priced like a window layer's plans (`plan_window_layer_priced`).
    `plan_fc_layer`'s fixed rule is one more contender and raises `DoesNotFit`. An `int8`
    layer (1-byte elements) has an i32 bias and a requantization pair per feature."""
    fixed = plan_fc_layer(
        n, k, o, target.ocm_bytes_per_tile, num_tiles, target.ocm_alignment, what,
        slopes=slopes, int8=int8,
    )  # fmt: skip
    layer = FcLayer(n, k, o, int(bias) + (2 if int8 else int(slopes)), int8)
    fixed_cycles = fc_plan_cycles(layer, fixed, num_tiles, target, pinned=pinned)
    best = _cheapest_fc_plan(layer, target, num_tiles, slopes, pinned)
    if best is None or best[1] >= fixed_cycles * (1 - SAVING):
        return fixed
    return list(best[0])


@cache
def _cheapest_fc_plan(
    layer: FcLayer, target, num_tiles: int, slopes: bool, pinned: bool
) -> tuple[tuple[FcPiece, ...], int] | None:
    budget = target.ocm_bytes_per_tile - (5 if slopes or layer.int8 else 4) * target.ocm_alignment
    widths = set()
    for start in (layer.o, ceil(layer.o / num_tiles)):
        w = start
        while True:
            widths.add(w)
            if w <= 1:
                break
            w = ceil(w / 2)
    candidates = []
    for os in sorted(widths, reverse=True):
        if layer.piece_bytes(1, os) > budget:
            continue
        tallest = _largest(lambda r, f=os: layer.piece_bytes(r, f) <= budget, layer.n)
        heights = {tallest}
        if _fc_double_buffers(layer, 1, os, target, pinned):
            heights.add(
                _largest(lambda r, f=os: _fc_double_buffers(layer, r, f, target, pinned), tallest)
            )
        candidates += [(r, os) for r in heights]
    if not candidates:
        return None
    candidates.sort(key=lambda c: _fc_estimate(layer, *c, num_tiles, target, pinned))
    best, best_cycles = None, None
    for ns, os in candidates[:SHORTLIST]:
        for split in FC_SPLITS if num_tiles > 1 else FC_SPLITS[:1]:
            pieces = fc_grid(layer.n, layer.o, ns, os, num_tiles, split)
            cycles = fc_plan_cycles(layer, pieces, num_tiles, target, pinned=pinned)
            if best_cycles is None or cycles < best_cycles:
                best, best_cycles = tuple(pieces), cycles
    return best, best_cycles
