"""The Numba engine's normalization instructions: `softmax` (and its exp32), bit for bit the
reference interpreter's (docs/isa.md §3 and §4): the same fp32 steps in the same order, one row
at a time."""

from __future__ import annotations

import numpy as np

from mrvl.isa import EXP_LN2_HI, EXP_LN2_LO, EXP_LOG2E, EXP_LOW, EXP_POLY, OPCODE_BY_NAME
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.numerics import f32_from_bits, load_f16, store_f16
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
    for o in range(outer):
        for i in range(inner):
            base = o * length * inner + i
            m = np.float32(-np.inf)
            for j in range(length):
                v = x[base + j * inner]
                if v > m or v != v:
                    m = v
            total = np.float32(0.0)
            for j in range(length):
                e[j] = exp32(x[base + j * inner] - m)
                total = total + e[j]
            for j in range(length):
                x[base + j * inner] = e[j] / total
    store_f16(ocm, row[SOFTMAX_OUT_ADDR], x, tally)
