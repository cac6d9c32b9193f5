"""The Numba engine's normalization instructions, `softmax` (and its exp32) and `layernorm`,
bit for bit the reference interpreter's (docs/isa.md §3 and §4): the same fp32 steps in the
same order, one row at a time."""

from __future__ import annotations

import numpy as np

from mrvl.isa import EXP_LN2_HI, EXP_LN2_LO, EXP_LOG2E, EXP_LOW, EXP_POLY, OPCODE_BY_NAME
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.numerics import f32_from_bits, load_f16, load_f32, store_f16
from mrvl.sim.validate import field_words

_softmax = field_words(OPCODE_BY_NAME["softmax"])
SOFTMAX_IN_ADDR, SOFTMAX_OUT_ADDR = _softmax["in_addr"], _softmax["out_addr"]
SOFTMAX_OUTER, SOFTMAX_LENGTH = _softmax["outer"], _softmax["length"]
SOFTMAX_INNER = _softmax["inner"]

_LOW, _LOG2E = np.float32(EXP_LOW), np.float32(EXP_LOG2E)
_HI, _LO = np.float32(EXP_LN2_HI), np.float32(EXP_LN2_LO)
_P7, _P6, _P5, _P4, _P3, _P2, _P1, _P0 = (np.float32(c) for c in EXP_POLY)


@jit
def exp32(d):
    """`mrvl.sim.numerics.exp32` on one float32."""
    t = _LOW if d < _LOW else d
    u = t * _LOG2E + np.float32(0.5)
    k = 0 if u != u else int(np.floor(u))
    kf = np.float32(k)
    r = (t - kf * _HI) - kf * _LO
    p = _P7
    p = p * r + _P6
    p = p * r + _P5
    p = p * r + _P4
    p = p * r + _P3
    p = p * r + _P2
    p = p * r + _P1
    p = p * r + _P0
    return p * f32_from_bits(np.uint32((k + 127) << 23))


@jit
def softmax(row, ocm, lut, tally):
    """Each row (outer index o, inner index i) of the [outer, length, inner] input: its max,
    exp32(x - max) kept in fp32, their sum in order, then e / sum, stored as f16."""
    outer, length, inner = row[SOFTMAX_OUTER], row[SOFTMAX_LENGTH], row[SOFTMAX_INNER]
    x = load_f16(ocm, row[SOFTMAX_IN_ADDR], outer * length * inner, lut)  # read before writing
    e = np.empty(length, np.float32)
    stride = np.uint64(inner)
    for o in range(outer):
        for i in range(inner):
            base = np.uint64(o * length * inner + i)
            m = np.float32(-np.inf)
            for j in range(np.uint64(length)):
                v = x[base + j * stride]
                if v > m or v != v:
                    m = v
            # the exponentials in a loop of their own, which vectorizes (unsigned indices,
            # exp32 branch-free), then their sum in order: ViT-Tiny's softmaxes took 12 ns a
            # value with the sum in the same loop, which kept it scalar
            for j in range(np.uint64(length)):
                e[j] = exp32(x[base + j * stride] - m)
            total = np.float32(0.0)
            for j in range(np.uint64(length)):
                total = total + e[j]
            for j in range(np.uint64(length)):
                x[base + j * stride] = e[j] / total
    store_f16(ocm, row[SOFTMAX_OUT_ADDR], x, tally)


_layernorm = field_words(OPCODE_BY_NAME["layernorm"])
LN_IN_ADDR, LN_OUT_ADDR = _layernorm["in_addr"], _layernorm["out_addr"]
LN_ROWS, LN_LENGTH = _layernorm["rows"], _layernorm["length"]
LN_G_ADDR, LN_B_ADDR, LN_EPS = _layernorm["g_addr"], _layernorm["b_addr"], _layernorm["eps"]


@jit
def layernorm(row, frow, ocm, lut, tally):
    """Each row of the [rows, length] input: the fp32 sum, the mean, the fp32 sum of squared
    deviations, the variance, rstd = 1 / sqrt(var + eps) (each one IEEE fp32 operation),
    then ((x - mean) * rstd) * g + b, stored as f16."""
    rows, length = row[LN_ROWS], row[LN_LENGTH]
    x = load_f16(ocm, row[LN_IN_ADDR], rows * length, lut)  # read before writing
    g = load_f32(ocm, row[LN_G_ADDR], length)
    b = load_f32(ocm, row[LN_B_ADDR], length)
    eps = np.float32(frow[LN_EPS])
    count = np.float32(length)
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
        rstd = np.float32(np.divide(np.float32(1.0), np.float32(np.sqrt(var + eps))))
        for j in range(length):
            x[base + j] = ((x[base + j] - mean) * rstd) * g[j] + b[j]
    store_f16(ocm, row[LN_OUT_ADDR], x, tally)
