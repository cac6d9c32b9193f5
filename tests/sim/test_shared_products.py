"""The Numba engine's threads share large `fc` and `bmm` instructions by blocks of rows: the
interpreter, and the engine on 1, 2 and 3 threads, give the same bytes and counts, whether the
output lies apart from what the instruction reads (each thread stores its chunks as it
computes them) or overlaps it (stored once every chunk is computed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_builders import (
    Staging,
    activation,
    f16_data,
    fc,
    instruction,
    layer_program,
    same_on_any_number_of_threads,
)

from mrvl.isa import Activation
from mrvl.sim.engines.numba import sharing as engine_threads

pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    rows=st.integers(25, 50),
    outs=st.integers(33, 90),
    place=st.sampled_from(["apart", "on_input"]),
    act=st.sampled_from(list(Activation)),
    seed=st.integers(0, 2**16),
)
def test_fcs_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    rows, outs, place, act, seed
):
    """An fc of at least SHARED_MACS multiply-adds (a weight-cache slot's) is cut into blocks
    of rows (the last one short, the last output block narrower than a vector); its output may
    overwrite its input rows."""
    inner = math.ceil(engine_threads.SHARED_MACS / (rows * outs)) + seed % 7
    staging = Staging()
    in_addr = staging.add(f16_data(seed, (rows, inner), True))
    w_addr = staging.add(f16_data(seed + 1, (outs, inner), False))
    b_addr = staging.add(f16_data(seed + 2, outs, False).astype(np.float32))
    out_addr = in_addr if place == "on_input" else staging.reserve(rows * outs * 2)
    code, fields = activation(staging, act, 0.25, 1.5, outs, seed)
    ins = fc(in_addr, rows, inner, outs, w_addr, out_addr, b_addr=b_addr, **fields)
    assert rows * inner * outs >= engine_threads.SHARED_MACS
    same_on_any_number_of_threads(layer_program(staging, [*code, ins], out_addr, (rows, outs)))


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    batch=st.integers(1, 3),
    m=st.integers(20, 40),
    n=st.integers(30, 70),
    trans_a=st.booleans(),
    trans_b=st.booleans(),
    shared=st.sampled_from(["none", "a", "b"]),
    chain=st.sampled_from(["whole", "first", "next", "next_in_place", "on_a"]),
    seed=st.integers(0, 2**16),
)
def test_bmms_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    batch, m, n, trans_a, trans_b, shared, chain, seed
):
    """A bmm of at least SHARED_MACS multiply-adds is cut into blocks of rows of each batch
    (each thread packing the B of the batches it reaches); it may start from fp32 partial sums
    and overwrite them, write fp32 sums, or overwrite its A."""
    k = math.ceil(engine_threads.SHARED_MACS / (batch * m * n)) + seed % 5
    a_count, b_count = 1 if shared == "a" else batch, 1 if shared == "b" else batch
    staging = Staging()
    # Special inputs (infinities, NaNs) only where the result is f16: the engines agree on an
    # fp32 sum's value, but not on the payload of a NaN in it.
    special = chain in ("whole", "on_a")
    a_addr = staging.add(f16_data(seed, (a_count, m * k), special))
    b_addr = staging.add(f16_data(seed + 1, (b_count, k * n), special))
    outputs = batch * m * n
    acc_addr = -1
    if chain.startswith("next"):
        acc_addr = staging.add(f16_data(seed + 2, outputs, False).astype(np.float32))
    acc_out = int(chain in ("first", "next", "next_in_place"))
    out_bytes = outputs * (4 if acc_out else 2)
    out_addr = {"next_in_place": acc_addr, "on_a": a_addr}.get(chain)
    if out_addr is None:
        out_addr = staging.reserve(out_bytes)
    ins = instruction(
        "bmm", a_addr=a_addr, b_addr=b_addr, out_addr=out_addr, batch=batch, m=m, k=k, n=n,
        trans_a=int(trans_a), trans_b=int(trans_b), a_shared=int(shared == "a"),
        b_shared=int(shared == "b"), acc_addr=acc_addr, acc_out=acc_out,
    )  # fmt: skip
    assert batch * m * k * n >= engine_threads.SHARED_MACS
    flat = (out_bytes // 2,)
    same_on_any_number_of_threads(layer_program(staging, [ins], out_addr, flat))


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    outer=st.integers(5, 40),
    length=st.integers(100, 220),
    inner=st.integers(1, 2),
    place=st.sampled_from(["apart", "in_place", "overlap"]),
    seed=st.integers(0, 2**16),
)
def test_softmaxes_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    outer, length, inner, place, seed
):
    """A softmax of at least SHARED_SOFTMAX_VALUES values is cut into chunks of outer indices;
    its output may be its input exactly (each thread writes only the rows it read) or overlap
    it a row further on (stored once every chunk is computed)."""
    values = outer * length * inner
    if values < engine_threads.SHARED_SOFTMAX_VALUES:
        outer = -(-engine_threads.SHARED_SOFTMAX_VALUES // (length * inner))
        values = outer * length * inner
    staging = Staging()
    in_addr = staging.add(f16_data(seed, values, True))
    staging.reserve(2 * length * inner)  # room for the overlapping output
    out_addr = {"in_place": in_addr, "overlap": in_addr + 2 * length * inner}.get(place)
    if out_addr is None:
        out_addr = staging.reserve(2 * values)
    ins = instruction(
        "softmax", in_addr=in_addr, out_addr=out_addr, outer=outer, length=length, inner=inner
    )
    same_on_any_number_of_threads(layer_program(staging, [ins], out_addr, (values,)))


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    rows=st.integers(20, 60),
    length=st.integers(140, 300),
    place=st.sampled_from(["apart", "in_place", "overlap"]),
    seed=st.integers(0, 2**16),
)
def test_layernorms_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    rows, length, place, seed
):
    """A layernorm of at least SHARED_LN_VALUES values is cut into chunks of rows; its output
    may be its input exactly or overlap it a row further on."""
    rows = max(rows, -(-engine_threads.SHARED_LN_VALUES // length))
    values = rows * length
    staging = Staging()
    in_addr = staging.add(f16_data(seed, values, True))
    staging.reserve(2 * length)  # room for the overlapping output
    g_addr = staging.add(f16_data(seed + 1, length, False).astype(np.float32))
    b_addr = staging.add(f16_data(seed + 2, length, False).astype(np.float32))
    out_addr = {"in_place": in_addr, "overlap": in_addr + 2 * length}.get(place)
    if out_addr is None:
        out_addr = staging.reserve(2 * values)
    ins = instruction(
        "layernorm", in_addr=in_addr, out_addr=out_addr, rows=rows, length=length,
        g_addr=g_addr, b_addr=b_addr, eps=1e-5,
    )  # fmt: skip
    same_on_any_number_of_threads(layer_program(staging, [ins], out_addr, (values,)))
