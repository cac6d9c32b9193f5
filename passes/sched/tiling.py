"""Tiling plans: how a layer's output is cut so each piece's working set fits a tile's OCM.

A window layer (conv, pool) is cut into bands of output rows and, when its weights are too
large, into groups of output channels; an FC layer into groups of output features. Pieces are
also kept small enough that every tile gets work (`num_tiles`). The plan is pure arithmetic, so
the lowering that emits the DMA and compute ops stays readable.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import ceil

from mrvl.errors import CompileError
from mrvl.isa import CONV_CI_BLOCK

F16 = 2
F32 = 4


class DoesNotFit(CompileError):
    """The smallest piece of a layer needs more OCM than a tile has. `partition_for_mrvl`
    asks the planner before it offloads a layer, and keeps such a layer on the CPU."""

    def __init__(self, what: str, unit: str, needed: int, available: int):
        super().__init__(
            f"{what}: does not fit on chip: one {unit} needs {needed} bytes of OCM, "
            f"a tile has {available}"
        )
        self.unit, self.needed, self.available = unit, needed, available


@dataclass(frozen=True)
class WindowPiece:
    """Output rows [orow0, orow0 + rows) x columns [ocol0, ocol0 + cols) x channels
    [oc0, oc0 + ocs); it reads input rows [in_row0, in_row0 + in_rows), columns
    [in_col0, in_col0 + in_cols) and channels [ic0, ic0 + ics)."""

    orow0: int
    rows: int
    oc0: int
    ocs: int
    in_row0: int
    in_rows: int
    ocol0: int = 0
    cols: int = 0
    in_col0: int = 0
    in_cols: int = 0
    ic0: int = 0
    ics: int = 0
    ci_blocks: tuple[tuple[int, int], ...] = ()
    """(first channel, channels) of each input-channel block, when the conv is cut into them
    (fp32 partial sums carried from block to block); empty when it is not."""


@dataclass(frozen=True)
class WindowLayer:
    """The geometry of a conv or pool layer, NHWC.

    A conv with `groups` > 1 reads, for output channel o, only the input channels of its group
    (`c / groups` of them); a pool (`depthwise_channels`) reads input channel o only.
    """

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
    sw: int = 1
    pad_left: int = 0
    dw: int = 1
    groups: int = 1

    @property
    def oc_per_group(self) -> int:
        return self.oc // self.groups

    @property
    def ic_per_group(self) -> int:
        return self.c // self.groups

    def input_rows(self, orow0: int, rows: int) -> tuple[int, int]:
        """First input row and row count needed for output rows [orow0, orow0 + rows)."""
        return _input_span(orow0, rows, self.sh, self.pad_top, self.kh, self.dh, self.h)

    def input_cols(self, ocol0: int, cols: int) -> tuple[int, int]:
        """First input column and column count needed for output columns [ocol0, +cols)."""
        return _input_span(ocol0, cols, self.sw, self.pad_left, self.kw, self.dw, self.w)

    def input_channels(self, oc0: int, ocs: int) -> tuple[int, int]:
        """First input channel and channel count that output channels [oc0, oc0 + ocs) read:
        the channels themselves for a pool, their groups' channels for a conv."""
        if self.depthwise_channels:
            return oc0, ocs
        first, last = oc0 // self.oc_per_group, (oc0 + ocs - 1) // self.oc_per_group
        return first * self.ic_per_group, (last - first + 1) * self.ic_per_group

    def channel_step(self, ocs: int) -> int:
        """The largest piece width <= `ocs` whose pieces never straddle a group boundary
        (a multiple of the group's output channels, or a part of one group)."""
        if self.depthwise_channels or self.groups == 1 or ocs <= self.oc_per_group:
            return max(ocs, 1)
        return ocs // self.oc_per_group * self.oc_per_group

    def channel_pieces(self, ocs: int) -> list[tuple[int, int]]:
        """(oc0, ocs) of every channel piece of width at most `ocs`."""
        if self.depthwise_channels or self.groups == 1 or ocs >= self.oc_per_group:
            return [(oc0, min(ocs, self.oc - oc0)) for oc0 in range(0, self.oc, ocs)]
        return [
            (oc0, min(ocs, g0 + self.oc_per_group - oc0))
            for g0 in range(0, self.oc, self.oc_per_group)
            for oc0 in range(g0, g0 + self.oc_per_group, ocs)
        ]

    def piece_bytes(
        self, rows: int, ocs: int, cols: int | None = None, cbs: int | None = None
    ) -> int:
        """OCM bytes of one piece; `cbs`: input channels per block of a conv cut into
        input-channel blocks (f16 window and weights of a block, fp32 partial sums in and
        out)."""
        cols = self.ow if cols is None else cols
        in_rows = min((rows - 1) * self.sh + (self.kh - 1) * self.dh + 1, self.h)
        in_cols = min((cols - 1) * self.sw + (self.kw - 1) * self.dw + 1, self.w)
        if cols >= self.ow:
            in_cols = self.w  # a whole row loads every column
        if cbs is not None:
            cbs = min(cbs, self.c)
            return (
                self.n * in_rows * in_cols * cbs * F16
                + ocs * (self.kh * self.kw * cbs * F16 + F32)
                + 2 * self.n * rows * cols * ocs * F32
            )
        if self.depthwise_channels:
            in_channels = ocs
        else:  # pieces never straddle a group (`channel_pieces`)
            in_channels = ceil(ocs / self.oc_per_group) * self.ic_per_group
        return (
            self.n * in_rows * in_cols * in_channels * F16
            + self.n * rows * cols * ocs * F16
            + ocs * self.weight_bytes_per_oc
        )


