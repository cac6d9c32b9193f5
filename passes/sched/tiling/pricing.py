"""Pricing: the modelled cycles of a plan, piece by piece or from its few distinct piece
shapes, with the functions of `mrvl.cost` (the cycle model's).

A plan is a choice of block sizes (output rows, columns and channels per piece, input
channels per block of a conv cut into blocks) and of the way its pieces go to the tiles.
The lowering asks for the cheapest plan that fits, as the functions of `mrvl.cost` (the
cycle model's) price it: candidates are priced analytically from the few distinct piece
shapes a plan has, and the best few are then laid out piece by piece and priced per tile.
Nothing is compiled to choose: a plan costs microseconds to price.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import cache

from mrvl import cost
from mrvl.passes.sched.pin_weights import LastSlices
from mrvl.passes.sched.tiling.double_buffering import (
    _double_buffers,
    _fits_twice,
    _vector_loads,
    early_outputs,
)
from mrvl.passes.sched.tiling.geometry import F16, F32, WindowLayer, WindowPiece
from mrvl.passes.sched.tiling.layout import (
    WindowPlan,
    _bands,
    _channels,
    _columns,
    grid_splits,
    shares_window,
)


@dataclass(frozen=True)
class _Step:
    """One compute of a tile and the DMAs around it, in engine cycles: the loads before it
    (`weights`: the part that loads constants, which `wb_pin_ocm` may keep), the compute,
    and the store after it (0 inside a chain of input-channel blocks)."""

    load: int
    weights: int
    work: int
    store: int


@dataclass(frozen=True)
class _PieceCost:
    steps: tuple[_Step, ...]
    ddr: int
    """DDR bytes the port moves for the piece, its constant loads included."""
    weight_ddr: int
    """The part of `ddr` that its constant loads move."""
    window_ddr: int = 0
    """The part of `ddr` that its input window moves (a piece of one step), which a tile
    whose previous piece loaded the same window does not load again."""
    windows_ddr: int = 0
    """The part of `ddr` that its input windows move, every step's."""


def _window_piece_cost(
    layer: WindowLayer,
    target,
    rows: int,
    in_rows: int,
    cols: int,
    in_cols: int,
    ocs: int,
    ics: int,
    cbs: int | None,
    sharing: int,
) -> _PieceCost:
    """What one piece of these extents costs, DMA by DMA as the lowering emits it (window,
    weights, bias / slopes, compute, store), with the DDR side's strides (`cost.dma_box`),
    while `sharing` tiles move data through the DDR port at once (`_contended`)."""
    return _piece_cost_cached(layer, target, rows, in_rows, cols, in_cols, ocs, ics, cbs, sharing)


def _contended(dma, target, sharing: float) -> int:
    """Cycles of a DMA (a `mrvl.cost.Cost`) while the port also moves the other tiles' bytes
    (`sharing`, `_sharing`): its set-up, then its engine's transfer or its share of the port,
    whichever is slower."""
    return cost.dma_cycles(target, dma, cost.ddr_port_cycles(target, dma.ddr_bytes * sharing))


MULTICAST = True
"""Whether the pricing counts the loads of the same bytes by several tiles as one DDR read
per round of them, as `sched-multicast` merges them (a `dma` with `dst_tiles`)."""

OTHER_TILES_ON_PORT = 0.125
"""The share of the other tiles' DDR transfers a tile's own transfer waits behind. The port
interleaves the tiles' bursts (`sim.cycles.Port`), so a transfer waits only for what the
others move at the same time: all of it when the tiles load in lock step (1), none when they
compute while it loads (0). 0.125 is what light ResNet-50 and MobileNetV2 at 8 tiles measured
best (0.0625 and less: plans whose tiles do not double-buffer priced too cheap; 0.375 and
more: plans on fewer tiles priced too dear); the whole layer's bytes are priced on the port
apart (`_layer_cycles`)."""


def _sharing(tiles: int) -> float:
    """How many tiles' bytes a tile's transfer is priced to move (`_contended`), when `tiles`
    tiles take pieces of a layer."""
    return 1 + (tiles - 1) * OTHER_TILES_ON_PORT


