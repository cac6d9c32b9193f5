"""Fit rules: the fixed plans that say whether a layer fits a tile's OCM at all, and the
plans of the layers that are not searched (elementwise, per-channel, resize)."""

from __future__ import annotations

from dataclasses import replace
from math import ceil

from mrvl.errors import CompileError
from mrvl.isa import CONV_CI_BLOCK
from mrvl.passes.sched.tiling.geometry import (
    F16,
    F32,
    REQUANT_BYTES_PER_OC,
    ChannelChunk,
    Chunk,
    FcPiece,
    ResizePiece,
    WindowLayer,
    WindowPiece,
)
from mrvl.passes.sched.tiling.layout import FC_SPLITS, fc_grid


class DoesNotFit(CompileError):
    """The smallest piece of a layer needs more OCM than a tile has. `partition_for_mrvl`
    asks the planner before it offloads a layer, and keeps such a layer on the CPU."""

    def __init__(self, what: str, unit: str, needed: int, available: int):
        super().__init__(
            f"{what}: does not fit on chip: one {unit} needs {needed} bytes of OCM, "
            f"a tile has {available}"
        )
        self.unit, self.needed, self.available = unit, needed, available


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
    int8: bool = False,
) -> list[FcPiece]:
    """Cut an FC layer's output features into groups whose weights fit `ocm_bytes`, and its
    rows (a Gemm over a sequence has many) into bands whose inputs fit next to them. With
    `slopes` (a fused PRelu) each output feature also has an f32 slope in OCM; an `int8`
    layer has 1-byte inputs, weights and outputs, an i32 bias and a requantization pair."""
    budget = ocm_bytes - (5 if slopes or int8 else 4) * alignment
    if int8:
        per_feature, elem = F32 + REQUANT_BYTES_PER_OC, 1  # i32 bias, (multiplier, shift)
    else:
        per_feature, elem = F32 * (2 if slopes else 1), F16  # f32 bias (and slope)

    def piece_bytes(ns: int, os: int) -> int:
        return (ns * k + os * k + ns * os) * elem + os * per_feature

    if piece_bytes(1, 1) > budget:
        raise DoesNotFit(what, "output feature", piece_bytes(1, 1), ocm_bytes)
    os = ceil(o / num_tiles)
    ns = n
    while (ns > 1 or os > 1) and piece_bytes(ns, os) > budget:
        if os > 1 and os >= ns:  # halve the larger of the two
            os = ceil(os / 2)
        else:
            ns = ceil(ns / 2)
    return fc_grid(n, o, ns, os, num_tiles, FC_SPLITS[0])


def plan_elementwise(
    count: int,
    operands: int,
    ocm_bytes: int,
    num_tiles: int,
    alignment: int,
    *,
    granule: int = 1,
    reserved_bytes: int = 0,
    elem_bytes: int = F16,
) -> list[Chunk]:
    """Cut a flat elementwise operation over `count` elements of `elem_bytes` (f16 unless
    said; with `operands` buffers of that size in OCM at once, plus `reserved_bytes` of other
    data) into chunks, one or more per tile, each a multiple of `granule` elements (the
    channels of a per-channel op)."""
    budget = (ocm_bytes - reserved_bytes - (operands + 3) * alignment) // (operands * elem_bytes)
    length = min(budget, ceil(count / num_tiles))
    length = max(granule, length // granule * granule)
    return [Chunk(s, min(length, count - s)) for s in range(0, count, length)]


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
