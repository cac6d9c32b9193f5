"""The normalization instructions (`softmax`) on both engines: against float64 references
(within the documented error), bit-identical to each other on hypothesis-generated rows with
special values, and exp32 exactly as docs/isa.md states it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_builders import Staging, instruction, layer_program, run_both

from mrvl.sim import SimulatorError, prepare
from mrvl.sim.engines.numba.normalization import exp32 as numba_exp32
from mrvl.sim.numerics import exp32

pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")

SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
SPECIAL_F16 = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, -65504, 6e-8, 11.0], np.float16)


def softmax_program(x: np.ndarray, axis: int):
    """x (f16, any rank) staged in OCM, one softmax over `axis`, the result out as 'y'."""
    outer = int(np.prod(x.shape[:axis]))
    length, inner = x.shape[axis], int(np.prod(x.shape[axis + 1 :]))
    staging = Staging()
    in_addr = staging.add(x)
    out_addr = staging.reserve(x.size * 2)
    ins = instruction(
        "softmax", in_addr=in_addr, out_addr=out_addr, outer=outer, length=length, inner=inner
    )
    return layer_program(staging, [ins], out_addr, x.shape)


def softmax64(x: np.ndarray, axis: int) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_exp32_is_within_two_fp32_ulps_and_the_engines_agree_on_every_half_difference():
    """Every difference of two f16 values softmax can form lies in [-131008, 0]; exp32 is
    within 2 fp32 ulps of exp on [-80, 0] and both engines give its bits for every f16 value."""
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    d = -np.abs(halves.astype(np.float32))
    tail = np.array([np.nan, -np.inf], np.float32)
    d = np.concatenate([d, np.linspace(-80, 0, 100001, dtype=np.float32), tail])
    got = exp32(d)
    compiled = np.array([numba_exp32(v) for v in d], np.float32)
    np.testing.assert_array_equal(compiled.view(np.uint32), got.view(np.uint32))
    inside = d >= -80
    want = np.exp(d[inside].astype(np.float64))
    ulp = np.spacing(want.astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got[inside] - want) / ulp) <= 2.0
    assert np.isnan(got[-2]) and got[-1] == np.float32(np.exp(np.float64(-80.0)))
    assert exp32(np.float32(0.0)) == 1.0


@pytest.mark.parametrize(
    "shape, axis", [((4, 10), 1), ((2, 3, 5, 7), 1), ((2, 3, 5, 7), 2), ((6, 33), 0), ((3, 1), 1)]
)
def test_softmax_matches_float64_on_both_engines(shape, axis):
    """Within an f16 rounding of the exact softmax of the f16 inputs: exp32, the fp32 sum and
    the division add a few fp32 ulps."""
    x = (np.random.default_rng(sum(shape)).standard_normal(shape) * 4).astype(np.float16)
    (y,) = run_both(softmax_program(x, axis), [])
    want = softmax64(x, axis)
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2**-11 + 1e-6, atol=2**-25)
    ones = y.astype(np.float64).sum(axis=axis)
    np.testing.assert_allclose(ones, 1.0, rtol=0, atol=x.shape[axis] * 2**-11)


def test_softmax_spec_order_by_hand():
    """The documented steps, written out with numpy float32 for one row: max, exp32, the
    sum in order, one division per element."""
    row = np.array([1.5, -3.0, 0.25, 2.0, -0.5], np.float16)
    (y,) = run_both(softmax_program(row[None, :], 1), [])
    x = row.astype(np.float32)
    e = exp32(x - x.max())
    total = np.float32(0.0)
    for v in e:
        total = np.float32(total + v)
    np.testing.assert_array_equal(y[0], (e / total).astype(np.float16))


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    data=st.data(),
    scale=st.sampled_from([0.01, 1.0, 30.0, 3000.0]),
    special=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_softmax_engines_agree(shape, data, scale, special, seed):
    axis = data.draw(st.integers(0, len(shape) - 1))
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(np.float16)
    if special:
        picks = rng.random(shape) < 0.15
        x[picks] = rng.choice(SPECIAL_F16, size=int(picks.sum()))
    (y,) = run_both(softmax_program(x, axis), [])
    # a NaN, +inf (inf - inf) or a row of -inf (whose max is -inf) makes the whole row NaN
    xf = x.astype(np.float32)
    bad = np.any(np.isnan(xf) | (xf == np.inf), axis=axis) | np.all(xf == -np.inf, axis=axis)
    assert np.array_equal(np.isnan(y), np.broadcast_to(np.expand_dims(bad, axis), y.shape))


def test_a_softmax_reaching_outside_the_ocm_fails_validation():
    program = softmax_program(np.zeros((4, 8), np.float16), 1)
    ins = program.code[1]
    program.code[1] = instruction("softmax", **{**ins.fields, "outer": 1 << 20})
    with pytest.raises(SimulatorError, match="softmax.*outside tile 0's OCM"):
        prepare(program)


# ------------------------------------------------------------------------------- layernorm


def layernorm_inputs(seed: int, rows: int, length: int, scale: float, special: bool):
    """A layernorm's rows x [rows, length] (f16, `scale` around a random mean; with `special`,
    a tenth of them special values), scales g of a random magnitude and shifts b, from `seed`."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, length)) * scale + rng.standard_normal()).astype(np.float16)
    if special:
        picks = rng.random(x.shape) < 0.1
        x[picks] = rng.choice(SPECIAL_F16, size=int(picks.sum()))
    g = rng.standard_normal(length) * rng.choice([0.1, 1.0, 1e4])
    b = rng.standard_normal(length)
    return x, g, b