def _layer_cycles(target, busiest: int, port_bytes: int, tail: int) -> int:
    """A layer's cycles: its busiest tile, or the DDR port moving all its bytes (the tiles'
    bursts interleave, `sim.cycles.Port`) then `tail`, the compute and store after the last
    load, whichever is longer."""
    return max(busiest, cost.ddr_port_cycles(target, port_bytes) + tail)


def _tail(target, last_work: float) -> int:
    """What follows the port's last load: the first load's set-up before the port starts,
    the last compute (`last_work`), and its store's set-up."""
    return 2 * target.dma_setup_cycles + int(last_work)


def _laid_out_cycles(target, steps: dict[int, list[_Step]], times: dict[int, int], port) -> int:
    """`_layer_cycles` of pieces laid out on tiles: `times` per tile of their `steps`, `port`
    the bytes they all move."""
    if not times:
        return 0
    busiest = max(times, key=times.get)
    return _layer_cycles(target, times[busiest], port, _tail(target, steps[busiest][-1].work))


@cache
def _piece_cost_cached(layer, target, rows, in_rows, cols, in_cols, ocs, ics, cbs, sharing):
    n = layer.n

    elem = layer.elem

    def load(box, dims):
        return _dense_box_dma(target, box, dims, reads=True, elem=elem)

    def load_window(box):
        return _window_dma(layer, target, box)

    store = _dense_box_dma(target, (n, rows, cols, ocs), (layer.oh, layer.ow, layer.oc), elem=elem)
    out_shape = (n, rows, cols, ocs)
    if layer.depthwise_channels:
        window = load_window((n, in_rows, in_cols, ics))
        work = cost.vector(target, cost.pool_element_ops(out_shape, (layer.kh, layer.kw)))
        step = _Step(
            _contended(window, target, sharing), 0, work.cycles,
            _contended(store, target, sharing),
        )  # fmt: skip
        return _PieceCost(
            (step,), window.ddr_bytes + store.ddr_bytes, 0, window.ddr_bytes, window.ddr_bytes
        )
    cg = layer.ic_per_group
    w_strides = (layer.kh, layer.kw, cg)
    # bias, slopes (an int8 conv's bias and requantization pairs)
    vectors = [
        cost.dma(target, nbytes, reads_ddr=True)
        for nbytes in _vector_loads(layer.int8, layer.vectors, ocs)
    ]
    f32_vector = cost.dma(target, ocs * F32, reads_ddr=True)
    blocks = [(c0, min(cbs, layer.c - c0)) for c0 in range(0, layer.c, cbs)] if cbs else [(0, ics)]
    steps, ddr, weight_ddr, windows_ddr = [], store.ddr_bytes, 0, 0
    block_loads = {}  # channels -> (window, weights) DMAs of a block that wide
    # A chain's middle blocks of one width are the same step: priced once (a conv over 1024
    # channels in blocks of 64 has 16 blocks and at most 4 distinct steps).
    block_steps: dict[tuple[int, bool, bool], tuple[_Step, int, int]] = {}
    for index, (_, cs) in enumerate(blocks):
        last = index == len(blocks) - 1
        kind = (cs, index == 0, last)
        if kind not in block_steps:
            if cs not in block_loads:
                block_loads[cs] = (
                    load_window((n, in_rows, in_cols, cs)),
                    load((ocs, layer.kh, layer.kw, cs if cbs else cg), w_strides),
                )
            window, weights = block_loads[cs]
            extra = _chain_vectors(vectors, f32_vector, layer.int8, index, len(blocks))
            const_cycles = _contended(weights, target, sharing) + sum(
                count * _contended(v, target, sharing) for count, v in extra
            )
            const_ddr = weights.ddr_bytes + sum(count * v.ddr_bytes for count, v in extra)
            macs = cost.conv_macs(out_shape, (layer.kh, layer.kw), cs if cbs else cg)
            step = _Step(
                _contended(window, target, sharing) + const_cycles,
                const_cycles,
                cost.mac(target, macs, int8=layer.int8).cycles,
                _contended(store, target, sharing) if last else 0,
            )
            block_steps[kind] = (step, const_ddr, window.ddr_bytes)
        step, const_ddr, window_bytes = block_steps[kind]
        steps.append(step)
        ddr += window_bytes + const_ddr
        weight_ddr += const_ddr
        windows_ddr += window_bytes
    window_ddr = block_loads[blocks[0][1]][0].ddr_bytes if len(blocks) == 1 else 0
    return _PieceCost(tuple(steps), ddr, weight_ddr, window_ddr, windows_ddr)


