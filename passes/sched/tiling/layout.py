"""Plans and their layout on the tiles: the pieces a plan's block sizes cut a layer into,
which tile computes each, and in what order the lowering emits them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from mrvl.passes.sched.tiling.geometry import FcPiece, WindowLayer, WindowPiece

SPLITS = ("dealt", "channels", "rows", "columns")
"""How a window layer's pieces go to the tiles: `dealt` round-robin in channel-major order;
`channels`, `rows`, `columns`: each tile takes a contiguous range of the pieces ordered by
that dimension first (so with `channels`, one tile computes all the rows of its output
channels, and with `wb_pin_ocm` loads their weights once)."""

FC_SPLITS = ("dealt", "features", "rows")
"""The same for an FC layer: `features` gives each tile a contiguous range of output
features (all rows of them), `rows` a contiguous range of row bands."""


@dataclass(frozen=True)
class WindowPlan:
    """Block sizes of a window layer's pieces and how they go to the tiles."""

    ocs: int
    rows: int
    cols: int
    cbs: int | None = None
    """Input channels per block when the conv is cut into input-channel blocks."""
    split: str = "dealt"


@dataclass(frozen=True)
class FcPlan:
    """Output features and rows per piece of an FC layer, and how the pieces go to the
    tiles (`FC_SPLITS`)."""

    os: int
    ns: int
    split: str = "dealt"


@cache
def _bands(layer: WindowLayer, rows: int) -> list[tuple[int, int, int, int]]:
    """(orow0, rows, in_row0, in_rows) of every band of `rows` output rows."""
    return [
        (r0, min(rows, layer.oh - r0), *layer.input_rows(r0, min(rows, layer.oh - r0)))
        for r0 in range(0, layer.oh, rows)
    ]


@cache
def _columns(layer: WindowLayer, cols: int) -> list[tuple[int, int, int, int]]:
    """(ocol0, cols, in_col0, in_cols) of every column piece; a whole row loads every column,
    as the padding arithmetic expects."""
    if cols >= layer.ow:
        return [(0, layer.ow, 0, layer.w)]
    return [
        (c0, min(cols, layer.ow - c0), *layer.input_cols(c0, min(cols, layer.ow - c0)))
        for c0 in range(0, layer.ow, cols)
    ]


@cache
def _channels(layer: WindowLayer, ocs: int) -> list[tuple[int, int, int, int]]:
    """(oc0, ocs, ic0, ics) of every channel piece of width at most `ocs`."""
    return [(o0, w, *layer.input_channels(o0, w)) for o0, w in layer.channel_pieces(ocs)]


def _deal(count_by_key: list[tuple], split_index: int | None, num_tiles: int) -> list[int]:
    """Tiles of pieces keyed by grid position: round-robin in the given order when
    `split_index` is None, else contiguous ranges of the order sorted by that key first."""
    if split_index is None:
        return [i % num_tiles for i in range(len(count_by_key))]
    order = sorted(range(len(count_by_key)), key=lambda i: (count_by_key[i][split_index], i))
    tiles = [0] * len(count_by_key)
    for rank, i in enumerate(order):
        tiles[i] = rank * num_tiles // len(order)
    return tiles


def shares_window(previous: WindowPiece | None, piece: WindowPiece) -> bool:
    """Whether `piece` reads the very input window its tile's previous piece loaded (the
    same rows, columns and channels, neither cut into input-channel blocks): the lowering
    then loads it once for both."""
    return (
        previous is not None
        and not previous.ci_blocks
        and not piece.ci_blocks
        and (previous.in_row0, previous.in_rows, previous.in_col0, previous.in_cols)
        == (piece.in_row0, piece.in_rows, piece.in_col0, piece.in_cols)
        and (previous.ic0, previous.ics) == (piece.ic0, piece.ics)
    )


