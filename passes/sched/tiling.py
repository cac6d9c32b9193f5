"""Tiling plans: how a layer's output is cut so each piece's working set fits a tile's OCM.

A window layer (conv, pool) is cut into bands of output rows, groups of output channels,
columns and (a conv) blocks of input channels; an FC layer into groups of output features and
bands of rows. Which cut, and which tile computes each piece, is a search over candidate plans
priced with `mrvl.cost` (the cycle model's functions): see "priced plans" below. The fixed rules
(`plan_window_layer`, `plan_fc_layer`) say whether a layer fits at all. The plan is pure
arithmetic, so the lowering that emits the DMA and compute ops stays readable.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from functools import cache
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
    tile: int = 0
    """The tile that computes the piece."""


@dataclass(frozen=True)
class InputSampling:
    """Where a layer's input rows and columns lie in the DDR tensor it loads them from, when
    it reads only some of them (`WindowLayer.subsampled`): input row i is DDR row
    `row0 + i * row_step`, input column j is DDR column `col0 + j * col_step`, of a DDR
    tensor of `h` x `w` pixels."""

    h: int
    w: int
    row0: int
    row_step: int
    col0: int
    col_step: int

    def element_offset(self, c: int, row: int, col: int, channel: int) -> int:
        """DDR element index of (image 0, input row, input column, channel)."""
        return (
            (self.row0 + row * self.row_step) * self.w + self.col0 + col * self.col_step
        ) * c + channel

    def element_strides(self, c: int) -> tuple[int, int, int, int]:
        """DDR element strides of an NHWC box of the input."""
        return (self.h * self.w * c, self.row_step * self.w * c, self.col_step * c, 1)


@dataclass(frozen=True)
class WindowLayer:
    """The geometry of a conv or pool layer, NHWC.

    A conv with `groups` > 1 reads, for output channel o, only the input channels of its group
    (`c / groups` of them); a pool (`depthwise_channels`) reads input channel o only. With
    `sampling`, the input (`h` x `w`) is every `row_step`-th row and `col_step`-th column of
    the DDR tensor (`subsampled`).
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
    sampling: InputSampling | None = None

    def subsampled(self) -> WindowLayer:
        """The same conv over only the input rows and columns it reads: a 1x1 kernel with a
        stride s > 1 reads one row (column) in s, so its pieces load just those (DMA
        strides) and it becomes a stride-1 conv over them, with the same taps in the same
        order (the same bits), 1/s of the rows (columns) loaded. Itself when nothing is
        skipped."""
        if self.sampling is not None or self.depthwise_channels:
            return self
        rows = _sampled(self.h, self.kh, self.sh, self.pad_top)
        cols = _sampled(self.w, self.kw, self.sw, self.pad_left)
        if rows is None and cols is None:
            return self
        h, row0, row_step, pad_top = rows or (self.h, 0, 1, self.pad_top)
        w, col0, col_step, pad_left = cols or (self.w, 0, 1, self.pad_left)
        return replace(
            self, h=h, w=w, sh=1 if rows else self.sh, sw=1 if cols else self.sw,
            pad_top=pad_top, pad_left=pad_left,
            sampling=InputSampling(self.h, self.w, row0, row_step, col0, col_step),
        )  # fmt: skip

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


def _sampled(size: int, k: int, stride: int, pad: int) -> tuple[int, int, int, int] | None:
    """(rows kept, first kept row, step, leading padding in kept rows) of one dimension of a
    1x1 kernel with `stride` > 1: output i reads row i*stride - pad, so the kept rows are
    those congruent to -pad; None when the kernel is wider or nothing would be skipped."""
    if k != 1 or stride == 1:
        return None
    first = -pad % stride
    if first >= size:
        return None
    return -(-(size - first) // stride), first, stride, (pad + first) // stride


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
                        tile=len(pieces) % num_tiles,
                    )
                )
    return pieces


@dataclass(frozen=True)
class FcPiece:
    """Output rows [n0, n0 + ns) x features [o0, o0 + os), computed on `tile`."""

    o0: int
    os: int
    n0: int = 0
    ns: int = 0
    tile: int = 0


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
    return _fc_grid(n, o, ns, os, num_tiles, FC_SPLITS[0])


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


# ------------------------------------------------------------ priced plans (issue 9)
#
# A plan is a choice of block sizes (output rows, columns and channels per piece, input
# channels per block of a conv cut into blocks) and of the way its pieces go to the tiles.
# The lowering asks for the cheapest plan that fits, as the functions of `mrvl.cost` (the
# cycle model's) price it: candidates are priced analytically from the few distinct piece
# shapes a plan has, and the best few are then laid out piece by piece and priced per tile.
# Nothing is compiled to choose: a plan costs microseconds to price.