def _chain_vectors(
    vectors: list, f32_vector, int8: bool, index: int, blocks: int
) -> list[tuple[int, object]]:
    """(count, DMA) of the vector loads (`_vector_loads`' DMAs) of step `index` of a piece
    cut into `blocks` input-channel blocks: all of them when it is not cut; in a chain, the
    bias first and the slopes last (as counted since fp16 plans were first priced), an int8
    conv's requantization pairs in every block."""
    if blocks == 1:
        return [(1, v) for v in vectors]
    if int8:
        return [(1, v) for v in vectors[:-1] * (index == 0) + vectors[-1:]]
    last = index == blocks - 1
    return [((index == 0) + (len(vectors) - 1) * last, f32_vector)]


def _window_dma(layer: WindowLayer, target, box: tuple[int, int, int, int]):
    """The load of an input window `box` (NHWC): a dense box of the DDR tensor, or with
    `layer.sampling` a strided one (`mrvl.cost.dma_box`, as the cycle model prices it)."""
    e = layer.elem
    if layer.sampling is None:
        return _dense_box_dma(target, box, (layer.h, layer.w, layer.c), reads=True, elem=e)
    strides = tuple(e * s for s in layer.sampling.element_strides(layer.c))
    dense = (box[1] * box[2] * box[3] * e, box[2] * box[3] * e, box[3] * e, e)
    return cost.dma_box(target, box, e, strides, dense, src_ddr=True, dst_ddr=False)


def _dense_box_dma(
    target, box: tuple[int, ...], dims: tuple[int, ...], *, reads=False, elem: int = F16
):
    """`mrvl.cost.dma_box` of a box of `elem`-byte elements (f16 unless said) of a dense DDR
    array of shape (any, *dims), the other side in OCM, with its contiguous runs counted
    directly: the innermost dimensions the box covers whole merge with the first one it
    does not."""
    run, runs = elem, 1
    merging = True
    for extent, size in zip(reversed(box), reversed((0, *dims))):
        if merging:
            run *= extent
            merging = extent == size
        else:
            runs *= extent
    nbytes = math.prod(box) * elem
    return cost.dma(target, nbytes, runs=runs, reads_ddr=reads, writes_ddr=not reads)


def _tile_cycles(steps: list[_Step], overlapped: bool, reused_outputs: bool = False) -> int:
    """Cycles of one tile running `steps` in order. Without overlap each step's loads,
    compute and store follow each other; with it (`sched-pipeline`'s double buffering) the
    DMA queue runs the loads of step i+1 before the store of step i, so they overlap the
    compute of step i. With `reused_outputs` (a double-buffered plan whose outputs are not
    allocated early, `early_outputs`), a compute writes the bytes of the previous step's
    output, so it waits for that store."""
    if not steps:
        return 0
    if not overlapped:
        return sum(s.load + s.work + s.store for s in steps)
    dma = steps[0].load
    loaded = [dma]
    mac = stored = 0
    for i, s in enumerate(steps):
        if i + 1 < len(steps):
            dma += steps[i + 1].load
            loaded.append(dma)
        mac = max(mac, loaded[i], stored if reused_outputs else 0) + s.work
        if s.store:
            dma = stored = max(dma, mac) + s.store
    return max(dma, mac)


