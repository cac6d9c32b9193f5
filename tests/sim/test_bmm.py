"""The `bmm` instruction (a batched product of two activations, isa.md `bmm`): against a float64
reference, the two engines bit for bit (special values included), a reduction cut into blocks
of fp32 partial sums giving the bits of one instruction, and the validator's faults."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_builders import (
    ENGINE_SETTINGS,
    Staging,
    assert_same_bytes,
    f16_data,
    instruction,
    layer_program,
    run_both,
)

from mrvl.sim import SimulatorError, validate

pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")

SETTINGS = ENGINE_SETTINGS


def bmm(a_addr, b_addr, out_addr, batch, m, k, n, **fields) -> object:
    defaults = dict(trans_a=0, trans_b=0, a_shared=0, b_shared=0, acc_addr=-1, acc_out=0)
    tile = fields.pop("tile", 0)
    return instruction(
        "bmm",
        tile,
        a_addr=a_addr,
        b_addr=b_addr,
        out_addr=out_addr,
        batch=batch,
        m=m,
        k=k,
        n=n,
        **(defaults | fields),
    )


def operands(seed, batch, m, k, n, trans_a, trans_b, a_shared, b_shared, special=False):
    """A and B as stored, and as [batch, m, k] / [batch, k, n] float64 for the reference."""
    a = f16_data(seed, (1 if a_shared else batch, *((k, m) if trans_a else (m, k))), special)
    b = f16_data(seed + 1, (1 if b_shared else batch, *((n, k) if trans_b else (k, n))), special)
    a64 = a.astype(np.float64).transpose(0, 2, 1) if trans_a else a.astype(np.float64)
    b64 = b.astype(np.float64).transpose(0, 2, 1) if trans_b else b.astype(np.float64)
    return a, b, np.broadcast_to(a64, (batch, m, k)), np.broadcast_to(b64, (batch, k, n))


def run_bmm(a, b, batch, m, k, n, trans_a, trans_b, a_shared, b_shared) -> np.ndarray:
    """One `bmm` of the stored A and B on both engines (their bytes compared); its output."""
    staging = Staging()
    a_addr, b_addr = staging.add(a), staging.add(b)
    out_addr = staging.reserve(batch * m * n * 2)
    ins = bmm(
        a_addr, b_addr, out_addr, batch, m, k, n,
        trans_a=int(trans_a), trans_b=int(trans_b), a_shared=int(a_shared), b_shared=int(b_shared),
    )  # fmt: skip
    (y,) = run_both(layer_program(staging, [ins], out_addr, (batch, m, n)), [])
    return y


SHAPES = dict(
    batch=st.integers(1, 5),
    m=st.integers(1, 9),
    k=st.integers(1, 70),
    n=st.integers(1, 20),
    trans_a=st.booleans(),
    trans_b=st.booleans(),
    a_shared=st.booleans(),
    b_shared=st.booleans(),
    seed=st.integers(0, 2**16),
)


@SETTINGS
@given(**SHAPES)
def test_bmm_matches_a_float64_reference_on_both_engines(
    batch, m, k, n, trans_a, trans_b, a_shared, b_shared, seed
):
    """Each output within one f16 rounding of the exact product plus the fp32 sum's error
    (k roundings of at most half an fp32 ulp of the running sum of magnitudes), saturated at
    +-65504 as the ISA stores it."""
    a, b, a64, b64 = operands(seed, batch, m, k, n, trans_a, trans_b, a_shared, b_shared)
    y = run_bmm(a, b, batch, m, k, n, trans_a, trans_b, a_shared, b_shared)
    exact = np.clip(a64 @ b64, -65504.0, 65504.0)
    magnitude = np.abs(a64) @ np.abs(b64)
    bound = np.abs(exact) * 2.0**-11 + magnitude * k * 2.0**-24 + 2.0**-25
    assert y.shape == (batch, m, n)
    assert np.all(np.abs(y.astype(np.float64) - exact) <= bound)


@SETTINGS
@given(**SHAPES, special=st.booleans())
def test_bmm_engines_agree_on_special_values(
    batch, m, k, n, trans_a, trans_b, a_shared, b_shared, seed, special
):
    a, b, _, _ = operands(seed, batch, m, k, n, trans_a, trans_b, a_shared, b_shared, special)
    run_bmm(a, b, batch, m, k, n, trans_a, trans_b, a_shared, b_shared)


@SETTINGS
@given(
    batch=st.integers(1, 3),
    m=st.integers(1, 6),
    k=st.integers(2, 90),
    n=st.integers(1, 12),
    cuts=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3),
    trans_a=st.booleans(),
    trans_b=st.booleans(),
    seed=st.integers(0, 2**16),
    special=st.booleans(),
)
def test_a_reduction_cut_into_blocks_gives_the_bits_of_one_instruction(
    batch, m, k, n, cuts, trans_a, trans_b, seed, special
):
    """The chain the lowering emits for a reduction too long for a tile: the first block
    writes fp32 partial sums (acc_out), each next one continues them (acc_addr), the last
    rounds to f16. Same bytes as one bmm over all of k, on both engines."""
    bounds = sorted({0, k, *(int(c * (k - 1)) + 1 for c in cuts)})
    a, b, _, _ = operands(seed, batch, m, k, n, trans_a, trans_b, False, False, special)
    staging = Staging()
    whole_out = staging.reserve(batch * m * n * 2)
    a_addr, b_addr = staging.add(a), staging.add(b)
    whole = [
        bmm(a_addr, b_addr, whole_out, batch, m, k, n, trans_a=int(trans_a), trans_b=int(trans_b))
    ]
    (expected,) = run_both(layer_program(staging, whole, whole_out, (batch, m, n)), [])

    staging = Staging()
    chain, acc = [], -1
    for index, (k0, k1) in enumerate(zip(bounds, bounds[1:])):
        last = k1 == k
        a_block = a[:, k0:k1, :] if trans_a else a[:, :, k0:k1]
        b_block = b[:, :, k0:k1] if trans_b else b[:, k0:k1, :]
        a_at, b_at = staging.add(a_block), staging.add(b_block)
        out = staging.reserve(batch * m * n * (2 if last else 4))
        chain.append(
            bmm(
                a_at, b_at, out, batch, m, k1 - k0, n, trans_a=int(trans_a),
                trans_b=int(trans_b), acc_addr=acc, acc_out=int(not last),
            )
        )  # fmt: skip
        acc = out
    (blocked,) = run_both(layer_program(staging, chain, acc, (batch, m, n)), [])
    assert_same_bytes([expected], [blocked])


def _program(**fields):
    staging = Staging()
    a_addr = staging.add(np.ones((2, 3, 4), np.float16))
    b_addr = staging.add(np.ones((2, 4, 5), np.float16))
    out_addr = staging.reserve(2 * 3 * 5 * 4)
    base = dict(a_addr=a_addr, b_addr=b_addr, out_addr=out_addr, batch=2, m=3, k=4, n=5)
    return layer_program(staging, [bmm(**(base | fields))], out_addr, (2, 3, 5))


def test_a_valid_bmm_runs():
    (y,) = run_both(_program(), [])
    np.testing.assert_array_equal(y, np.full((2, 3, 5), 4.0, np.float16))


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"k": 0}, "k >= 1"),
        ({"trans_a": 2}, "trans_a in (0, 1)"),
        ({"acc_out": -1}, "acc_out in (0, 1)"),
        ({"b_addr": 10**9}, "operand B"),
        ({"m": 40000}, "output"),
        ({"acc_addr": 10**8}, "partial sums"),
    ],
)
def test_a_bad_bmm_is_refused_before_it_runs(fields, message):
    with pytest.raises(SimulatorError, match="bmm") as err:
        validate(_program(**fields))
    assert message in str(err.value)
