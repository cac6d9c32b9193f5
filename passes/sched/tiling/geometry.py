"""Piece geometry: a layer's shape and what one piece of its output reads and holds in OCM.

Pure arithmetic on the layer's numbers (NHWC), shared by the fit rules, the pricing and the
lowering that emits a piece's DMAs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import ceil

F16 = 2
F32 = 4
I8 = 1
"""Bytes of an element: an fp16 activation or weight, an f32 (or an int8 layer's i32) bias,
slope, requantization value or partial sum, an int8 activation or weight."""

REQUANT_BYTES_PER_OC = 2 * F32
"""An int8 conv's or fc's (multiplier, shift) pair per output channel: two i32 in one buffer."""


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
    weight_bytes_per_oc: int  # OHWI weights + f32 / i32 vectors of one output channel; 0 for pools
    depthwise_channels: bool  # a pool: output channel c reads input channel c only
    sw: int = 1
    pad_left: int = 0
    dw: int = 1
    groups: int = 1
    sampling: InputSampling | None = None
    int8: bool = False
    """An int8 layer: 1-byte activations and weights, so twice the elements of fp16 fit."""

    @property
    def elem(self) -> int:
        """Bytes of one of its activations or weights."""
        return I8 if self.int8 else F16

    @property
    def vectors(self) -> int:
        """The f32 / i32 values of one output channel besides its weights (bias, PRELU slope,
        an int8 conv's requantization pair)."""
        if self.depthwise_channels:
            return 0
        weights = self.kh * self.kw * self.ic_per_group * self.elem
        return (self.weight_bytes_per_oc - weights) // F32

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

    def piece_pad_left(self, p: WindowPiece) -> int:
        """The leading column padding of piece `p` over its window (columns from `in_col0`).
        A piece whose taps all fall past the input's right end reads a 1-wide dummy window
        (`_input_span`) to the left of them, which would need a negative padding: its taps
        are read as leading padding instead, all left of the window (zeros either way)."""
        pad = self.pad_left + p.in_col0 - p.ocol0 * self.sw
        if pad >= 0:
            return pad
        return (max(p.cols, 1) - 1) * self.sw + (self.kw - 1) * self.dw + 1

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
        input-channel blocks (f16 or int8 window and weights of a block, fp32 or i32 partial
        sums in and out)."""
        cols = self.ow if cols is None else cols
        in_rows = min((rows - 1) * self.sh + (self.kh - 1) * self.dh + 1, self.h)
        in_cols = min((cols - 1) * self.sw + (self.kw - 1) * self.dw + 1, self.w)
        if cols >= self.ow:
            in_cols = self.w  # a whole row loads every column
        if cbs is not None:
            cbs = min(cbs, self.c)
            # a block's bias or slopes; an int8 block also its requantization pair
            vector = F32 + REQUANT_BYTES_PER_OC if self.int8 else F32
            return (
                self.n * in_rows * in_cols * cbs * self.elem
                + ocs * (self.kh * self.kw * cbs * self.elem + vector)
                + 2 * self.n * rows * cols * ocs * F32
            )
        if self.depthwise_channels:
            in_channels = ocs
        else:  # pieces never straddle a group (`channel_pieces`)
            in_channels = ceil(ocs / self.oc_per_group) * self.ic_per_group
        return (
            self.n * in_rows * in_cols * in_channels * self.elem
            + self.n * rows * cols * ocs * self.elem
            + ocs * self.weight_bytes_per_oc
        )


def conv_weight_bytes_per_oc(
    kh: int, kw: int, group_channels: int, *, bias: bool, slopes: bool, int8: bool = False
):
    """OCM bytes of one output channel's constants in a conv piece: its f16 weights (KH x KW
    x the input channels of its group), and an f32 bias and PRELU slope when it has them
    (`WindowLayer.weight_bytes_per_oc`); with `int8`, int8 weights, an i32 bias and the
    requantization pair."""
    if int8:
        return kh * kw * group_channels * I8 + F32 * int(bias) + REQUANT_BYTES_PER_OC
    return kh * kw * group_channels * F16 + F32 * (int(bias) + int(slopes))


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


@dataclass(frozen=True)
class FcPiece:
    """Output rows [n0, n0 + ns) x features [o0, o0 + os), computed on `tile`."""

    o0: int
    os: int
    n0: int = 0
    ns: int = 0
    tile: int = 0


@dataclass(frozen=True)
class Chunk:
    start: int
    length: int


@dataclass(frozen=True)
class ChannelChunk:
    """Flat elements [start, start + length) of a tensor whose channel is its innermost index,
    covering channels [c0, c0 + cs) of each pixel it holds."""

    start: int
    length: int
    c0: int
    cs: int


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


@dataclass(frozen=True)
class FcLayer:
    """An FC layer's geometry: `n` rows of `k` inputs to `o` features; `vectors` f32 (i32)
    values per feature besides the weights (bias, PRELU slope, an int8 layer's
    requantization pair); `int8`: 1-byte inputs, weights and outputs."""

    n: int
    k: int
    o: int
    vectors: int
    int8: bool = False

    @property
    def elem(self) -> int:
        return I8 if self.int8 else F16

    def piece_bytes(self, ns: int, os: int) -> int:
        e = self.elem
        return ns * self.k * e + os * self.k * e + os * self.vectors * F32 + ns * os * e
