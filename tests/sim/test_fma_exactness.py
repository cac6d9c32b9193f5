"""Why the Numba engine's MAC tiles may fuse their multiply-adds: the product of two f16 values
is exact in fp32 (at most 11 x 11 significant bits; magnitudes in [2^-48, 2^32), subnormal
f16 included, inside fp32's normal range), so fma(a, b, c) rounds once to the same bits as
fp32(fp32(a * b) + c), the reference interpreter's `fp32_mac`. Checked against a real FMA
(`llvm.fma.f32` compiled by llvmlite for this CPU, and for a baseline CPU without FMA, where
LLVM calls libm's fmaf) over f16 bit patterns (subnormals, infinities, NaNs) and any fp32
accumulator; then the engine's `mac_rows` (both tile shapes, the edges) against `fp32_mac`."""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
from functools import cache

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrvl.sim.engines.numba.mac_tiles import MAC_CHANNELS, MAC_PIXELS, packed_size
from mrvl.sim.engines.numba.matmul import mac_rows, pack_matrix, rows_scratch
from mrvl.sim.numerics import fp32_mac

FMA_ROWS_IR = """
declare float @llvm.fma.f32(float, float, float)

define void @fma_rows(float* %a, float* %b, float* %c, float* %out, i64 %n) {
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%next, %body]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %pa = getelementptr float, float* %a, i64 %i
  %pb = getelementptr float, float* %b, i64 %i
  %pc = getelementptr float, float* %c, i64 %i
  %po = getelementptr float, float* %out, i64 %i
  %va = load float, float* %pa
  %vb = load float, float* %pb
  %vc = load float, float* %pc
  %r = call float @llvm.fma.f32(float %va, float %vb, float %vc)
  store float %r, float* %po
  %next = add i64 %i, 1
  br label %head
done:
  ret void
}
"""
"""out[i] = fma(a[i], b[i], c[i]), one rounding, by LLVM's own lowering of `llvm.fma`."""

_engines = []  # kept alive: the compiled functions live in them


@cache
def compiled_fma(host: bool):
    """(fma_rows as a ctypes function, its assembly), compiled for this CPU (`host`: its FMA
    instruction) or for the target's baseline CPU, which has none on x86-64 (a call to
    fmaf)."""
    target = llvm.Target.from_default_triple()
    if host:
        machine = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten()
        )
    else:
        machine = target.create_target_machine(cpu="", features="")
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    llvm.add_symbol("fmaf", ctypes.cast(libm.fmaf, ctypes.c_void_p).value)
    module = llvm.parse_assembly(FMA_ROWS_IR)
    module.verify()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    _engines.append(engine)
    pointer = ctypes.POINTER(ctypes.c_float)
    function = ctypes.CFUNCTYPE(None, pointer, pointer, pointer, pointer, ctypes.c_int64)(
        engine.get_function_address("fma_rows")
    )
    return function, machine.emit_assembly(llvm.parse_assembly(FMA_ROWS_IR))


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, host: bool) -> np.ndarray:
    """fma(a, b, c) lane by lane in fp32 (compiled_fma)."""
    a, b, c = (np.ascontiguousarray(v, np.float32) for v in (a, b, c))
    out = np.empty_like(a)
    function, _ = compiled_fma(host)
    pointer = ctypes.POINTER(ctypes.c_float)
    function(*(v.ctypes.data_as(pointer) for v in (a, b, c, out)), a.size)
    return out


def assert_same_bits_or_both_nan(got: np.ndarray, want: np.ndarray) -> None:
    """Every non-NaN result bit for bit (signed zeros, infinities); NaN where NaN. A NaN's
    payload is the first NaN operand's in the instruction's operand order, which LLVM picks
    for a fused or an unfused add alike (mul+add had the same freedom); an f16 store makes
    every NaN 0x7E00."""
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def halves(bits) -> np.ndarray:
    return np.asarray(bits, np.uint16).view(np.float16).astype(np.float32)


F16_BITS = st.integers(0, 0xFFFF)
F16_SPECIAL_BITS = st.sampled_from(
    [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00,
     0x7E00, 0xFE00, 0x7C01, 0x7FFF, 0x3C00, 0x3C01, 0xBC00]
)  # fmt: skip
"""Zeros, the least and greatest subnormals and normals, infinities, quiet and signalling
NaNs, 1 and its neighbour."""
F32_BITS = st.integers(0, 0xFFFF_FFFF)


