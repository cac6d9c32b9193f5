"""The Numba engine's `reduce` and `binary`, bit for bit the reference interpreter's
(docs/isa.md §3): the same fp32 steps in the same order, one row (or one element) at a time."""

from __future__ import annotations

import numpy as np

from mrvl.isa import OPCODE_BY_NAME, BinaryMode, ReduceMode
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.numerics import load_f16, load_f32, store_f16, store_f32
from mrvl.sim.validate import field_words

_reduce = field_words(OPCODE_BY_NAME["reduce"])
R_IN_ADDR, R_OUT_ADDR = _reduce["in_addr"], _reduce["out_addr"]
R_OUTER, R_LENGTH, R_INNER = _reduce["outer"], _reduce["length"], _reduce["inner"]
R_MODE, R_DIVISOR = _reduce["mode"], _reduce["divisor"]
R_ACC_ADDR, R_ACC_OUT = _reduce["acc_addr"], _reduce["acc_out"]
SUM, MEAN, MAX, MIN, ARGMAX, L2 = (int(m) for m in ReduceMode)


@jit
def reduce(row, ocm, lut, tally):
    """Each row (outer index o, inner index i): the fp32 sum (of squares for L2), max or min
    in order of the axis from +0.0 / -inf / +inf or the partials, then the f16 result (MEAN
    divided once, L2's square root taken once), the fp32 partials, or the f32 index of the
    first maximum."""
    outer, length, inner = row[R_OUTER], row[R_LENGTH], row[R_INNER]
    mode = row[R_MODE]
    x = load_f16(ocm, row[R_IN_ADDR], outer * length * inner, lut)
    if row[R_ACC_ADDR] != -1:
        acc = load_f32(ocm, row[R_ACC_ADDR], outer * inner)
    elif mode == MAX or mode == ARGMAX:
        acc = np.full(outer * inner, -np.inf, np.float32)
    elif mode == MIN:
        acc = np.full(outer * inner, np.inf, np.float32)
    else:
        acc = np.zeros(outer * inner, np.float32)
    index = np.zeros(outer * inner, np.float32)
    for o in range(outer):
        for i in range(inner):
            base, at = o * length * inner + i, o * inner + i
            a = acc[at]
            for j in range(length):
                v = x[base + j * inner]
                if mode == MAX:
                    if v > a or v != v:
                        a = v
                elif mode == MIN:
                    if v < a or v != v:
                        a = v
                elif mode == ARGMAX:
                    if v > a or (v != v and a == a):
                        a = v
                        index[at] = np.float32(j)
                elif mode == L2:
                    a = a + v * v
                else:
                    a = a + v
            acc[at] = a
    if mode == ARGMAX:
        store_f32(ocm, row[R_OUT_ADDR], index)
    elif row[R_ACC_OUT] == 1:
        store_f32(ocm, row[R_OUT_ADDR], acc)
    else:
        if mode == MEAN:
            divisor = np.float32(row[R_DIVISOR])
            for k in range(acc.size):
                acc[k] = np.divide(acc[k], divisor)
        elif mode == L2:
            for k in range(acc.size):
                acc[k] = np.sqrt(acc[k])
        store_f16(ocm, row[R_OUT_ADDR], acc, tally)


_binary = field_words(OPCODE_BY_NAME["binary"])
B_A_ADDR, B_B_ADDR, B_OUT_ADDR = _binary["a_addr"], _binary["b_addr"], _binary["out_addr"]
B_SHAPE, B_A_STRIDES, B_B_STRIDES = _binary["shape"], _binary["a_strides"], _binary["b_strides"]
B_MODE = _binary["mode"]
ADD, SUB, MUL, DIV, BMAX, BMIN = (int(m) for m in BinaryMode)


@jit
def _span(row, shape_at, strides_at):
    span = 1
    for d in range(4):
        span += (row[shape_at + d] - 1) * row[strides_at + d]
    return span


@jit
def binary(row, ocm, lut, tally):
    """Each result element, in order: its two operands through their strides, one fp32
    operation, f16."""
    s0, s1, s2, s3 = row[B_SHAPE], row[B_SHAPE + 1], row[B_SHAPE + 2], row[B_SHAPE + 3]
    mode = row[B_MODE]
    a = load_f16(ocm, row[B_A_ADDR], _span(row, B_SHAPE, B_A_STRIDES), lut)
    b = load_f16(ocm, row[B_B_ADDR], _span(row, B_SHAPE, B_B_STRIDES), lut)
    sa = row[B_A_STRIDES : B_A_STRIDES + 4]
    sb = row[B_B_STRIDES : B_B_STRIDES + 4]
    y = np.empty(s0 * s1 * s2 * s3, np.float32)
    k = 0
    for i0 in range(s0):
        for i1 in range(s1):
            for i2 in range(s2):
                pa = i0 * sa[0] + i1 * sa[1] + i2 * sa[2]
                pb = i0 * sb[0] + i1 * sb[1] + i2 * sb[2]
                for i3 in range(s3):
                    u, v = a[pa + i3 * sa[3]], b[pb + i3 * sb[3]]
                    if mode == ADD:
                        r = u + v
                    elif mode == SUB:
                        r = u - v
                    elif mode == MUL:
                        r = u * v
                    elif mode == DIV:
                        r = np.float32(np.divide(u, v))  # IEEE: x / 0 is inf or NaN
                    elif mode == BMAX:
                        r = u if (u > v or u != u) else v
                    else:
                        r = u if (u < v or u != u) else v
                    y[k] = r
                    k += 1
    store_f16(ocm, row[B_OUT_ADDR], y, tally)
