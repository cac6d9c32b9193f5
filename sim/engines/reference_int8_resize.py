"""The reference interpreter's `qresize` (docs/isa.md): `resize`'s two-tap interpolation on
int8 data with `RESIZE_WEIGHT_BITS`-bit integer weights, summed exactly and rounded once.

Apart from `reference_int8.py`, which registers it in `INT8_KERNELS`."""

from __future__ import annotations

import numpy as np

from mrvl.isa import Instruction, MemSpace
from mrvl.isa_int8_resize import RESIZE_ONE, requantize_half_even
from mrvl.sim.errors import Fault
from mrvl.sim.memory import Memory

OCM = MemSpace.OCM


def fixed_point_taps(table: np.ndarray, size: int, lo: int, what: str):
    """The (i0, i1, w0, w1) of an int32 [rows, 3] table: indices made relative to `lo` and
    checked to lie in [0, size) (the one fault: tables are data), w1 clamped into
    [0, 2^11] and w0 = 2^11 - w1."""
    i0, i1 = table[:, 0].astype(np.int64) - lo, table[:, 1].astype(np.int64) - lo
    if not np.all((i0 >= 0) & (i0 < size) & (i1 >= 0) & (i1 < size)):
        raise Fault(f"{what} indices fall outside [{lo}, {lo + size})")
    w1 = np.clip(table[:, 2].astype(np.int64), 0, RESIZE_ONE)
    return i0, i1, RESIZE_ONE - w1, w1


def qresize(memory: Memory, ins: Instruction, finish) -> None:
    """acc = Σ wy·wx·(x − in_zp) over the four taps (exact, below 2^30), then
    finish(out_zp + requantize_half_even(acc, rq)); `finish` is the clamp and table of every
    int8 result (`reference_int8._finish`)."""
    f = ins.fields
    n, h, w, c = f["in_shape"]
    _, oh, ow, _ = f["out_shape"]
    x = memory.read(OCM, ins.tile, f["in_addr"], "int8", (n, h, w, c)).astype(np.int64)
    ytab = memory.read(OCM, ins.tile, f["ytab_addr"], "int32", (oh, 3))
    xtab = memory.read(OCM, ins.tile, f["xtab_addr"], "int32", (ow, 3))
    y0, y1, wy0, wy1 = fixed_point_taps(ytab, h, f["row0"], "row table")
    x0, x1, wx0, wx1 = fixed_point_taps(xtab, w, 0, "column table")
    d = x - f["in_zp"]
    wx0, wx1 = wx0[None, None, :, None], wx1[None, None, :, None]
    top = wx0 * d[:, y0][:, :, x0] + wx1 * d[:, y0][:, :, x1]
    bottom = wx0 * d[:, y1][:, :, x0] + wx1 * d[:, y1][:, :, x1]
    acc = wy0[None, :, None, None] * top + wy1[None, :, None, None] * bottom
    y = f["out_zp"] + requantize_half_even(acc, *f["rq"])
    memory.write(OCM, ins.tile, f["out_addr"], finish(memory, ins, y))
