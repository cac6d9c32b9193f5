"""The Numba engine's threads: a shared instruction gives the same bytes on any number of
threads, helper threads start only for work to share, and the default thread count leaves the
cores other work wants."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_builders import (
    Staging,
    activation,
    assert_same_bytes,
    conv,
    f16_data,
    instruction,
    layer_program,
    pool,
    same_on_any_number_of_threads,
    stage_bias_and_partial_sums,
    valid_conv_program,
)

import mrvl.sim.engines.numba as numba_engine
from mrvl.isa import (
    CONV_CI_BLOCK,
    TABLE_ACTIVATIONS,
    Activation,
    PoolMode,
)
from mrvl.sim import (
    SimulatorInputError,
    prepare,
    run,
)
from mrvl.sim.engines.numba import sharing as engine_threads

# The generated programs saturate and make NaNs on purpose; the warning is tested on its own.
pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


ACTIVATIONS = st.sampled_from(list(Activation))
CHAINS = st.sampled_from(["whole", "first", "next", "next_in_place"])
"""Where a conv stands in its chain of input-channel blocks (`stage_bias_and_partial_sums`)."""


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    hw=st.tuples(st.integers(9, 12), st.integers(9, 12)),
    shape=st.sampled_from([((3, 3), CONV_CI_BLOCK + 3, 24), ((1, 1), 3 * CONV_CI_BLOCK + 5, 40)]),
    extra_channels=st.integers(0, 16),
    chain=CHAINS,
    act=ACTIVATIONS,
    seed=st.integers(0, 2**16),
)
def test_convs_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    hw, shape, extra_channels, chain, act, seed
):
    """Convs with at least SHARED_MACS multiply-adds are split by output positions over the
    engine's threads; a span may end inside a mac_tile call's group, and a chain of
    input-channel blocks reads and writes fp32 partial sums, apart (written as computed) or
    in place (stored after every thread has computed). The interpreter, and the engine on 1,
    2 and 3 threads, give the same bytes and counts."""
    kernel, channels, out_channels = shape
    out_channels += extra_channels
    macs = hw[0] * hw[1] * kernel[0] * kernel[1] * channels * out_channels
    assert macs >= engine_threads.SHARED_MACS
    _same_shared_conv(hw, kernel, channels, out_channels, chain, act, seed)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    shape=st.sampled_from([(p, k) for p in (1, 7, 13) for k in ((1, 1), (3, 3))]),
    out_channels=st.integers(17, 90),
    chain=CHAINS,
    act=ACTIVATIONS,
    seed=st.integers(0, 2**16),
)
def test_convs_whose_last_tile_is_one_position_give_the_same_bits(
    shape, out_channels, chain, act, seed
):
    """A conv's tile of one output position (a squeeze-and-excite conv's only one, the last
    of 7 or 13) runs on mac_tile_row and mac_tile_one (`conv_position_blocked`), padding taps
    and a last block narrower than MAC_CHANNELS included."""
    positions, kernel = shape
    channels = 9 + seed % 23  # a table's 128 KiB, weights and sums fit a tile's OCM
    _same_shared_conv((1, positions), kernel, channels, out_channels, chain, act, seed)


def _same_shared_conv(hw, kernel, channels, out_channels, chain, act, seed):
    """A conv over [1, *hw, channels], padded to keep its size, at its place in a `chain` of
    input-channel blocks (`stage_bias_and_partial_sums`): the same bytes and counts on any
    number of threads."""
    in_shape = (1, *hw, channels)
    pad = (kernel[0] // 2, kernel[1] // 2)
    out_shape = (1, *hw, out_channels)
    staging = Staging()
    # Special inputs (infinities, NaNs) only where the result is f16: the engines agree on an
    # fp32 accumulator's value, but not on the payload of a NaN in it.
    x = f16_data(seed, in_shape, chain == "whole")
    w = f16_data(seed + 1, (out_channels, *kernel, channels), False)
    in_addr, w_addr = staging.add(x), staging.add(w)
    positions = hw[0] * hw[1]
    # "next...": continue from fp32 partial sums (maybe overwriting them)
    b_addr, acc_addr, acc_out, out_bytes = stage_bias_and_partial_sums(
        staging, chain, seed, out_channels, positions
    )
    out_addr = acc_addr if chain == "next_in_place" else staging.reserve(out_bytes)
    code, act_fields = activation(staging, act, 0.25, 1.5, out_channels, seed)
    if acc_out:
        code, act_fields = [], {}
    ins = conv(
        in_addr,
        in_shape,
        out_addr,
        out_shape,
        w_addr,
        kernel=kernel,
        b_addr=b_addr,
        pad=pad,
        acc_addr=acc_addr,
        acc_out=int(acc_out),
        **act_fields,
    )
    flat = (out_bytes // 2,)
    same_on_any_number_of_threads(layer_program(staging, [*code, ins], out_addr, flat))


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    hw=st.tuples(st.integers(20, 22), st.integers(20, 22)),
    group_outputs=st.sampled_from([1, 2]),
    chain=CHAINS,
    on_input=st.booleans(),
    act=ACTIVATIONS,
    seed=st.integers(0, 2**16),
)
def test_depthwise_convs_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    hw, group_outputs, chain, on_input, act, seed
):
    """Depthwise convs with at least SHARED_DEPTHWISE_MACS multiply-adds are split by whole
    output rows over the threads (a row band's tiles), each thread converting the window rows
    and the weights it reads; the output may overwrite the input (and, with two outputs a
    group, the weights after it), or continue fp32 partial sums in place. (Sizes that fit a
    256 KiB tile with fp32 partial sums and results.)"""
    out_channels = 48
    channels = out_channels // group_outputs
    in_shape = (1, *hw, channels)
    out_shape = (1, *hw, out_channels)
    staging = Staging()
    x = f16_data(seed, in_shape, chain == "whole")
    in_addr = staging.add(x)
    w_addr = staging.add(f16_data(seed + 1, (out_channels, 3, 3, 1), False))
    positions = out_shape[1] * out_shape[2]
    b_addr, acc_addr, acc_out, out_bytes = stage_bias_and_partial_sums(
        staging, chain, seed, out_channels, positions
    )
    if chain == "next_in_place":
        out_addr = acc_addr
    else:
        out_addr = in_addr if on_input else staging.reserve(out_bytes)
    code, act_fields = [], {}  # fp32 results take no activation (nor its table's OCM)
    if not acc_out:
        code, act_fields = activation(staging, act, 0.25, 1.5, out_channels, seed)
    ins = conv(
        in_addr, in_shape, out_addr, out_shape, w_addr, kernel=(3, 3), b_addr=b_addr,
        pad=(1, 1), groups=channels, acc_addr=acc_addr, acc_out=int(acc_out),
        **act_fields,
    )  # fmt: skip
    assert positions * 9 * out_channels >= engine_threads.SHARED_DEPTHWISE_MACS
    flat = (out_bytes // 2,)
    same_on_any_number_of_threads(layer_program(staging, [*code, ins], out_addr, flat))


@settings(max_examples=10, deadline=None, derandomize=True)
@given(
    extra=st.integers(0, 40),
    place=st.sampled_from(["apart", "on_a", "overlap"]),
    act=ACTIVATIONS.filter(lambda a: a != Activation.PRELU and a not in TABLE_ACTIVATIONS),
    seed=st.integers(0, 2**16),
)
def test_adds_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    extra, place, act, seed
):
    """An add of at least SHARED_VALUES values is split by values over the threads (a part
    may end inside a vector of F16_LANES); the sum may overwrite an addend, or overlap one a
    value further on, so a thread must not store while another still loads. (A table
    activation's 128 KiB table would not fit the tile's OCM next to 3 such arrays; it is the
    same per-value path of `finish`.)"""
    count = engine_threads.SHARED_VALUES + extra
    staging = Staging()
    a_addr = staging.add(f16_data(seed, count, True))
    b_addr = staging.add(f16_data(seed + 1, count, True))
    out_addr = staging.reserve(count * 2)
    out_addr = {"apart": out_addr, "on_a": a_addr, "overlap": a_addr + 2}[place]
    code, fields = activation(staging, act, -2.0, 3.0, 0, seed)
    fields.setdefault("act_addr", -1)
    ins = instruction(
        "add", a_addr=a_addr, b_addr=b_addr, out_addr=out_addr, count=count, channels=0, **fields
    )
    same_on_any_number_of_threads(layer_program(staging, [*code, ins], out_addr, (count,)))


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    hw=st.tuples(st.integers(32, 40), st.integers(32, 40)),
    mode=st.sampled_from([PoolMode.MAX, PoolMode.AVG]),
    overwrite=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_pools_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    hw, mode, overwrite, seed
):
    """A 3x3 pool with padding and at least SHARED_VALUES outputs is split by output positions
    over the threads; its output may overwrite its input."""
    channels = 32
    in_shape, out_shape = (1, *hw, channels), (1, *hw, channels)
    assert np.prod(out_shape) >= engine_threads.SHARED_VALUES
    staging = Staging()
    in_addr = staging.add(f16_data(seed, in_shape, True))
    out_addr = in_addr if overwrite else staging.reserve(int(np.prod(out_shape)) * 2)
    ins = pool(
        in_addr, in_shape, out_addr, out_shape, kernel=(3, 3), mode=mode, in_hw=hw,
        pad=(1, 1), pad_end=(1, 1),
    )  # fmt: skip
    same_on_any_number_of_threads(layer_program(staging, [ins], out_addr, out_shape))


def large_pool_program():
    """A max pool over (1, 32, 32, 32), 3x3: enough outputs that the threads share it."""
    staging = Staging()
    shape = (1, 32, 32, 32)
    in_addr = staging.add(f16_data(0, shape, True))
    out_addr = staging.reserve(int(np.prod(shape)) * 2)
    ins = pool(
        in_addr, shape, out_addr, shape, kernel=(3, 3), mode=PoolMode.MAX, in_hw=(32, 32),
        pad=(1, 1), pad_end=(1, 1),
    )  # fmt: skip
    return prepare(layer_program(staging, [ins], out_addr, shape))


def test_helper_threads_start_only_for_a_program_with_work_to_share(monkeypatch):
    """A run on several threads starts its helpers only if it shares an instruction
    (`shares_any`): a small program runs on thread 0 alone, a large pool on all of them, and
    both give the interpreter's bytes."""
    from mrvl.sim.engines.numba import dispatch

    started = []
    pool_of = dispatch._helper_pool
    monkeypatch.setattr(
        dispatch, "_helper_pool", lambda count: started.append(count) or pool_of(count)
    )
    monkeypatch.setenv(numba_engine.THREADS_ENV, "3")
    small = prepare(valid_conv_program())
    assert_same_bytes(run(small, [], engine="interp"), run(small, [], engine="numba"))
    assert started == []
    large = large_pool_program()
    assert_same_bytes(run(large, [], engine="interp"), run(large, [], engine="numba"))
    assert started == [2]


def test_a_bad_thread_count_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(numba_engine.THREADS_ENV, "zero")
    with pytest.raises(SimulatorInputError, match="MRVL_SIM_THREADS"):
        run(valid_conv_program(), [], engine="numba")


def _loadavg(tmp_path, running: int) -> str:
    """A /proc/loadavg whose fourth field says `running` tasks are runnable."""
    path = tmp_path / f"loadavg-{running}"
    path.write_text(f"1.00 0.50 0.25 {running}/300 4321\n")
    return str(path)


def test_parallel_workers_divide_the_cores_among_them(monkeypatch, tmp_path):
    """$MRVL_SIM_WORKERS processes share the cores: each defaults to its part, at least one."""
    monkeypatch.delenv(numba_engine.THREADS_ENV, raising=False)
    monkeypatch.setattr(engine_threads, "LOADAVG", _loadavg(tmp_path, 1))  # an idle machine
    cpus = len(os.sched_getaffinity(0))
    monkeypatch.setenv(engine_threads.WORKERS_ENV, "1")
    assert numba_engine.threads() == cpus
    monkeypatch.setenv(engine_threads.WORKERS_ENV, str(cpus + 1))
    assert numba_engine.threads() == 1
    monkeypatch.setenv(numba_engine.THREADS_ENV, "3")  # an explicit count wins
    assert numba_engine.threads() == 3
    monkeypatch.delenv(numba_engine.THREADS_ENV)
    monkeypatch.setenv(engine_threads.WORKERS_ENV, "none")
    with pytest.raises(SimulatorInputError, match="MRVL_SIM_WORKERS"):
        run(valid_conv_program(), [], engine="numba")


def test_the_default_leaves_the_cores_other_tasks_want(monkeypatch, tmp_path):
    """By default a run takes only the CPUs that other runnable tasks leave free (at least
    one), so no helper thread shares a core with another process from the start."""
    monkeypatch.delenv(numba_engine.THREADS_ENV, raising=False)
    monkeypatch.delenv(engine_threads.WORKERS_ENV, raising=False)
    monkeypatch.setattr(engine_threads.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(engine_threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    for running, free in [(1, 4), (2, 3), (4, 1), (9, 1)]:
        monkeypatch.setattr(engine_threads, "LOADAVG", _loadavg(tmp_path, running))
        assert numba_engine.threads() == free
    assert engine_threads.free_cpus(4, str(tmp_path / "missing")) == 4
    # two of eight online CPUs: the others' tasks are spread over all eight
    monkeypatch.setattr(engine_threads.os, "cpu_count", lambda: 8)
    assert engine_threads.free_cpus(2, _loadavg(tmp_path, 2)) == 2
    assert engine_threads.free_cpus(2, _loadavg(tmp_path, 9)) == 1


def test_a_program_no_thread_would_join_counts_no_free_cpu(monkeypatch):
    """A program that runs on one thread whatever the machine (`runs_alone`: no tile plan,
    nothing two threads share) does not read the machine's load at each run, and a large one
    does; the thread variables are checked either way."""
    from mrvl.sim.engines.numba import dispatch

    monkeypatch.delenv(numba_engine.THREADS_ENV, raising=False)
    monkeypatch.delenv(engine_threads.WORKERS_ENV, raising=False)
    reads = []
    free_cpus = engine_threads.free_cpus
    monkeypatch.setattr(
        engine_threads, "free_cpus", lambda cpus: reads.append(cpus) or free_cpus(cpus)
    )
    small = prepare(valid_conv_program())
    assert_same_bytes(run(small, [], engine="interp"), run(small, [], engine="numba"))
    assert reads == []
    cache = dispatch.weight_cache(small, dispatch.PACKING)
    assert dispatch.runs_alone(small if cache.rows is None else cache.rows, cache)
    large = large_pool_program()
    assert_same_bytes(run(large, [], engine="interp"), run(large, [], engine="numba"))
    assert len(reads) == 1
    monkeypatch.setenv(engine_threads.WORKERS_ENV, "none")
    with pytest.raises(SimulatorInputError, match="MRVL_SIM_WORKERS"):
        run(small, [], engine="numba")