def window_plan_cycles(
    layer: WindowLayer,
    pieces: list[WindowPiece],
    num_tiles: int,
    target,
    *,
    pinned: bool = False,
    overlapped: bool | None = None,
) -> int:
    """Modelled cycles of a conv/pool layer cut into `pieces` (each on its `tile`), priced
    with `mrvl.cost`: each tile runs its pieces' loads, compute and stores (`_tile_cycles`,
    overlapped when `sched-pipeline` can double-buffer them, `_double_buffers`, unless
    `overlapped` says); the shared DDR port moves every
    piece's bytes. With `pinned` (`wb_pin_ocm`), a tile that loads the same weight slice as
    its previous piece does not load it again. The larger of the busiest tile and the port is
    the layer's time."""
    steps: dict[int, list[_Step]] = {}
    held = LastSlices()  # the weights each tile loaded last
    windows: dict[int, tuple] = {}  # tile -> the window its last piece loaded
    port = 0  # the bytes of the stores
    # the loads, by what they read: (bytes, loads per tile); `sched-multicast` makes the
    # loads of one thing by several tiles one read per round of them
    loads: dict[tuple, tuple[int, Counter]] = {}

    def loaded(key: tuple, nbytes: int, tile: int) -> None:
        if nbytes:
            loads.setdefault(key, (nbytes, Counter()))[1][tile] += 1

    pins = False  # whether `sched-pin-weights` keeps some tile's weights
    sharing = _sharing(len({p.tile for p in pieces}))
    for p in pieces:
        in_cols = p.in_cols or layer.w
        ics = p.ics or layer.input_channels(p.oc0, p.ocs)[1]
        cbs = p.ci_blocks[0][1] if p.ci_blocks else None
        if cbs is not None and len(p.ci_blocks) == 1:
            cbs = None
        piece = _window_piece_cost(
            layer, target, p.rows, p.in_rows, p.cols or layer.ow, in_cols, p.ocs, ics, cbs,
            sharing,
        )  # fmt: skip
        # `sched-pin-weights` keeps its bias at least
        repeat = pinned and held.repeated(p.tile, "weights", (p.oc0, p.ocs)) is not None
        kept = repeat and len(piece.steps) == 1
        shared = shares_window(windows.get(p.tile), p)
        windows[p.tile] = p
        for s in piece.steps:
            load = (0 if kept else s.weights) + (0 if shared else s.load - s.weights)
            steps.setdefault(p.tile, []).append(
                _Step(load, 0 if kept else s.weights, s.work, s.store)
            )
        port += piece.ddr - piece.weight_ddr - piece.windows_ddr
        window = (p.in_row0, p.in_rows, p.in_col0, in_cols, p.ic0, ics, p.ci_blocks)
        loaded(("window", *window), piece.windows_ddr - (piece.window_ddr if shared else 0), p.tile)
        loaded(("weights", p.oc0, p.ocs, p.ci_blocks), 0 if kept else piece.weight_ddr, p.tile)
        pins = pins or repeat
    if overlapped is None:
        first = pieces[0]
        blocks = first.ci_blocks
        plan = WindowPlan(
            first.ocs, first.rows, first.cols or layer.ow,
            blocks[0][1] if len(blocks) > 1 else None,
        )  # fmt: skip
        # a chain whose bias `sched-pin-weights` keeps leaves a hole that, as measured, costs
        # the layer its double buffering: such a plan counts on none
        overlapped = not (pins and plan.cbs) and _double_buffers(layer, plan, target, pins)
    reused = (
        overlapped
        and len(pieces[0].ci_blocks) <= 1
        and not early_outputs(layer, pieces, target, pinned)
    )
    for nbytes, per_tile in loads.values():
        port += nbytes * (max(per_tile.values()) if MULTICAST else sum(per_tile.values()))
    times = {t: _tile_cycles(s, overlapped, reused) for t, s in steps.items()}
    return _laid_out_cycles(target, steps, times, port)