SPLITS = ("dealt", "channels", "rows", "columns")
"""How a window layer's pieces go to the tiles: `dealt` round-robin in channel-major order;
`channels`, `rows`, `columns`: each tile takes a contiguous range of the pieces ordered by
that dimension first (so with `channels`, one tile computes all the rows of its output
channels, and with `wb_pin_ocm` loads their weights once)."""

FC_SPLITS = ("dealt", "features", "rows")
"""The same for an FC layer: `features` gives each tile a contiguous range of output
features (all rows of them), `rows` a contiguous range of row bands."""

DOUBLE_BUFFER_SLACK = 8
"""Alignments of OCM a plan leaves free when it counts on two pieces' loads fitting at once
(`sched-pipeline` then loads the next piece while this one computes)."""


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
    port = ceil(dma.ddr_bytes * sharing / target.ddr_bytes_per_cycle)
    return max(dma.cycles, target.dma_setup_cycles + port)


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
    from mrvl import cost

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
    from mrvl import cost

    n = layer.n

    def load(box, dims):
        return _dense_box_dma(target, box, dims, reads=True)

    def load_window(box):
        return _window_dma(layer, target, box)

    store = _dense_box_dma(target, (n, rows, cols, ocs), (layer.oh, layer.ow, layer.oc))
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
    vectors = (layer.weight_bytes_per_oc - layer.kh * layer.kw * cg * F16) // F32  # bias, slope
    vector = cost.dma(target, ocs * F32, reads_ddr=True)
    blocks = [(c0, min(cbs, layer.c - c0)) for c0 in range(0, layer.c, cbs)] if cbs else [(0, ics)]
    steps, ddr, weight_ddr, windows_ddr = [], store.ddr_bytes, 0, 0
    block_loads = {}  # channels -> (window, weights) DMAs of a block that wide
    for index, (_, cs) in enumerate(blocks):
        if cs not in block_loads:
            block_loads[cs] = (
                load_window((n, in_rows, in_cols, cs)),
                load((ocs, layer.kh, layer.kw, cs if cbs else cg), w_strides),
            )
        window, weights = block_loads[cs]
        extra = (
            vectors
            if len(blocks) == 1
            else (index == 0) + (vectors - 1) * (index == len(blocks) - 1)
        )  # a chain loads the bias first and the slopes last
        const_cycles = _contended(weights, target, sharing) + extra * _contended(
            vector, target, sharing
        )
        const_ddr = weights.ddr_bytes + extra * vector.ddr_bytes
        macs = cost.conv_macs(out_shape, (layer.kh, layer.kw), cs if cbs else cg)
        last = index == len(blocks) - 1
        steps.append(
            _Step(
                _contended(window, target, sharing) + const_cycles,
                const_cycles,
                cost.mac(target, macs).cycles,
                _contended(store, target, sharing) if last else 0,
            )
        )
        ddr += window.ddr_bytes + const_ddr
        weight_ddr += const_ddr
        windows_ddr += window.ddr_bytes
    window_ddr = block_loads[blocks[0][1]][0].ddr_bytes if len(blocks) == 1 else 0
    return _PieceCost(tuple(steps), ddr, weight_ddr, window_ddr, windows_ddr)


def _window_dma(layer: WindowLayer, target, box: tuple[int, int, int, int]):
    """The load of an input window `box` (NHWC): a dense box of the DDR tensor, or with
    `layer.sampling` a strided one (`mrvl.cost.dma_box`, as the cycle model prices it)."""
    from mrvl import cost

    if layer.sampling is None:
        return _dense_box_dma(target, box, (layer.h, layer.w, layer.c), reads=True)
    strides = tuple(F16 * s for s in layer.sampling.element_strides(layer.c))
    dense = (box[1] * box[2] * box[3] * F16, box[2] * box[3] * F16, box[3] * F16, F16)
    return cost.dma_box(target, box, F16, strides, dense, src_ddr=True, dst_ddr=False)


def _dense_box_dma(target, box: tuple[int, ...], dims: tuple[int, ...], *, reads=False):
    """`mrvl.cost.dma_box` of an f16 box of a dense DDR array of shape (any, *dims), the
    other side in OCM, with its contiguous runs counted directly: the innermost dimensions
    the box covers whole merge with the first one it does not."""
    from mrvl import cost

    run, runs = F16, 1
    merging = True
    for extent, size in zip(reversed(box), reversed((0, *dims))):
        if merging:
            run *= extent
            merging = extent == size
        else:
            runs *= extent
    nbytes = math.prod(box) * F16
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
    places the buffers first fit, as those passes do it: the loads of step i+1 are allocated
    before compute i (after its output), each step's loads live until its compute, its
    output until its store (right after the compute) or, in a chain of input-channel blocks
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
    live: list[tuple[int, int, int]] = []  # (end, offset, size)
    top = 0
    for start, stop, size in ranges:
        live = [entry for entry in live if entry[0] >= start]
        offset = 0
        for _, off, sz in sorted(live, key=lambda e: e[1]):
            if offset + size <= off:
                break
            offset = max(offset, off + sz)
        live.append((stop if stop is not None else start, offset, size))
        top = max(top, offset + size)
    return top


