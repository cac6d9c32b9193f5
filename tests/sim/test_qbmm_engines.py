"""`qbmm` (docs/isa.md): the int8 product of two activations gives the same bytes on both
engines on generated shapes, transposes, shared operands, zero points, pairs, clamps, tables
and partial sums; it is the exact integer product requantized once; and a reduction cut into
blocks (int32 partial sums) gives the bits of one instruction over the whole of it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_builders import ENGINE_SETTINGS, Staging, instruction, layer_program, run_both
from test_int8_engines import MULTIPLIERS, SHIFTS, ZERO_POINTS, int8_finish, int8_values

from mrvl import int8
from mrvl.isa import DType, bmm_shapes
from mrvl.sim import SimulatorError, validate


def _fields(batch, m, k, n, trans_a=0, trans_b=0, a_shared=0, b_shared=0) -> dict:
    return {
        "batch": batch, "m": m, "k": k, "n": n, "trans_a": trans_a, "trans_b": trans_b,
        "a_shared": a_shared, "b_shared": b_shared,
    }  # fmt: skip


def _staged(staging: Staging, rng, geometry: dict) -> tuple[int, int, np.ndarray, np.ndarray]:
    a_shape, b_shape, _ = bmm_shapes(geometry)
    a, b = int8_values(rng, a_shape), int8_values(rng, b_shape)
    return staging.add(a), staging.add(b), a, b


@ENGINE_SETTINGS
@given(
    dims=st.tuples(*[st.integers(1, 9)] * 4),
    flags=st.tuples(*[st.integers(0, 1)] * 4),
    zps=st.tuples(ZERO_POINTS, ZERO_POINTS, ZERO_POINTS),
    rq=st.tuples(MULTIPLIERS, SHIFTS),
    partial=st.sampled_from(["none", "in", "out", "both"]),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_qbmm_engines_agree(dims, flags, zps, rq, partial, seed, data):
    rng = np.random.default_rng(seed)
    geometry = _fields(*dims, *flags)
    _, _, out_shape = bmm_shapes(geometry)
    staging = Staging()
    a_addr, b_addr, _, _ = _staged(staging, rng, geometry)
    acc_addr = -1
    if partial in ("in", "both"):
        acc = rng.integers(-(2**31), 2**31, out_shape, dtype=np.int64).astype(np.int32)
        acc_addr = staging.add(acc)
    acc_out = int(partial in ("out", "both"))
    out = staging.reserve(int(np.prod(out_shape)) * (4 if acc_out else 1))
    ins = instruction(
        "qbmm",
        a_addr=a_addr,
        b_addr=b_addr,
        out_addr=out,
        **geometry,
        a_zp=zps[0],
        b_zp=zps[1],
        out_zp=zps[2],
        rq=rq,
        **data.draw(int8_finish(staging, rng)),
        acc_addr=acc_addr,
        acc_out=acc_out,
    )
    dtype = DType.I32 if acc_out else DType.I8
    run_both(layer_program(staging, [ins], out, out_shape, dtype=dtype), [])


def _qbmm_program(geometry, a_zp, b_zp, out_zp, rq, k_blocks, seed=0):
    """A product of random operands as a chain over `k_blocks` (k0, kb) of the reduction
    (operands pre-split per block, as the lowering loads them), and the operands."""
    rng = np.random.default_rng(seed)
    a_shape, b_shape, out_shape = bmm_shapes(geometry)
    a, b = int8_values(rng, a_shape), int8_values(rng, b_shape)
    staging = Staging()
    count = int(np.prod(out_shape))
    code, acc = [], -1
    for index, (k0, kb) in enumerate(k_blocks):
        last = index == len(k_blocks) - 1
        a_part = a[:, k0 : k0 + kb, :] if geometry["trans_a"] else a[:, :, k0 : k0 + kb]
        b_part = b[:, :, k0 : k0 + kb] if geometry["trans_b"] else b[:, k0 : k0 + kb, :]
        out = staging.reserve(count * (1 if last else 4))
        code.append(
            instruction(
                "qbmm",
                a_addr=staging.add(np.ascontiguousarray(a_part)),
                b_addr=staging.add(np.ascontiguousarray(b_part)),
                out_addr=out,
                **{**geometry, "k": kb},
                a_zp=a_zp,
                b_zp=b_zp,
                out_zp=out_zp,
                rq=rq,
                clamp=(-128, 127),
                lut_addr=-1,
                acc_addr=acc,
                acc_out=int(not last),
            )
        )
        acc = out
    return layer_program(staging, code, out, out_shape, dtype=DType.I8), a, b


@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_qbmm_is_the_exact_product_requantized_once(trans_a, trans_b):
    geometry = _fields(3, 5, 11, 4, trans_a, trans_b, b_shared=1)
    scales = (0.02, 0.05, 0.3)
    rq = int8.qmul_params(*scales)
    program, a, b = _qbmm_program(geometry, 4, -7, 2, rq, [(0, 11)])
    (y,) = run_both(program, [])
    da = a.astype(np.int64) - 4
    db = b.astype(np.int64) + 7
    da = da.transpose(0, 2, 1) if trans_a else da
    db = db.transpose(0, 2, 1) if trans_b else db
    want = np.clip(2 + int8.requantize(np.matmul(da, db), *rq), -128, 127)
    np.testing.assert_array_equal(y, want)
    # against the real arithmetic: one rounding of s_a s_b / s_y times the exact sum
    real = np.matmul(da, db) * (scales[0] * scales[1] / scales[2])
    assert np.abs(np.clip(np.rint(real) + 2, -128, 127) - y).max() <= 1


def test_a_reduction_in_blocks_gives_the_bits_of_one_qbmm():
    geometry = _fields(2, 3, 10, 5, 1, 1)
    rq = int8.qmul_params(0.1, 0.1, 0.05)
    (whole,) = run_both(_qbmm_program(geometry, 1, 2, -3, rq, [(0, 10)])[0], [])
    (blocks,) = run_both(_qbmm_program(geometry, 1, 2, -3, rq, [(0, 4), (4, 4), (8, 2)])[0], [])
    assert whole.tobytes() == blocks.tobytes()


def test_qbmm_operands_outside_the_ocm_are_refused():
    staging = Staging()
    program = layer_program(
        staging,
        [
            instruction(
                "qbmm",
                a_addr=10**9,
                b_addr=0,
                out_addr=0,
                **_fields(1, 2, 2, 2),
                a_zp=0,
                b_zp=0,
                out_zp=0,
                rq=(1 << 30, 1),
                clamp=(-128, 127),
                lut_addr=-1,
                acc_addr=-1,
                acc_out=0,
            )  # fmt: skip
        ],
        0,
        (1, 2, 2),
        dtype=DType.I8,
    )
    with pytest.raises(SimulatorError, match="qbmm.*operand A"):
        validate(program)