def _estimate(
    layer: WindowLayer,
    plan: WindowPlan,
    num_tiles: int,
    target,
    pinned: bool,
    shared_windows: bool = False,
) -> int:
    """`window_plan_cycles` without laying the pieces out: the plan's few distinct piece
    shapes, counted, with the busiest tile taking its share of the pieces; with
    `shared_windows`, as a grid split would lay them out (each tile loading a window once
    for its channel pieces of that band)."""
    (
        channels, spatial, columns, pieces, cbs,
        load, weights, work, store, ddr, weight_ddr, steps, window, window_ddr,
    ) = _estimate_totals(layer, plan, num_tiles, target)  # fmt: skip
    if pinned and cbs is None:
        groups = channels
        loads = min(pieces, groups + min(pieces, num_tiles) - 1)  # one per (tile, group)
        saved = 1 - loads / pieces
        load -= int(weights * saved)
        ddr -= int(weight_ddr * saved)
    overlapped = _fits_twice(layer, plan, target, pinned and cbs is None)
    tail = _tail(target, work / max(1, steps))

    def priced(load: int, ddr: int, tile_pieces: int) -> int:
        share = tile_pieces / pieces  # the busiest tile's share
        dma, compute = (load + store) * share, work * share
        if overlapped:
            tile = max(dma, compute) + min(dma, compute) / max(1, steps * share)
        else:
            tile = dma + compute
        return _layer_cycles(target, int(tile), ddr, tail)

    per_tile = -(-pieces // num_tiles)  # the busiest tile's pieces, dealt evenly

    def sharing_windows(k: int, tile_pieces: int) -> int:
        """Priced with each tile loading a window once for `k` channel pieces in a row, when
        they read the same input channels (not a pool's or a grouped conv's)."""
        saved = 1 - 1 / max(1, k) if not layer.depthwise_channels and layer.groups == 1 else 0
        return priced(load - int(window * saved), ddr - int(window_ddr * saved), tile_pieces)

    if not shared_windows or pinned:
        options = [priced(load, ddr, per_tile)]
        if not pinned and spatial <= num_tiles and num_tiles % spatial == 0:
            # dealt: tile t takes spatial piece t % spatial of every (tiles / spatial)-th
            # channel piece, one window for all of them (`shares_window`)
            options.append(sharing_windows(-(-channels // (num_tiles // spatial)), per_tile))
        if not pinned and num_tiles > 1 and columns == 1:
            # rows: a tile takes its pieces band by band, the channel pieces of a band in a row
            options.append(sharing_windows(min(channels, per_tile), per_tile))
        return min(options)
    # A grid split of G channel groups by R band groups gives each tile ceil(channel pieces /
    # G) x ceil(spatial pieces / R) pieces, and the tile loads each window once for its
    # channel pieces of that band (`shares_window`).
    grids = []
    for g in (int(split.split("x")[0]) for split in grid_splits(num_tiles)):
        k = -(-channels // g)
        grids.append(sharing_windows(k, k * -(-spatial // (num_tiles // g))))
    return min(grids, default=priced(load, ddr, per_tile))


@cache
def _estimate_totals(layer: WindowLayer, plan: WindowPlan, num_tiles: int, target) -> tuple:
    """What `_estimate` sums over a plan's distinct piece shapes, however it then prices
    them (the search asks twice for each candidate: dealt, and laid out in a grid): the
    channel, spatial and column piece counts, all pieces, the input-channel block, and the
    totals of the steps' loads, weights, work, stores, DDR bytes, steps and single-step
    windows."""
    bands = Counter((rows, in_rows) for _, rows, _, in_rows in _bands(layer, plan.rows))
    cols = Counter((c, in_c) for _, c, _, in_c in _columns(layer, plan.cols))
    chans = Counter((ocs, ics) for _, ocs, _, ics in _channels(layer, plan.ocs))
    cbs = plan.cbs if plan.cbs and plan.cbs < layer.c else None
    load = weights = work = store = ddr = weight_ddr = steps = window = window_ddr = 0
    pieces = sum(bands.values()) * sum(cols.values()) * sum(chans.values())
    sharing = _sharing(min(num_tiles, pieces))
    for (rows, in_rows), nb in bands.items():
        for (cs, in_cs), nc in cols.items():
            for (ocs, ics), ng in chans.items():
                count = nb * nc * ng
                piece = _window_piece_cost(
                    layer, target, rows, in_rows, cs, in_cs, ocs, ics, cbs, sharing
                )
                for s in piece.steps:
                    load += count * s.load
                    weights += count * s.weights
                    work += count * s.work
                    store += count * s.store
                steps += count * len(piece.steps)
                ddr += count * piece.ddr
                weight_ddr += count * piece.weight_ddr
                if len(piece.steps) == 1:
                    window += count * (piece.steps[0].load - piece.steps[0].weights)
                    window_ddr += count * piece.window_ddr
    channels, spatial = sum(chans.values()), sum(bands.values()) * sum(cols.values())
    return (
        channels, spatial, sum(cols.values()), pieces, cbs,
        load, weights, work, store, ddr, weight_ddr, steps, window, window_ddr,
    )  # fmt: skip