def _window_steps(layer: WindowLayer, plan: WindowPlan, rows: int, in_rows: int, pinned: bool):
    """The buffers of one piece of `rows` output rows reading `in_rows` input rows, step by
    step (`_pipelined_top`)."""
    in_cols = (
        layer.w
        if plan.cols >= layer.ow
        else min((plan.cols - 1) * layer.sw + (layer.kw - 1) * layer.dw + 1, layer.w)
    )
    out = layer.n * rows * plan.cols * plan.ocs
    vectors = 0
    if not layer.depthwise_channels:
        cg = layer.ic_per_group
        vectors = (layer.weight_bytes_per_oc - layer.kh * layer.kw * cg * F16) // F32
    if plan.cbs and plan.cbs < layer.c:
        blocks = [min(plan.cbs, layer.c - c0) for c0 in range(0, layer.c, plan.cbs)]
        steps = []
        for k, cs in enumerate(blocks):
            last = k == len(blocks) - 1
            extra = (k == 0) + (vectors - 1) * last if vectors and not pinned else 0
            loads = (
                layer.n * in_rows * in_cols * cs * F16,
                plan.ocs * layer.kh * layer.kw * cs * F16,
                *([plan.ocs * F32] * extra),
            )
            steps.append((loads, out * (F16 if last else F32), not last))
        return steps, vectors * plan.ocs * F32 if pinned else 0  # pinned: bias and slopes
    if layer.depthwise_channels:
        ics, weights = plan.ocs, ()
    else:
        ics = layer.input_channels(0, plan.ocs)[1]
        weights = (plan.ocs * layer.kh * layer.kw * layer.ic_per_group * F16,) + (
            plan.ocs * F32,
        ) * vectors
    window = layer.n * in_rows * in_cols * ics * F16
    if pinned:
        return [((window,), out * F16, False)], sum(weights)
    return [((window, *weights), out * F16, False)], 0


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