@pytest.mark.parametrize("host", [True, False], ids=["this_cpu", "baseline_cpu"])
@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    terms=st.lists(
        st.tuples(F16_BITS | F16_SPECIAL_BITS, F16_BITS | F16_SPECIAL_BITS, F32_BITS),
        min_size=1,
        max_size=400,
    )
)
def test_fma_of_f16_factors_is_mul_then_add_in_fp32(host, terms):
    a, b, c = (np.array(column) for column in zip(*terms, strict=True))
    fa, fb, fc = halves(a), halves(b), np.asarray(c, np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):  # inf x 0
        want = fp32_mac(fc, fa, fb)
    assert_same_bits_or_both_nan(fma(fa, fb, fc, host), want)


@pytest.mark.parametrize("host", [True, False], ids=["this_cpu", "baseline_cpu"])
def test_fma_of_f16_factors_is_mul_then_add_for_every_half(host):
    """Every f16 value times every f16 value of a random sample, onto accumulators near the
    product (where the add cancels or rounds most) and anywhere in fp32."""
    rng = np.random.default_rng(0)
    every = halves(np.arange(1 << 16))
    for _ in range(24):
        a = every
        b = halves(rng.integers(0, 1 << 16, every.size))
        scale = rng.choice([1.0, 0.5, 2.0, 1 + 2**-12], every.size).astype(np.float32)
        anywhere = rng.integers(0, 1 << 32, every.size, np.uint64).astype(np.uint32)
        with np.errstate(invalid="ignore", over="ignore"):  # inf x 0, inf - inf
            near = -(a * b) * scale
            for c in (near, anywhere.view(np.float32)):
                assert_same_bits_or_both_nan(fma(a, b, c, host), fp32_mac(c, a, b))


@pytest.mark.parametrize("host", [True, False], ids=["this_cpu", "baseline_cpu"])
def test_fma_of_fp32_factors_is_not_mul_then_add(host):
    """The oracle fuses: with factors of 24 significant bits (an fp32 accumulator as a factor)
    the product rounds, and fma(a, b, -fp32(a * b)) is its rounding error, not mul+add's 0."""
    rng = np.random.default_rng(1)
    a = (1 + rng.integers(1, 1 << 23, 4096) / (1 << 23)).astype(np.float32)
    b = (1 + rng.integers(1, 1 << 23, 4096) / (1 << 23)).astype(np.float32)
    c = -(a * b)
    fused = fma(a, b, c, host)
    assert np.all(fp32_mac(c, a, b) == 0) and np.count_nonzero(fused) > 4000


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64's baseline has no FMA")
def test_the_baseline_cpu_has_no_fma_instruction_and_calls_fmaf():
    """The second oracle is the path of a machine without FMA, not the same instruction."""
    _, assembly = compiled_fma(False)
    assert "fmaf" in assembly and "vfmadd" not in assembly
    _, host_assembly = compiled_fma(True)
    if "fma" in llvm.get_host_cpu_features().flatten().split(","):  # "+fma"
        assert "vfmadd" in host_assembly


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    rows=st.integers(1, 3 * MAC_PIXELS + 1),
    inner=st.integers(1, 40),
    outs=st.integers(1, 5 * MAC_CHANNELS + 3),
    seed=st.integers(0, 2**16),
)
def test_mac_rows_is_the_sequential_fp32_sum(rows, inner, outs, seed):
    """The engine's fused tiles (mac_tile, mac_tile_pair, a last row's mac_tile_row and
    mac_tile_one, the scratch edges) give every
    output the bits of the reference's sequential fp32_mac, on f16 bit patterns of every
    kind (a quarter of them specials)."""
    rng = np.random.default_rng(seed)

    def f16_bits(shape):
        bits = rng.integers(0, 1 << 16, shape).astype(np.uint16)
        specials = np.array([0x0001, 0x83FF, 0x7C00, 0xFC00, 0x7E00, 0x8000, 0x7BFF], np.uint16)
        picks = rng.random(shape) < 0.25
        bits[picks] = rng.choice(specials, int(picks.sum()))
        return halves(bits)

    x, b = f16_bits((rows, inner)), f16_bits((inner, outs))
    bias = rng.standard_normal(outs).astype(np.float32)
    packed = np.empty(packed_size(outs, inner), np.float32)
    pack_matrix(b.ravel(), 0, inner, outs, False, packed)
    out = np.empty(rows * outs, np.float32)
    mac_rows(x.ravel(), 0, packed, 0, rows, inner, outs, bias, 0, 0, out, 0, rows_scratch())
    want = np.broadcast_to(bias, (rows, outs)).copy()
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(inner):
            want = fp32_mac(want, x[:, k, None], b[None, k, :])
    assert_same_bits_or_both_nan(out.reshape(rows, outs), want)