def layernorm_program(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float):
    rows, length = x.shape
    staging = Staging()
    in_addr = staging.add(x)
    g_addr, b_addr = staging.add(g.astype(np.float32)), staging.add(b.astype(np.float32))
    out_addr = staging.reserve(x.size * 2)
    ins = instruction(
        "layernorm", in_addr=in_addr, out_addr=out_addr, rows=rows, length=length,
        g_addr=g_addr, b_addr=b_addr, eps=eps,
    )  # fmt: skip
    return layer_program(staging, [ins], out_addr, x.shape)


def test_layernorm_matches_float64_on_both_engines():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((9, 192)) * 3 + 1).astype(np.float16)
    g, b = rng.standard_normal(192), rng.standard_normal(192)
    (y,) = run_both(layernorm_program(x, g, b, 1e-5), [])
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    want = (x64 - mean) / np.sqrt(var + 1e-5) * g.astype(np.float32) + b.astype(np.float32)
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2**-11, atol=1e-5)


def test_layernorm_spec_order_by_hand():
    """The documented steps for one row in numpy float32: two passes in order, one rstd."""
    x = np.array([[0.5, -2.0, 3.25, 1.0, -0.125]], np.float16)
    g = np.array([1.0, 0.5, -1.0, 2.0, 1.5], np.float32)
    b = np.array([0.0, 0.25, 0.0, -1.0, 0.5], np.float32)
    (y,) = run_both(layernorm_program(x, g, b, 1e-3), [])
    v = x[0].astype(np.float32)
    total = np.float32(0.0)
    for e in v:
        total = np.float32(total + e)
    mean = np.float32(total / np.float32(5))
    squares = np.float32(0.0)
    for e in v:
        d = np.float32(e - mean)
        squares = np.float32(squares + np.float32(d * d))
    var = np.float32(squares / np.float32(5))
    rstd = np.float32(np.float32(1.0) / np.sqrt(np.float32(var + np.float32(1e-3))))
    want = (((v - mean) * rstd) * g + b).astype(np.float16)
    np.testing.assert_array_equal(y[0], want)


@SETTINGS
@given(
    rows=st.integers(1, 6),
    length=st.integers(1, 300),
    scale=st.sampled_from([0.01, 1.0, 300.0]),
    eps=st.sampled_from([0.0, 1e-12, 1e-5, 0.1]),
    special=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_layernorm_engines_agree(rows, length, scale, eps, special, seed):
    x, g, b = layernorm_inputs(seed, rows, length, scale, special)
    run_both(layernorm_program(x, g, b, eps), [])