def _fits_twice(layer: WindowLayer, plan: WindowPlan, target, pinned: bool) -> bool:
    """A quick necessary condition for `_double_buffers`: a piece and one more step's loads
    fit a tile, fragmentation aside."""
    rows = plan.rows
    in_rows = min((rows - 1) * layer.sh + (layer.kh - 1) * layer.dh + 1, layer.h)
    steps, resident = _window_steps(layer, plan, rows, in_rows, pinned)
    held = layer.piece_bytes(rows, plan.ocs, plan.cols, plan.cbs) + resident
    room = target.ocm_bytes_per_tile - DOUBLE_BUFFER_SLACK * target.ocm_alignment
    return held + max(sum(loads) for loads, _, _ in steps) <= room


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
    pieces = [replace(p, tile=t) for p, t in zip(grid, tiles)]
    return _interleaved(pieces, tiles)


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
    held: dict[int, tuple[int, int]] = {}
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
        repeat = pinned and held.get(p.tile) == (p.oc0, p.ocs)  # its bias at least is kept
        kept = repeat and len(piece.steps) == 1
        held[p.tile] = (p.oc0, p.ocs)
        shared = shares_window(windows.get(p.tile), p)
        windows[p.tile] = p
        for s in piece.steps:
            load = (0 if kept else s.weights) + (0 if shared else s.load - s.weights)
            steps.setdefault(p.tile, []).append(
                replace(s, load=load, weights=0 if kept else s.weights)
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
    if pinned and cbs is None:
        groups = sum(chans.values())
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

    channels, spatial = sum(chans.values()), sum(bands.values()) * sum(cols.values())
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
        if not pinned and num_tiles > 1 and sum(cols.values()) == 1:
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
                if tallest == layer.oh and len(layer.channel_pieces(ocs)) >= 2 * num_tiles:
                    break  # narrower channel pieces would only add loads
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


"""How many of the analytically cheapest plans are laid out and priced piece by piece."""


# ------------------------------------------------------------ FC plans


@dataclass(frozen=True)
class FcPlan:
    """Output features and rows per piece of an FC layer, and how the pieces go to the
    tiles (`FC_SPLITS`)."""

    os: int
    ns: int
    split: str = "dealt"


@dataclass(frozen=True)
class FcLayer:
    """An FC layer's geometry: `n` rows of `k` inputs to `o` features; `vectors` f32 values
    per feature besides the weights (bias, PRELU slope)."""

    n: int
    k: int
    o: int
    vectors: int

    def piece_bytes(self, ns: int, os: int) -> int:
        return ns * self.k * F16 + os * self.k * F16 + os * self.vectors * F32 + ns * os * F16


def _fc_grid(n: int, o: int, ns: int, os: int, num_tiles: int, split: str) -> list[FcPiece]:
    """The pieces of an FC plan, each with its tile, in emission order."""
    grid = [
        FcPiece(o0, min(os, o - o0), n0, min(ns, n - n0))
        for n0 in range(0, n, ns)
        for o0 in range(0, o, os)
    ]
    keys = [(p.o0, p.n0) for p in grid]
    tiles = _deal(keys, {"dealt": None, "features": 0, "rows": 1}[split], num_tiles)
    return _interleaved([replace(p, tile=t) for p, t in zip(grid, tiles)], tiles)


@cache
def _fc_piece_cost(layer: FcLayer, target, ns: int, os: int, sharing: int) -> _PieceCost:
    """One FC piece, DMA by DMA as the lowering emits it: its rows of the input, its
    features' weights, bias and slopes, the compute, the store of its outputs."""
    from mrvl import cost

    x = _dense_box_dma(target, (ns, layer.k), (layer.k,), reads=True)
    w = _dense_box_dma(target, (os, layer.k), (layer.k,), reads=True)
    vector = cost.dma(target, os * F32, reads_ddr=True)
    store = _dense_box_dma(target, (ns, os), (layer.o,))
    const_cycles = _contended(w, target, sharing) + layer.vectors * _contended(
        vector, target, sharing
    )
    const_ddr = w.ddr_bytes + layer.vectors * vector.ddr_bytes
    work = cost.mac(target, ns * layer.k * os).cycles
    step = _Step(
        _contended(x, target, sharing) + const_cycles, const_cycles, work,
        _contended(store, target, sharing),
    )  # fmt: skip
    return _PieceCost((step,), x.ddr_bytes + const_ddr + store.ddr_bytes, const_ddr)


def _fc_double_buffers(layer: FcLayer, ns: int, os: int, target, pinned: bool) -> bool:
    """As `_double_buffers`, for FC pieces of `ns` rows and `os` features."""
    weights = (os * layer.k * F16,) + (os * F32,) * layer.vectors
    x, out = ns * layer.k * F16, ns * os * F16
    if pinned:
        steps, resident = [((x,), out, False)] * 3, sum(weights)
    else:
        steps, resident = [((x, *weights), out, False)] * 3, 0
    return _pipelined_top(steps, target.ocm_alignment, resident) <= _pipelined_room(target)


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
    held: dict[int, tuple[int, int]] = {}
    port = 0
    pins = False
    sharing = _sharing(len({p.tile for p in pieces}))
    for p in pieces:
        piece = _fc_piece_cost(layer, target, p.ns, p.os, sharing)
        kept = pinned and held.get(p.tile) == (p.o0, p.os)
        held[p.tile] = (p.o0, p.os)
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
) -> list[FcPiece]:
    """The cheapest plan of an FC layer that fits: feature widths halving from all of them
    and from one tile's share, each with the most rows that fit and the most that can be
    double-buffered, priced like a window layer's plans (`plan_window_layer_priced`).
    `plan_fc_layer`'s fixed rule is one more contender and raises `DoesNotFit`."""
    fixed = plan_fc_layer(
        n, k, o, target.ocm_bytes_per_tile, num_tiles, target.ocm_alignment, what, slopes=slopes
    )
    layer = FcLayer(n, k, o, int(bias) + int(slopes))
    fixed_cycles = fc_plan_cycles(layer, fixed, num_tiles, target, pinned=pinned)
    best = _cheapest_fc_plan(layer, target, num_tiles, slopes, pinned)
    if best is None or best[1] >= fixed_cycles * (1 - SAVING):
        return fixed
    return list(best[0])


@cache
def _cheapest_fc_plan(
    layer: FcLayer, target, num_tiles: int, slopes: bool, pinned: bool
) -> tuple[tuple[FcPiece, ...], int] | None:
    budget = target.ocm_bytes_per_tile - (5 if slopes else 4) * target.ocm_alignment
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
            pieces = _fc_grid(layer.n, layer.o, ns, os, num_tiles, split)
            cycles = fc_plan_cycles(layer, pieces, num_tiles, target, pinned=pinned)
            if best_cycles is None or cycles < best_cycles:
                best, best_cycles = tuple(pieces), cycles
    return best, best_cycles