def _input_span(o0: int, count: int, stride: int, pad: int, k: int, d: int, size: int):
    lo = o0 * stride - pad
    hi = (o0 + count - 1) * stride - pad + (k - 1) * d + 1
    lo, hi = max(lo, 0), min(hi, size)
    if hi <= lo:  # every tap of these outputs falls in the padding: a 1-wide dummy window
        return min(lo, size - 1), 1
    return lo, hi - lo


def _padded(nbytes: int, alignment: int) -> int:
    return -(-nbytes // alignment) * alignment


def plan_window_layer(
    layer: WindowLayer,
    ocm_bytes: int,
    num_tiles: int,
    alignment: int,
    what: str,
    *,
    split_columns: bool = False,
) -> list[WindowPiece]:
    """Cut a conv/pool layer into pieces that fit `ocm_bytes` (3 buffers, each aligned).

    Output channels are cut first (on group boundaries), then output rows. When one whole
    output row of one channel still does not fit (`split_columns`, convs): a conv without
    groups of more than `CONV_CI_BLOCK` input channels is cut into blocks of input channels
    (multiples of `CONV_CI_BLOCK`, so the fp32 partial sums follow the conv's accumulation
    order exactly), and then, or otherwise, into output columns. Raises `DoesNotFit` with
    the bytes needed when even one output element does not fit.
    """
    budget = ocm_bytes - 4 * alignment
    cbs: int | None = None

    def fits(rows: int, ocs: int, cols: int | None = None) -> bool:
        return layer.piece_bytes(rows, ocs, cols, cbs) <= budget

    ocs = layer.oc
    while ocs > 1 and not fits(1, ocs):
        ocs = layer.channel_step(ceil(ocs / 2))
    cols = layer.ow
    blockable = not layer.depthwise_channels and layer.groups == 1 and layer.c > CONV_CI_BLOCK
    if split_columns and blockable and not fits(1, ocs):
        cbs = CONV_CI_BLOCK * ceil(layer.c / CONV_CI_BLOCK / 2)
        while cbs > CONV_CI_BLOCK and not fits(1, 1):
            cbs = CONV_CI_BLOCK * ceil(cbs / CONV_CI_BLOCK / 2)
        ocs = layer.oc
        while ocs > 1 and not fits(1, ocs):
            ocs = ceil(ocs / 2)
    if split_columns:
        while cols > 1 and not fits(1, ocs, cols):
            cols = ceil(cols / 2)
    if not fits(1, ocs, cols):
        unit = "output element" if split_columns else "output row"
        raise DoesNotFit(what, unit, layer.piece_bytes(1, ocs, cols, cbs), ocm_bytes)
    ci_blocks = tuple((c0, min(cbs, layer.c - c0)) for c0 in range(0, layer.c, cbs)) if cbs else ()
    channel_pieces = layer.channel_pieces(ocs)
    column_pieces = ceil(layer.ow / cols)
    # Enough row bands that every tile has a piece, then as large as OCM allows.
    bands = max(1, ceil(num_tiles / (len(channel_pieces) * column_pieces)))
    rows = max(1, ceil(layer.oh / bands))
    while rows > 1 and not fits(rows, ocs, cols):
        rows = ceil(rows / 2)
    pieces = []
    for oc0, width in channel_pieces:
        ic0, ics = layer.input_channels(oc0, width)
        for orow0 in range(0, layer.oh, rows):
            r = min(rows, layer.oh - orow0)
            in_row0, in_rows = layer.input_rows(orow0, r)
            for ocol0 in range(0, layer.ow, cols):
                cs = min(cols, layer.ow - ocol0)
                # A whole row loads every column, as the padding arithmetic expects.
                in_col0, in_cols = layer.input_cols(ocol0, cs) if cs < layer.ow else (0, layer.w)
                piece = WindowPiece(orow0, r, oc0, width, in_row0, in_rows)
                pieces.append(
                    replace(
                        piece,
                        ocol0=ocol0,
                        cols=cs,
                        in_col0=in_col0,
                        in_cols=in_cols,
                        ic0=ic0,
                        ics=ics,
                        ci_blocks=ci_blocks,
                    )
                )
    return pieces


@dataclass(frozen=True)
class FcPiece:
    """Output rows [n0, n0 + ns) x features [o0, o0 + os)."""

    o0: int
    os: int
    n0: int = 0
    ns: int = 0


def plan_fc_layer(
    n: int,
    k: int,
    o: int,
    ocm_bytes: int,
    num_tiles: int,
    alignment: int,
    what: str,
    *,
    slopes: bool = False,
) -> list[FcPiece]:
    """Cut an FC layer's output features into groups whose weights fit `ocm_bytes`, and its
    rows (a Gemm over a sequence has many) into bands whose inputs fit next to them. With
    `slopes` (a fused PRelu) each output feature also has an f32 slope in OCM."""
    budget = ocm_bytes - (5 if slopes else 4) * alignment
    per_feature = F32 * (2 if slopes else 1)  # f32 bias (and slope)

    def piece_bytes(ns: int, os: int) -> int:
        return ns * k * F16 + os * k * F16 + os * per_feature + ns * os * F16

    if piece_bytes(1, 1) > budget:
        raise DoesNotFit(what, "output feature", piece_bytes(1, 1), ocm_bytes)
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
class ChannelChunk:
    """Flat elements [start, start + length) of a tensor whose channel is its innermost index,
    covering channels [c0, c0 + cs) of each pixel it holds."""

    start: int
    length: int
    c0: int
    cs: int


def plan_per_channel(
    count: int,
    channels: int,
    ocm_bytes: int,
    num_tiles: int,
    alignment: int,
    what: str,
    *,
    param_bytes: int,
    operands: int = 2,
) -> list[ChannelChunk]:
    """Cut a per-channel map of `count` f16 elements (`operands` f16 buffers in OCM: input
    and output, or two inputs and the output) whose parameters take `param_bytes` per channel
    (at most 3 buffers): whole pixels with every channel's parameters while one pixel fits,
    else groups of channels of one pixel (a scale_shift over 23040 channels of a 1x1 plane:
    184 KB of f32 scale and shift)."""
    reserved = channels * param_bytes
    slack = (operands + 3) * alignment  # the f16 buffers and 3 parameter buffers, each aligned
    if (ocm_bytes - reserved - slack) // (operands * F16) >= channels:
        return [
            ChannelChunk(c.start, c.length, 0, channels)
            for c in plan_elementwise(
                count, operands, ocm_bytes, num_tiles, alignment, granule=channels,
                reserved_bytes=reserved,
            )
        ]  # fmt: skip
    group = (ocm_bytes - slack) // (operands * F16 + param_bytes)
    if group < 1:
        raise DoesNotFit(what, "channel", operands * F16 + param_bytes + slack, ocm_bytes)
    return [
        ChannelChunk(pixel + c0, min(group, channels - c0), c0, min(group, channels - c0))
        for pixel in range(0, count, channels)
        for c0 in range(0, channels, group)
    ]


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


def window_plan_cycles(
    layer: WindowLayer, pieces: list[WindowPiece], num_tiles: int, target
) -> int:
    """Modelled cycles of a conv/pool layer cut into `pieces`, dealt round-robin to
    `num_tiles` tiles, priced with `mrvl.cost` (the cycle model's functions): each tile runs
    its pieces' loads, compute and stores one after another; the shared DDR port moves every
    piece's bytes. The larger of the busiest tile and the port is the layer's time."""
    from mrvl import cost

    busy = [0] * num_tiles
    port_bytes = 0
    for index, p in enumerate(pieces):
        rows, cols = p.rows, p.cols or layer.ow
        in_cols = p.in_cols or layer.w
        ics = p.ics or layer.input_channels(p.oc0, p.ocs)[1]
        ins = layer.n * p.in_rows * in_cols * ics * F16
        in_runs = layer.n * p.in_rows * (1 if in_cols == layer.w and ics == layer.c else in_cols)
        loads = [cost.dma(target, ins, runs=in_runs, reads_ddr=True)]
        if layer.weight_bytes_per_oc:
            loads.append(cost.dma(target, p.ocs * layer.weight_bytes_per_oc, reads_ddr=True))
        outs = layer.n * rows * cols * p.ocs * F16
        out_runs = layer.n * rows * (cols if p.ocs != layer.oc or cols != layer.ow else 1)
        store = cost.dma(target, outs, runs=out_runs, writes_ddr=True)
        out_shape = (layer.n, rows, cols, p.ocs)
        if layer.depthwise_channels:
            work = cost.vector(target, cost.pool_element_ops(out_shape, (layer.kh, layer.kw)))
        else:
            work = cost.mac(
                target, cost.conv_macs(out_shape, (layer.kh, layer.kw), layer.ic_per_group)
            )
        dma = sum(c.cycles for c in loads) + store.cycles
        busy[index % num_tiles] += dma + work.cycles
        port_bytes += sum(c.ddr_bytes for c in loads) + store.ddr_bytes
    return max(max(busy), cost.ddr_port_cycles(target, port_bytes))


def plan_window_layer_priced(
    layer: WindowLayer, target, num_tiles: int, what: str, *, split_columns: bool = False
) -> list[WindowPiece]:
    """The cheapest of `plan_window_layer`'s plans made for 1, 2, 4 ... `num_tiles` tiles
    (pieces small enough that that many tiles get work), as `window_plan_cycles` prices them
    over the program's `num_tiles`: a small layer spread over every tile can cost more in
    halo rows and per-transfer set-up than it saves in compute. Input-channel blocks are
    left to the plan for all tiles, so the partial-sum chains stay as they are."""
    best, best_cycles = None, None
    for spread in sorted({t for t in (1, 2, 4, 8) if t < num_tiles} | {num_tiles}, reverse=True):
        pieces = plan_window_layer(
            layer,
            target.ocm_bytes_per_tile,
            spread,
            target.ocm_alignment,
            what,
            split_columns=split_columns,
        )
        if any(p.ci_blocks for p in pieces):
            return pieces if best is None else best
        cycles = window_plan_cycles(layer, pieces, num_tiles, target)
        if best_cycles is None or cycles < best_cycles:
            best, best_cycles = pieces, cycles
    return best
