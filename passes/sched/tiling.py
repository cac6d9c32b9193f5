"""Tiling plans: how a layer's output is cut so each piece's working set fits a tile's OCM.

A window layer (conv, pool) is cut into bands of output rows and, when its weights are too
large, into groups of output channels; an FC layer into groups of output features. Pieces are
also kept small enough that every tile gets work (`num_tiles`). The plan is pure arithmetic, so
the lowering that emits the DMA and compute ops stays readable.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from mrvl.errors import CompileError

F16 = 2
F32 = 4


@dataclass(frozen=True)
class WindowPiece:
    """Output rows [orow0, orow0 + rows) x channels [oc0, oc0 + ocs), and the input rows
    [in_row0, in_row0 + in_rows) they read."""

    orow0: int
    rows: int
    oc0: int
    ocs: int
    in_row0: int
    in_rows: int


@dataclass(frozen=True)
class WindowLayer:
    """The geometry of a conv or pool layer, NHWC."""

    n: int
    h: int
    w: int
    c: int
    oh: int
    ow: int
    oc: int
    kh: int
    kw: int
    sh: int
    pad_top: int
    dh: int
    weight_bytes_per_oc: int  # OHWI f16 weights + f32 bias of one output channel; 0 for pools
    depthwise_channels: bool  # a pool: output channel c reads input channel c only

    def input_rows(self, orow0: int, rows: int) -> tuple[int, int]:
        """First input row and row count needed for output rows [orow0, orow0 + rows)."""
        lo = orow0 * self.sh - self.pad_top
        hi = (orow0 + rows - 1) * self.sh - self.pad_top + (self.kh - 1) * self.dh + 1
        lo, hi = max(lo, 0), min(hi, self.h)
        if hi <= lo:  # every tap of these rows falls in the padding: a 1-row dummy window
            return min(lo, self.h - 1), 1
        return lo, hi - lo

    def piece_bytes(self, rows: int, ocs: int) -> int:
        in_rows = min((rows - 1) * self.sh + (self.kh - 1) * self.dh + 1, self.h)
        in_channels = ocs if self.depthwise_channels else self.c
        return (
            self.n * in_rows * self.w * in_channels * F16
            + self.n * rows * self.ow * ocs * F16
            + ocs * self.weight_bytes_per_oc
        )


def _padded(nbytes: int, alignment: int) -> int:
    return -(-nbytes // alignment) * alignment


def plan_window_layer(
    layer: WindowLayer, ocm_bytes: int, num_tiles: int, alignment: int, what: str
) -> list[WindowPiece]:
    """Cut a conv/pool layer into pieces that fit `ocm_bytes` (3 buffers, each aligned)."""
    budget = ocm_bytes - 4 * alignment

    def fits(rows: int, ocs: int) -> bool:
        return layer.piece_bytes(rows, ocs) <= budget

    ocs = layer.oc
    while ocs > 1 and not fits(1, ocs):
        ocs = ceil(ocs / 2)
    if not fits(1, ocs):
        raise CompileError(
            f"{what}: does not fit on chip: one output row needs {layer.piece_bytes(1, ocs)} "
            f"bytes of OCM, a tile has {ocm_bytes}"
        )
    channel_groups = ceil(layer.oc / ocs)
    # Enough row bands that every tile has a piece, then as large as OCM allows.
    rows = max(1, ceil(layer.oh / max(1, ceil(num_tiles / channel_groups))))
    while rows > 1 and not fits(rows, ocs):
        rows = ceil(rows / 2)
    pieces = []
    for oc0 in range(0, layer.oc, ocs):
        for orow0 in range(0, layer.oh, rows):
            r = min(rows, layer.oh - orow0)
            in_row0, in_rows = layer.input_rows(orow0, r)
            pieces.append(WindowPiece(orow0, r, oc0, min(ocs, layer.oc - oc0), in_row0, in_rows))
    return pieces


@dataclass(frozen=True)
class FcPiece:
    """Output rows [n0, n0 + ns) x features [o0, o0 + os)."""

    o0: int
    os: int
    n0: int = 0
    ns: int = 0


def plan_fc_layer(
    n: int, k: int, o: int, ocm_bytes: int, num_tiles: int, alignment: int, what: str
) -> list[FcPiece]:
    """Cut an FC layer's output features into groups whose weights fit `ocm_bytes`, and its
    rows (a Gemm over a sequence has many) into bands whose inputs fit next to them."""
    budget = ocm_bytes - 4 * alignment

    def piece_bytes(ns: int, os: int) -> int:
        return ns * k * F16 + os * k * F16 + os * F32 + ns * os * F16

    if piece_bytes(1, 1) > budget:
        raise CompileError(
            f"{what}: does not fit on chip: one output feature needs {piece_bytes(1, 1)} bytes "
            f"of OCM, a tile has {ocm_bytes}"
        )
    os = ceil(o / num_tiles)
    ns = n
    while (ns > 1 or os > 1) and piece_bytes(ns, os) > budget:
        if os > 1 and os >= ns:  # halve the larger of the two
            os = ceil(os / 2)
        else:
            ns = ceil(ns / 2)
    return [
        FcPiece(o0, min(os, o - o0), n0, min(ns, n - n0))
        for n0 in range(0, n, ns)
        for o0 in range(0, o, os)
    ]


@dataclass(frozen=True)
class Chunk:
    start: int
    length: int


def plan_elementwise(
    count: int,
    operands: int,
    ocm_bytes: int,
    num_tiles: int,
    alignment: int,
    *,
    granule: int = 1,
    reserved_bytes: int = 0,
) -> list[Chunk]:
    """Cut a flat elementwise operation over `count` f16 elements (with `operands` buffers of
    that size in OCM at once, plus `reserved_bytes` of other data) into chunks, one or more
    per tile, each a multiple of `granule` elements (the channels of a per-channel op)."""
    budget = (ocm_bytes - reserved_bytes - (operands + 3) * alignment) // (operands * F16)
    length = min(budget, ceil(count / num_tiles))
    length = max(granule, length // granule * granule)
    return [Chunk(s, min(length, count - s)) for s in range(0, count, length)]


@dataclass(frozen=True)
class ResizePiece:
    """Output rows [orow0, orow0 + rows) x channels [c0, c0 + cs), reading input rows
    [in_row0, in_row0 + in_rows)."""

    orow0: int
    rows: int
    c0: int
    cs: int
    in_row0: int
    in_rows: int


def plan_resize_layer(
    n: int,
    w: int,
    c: int,
    ow: int,
    row_sources: list[tuple[int, int]],
    ocm_bytes: int,
    num_tiles: int,
    alignment: int,
    what: str,
) -> list[ResizePiece]:
    """Cut a resize into bands of output rows (and groups of channels if one row does not
    fit). `row_sources[r]` is the (first, last) input row output row r reads."""
    budget = ocm_bytes - 5 * alignment
    oh = len(row_sources)

    def span(orow0: int, rows: int) -> tuple[int, int]:
        band = row_sources[orow0 : orow0 + rows]
        lo = min(first for first, _ in band)
        return lo, max(last for _, last in band) - lo + 1

    def piece_bytes(orow0: int, rows: int, cs: int) -> int:
        in_rows = span(orow0, rows)[1]
        return (n * in_rows * w * cs + n * rows * ow * cs) * F16 + (rows + ow) * 4 * F32

    def fits(rows: int, cs: int) -> bool:
        return all(piece_bytes(r, min(rows, oh - r), cs) <= budget for r in range(0, oh, rows))

    cs = c
    while cs > 1 and not fits(1, cs):
        cs = ceil(cs / 2)
    if not fits(1, cs):
        raise CompileError(
            f"{what}: does not fit on chip: one output row needs {piece_bytes(0, 1, cs)} "
            f"bytes of OCM, a tile has {ocm_bytes}"
        )
    groups = ceil(c / cs)
    rows = max(1, ceil(oh / max(1, ceil(num_tiles / groups))))
    while rows > 1 and not fits(rows, cs):
        rows = ceil(rows / 2)
    pieces = []
    for c0 in range(0, c, cs):
        for orow0 in range(0, oh, rows):
            r = min(rows, oh - orow0)
            in_row0, in_rows = span(orow0, r)
            pieces.append(ResizePiece(orow0, r, c0, min(cs, c - c0), in_row0, in_rows))
    return pieces
