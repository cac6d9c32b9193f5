"""What MLIP work costs in cycles: one function per kind of work, on plain numbers.

The scheduler prices the pieces it plans with these functions, and the simulator's cycle model
prices the instructions it replays with the same ones, so the tiler and the model never
disagree (Vela's `PerformanceQuery` is the pattern). Every number comes from the target
description (`targets/<mcpu>.json`); the model itself is documented in docs/isa.md.

A `Cost` says which engine of a tile the work occupies, for how many cycles, and how many
bytes it moves through the DDR port that all tiles share. The cycle model queues the engine
time on the tile's engine and the DDR bytes on the shared port.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from math import ceil

from mrvl.target import Target


class Unit(str, Enum):
    """The engines of a tile (docs/isa.md §1)."""

    DMA = "dma"
    MAC = "mac"
    VECTOR = "vector"


@dataclass(frozen=True)
class Cost:
    unit: Unit
    cycles: int
    """Cycles the engine is busy (its set-up included)."""
    ddr_read: int = 0
    """Bytes read from DDR, counted in whole bursts (what the port really moves)."""
    ddr_write: int = 0

    @property
    def ddr_bytes(self) -> int:
        return self.ddr_read + self.ddr_write


def ddr_bytes(target: Target, nbytes: int, runs: int = 1) -> int:
    """Bytes the DDR port moves for `nbytes` in `runs` equal contiguous runs: each run is
    rounded up to whole bursts, so narrow strided transfers cost more than their payload."""
    if nbytes <= 0:
        return 0
    runs = max(1, runs)
    burst = target.ddr_burst_bytes
    return runs * ceil(ceil(nbytes / runs) / burst) * burst


def ddr_port_cycles(target: Target, nbytes: float) -> int:
    """Cycles the shared DDR port is busy moving `nbytes` (already counted in bursts; the
    planner prices a share of other tiles' bytes too, so it may be fractional)."""
    return ceil(nbytes / target.ddr_bytes_per_cycle)


def dma_cycles(target: Target, dma_cost: Cost, port_cycles: int) -> int:
    """Cycles of a DMA from its start: its set-up, then the `port_cycles` from its first
    DDR port cycle to one past its last (other transfers' bursts interleaved), or its
    engine's own time, whichever ends later. The cycle model times every DMA so; the planner
    so prices one that shares the port with the other tiles' transfers."""
    return max(dma_cost.cycles, target.dma_setup_cycles + port_cycles)


def dma(
    target: Target,
    nbytes: int,
    *,
    runs: int = 1,
    reads_ddr: bool = False,
    writes_ddr: bool = False,
) -> Cost:
    """A `dma` of `nbytes` in `runs` contiguous runs on one tile's DMA engine."""
    moved = ddr_bytes(target, nbytes, runs)
    return Cost(
        Unit.DMA,
        target.dma_setup_cycles + ceil(nbytes / target.dma_bytes_per_cycle),
        ddr_read=moved if reads_ddr else 0,
        ddr_write=moved if writes_ddr else 0,
    )


def convert(target: Target, read_bytes: int, write_bytes: int, *, runs: int = 1) -> Cost:
    """A `cvt`: DDR to DDR on the DMA engine, reading one element type and writing another."""
    return Cost(
        Unit.DMA,
        target.dma_setup_cycles + ceil(max(read_bytes, write_bytes) / target.dma_bytes_per_cycle),
        ddr_read=ddr_bytes(target, read_bytes, runs),
        ddr_write=ddr_bytes(target, write_bytes, 1),
    )


def lut(target: Target, table_bytes: int) -> Cost:
    """A `lut`: one table from DDR into the tile's activation-table memory."""
    return dma(target, table_bytes, reads_ddr=True)


def mac(target: Target, macs: int, *, int8: bool = False) -> Cost:
    """A `conv` or `fc` on the MAC array: set-up, then `macs` at the array's peak rate."""
    rate = target.int8_macs_per_cycle_per_tile if int8 else target.fp16_macs_per_cycle_per_tile
    return Cost(Unit.MAC, target.mac_setup_cycles + ceil(macs / rate))


def vector(target: Target, element_ops: int) -> Cost:
    """A `pool`, `add`, `scale`, `mul` or `resize` on the vector unit: `element_ops` is the
    number of element operations (a pool counts each window tap)."""
    return Cost(
        Unit.VECTOR,
        target.vector_setup_cycles + ceil(element_ops / target.vector_elems_per_cycle_per_tile),
    )


def roofline_cycles(
    target: Target, num_tiles: int, macs: int, ddr_bytes_: int, *, int8_macs: int = 0
) -> int:
    """The bound no schedule beats: all tiles' MAC arrays busy, or the DDR port busy moving
    the compulsory bytes, whichever takes longer. `int8_macs` of the `macs` run at the int8
    rate."""
    if int8_macs:
        fp16, int8 = target.fp16_macs_per_cycle_per_tile, target.int8_macs_per_cycle_per_tile
        compute = ceil(((macs - int8_macs) * int8 + int8_macs * fp16) / (fp16 * int8 * num_tiles))
    else:
        compute = ceil(macs / (target.fp16_macs_per_cycle_per_tile * num_tiles))
    return max(compute, ddr_port_cycles(target, ddr_bytes_))


# ------------------------------------------------------------ geometry -> work (for both sides)


def contiguous_runs(
    box: tuple[int, ...], strides: tuple[int, ...], elem_bytes: int
) -> tuple[int, int]:
    """(distinct bytes, contiguous runs) of one side of a strided `dma` box.

    A dimension of extent 1 does not count; one of stride 0 re-reads the same bytes (a
    broadcast), which the engine fetches once; a negative stride walks the same bytes
    backwards. The innermost dimensions whose elements follow each other merge into one run.
    """
    if math.prod(box) == 0:
        return 0, 0
    dims = sorted(((abs(s), n) for n, s in zip(box, strides) if n > 1 and s != 0), reverse=True)
    run = elem_bytes
    while dims and dims[-1][0] == run:
        run *= dims.pop()[1]
    runs = math.prod(n for _, n in dims)
    return runs * run, runs


def dma_box(
    target: Target,
    box: tuple[int, ...],
    elem_bytes: int,
    src_strides: tuple[int, ...],
    dst_strides: tuple[int, ...],
    *,
    src_ddr: bool,
    dst_ddr: bool,
) -> Cost:
    """A `dma` of a strided box: the DMA engine moves every element of the box (its OCM
    side); the DDR port moves the distinct bytes of the DDR side(s) in whole bursts per
    contiguous run (`contiguous_runs`)."""
    nbytes = math.prod(box) * elem_bytes
    engine = dma(target, nbytes)
    read = write = 0
    if src_ddr:
        distinct, runs = contiguous_runs(box, src_strides, elem_bytes)
        read = ddr_bytes(target, distinct, runs)
    if dst_ddr:
        distinct, runs = contiguous_runs(box, dst_strides, elem_bytes)
        write = ddr_bytes(target, distinct, runs)
    return Cost(Unit.DMA, engine.cycles, ddr_read=read, ddr_write=write)


def conv_macs(out_shape: tuple[int, ...], kernel: tuple[int, ...], group_channels: int) -> int:
    """MACs of a convolution tile: every output element takes KH x KW x (C / groups) taps."""
    return math.prod(out_shape) * kernel[0] * kernel[1] * group_channels


def pool_element_ops(out_shape: tuple[int, ...], kernel: tuple[int, ...]) -> int:
    """Vector element operations of a pool tile: one per window tap of every output element."""
    return math.prod(out_shape) * kernel[0] * kernel[1]


RESIZE_TAPS = 4
"""A two-tap-by-two-tap interpolation combines four input elements per output element."""


def softmax_element_ops(count: int) -> int:
    """Vector-unit operations of a softmax over `count` elements: four passes over them (the
    max, the exponential, the sum, the division)."""
    return 4 * count


LAYERNORM_STATS_OPS = 2
"""Of a layer normalization's five operations an element, those of its statistics (the sum,
the squared deviation): `lnstats` makes them, `lnapply` the other three."""


def layernorm_element_ops(count: int) -> int:
    """Vector-unit operations of a layer normalization over `count` elements: five per
    element (the sum, the squared deviation, the normalization, the scale, the shift)."""
    return 5 * count


def resize_element_ops(out_shape: tuple[int, ...]) -> int:
    return math.prod(out_shape) * RESIZE_TAPS
