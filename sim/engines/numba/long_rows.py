"""The Numba engine's `lnstats` and `lnapply` (docs/isa.md): `layernorm` in two instructions
for a row too long to hold beside its f32 scales and shifts, bit for bit the reference
interpreter's and `layernorm`'s (the same fp32 steps in the same order)."""

from __future__ import annotations

import numpy as np

from mrvl.isa import OPCODE_BY_NAME
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.numerics import load_f16, load_f32, store_f16, store_f32
from mrvl.sim.validate import field_words

_stats = field_words(OPCODE_BY_NAME["lnstats"])
ST_IN_ADDR, ST_OUT_ADDR = _stats["in_addr"], _stats["out_addr"]
ST_ROWS, ST_LENGTH, ST_EPS = _stats["rows"], _stats["length"], _stats["eps"]

_apply = field_words(OPCODE_BY_NAME["lnapply"])
AP_IN_ADDR, AP_OUT_ADDR, AP_STATS_ADDR = _apply["in_addr"], _apply["out_addr"], _apply["stats_addr"]
AP_ROWS, AP_COUNT = _apply["rows"], _apply["count"]
AP_G_ADDR, AP_B_ADDR = _apply["g_addr"], _apply["b_addr"]


@jit
def lnstats(row, frow, ocm, lut):
    """Each row of the [rows, length] input: the fp32 sum, the mean, the fp32 sum of squared
    deviations, the variance and rstd = 1 / sqrt(var + eps), stored as f32 (mean, rstd)."""
    rows, length = row[ST_ROWS], row[ST_LENGTH]
    x = load_f16(ocm, row[ST_IN_ADDR], rows * length, lut)
    eps = np.float32(frow[ST_EPS])
    count = np.float32(length)
    stats = np.empty(2 * rows, np.float32)
    for r in range(rows):
        base = r * length
        total = np.float32(0.0)
        for j in range(length):
            total = total + x[base + j]
        mean = total / count
        squares = np.float32(0.0)
        for j in range(length):
            d = x[base + j] - mean
            squares = squares + d * d
        var = squares / count
        # np.divide: IEEE 1 / +0 = inf (Numba's `/` raises), correctly rounded to fp32
        stats[2 * r] = mean
        stats[2 * r + 1] = np.float32(np.divide(np.float32(1.0), np.float32(np.sqrt(var + eps))))
    store_f32(ocm, row[ST_OUT_ADDR], stats)


@jit
def lnapply(row, ocm, lut, tally):
    """Each element of the [rows, count] run: ((x - mean) * rstd) * g + b in fp32 with its
    row's (mean, rstd), stored as f16."""
    rows, count = row[AP_ROWS], row[AP_COUNT]
    x = load_f16(ocm, row[AP_IN_ADDR], rows * count, lut)  # read before writing
    stats = load_f32(ocm, row[AP_STATS_ADDR], 2 * rows)
    g = load_f32(ocm, row[AP_G_ADDR], count)
    b = load_f32(ocm, row[AP_B_ADDR], count)
    for r in range(rows):
        base = r * count
        mean, rstd = stats[2 * r], stats[2 * r + 1]
        for j in range(count):
            x[base + j] = ((x[base + j] - mean) * rstd) * g[j] + b[j]
    store_f16(ocm, row[AP_OUT_ADDR], x, tally)