def grid_splits(num_tiles: int) -> tuple[str, ...]:
    """The 2-D splits of `num_tiles` tiles: `GxR` puts the tiles in a grid of G groups of
    output channels by R groups of row bands (and columns); each tile takes the pieces of
    its channel group and its bands, band by band (`window_pieces`), so it loads each of
    its windows once for all its channel pieces (`shares_window`) and reads 1/R of the
    input and 1/G of the weights (per band)."""
    return tuple(f"{g}x{num_tiles // g}" for g in (2, 4) if g < num_tiles and num_tiles % g == 0)


def splits(num_tiles: int) -> tuple[str, ...]:
    """Every split of a window layer over `num_tiles` tiles: `SPLITS` and `grid_splits`."""
    return SPLITS + grid_splits(num_tiles) if num_tiles > 1 else SPLITS


def _interleaved(pieces: list, tiles: list[int]) -> list:
    """Pieces in emission order: the first piece of every tile, then the second..., so every
    tile starts at once; each tile keeps its pieces' order."""
    seen: dict[int, int] = {}
    rank = []
    for t in tiles:
        rank.append(seen.get(t, 0))
        seen[t] = rank[-1] + 1
    order = sorted(range(len(pieces)), key=lambda i: (rank[i], tiles[i]))
    return [pieces[i] for i in order]


def window_pieces(layer: WindowLayer, plan: WindowPlan, num_tiles: int) -> list[WindowPiece]:
    """The pieces of `plan`, each with its tile, in emission order."""
    ci_blocks = (
        tuple((c0, min(plan.cbs, layer.c - c0)) for c0 in range(0, layer.c, plan.cbs))
        if plan.cbs
        else ()
    )
    grid, keys = [], []
    for g, (oc0, ocs, ic0, ics) in enumerate(_channels(layer, plan.ocs)):
        for b, (orow0, rows, in_row0, in_rows) in enumerate(_bands(layer, plan.rows)):
            for c, (ocol0, cols, in_col0, in_cols) in enumerate(_columns(layer, plan.cols)):
                grid.append(
                    WindowPiece(
                        orow0,
                        rows,
                        oc0,
                        ocs,
                        in_row0,
                        in_rows,
                        ocol0,
                        cols,
                        in_col0,
                        in_cols,
                        ic0,
                        ics,
                        ci_blocks,
                    )
                )
                keys.append((g, b, c))
    if "x" in plan.split:  # a grid of channel groups by band (and column) groups
        groups = int(plan.split.split("x")[0])
        bands = num_tiles // groups
        channels, columns = len(_channels(layer, plan.ocs)), len(_columns(layer, plan.cols))
        spatial = len(grid) // channels  # band and column pieces of one channel piece
        tiles = [
            g * groups // channels * bands + (b * columns + c) * bands // spatial
            for g, b, c in keys
        ]
        order = sorted(range(len(grid)), key=lambda i: (tiles[i], keys[i][1], keys[i][2], i))
        grid, tiles = [grid[i] for i in order], [tiles[i] for i in order]
    else:
        split = {"dealt": None, "channels": 0, "rows": 1, "columns": 2}[plan.split]
        tiles = _deal(keys, split, num_tiles)
    # (`replace` walks the dataclass's fields for each of thousands of pieces)
    pieces = [WindowPiece(**{**vars(p), "tile": t}) for p, t in zip(grid, tiles)]
    return _interleaved(pieces, tiles)


def fc_grid(n: int, o: int, ns: int, os: int, num_tiles: int, split: str) -> list[FcPiece]:
    """The pieces of an FC plan, each with its tile, in emission order."""
    grid = [
        FcPiece(o0, min(os, o - o0), n0, min(ns, n - n0))
        for n0 in range(0, n, ns)
        for o0 in range(0, o, os)
    ]
    keys = [(p.o0, p.n0) for p in grid]
    tiles = _deal(keys, {"dealt": None, "features": 0, "rows": 1}[split], num_tiles)
    return _interleaved([replace(p, tile=t) for p, t in zip(grid, tiles)], tiles)
