"""The reference interpreter's `qbmm` (docs/isa.md): `bmm`'s batched product on int8 data,
the differences from the zero points multiplied and summed exactly (int64, then wrapped to
int32 as the accumulator does), requantized once.

Integer sums do not depend on their order, so the whole product is one numpy matmul. Apart
from `reference_int8.py`, which registers it in `INT8_KERNELS`."""

from __future__ import annotations

import numpy as np

from mrvl.int8 import requantize
from mrvl.isa import Instruction, MemSpace, bmm_shapes
from mrvl.sim.memory import Memory

OCM = MemSpace.OCM


def qbmm(memory: Memory, ins: Instruction, finish, wrap_int32) -> None:
    """acc[q] = (P[q] or 0) + (A[q] − a_zp) · (B[q] − b_zp), wrapped to int32; then the
    accumulator (acc_out) or finish(out_zp + requantize(acc, rq)). `finish` and `wrap_int32`
    are `reference_int8`'s (the clamp and table of every int8 result, the int32 wrap)."""
    f = ins.fields
    a_shape, b_shape, out_shape = bmm_shapes(f)
    a = memory.read(OCM, ins.tile, f["a_addr"], "int8", a_shape).astype(np.int64) - f["a_zp"]
    b = memory.read(OCM, ins.tile, f["b_addr"], "int8", b_shape).astype(np.int64) - f["b_zp"]
    a = a.transpose(0, 2, 1) if f["trans_a"] else a  # [., M, K]
    b = b.transpose(0, 2, 1) if f["trans_b"] else b  # [., K, N]
    acc = np.matmul(a, b)  # a shared operand (batch 1) broadcasts
    if f["acc_addr"] != -1:
        acc = acc + memory.read(OCM, ins.tile, f["acc_addr"], "int32", out_shape)
    acc = wrap_int32(np.broadcast_to(acc, out_shape))
    if f["acc_out"]:
        memory.write(OCM, ins.tile, f["out_addr"], acc)
        return
    y = f["out_zp"] + requantize(acc, *f["rq"])
    memory.write(OCM, ins.tile, f["out_addr"], finish(memory, ins, y))
