"""The Numba engine's `qbmm` (docs/isa.md): the reference interpreter's exact integer product
(`reference_int8_bmm.py`) as loops over each batch's rows and columns, both operands first
copied as int64 differences from their zero points ([M, K] and [N, K], so that every dot
product reads two contiguous rows). Every sum is exact in int64 and wrapped to int32 once, so
the bytes are the reference's. `dispatch.py` registers `qbmm_kernel`."""

from __future__ import annotations

import numpy as np

from mrvl.isa import OPCODE_BY_NAME
from mrvl.sim.engines.numba.int8 import (
    finish,
    load_i8,
    load_i32,
    requantize,
    store_i8,
    store_i32,
    table_copy,
    wrap_int32,
)
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.validate import field_words

_qbmm = field_words(OPCODE_BY_NAME["qbmm"])
QB_A_ADDR, QB_B_ADDR, QB_OUT_ADDR = _qbmm["a_addr"], _qbmm["b_addr"], _qbmm["out_addr"]
QB_BATCH, QB_M, QB_K, QB_N = _qbmm["batch"], _qbmm["m"], _qbmm["k"], _qbmm["n"]
QB_TRANS_A, QB_TRANS_B = _qbmm["trans_a"], _qbmm["trans_b"]
QB_A_SHARED, QB_B_SHARED = _qbmm["a_shared"], _qbmm["b_shared"]
QB_A_ZP, QB_B_ZP, QB_OUT_ZP, QB_RQ = _qbmm["a_zp"], _qbmm["b_zp"], _qbmm["out_zp"], _qbmm["rq"]
QB_CLAMP, QB_LUT_ADDR = _qbmm["clamp"], _qbmm["lut_addr"]
QB_ACC_ADDR, QB_ACC_OUT = _qbmm["acc_addr"], _qbmm["acc_out"]


@jit
def _rows(ocm, addr, zp, rows, cols, transposed):
    """int64 [rows, cols] of the int8 matrix at addr minus zp, stored [rows, cols] or (when
    `transposed`) [cols, rows]."""
    raw = load_i8(ocm, addr, rows * cols)
    out = np.empty((rows, cols), np.int64)
    for r in range(rows):
        for c in range(cols):
            out[r, c] = (raw[c * rows + r] if transposed else raw[r * cols + c]) - zp
    return out


@jit
def qbmm_kernel(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    ocm = machine[1][row[1]]
    batch, m, k, n = row[QB_BATCH], row[QB_M], row[QB_K], row[QB_N]
    trans_a, trans_b = row[QB_TRANS_A] != 0, row[QB_TRANS_B] != 0
    a_zp, b_zp, out_zp = np.int64(row[QB_A_ZP]), np.int64(row[QB_B_ZP]), row[QB_OUT_ZP]
    multiplier, shift = row[QB_RQ], row[QB_RQ + 1]
    a_stride = 0 if row[QB_A_SHARED] else m * k
    b_stride = 0 if row[QB_B_SHARED] else k * n
    acc_addr, acc_out = row[QB_ACC_ADDR], row[QB_ACC_OUT] != 0
    lo, hi, lut = row[QB_CLAMP], row[QB_CLAMP + 1], row[QB_LUT_ADDR]
    table, lut = table_copy(ocm, lut)
    out = np.int64(row[QB_OUT_ADDR])
    acc = np.zeros(batch * m * n, np.int64)
    if acc_addr != -1:
        acc = load_i32(ocm, np.int64(acc_addr), batch * m * n)
    for q in range(batch):
        # A as [M, K]; B as [N, K] (B stored [K, N] is its transpose, [N, K] with trans_b)
        a = _rows(ocm, np.int64(row[QB_A_ADDR] + q * a_stride), a_zp, m, k, trans_a)
        b = _rows(ocm, np.int64(row[QB_B_ADDR] + q * b_stride), b_zp, n, k, not trans_b)
        for r in range(m):
            for c in range(n):
                s = np.int64(0)
                for kk in range(k):
                    s += a[r, kk] * b[c, kk]
                at = (q * m + r) * n + c
                acc[at] = wrap_int32(acc[at] + s)
    if acc_out:
        store_i32(ocm, out, acc)
        return 0
    for at in range(acc.size):
        y = out_zp + requantize(acc[at], multiplier, shift)
        store_i8(ocm, out + at, finish(y, lo, hi, table, lut))
    return 0
