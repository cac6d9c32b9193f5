"""The two engines give the same bytes, with no tolerance, on generated programs; validation
stops a bad program before either engine runs; the engine is chosen as documented.

The unit programs of test_sim_interpreter.py also run on both engines (`run_both`), and
test_engines_models.py does the same for the e2e nets, node conformance cases and models.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_builders import (
    ENGINE_SETTINGS,
    Staging,
    activation,
    assert_same_bytes,
    conv,
    copy_bytes,
    corrupt_and_run_both,
    dma,
    end,
    f16_data,
    fc,
    instruction,
    layer_program,
    pool,
    run_both,
    same_on_any_number_of_threads,
)

import mrvl.sim.engines.numba as numba_engine
from mrvl.isa import (
    CONV_CI_BLOCK,
    TABLE_ACTIVATIONS,
    Activation,
    DType,
    IOEntry,
    MemSpace,
    PoolMode,
    Program,
)
from mrvl.sim import (
    ENGINE_ENV,
    SimulatorError,
    SimulatorInputError,
    prepare,
    run,
    simulator_wall_time,
    use_engine,
    validate,
)
from mrvl.sim.engines.numba import mac_tiles, numerics
from mrvl.sim.engines.numba import sharing as engine_threads
from mrvl.sim.engines.numba.dispatch import PACKING
from mrvl.sim.numerics import round_to_f16
from mrvl.sim.weight_cache import CONSTANT, weight_cache

# The generated programs saturate and make NaNs on purpose; the warning is tested on its own.
pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


SETTINGS = ENGINE_SETTINGS


ACTIVATIONS = st.sampled_from(list(Activation))
ACT_A = st.sampled_from([0.0, -1.5, 0.2, 6.0])
ACT_B = st.sampled_from([0.0, 0.5, 6.0, 1e30])


# ------------------------------------------------------------------- numerics, exhaustively


def _numba_round(values: np.ndarray) -> np.ndarray:
    """The engine's f16 store of `values`: at an even address (vector lanes, then a scalar tail)
    and at an odd one (scalar bytes), which must agree on the bits and on the counts."""
    values = np.ascontiguousarray(values, np.float32)
    buffer, tally = np.zeros(values.size * 2 + 1, np.uint8), np.zeros(2, np.int64)
    numerics.store_f16(buffer, 0, values, tally)
    odd_buffer, odd_tally = np.zeros_like(buffer), np.zeros(2, np.int64)
    numerics.store_f16(odd_buffer, 1, values, odd_tally)
    assert odd_buffer[1:].tobytes() == buffer[:-1].tobytes()
    nans = int(np.isnan(values).sum())
    saturated = int((np.abs(values[~np.isnan(values)]) > 65504).sum())  # infinities too
    assert tally.tolist() == odd_tally.tolist() == [saturated, nans]
    return buffer[:-1].view(np.uint16)


def test_f32_to_f16_matches_numpy_on_every_half_and_random_floats():
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32)
    # Every tie between two neighbouring halves, and halfway cases around the subnormals.
    with np.errstate(invalid="ignore"):
        ties = (halves[:-1].astype(np.float64) + halves[1:].astype(np.float64)) / 2
    values = np.concatenate(
        [
            halves.astype(np.float32),
            bits.view(np.float32),
            ties[np.isfinite(ties)].astype(np.float32),
            np.array([2.0**-25, -(2.0**-25), 2.0**-24 * 1.5, 65519.99, 65520, 1e38], np.float32),
        ]
    )
    expected = round_to_f16(values).view(np.uint16)
    np.testing.assert_array_equal(_numba_round(values), expected)
    for size in range(1, 20):  # every length of the scalar tail after the vector lanes
        np.testing.assert_array_equal(_numba_round(values[-size:]), expected[-size:])


def test_f16_to_f32_table_is_numpy_exact():
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    np.testing.assert_array_equal(
        numerics.F16_TO_F32.view(np.uint32), halves.astype(np.float32).view(np.uint32)
    )


def test_f16_loads_widen_every_half_like_the_table_at_any_length_and_address():
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    memory = np.concatenate([np.zeros(1, np.uint16), halves]).view(np.uint8)
    table = numerics.F16_TO_F32
    expected = table.view(np.uint32)
    loaded = numerics.load_f16(memory, 2, halves.size, table)  # the vector lanes
    np.testing.assert_array_equal(loaded.view(np.uint32), expected)
    for size in range(1, 20):  # every length of the tail after the vector lanes
        loaded = numerics.load_f16(memory, 2 * (1 << 16) + 2 - 2 * size, size, table)
        np.testing.assert_array_equal(loaded.view(np.uint32), expected[-size:])
    unaligned = numerics.load_f16(
        np.concatenate([[7], memory[2:40]]).astype(np.uint8), 1, 19, table
    )
    np.testing.assert_array_equal(unaligned.view(np.uint32), expected[:19])


# --------------------------------------------------------------- generated single layers


@st.composite
def conv_layers(draw, group_outputs=st.integers(1, 6), depthwise=False):
    """A conv layer; `group_outputs` draws the output channels per group (narrow runs by
    default; from mac_tiles.NARROW on, the engine's blocked kernel); `depthwise`: many
    groups of one input channel."""
    if depthwise:
        groups, group_channels = draw(st.sampled_from([8, 17, 32])), 1
    else:
        groups = draw(st.sampled_from([1, 1, 2, 3]))
        group_channels = draw(st.sampled_from([1, 2, 5, CONV_CI_BLOCK - 1, CONV_CI_BLOCK + 3]))
    channels = groups * group_channels
    oc_total = groups * draw(group_outputs)
    n = draw(st.integers(1, 2))
    height, width = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    pad_end = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    out_h = (height + pad[0] + pad_end[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    out_w = (width + pad[1] + pad_end[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    if out_h < 1 or out_w < 1:
        pad_end = (pad_end[0] + dilation[0] * kernel[0], pad_end[1] + dilation[1] * kernel[1])
        out_h = (height + pad[0] + pad_end[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
        out_w = (width + pad[1] + pad_end[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    # A tile of the output channels (it may cross group boundaries).
    oc0 = draw(st.integers(0, oc_total - 1))
    tile_channels = draw(st.integers(1, oc_total - oc0))
    return dict(
        n=n,
        in_hwc=(height, width, channels),
        out_hw=(out_h, out_w),
        kernel=kernel,
        stride=stride,
        dilation=dilation,
        pad=pad,
        groups=groups,
        oc0=oc0,
        oc_total=oc_total,
        tile_channels=tile_channels,
        bias=draw(st.booleans()),
        act=draw(ACTIVATIONS),
        act_a=draw(ACT_A),
        act_b=draw(ACT_B),
        seed=draw(st.integers(0, 2**16)),
        special=draw(st.booleans()),
    )


@SETTINGS
@given(
    conv_layers()
    | conv_layers(st.integers(mac_tiles.NARROW, 40))
    | conv_layers(st.integers(1, 2), depthwise=True)
)
def test_conv_engines_agree(layer):
    height, width, channels = layer["in_hwc"]
    in_shape = (layer["n"], height, width, channels)
    out_shape = (layer["n"], *layer["out_hw"], layer["tile_channels"])
    group_channels = channels // layer["groups"]
    staging = Staging()
    x = f16_data(layer["seed"], in_shape, layer["special"])
    w = f16_data(layer["seed"] + 1, (out_shape[3], *layer["kernel"], group_channels), False)
    in_addr, w_addr = staging.add(x), staging.add(w)
    b_addr = staging.add(f16_data(layer["seed"] + 2, out_shape[3], False).astype(np.float32))
    out_addr = staging.reserve(int(np.prod(out_shape)) * 2)
    code, act = activation(
        staging, layer["act"], layer["act_a"], layer["act_b"], out_shape[3], layer["seed"]
    )
    ins = conv(
        in_addr,
        in_shape,
        out_addr,
        out_shape,
        w_addr,
        kernel=layer["kernel"],
        b_addr=b_addr if layer["bias"] else -1,
        stride=layer["stride"],
        pad=layer["pad"],
        dilation=layer["dilation"],
        groups=layer["groups"],
        oc0=layer["oc0"],
        oc_total=layer["oc_total"],
        **act,
    )
    run_both(layer_program(staging, [*code, ins], out_addr, out_shape), [])


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    hw=st.tuples(st.integers(9, 12), st.integers(9, 12)),
    shape=st.sampled_from([((3, 3), CONV_CI_BLOCK + 3, 24), ((1, 1), 3 * CONV_CI_BLOCK + 5, 40)]),
    extra_channels=st.integers(0, 16),
    chain=st.sampled_from(["whole", "first", "next", "next_in_place"]),
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
    in_shape = (1, *hw, channels)
    pad = (kernel[0] // 2, kernel[1] // 2)
    out_shape = (1, *hw, out_channels)
    staging = Staging()
    # Special inputs (infinities, NaNs) only where the result is f16: the engines agree on an
    # fp32 accumulator's value, but not on the payload of a NaN in it.
    x = f16_data(seed, in_shape, chain == "whole")
    w = f16_data(seed + 1, (out_channels, *kernel, channels), False)
    in_addr, w_addr = staging.add(x), staging.add(w)
    b_addr = staging.add(f16_data(seed + 2, out_channels, False).astype(np.float32))
    positions = hw[0] * hw[1]
    acc_addr = -1
    if chain.startswith("next"):  # continue from fp32 partial sums (maybe overwriting them)
        partial = f16_data(seed + 3, positions * out_channels, False).astype(np.float32)
        acc_addr = staging.add(partial)
    acc_out = chain != "whole"
    out_bytes = positions * out_channels * (4 if acc_out else 2)
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
    macs = positions * kernel[0] * kernel[1] * channels * out_channels
    assert macs >= engine_threads.SHARED_MACS
    flat = (out_bytes // 2,)
    same_on_any_number_of_threads(layer_program(staging, [*code, ins], out_addr, flat))


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    hw=st.tuples(st.integers(20, 22), st.integers(20, 22)),
    group_outputs=st.sampled_from([1, 2]),
    chain=st.sampled_from(["whole", "first", "next", "next_in_place"]),
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
    b_addr = staging.add(f16_data(seed + 2, out_channels, False).astype(np.float32))
    positions = out_shape[1] * out_shape[2]
    acc_addr = -1
    if chain.startswith("next"):
        partial = f16_data(seed + 3, positions * out_channels, False).astype(np.float32)
        acc_addr = staging.add(partial)
    acc_out = chain != "whole"
    out_bytes = positions * out_channels * (4 if acc_out else 2)
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
    small = prepare(_valid_conv_program())
    assert_same_bytes(run(small, [], engine="interp"), run(small, [], engine="numba"))
    assert started == []
    staging = Staging()
    shape = (1, 32, 32, 32)
    in_addr = staging.add(f16_data(0, shape, True))
    out_addr = staging.reserve(int(np.prod(shape)) * 2)
    ins = pool(
        in_addr, shape, out_addr, shape, kernel=(3, 3), mode=PoolMode.MAX, in_hw=(32, 32),
        pad=(1, 1), pad_end=(1, 1),
    )  # fmt: skip
    large = prepare(layer_program(staging, [ins], out_addr, shape))
    assert_same_bytes(run(large, [], engine="interp"), run(large, [], engine="numba"))
    assert started == [2]


def test_a_bad_thread_count_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(numba_engine.THREADS_ENV, "zero")
    with pytest.raises(SimulatorInputError, match="MRVL_SIM_THREADS"):
        run(_valid_conv_program(), [], engine="numba")


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
        run(_valid_conv_program(), [], engine="numba")


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


@SETTINGS
@given(
    n=st.integers(1, 2),
    hw=st.tuples(st.integers(1, 7), st.integers(1, 7)),
    channels=st.integers(1, 20),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    pad=st.tuples(st.integers(0, 1), st.integers(0, 1)),
    mode=st.sampled_from(list(PoolMode)),
    count_include_pad=st.integers(0, 1),
    seed=st.integers(0, 2**16),
    special=st.booleans(),
)
def test_pool_engines_agree(
    n, hw, channels, kernel, stride, pad, mode, count_include_pad, seed, special
):
    kernel = (min(kernel[0], hw[0] + pad[0]), min(kernel[1], hw[1] + pad[1]))
    pad = (min(pad[0], kernel[0] - 1), min(pad[1], kernel[1] - 1))  # the ISA's pad < kernel
    pad_end = pad
    out_h = (hw[0] + 2 * pad[0] - kernel[0]) // stride[0] + 1
    out_w = (hw[1] + 2 * pad[1] - kernel[1]) // stride[1] + 1
    in_shape, out_shape = (n, *hw, channels), (n, out_h, out_w, channels)
    staging = Staging()
    in_addr = staging.add(f16_data(seed, in_shape, special))
    out_addr = staging.reserve(int(np.prod(out_shape)) * 2)
    ins = pool(
        in_addr,
        in_shape,
        out_addr,
        out_shape,
        kernel=kernel,
        mode=mode,
        in_hw=hw,
        stride=stride,
        pad=pad,
        pad_end=pad_end,
        count_include_pad=count_include_pad,
    )
    try:
        program = layer_program(staging, [ins], out_addr, out_shape)
        validate(program)
    except SimulatorError as e:  # an output position with no tap inside the window
        assert "has no tap inside" in str(e)
        return
    run_both(program, [])


@SETTINGS
@given(
    rows=st.integers(1, 3),
    inner=st.integers(1, 150),
    outs=st.integers(1, 40),
    bias=st.booleans(),
    act=ACTIVATIONS,
    seed=st.integers(0, 2**16),
    special=st.booleans(),
)
def test_fc_engines_agree(rows, inner, outs, bias, act, seed, special):
    staging = Staging()
    in_addr = staging.add(f16_data(seed, (rows, inner), special))
    w_addr = staging.add(f16_data(seed + 1, (outs, inner), False))
    b_addr = staging.add(f16_data(seed + 2, outs, False).astype(np.float32)) if bias else -1
    out_addr = staging.reserve(rows * outs * 2)
    code, fields = activation(staging, act, 0.25, 0.5, outs, seed)
    ins = fc(in_addr, rows, inner, outs, w_addr, out_addr, b_addr=b_addr, **fields)
    run_both(layer_program(staging, [*code, ins], out_addr, (rows, outs)), [])


@SETTINGS
@given(
    channels=st.integers(1, 17),
    repeats=st.integers(1, 9),
    acts=st.tuples(ACTIVATIONS, ACTIVATIONS, ACTIVATIONS),
    broadcast=st.booleans(),
    seed=st.integers(0, 2**16),
    special=st.booleans(),
    place=st.sampled_from(["apart", "on_a", "on_b", "overlap"]),
)
def test_add_scale_and_mul_engines_agree(channels, repeats, acts, broadcast, seed, special, place):
    """add, then scale, then mul (maybe broadcast per channel), each with its activation (PRELU
    on add and scale, whose elements have channels). The sum goes apart from the addends, onto
    one, or one element past the first (overlapping it: every input is read before any output
    is written)."""
    chosen, tables = [], 0
    for i, act in enumerate(acts):
        if act == Activation.PRELU and i == 2:
            act = Activation.RELU
        if act in TABLE_ACTIVATIONS:
            tables += 1
            if tables > 1:  # the OCM holds the staged constants and one table, not two
                act = Activation.CLIP
        chosen.append(act)
    add_act, scale_act, mul_act = chosen
    count = channels * repeats
    staging = Staging()
    a_addr = staging.add(f16_data(seed, count, special))
    b_addr = staging.add(f16_data(seed + 1, count, special))
    s_addr = staging.add(f16_data(seed + 2, channels, special).astype(np.float32))
    t_addr = staging.add(f16_data(seed + 3, channels, False).astype(np.float32))
    m_addr = staging.add(f16_data(seed + 4, channels if broadcast else count, special))
    sum_addr, scaled_addr = staging.reserve(count * 2), staging.reserve(count * 2)
    sum_addr = {"apart": sum_addr, "on_a": a_addr, "on_b": b_addr, "overlap": a_addr + 2}[place]
    out_addr = staging.reserve(count * 2)
    code = []
    prefix, fields = activation(staging, add_act, -2.0, 3.0, channels, seed)
    fields.setdefault("act_addr", -1)
    code += prefix
    add_channels = channels if add_act == Activation.PRELU else 0
    code.append(
        instruction(
            "add",
            a_addr=a_addr,
            b_addr=b_addr,
            out_addr=sum_addr,
            count=count,
            channels=add_channels,
            **fields,
        )  # fmt: skip
    )
    prefix, fields = activation(staging, scale_act, 0.2, 0.5, channels, seed)
    fields.setdefault("act_addr", -1)
    code += prefix
    code.append(
        instruction(
            "scale",
            in_addr=sum_addr,
            out_addr=scaled_addr,
            count=count,
            channels=channels,
            s_addr=s_addr,
            b_addr=t_addr,
            **fields,
        )
    )
    prefix, fields = activation(staging, mul_act, 0.2, 0.5, 0, seed)
    code += prefix
    code.append(
        instruction(
            "mul",
            a_addr=scaled_addr,
            b_addr=m_addr,
            out_addr=out_addr,
            count=count,
            channels=channels if broadcast else 0,
            **fields,
        )
    )
    run_both(layer_program(staging, code, out_addr, (count,)), [])


@SETTINGS
@given(
    shape=st.tuples(*[st.integers(1, 4)] * 4),
    perm=st.permutations(range(4)),
    dtypes=st.sampled_from(
        [
            (DType.F32, DType.F16),
            (DType.F16, DType.F32),
            (DType.F16, DType.F16),
            (DType.I8, DType.I8),
            (DType.I32, DType.I32),
            (DType.F32, DType.F32),
        ]
    ),
    seed=st.integers(0, 2**16),
)
def test_cvt_engines_agree(shape, perm, dtypes, seed):
    """Conversions and same-type copies (a transposition of f16 goes by whole halves in the
    Numba engine), with permuted layouts."""
    src, dst = dtypes
    rng = np.random.default_rng(seed)
    numpy_type = {
        DType.F32: np.float32,
        DType.F16: np.float16,
        DType.I8: np.int8,
        DType.I32: np.int32,
    }
    if src in (DType.I8, DType.I32):
        x = rng.integers(-100, 100, size=shape).astype(numpy_type[src])
    else:
        with np.errstate(over="ignore"):  # beyond the f16 range: infinities, on purpose
            x = (rng.standard_normal(shape) * 3e4).astype(numpy_type[src])
        x.reshape(-1)[::7] = np.nan
    count = int(np.prod(shape))
    dst_addr = ((x.nbytes + 63) // 64) * 64
    dst_shape = tuple(shape[p] for p in perm)
    program = Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=dst_addr + count * 4,
        io=[IOEntry("x", True, shape, src, 0), IOEntry("y", False, dst_shape, dst, dst_addr)],
        code=[
            instruction(
                "cvt",
                src_addr=0,
                src_dtype=int(src),
                src_shape=shape,
                dst_addr=dst_addr,
                dst_dtype=int(dst),
                perm=tuple(perm),
            ),
            end(),
        ],
        const_base=0,
        consts=b"",
        srcmap=[],
    )
    run_both(program, [x])


@SETTINGS
@given(
    box=st.tuples(*[st.integers(0, 3)] * 3, st.integers(1, 12)),
    elem_bytes=st.sampled_from([1, 2, 4]),
    order=st.permutations(range(4)),
    reverse=st.sampled_from(["none", "all", "outer"]),
    tiles=st.integers(0, 3),
)
def test_dma_engines_agree(box, elem_bytes, order, reverse, tiles):
    """A dense source box stored to a destination with permuted strides, all or the outer three
    maybe negative (runs of 16 bytes and more are copied by memcpy in the Numba engine). The
    box goes to OCM by a multicast from tile 0 to tiles 0..tiles-1 (tiles=0: dst_tiles 0, one
    tile), and the last tile stores it."""
    dense = [0, 0, 0, elem_bytes]
    for d in (2, 1, 0):
        dense[d] = dense[d + 1] * box[d + 1]
    permuted = [0, 0, 0, 0]
    step = elem_bytes
    for d in reversed(order):
        permuted[d] = step
        step *= box[d]
    size = max(step, 1)
    negated = {"none": (), "all": (0, 1, 2, 3), "outer": (0, 1, 2)}[reverse]
    dst_addr = 256 + sum((box[d] - 1) * permuted[d] for d in negated if box[d])
    dst_strides = tuple(-s if d in negated else s for d, s in enumerate(permuted))
    consts = np.arange(256, dtype=np.uint8).tobytes()
    last = max(tiles, 1) - 1
    program = Program(
        target="cn10ka",
        num_tiles=max(tiles, 1),
        ddr_size=256 + size,
        io=[IOEntry("y", False, (size,), DType.I8, 256)],
        code=[
            dma(
                *(MemSpace.DDR, 0, tuple(dense), MemSpace.OCM, 0, tuple(dense), box, elem_bytes),
                dst_tiles=(1 << tiles) - 1,
            ),
            dma(
                *(MemSpace.OCM, 0, tuple(dense), MemSpace.DDR, dst_addr, dst_strides),
                *(box, elem_bytes),
                tile=last,
            ),
            end(),
        ],
        const_base=0,
        consts=consts,
        srcmap=[],
    )
    run_both(program, [])


# ------------------------------------------------------------------------------ validation


def _valid_conv_program() -> Program:
    staging = Staging()
    x_addr = staging.add(np.ones((1, 3, 3, 4), np.float16))
    w_addr = staging.add(np.ones((2, 3, 3, 4), np.float16))
    out_addr = staging.reserve(2 * 2)
    ins = conv(x_addr, (1, 3, 3, 4), out_addr, (1, 1, 1, 2), w_addr, kernel=(3, 3), loc=0)
    return layer_program(staging, [ins], out_addr, (1, 1, 1, 2), srcmap=["/c/Conv"])


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("w_addr", 1 << 18, r"weights \[0x40000, .* outside tile 0's OCM"),
        ("in_addr", -2, "input window .* outside"),
        ("out_addr", (1 << 18) - 2, "output tile .* outside"),
        ("b_addr", (1 << 18) - 4, "bias .* outside"),
        ("kernel", (0, 3), r"kernel=\[0, 3\] breaks `kernel\[d\] >= 1` \(d = 0\)"),
        ("groups", 3, r"groups=3 breaks `in_shape\[3\] % groups == 0`"),
        ("act", 99, "act=99 is not a valid Activation"),
        ("in_shape", (1, 3, 3), "field in_shape must hold 4 integers"),
        ("oc0", 1, r"oc0=1 breaks `0 <= oc0 <= oc_total - out_shape\[3\]`"),
        ("stride", (1, 2**31), "field stride must hold 32-bit integers"),
    ],
)
@pytest.mark.parametrize("engine", ["numba", "interp"])
def test_a_corrupt_instruction_fails_validation_before_any_engine_runs(
    field, value, message, engine
):
    program = _valid_conv_program()
    program.code[1].fields[field] = value
    pattern = rf"instruction 1 \(conv, ONNX node '/c/Conv'\): {message}"
    with pytest.raises(SimulatorError, match=pattern):
        validate(program)
    with simulator_wall_time() as spent, pytest.raises(SimulatorError, match=pattern):
        run(program, [], engine=engine)
    assert spent.calls == 0  # no run was recorded: nothing executed


def test_dma_outside_ddr_and_overlapping_writes_fail_validation():
    bad = copy_bytes(MemSpace.OCM, 0, MemSpace.DDR, (1 << 20) - 4, 8, loc=0)
    program = _valid_conv_program()
    program.code.insert(1, bad)
    with pytest.raises(
        SimulatorError, match=r"instruction 1 \(dma.*destination box .* outside DDR"
    ):
        validate(program)
    overlap = dma(MemSpace.DDR, 0, (0, 0, 2, 1), MemSpace.OCM, 0, (0, 0, 1, 1), (1, 1, 4, 2), 1)
    program = _valid_conv_program()
    program.code.insert(1, overlap)
    with pytest.raises(SimulatorError, match="overlap"):
        validate(program)


def _multicast_program(multicast: bool) -> Program:
    """x [1, 5, 3, 4] and 3x3 conv weights (16 outputs) in the constant pool, brought to the
    same OCM addresses on tiles 0, 1 and 2 by a multicast dma each (issued by tile 1), or by
    one dma per tile; then tile t computes output row t with a conv that waits on both, and
    stores it to row t of y [3, 16] (f16)."""
    channels, outs, tiles = 4, 16, (0, 1, 2)
    staging = Staging()
    x = f16_data(11, (1, 5, 3, channels), False)
    w = f16_data(12, (outs, 3, 3, channels), False)
    x_addr, w_addr = staging.add(x), staging.add(w)
    out_ocm = staging.reserve(outs * 2)
    consts = bytes(staging.blob)
    out_ddr, nbytes = len(consts), outs * 2
    code = []
    for signal, (addr, size) in enumerate(((x_addr, x.nbytes), (w_addr, w.nbytes)), 1):
        ddr_to_ocm = (MemSpace.DDR, addr, MemSpace.OCM, addr, size)
        if multicast:
            code.append(copy_bytes(*ddr_to_ocm, tile=1, signal=signal, dst_tiles=0b111, loc=0))
        else:
            code += [copy_bytes(*ddr_to_ocm, tile=t, signal=signal, loc=0) for t in tiles]
    for t in tiles:
        code.append(
            conv(
                *(x_addr, (1, 5, 3, channels), out_ocm, (1, 1, 1, outs), w_addr),
                kernel=(3, 3),
                orow0=t,
                tile=t,
                waits=(1, 2),
                signal=3 + t,
                loc=1,
            )
        )
        code.append(
            copy_bytes(
                *(MemSpace.OCM, out_ocm, MemSpace.DDR, out_ddr + t * nbytes, nbytes),
                tile=t,
                waits=(3 + t,),
                loc=1,
            )
        )
    return Program(
        target="cn10ka",
        num_tiles=3,
        ddr_size=out_ddr + 3 * nbytes,
        io=[IOEntry("y", False, (3, outs), DType.F16, out_ddr)],
        code=[*code, end()],
        const_base=0,
        consts=consts,
        srcmap=["/m/Load", "/m/Conv"],
    )


@pytest.mark.parametrize(
    "tile, mask, spaces, nbytes, message",
    [
        (0, 0b110, "DDR OCM", 8, r"dst_tiles=0x6 does not include the instruction's own tile 0"),
        (1, 0b1010, "DDR OCM", 8, r"dst_tiles=0xa names tile 3 >= num_tiles 3"),
        (2, -1, "DDR OCM", 8, r"dst_tiles=0xffffffff names tile 3 >= num_tiles 3"),
        (0, 0b11, "DDR DDR", 8, r"dst_tiles=0x3: only a dma from DDR to OCM .* from DDR to DDR"),
        (0, 0b11, "OCM OCM", 8, r"dst_tiles=0x3: only a dma from DDR to OCM .* from OCM to OCM"),
        (0, 0b11, "OCM DDR", 0, r"dst_tiles=0x3: only a dma from DDR to OCM .* from OCM to DDR"),
    ],
)
def test_a_bad_multicast_fails_validation(tile, mask, spaces, nbytes, message):
    """dst_tiles must include the dma's own tile, name only tiles < num_tiles, and copy from
    DDR to OCM; an empty box is no exception."""
    src, dst = (MemSpace[name] for name in spaces.split())
    program = _multicast_program(True)
    program.code[0] = copy_bytes(src, 0, dst, 0x800, nbytes, tile=tile, dst_tiles=mask, loc=0)
    pattern = rf"instruction 0 \(dma, ONNX node '/m/Load'\): {message}"
    with pytest.raises(SimulatorError, match=pattern):
        validate(program)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(data=st.data())
def test_random_corruption_is_rejected_or_runs_the_same_on_both_engines(data):
    """Any integer field of the conv program set to an arbitrary value: validation rejects it
    with SimulatorError, or both engines run it to the same bytes (and neither crashes)."""
    program = _valid_conv_program()
    index = data.draw(st.integers(0, len(program.code) - 1))
    corrupt_and_run_both(data, program, program.code[index])


# --------------------------------------------------------------------------- engine choice


def test_engine_choice_environment_context_and_argument(monkeypatch):
    program = _valid_conv_program()
    with simulator_wall_time() as spent:
        monkeypatch.setenv(ENGINE_ENV, "interp")
        run(program, [])
        monkeypatch.delenv(ENGINE_ENV)
        run(program, [])  # the default
        with use_engine("interp"):
            run(program, [])
            run(program, [], engine="numba")  # an explicit argument wins
    assert spent.calls == 4
    assert set(spent.by_engine) == {"interp", "numba"}
    monkeypatch.setenv(ENGINE_ENV, "fast")
    with pytest.raises(SimulatorInputError, match=r"\$MRVL_SIM_ENGINE='fast' is not a simulator"):
        run(program, [])
    with pytest.raises(SimulatorInputError, match="engine='gpu'"):
        run(program, [], engine="gpu")


def test_numba_cache_lives_in_the_users_cache_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert numba_engine.cache_dir().parent == tmp_path / "mrvl" / "numba"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert numba_engine.cache_dir().parent == tmp_path / "elsewhere"


def test_interpreter_progress_bar_is_silent_off_a_terminal(capfd):
    """The tqdm bar of long interpreter runs goes to stderr only when it is a terminal."""
    from mrvl.sim.engines import reference

    assert reference._progress(10).disable  # pytest's stderr is not a terminal
    run(_valid_conv_program(), [], engine="interp")
    assert capfd.readouterr().err == ""


def test_a_validated_program_keeps_its_target():
    from mrvl.sim import prepare

    valid = prepare(_valid_conv_program())
    with pytest.raises(SimulatorInputError, match="already validated for cn10ka"):
        run(valid, [], target="cnf10kb")


@SETTINGS
@given(
    n=st.integers(1, 2),
    in_hw=st.tuples(st.integers(1, 6), st.integers(1, 6)),
    out_hw=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    channels=st.integers(1, 9),
    method=st.sampled_from(["linear", "nearest_neighbor"]),
    mode=st.sampled_from(["half_pixel", "align_corners", "asymmetric"]),
    seed=st.integers(0, 2**16),
    special=st.booleans(),
)
def test_resize_engines_agree(n, in_hw, out_hw, channels, method, mode, seed, special):
    from mrvl.strided import interpolation_table

    x = f16_data(seed, (n, *in_hw, channels), special)
    ytab = interpolation_table(in_hw[0], out_hw[0], method, mode)
    xtab = interpolation_table(in_hw[1], out_hw[1], method, mode)
    staging = Staging()
    x_addr, y_addr, t_addr = staging.add(x), staging.add(ytab), staging.add(xtab)
    out_shape = (n, *out_hw, channels)
    out_addr = staging.reserve(int(np.prod(out_shape)) * 2)
    ins = instruction(
        "resize",
        in_addr=x_addr,
        in_shape=x.shape,
        row0=0,
        out_addr=out_addr,
        out_shape=out_shape,
        ytab_addr=y_addr,
        xtab_addr=t_addr,
    )
    run_both(layer_program(staging, [ins], out_addr, out_shape), [])


def _two_layers_over_one_weight_address(between, layer="conv"):
    """x, two sets of conv weights in the constant pool, and two 3x3 convs of the same shape
    (two fcs of 7 rows over the same weights flattened, `layer="fc"`: one mac_tile call and
    a tail) reading weights at one OCM address; `between(first, second, w_addr, nbytes,
    scratch)` gives the instructions that put each layer's weights there (a list per layer;
    `scratch`: 64 bytes of OCM nothing else uses). The program, the cache's flags per layer
    and the layers' slots."""
    channels, outs, rows = 5, 32, 7
    staging = Staging()
    x_shape = (1, 3, 3, channels) if layer == "conv" else (rows, 9 * channels)
    x_addr = staging.add(f16_data(7, x_shape, True))
    first = staging.add(f16_data(8, (outs, 3, 3, channels), False))
    second = staging.add(f16_data(9, (outs, 3, 3, channels), False))
    nbytes = outs * 9 * channels * 2
    w_addr = staging.reserve(nbytes)
    out_values = outs if layer == "conv" else rows * outs
    out_addr = staging.reserve(2 * out_values * 2)
    scratch = staging.reserve(64)
    code = []
    for index, setup in enumerate(between(first, second, w_addr, nbytes, scratch)):
        code += setup
        out_at = out_addr + index * out_values * 2
        if layer == "fc":
            code.append(fc(x_addr, rows, 9 * channels, outs, w_addr, out_at))
            continue
        code.append(
            conv(x_addr, (1, 3, 3, channels), out_at, (1, 1, 1, outs), w_addr, kernel=(3, 3))
        )
    valid = prepare(layer_program(staging, code, out_addr, (2, out_values)))
    slots, *_, flags = weight_cache(valid, PACKING).arrays
    layers = [i for i, ins in enumerate(valid.code) if ins.opcode == layer]
    return valid, [int(flags[slots[i]]) & CONSTANT for i in layers], slots[layers]


@pytest.mark.parametrize("layer", ["conv", "fc"])
def test_cached_packed_weights_follow_the_bytes_in_ocm(layer):
    """Two convs (fcs) of the same shape read weights at the same OCM address (one slot of
    the Numba engine's weight cache), each after an OCM-to-OCM copy has put its weights there
    (not a copy of the constant pool): each run, the cache notices the bytes changed and
    repacks; running the program again gives the same."""
    valid, constant, slots = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.OCM, first, MemSpace.OCM, w_addr, nbytes)],
            [copy_bytes(MemSpace.OCM, second, MemSpace.OCM, w_addr, nbytes)],
        ],
        layer,
    )
    assert constant == [0, 0] and slots[0] == slots[1]  # one shared slot, compared at each use
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))
    assert first_run[0][0].tobytes() != first_run[0][1].tobytes()


@pytest.mark.parametrize("layer", ["conv", "fc"])
def test_weights_copied_from_the_constant_pool_are_packed_once(layer):
    """Each conv's (fc's) weights come by DMA from their own part of the constant pool to the
    same OCM address: they are constant (a run uses their packing without comparing bytes),
    each in its own slot, and both engines give the same bytes run after run."""
    valid, constant, slots = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes)],
            [copy_bytes(MemSpace.DDR, second, MemSpace.OCM, w_addr, nbytes)],
        ],
        layer,
    )
    assert all(constant) and slots[0] != slots[1]
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))
    assert first_run[0][0].tobytes() != first_run[0][1].tobytes()


def test_pool_weights_overwritten_in_ocm_are_compared_at_each_use():
    """The first conv reads its weights where the program's first DMA put the pool; then an
    OCM-to-OCM copy writes the other weights over half of them: the second conv's weights are
    not a copy of the pool, so its slot compares them at each run."""
    valid, constant, slots = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes)],
            [copy_bytes(MemSpace.OCM, second, MemSpace.OCM, w_addr, nbytes // 2)],
        ]
    )
    assert constant == [CONSTANT, 0] and slots[0] != slots[1]
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))


def test_warm_runs_skip_the_dmas_only_constant_weights_read():
    """Once a run has packed every constant slot, the DMAs whose bytes only those convs read
    as weights are skipped: here both weight copies, not the program's first DMA (it also
    brings the input) nor its last. Every run gives the interpreter's bytes."""
    valid, constant, _ = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes)],
            [copy_bytes(MemSpace.DDR, second, MemSpace.OCM, w_addr, nbytes)],
        ]
    )
    cache = weight_cache(valid, PACKING)
    dmas = [i for i, ins in enumerate(valid.code) if ins.opcode == "dma"]
    assert cache.weight_only[dmas].tolist() == [0, 1, 1, 0]
    assert not cache.skip().any()
    first_run = run_both(valid, [])
    assert cache.skip()[dmas].tolist() == [0, 1, 1, 0]
    for _ in range(2):
        assert_same_bytes(first_run, run_both(valid, []))


def test_a_dma_whose_bytes_are_also_read_otherwise_is_never_skipped():
    """The second weights are also copied elsewhere in OCM: their DMA is kept, while the first
    conv's weights, read only as weights, may be skipped."""
    valid, _, _ = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes)],
            [
                copy_bytes(MemSpace.DDR, second, MemSpace.OCM, w_addr, nbytes),
                copy_bytes(MemSpace.OCM, w_addr, MemSpace.OCM, scratch, 64),
            ],
        ]
    )
    cache = weight_cache(valid, PACKING)
    dmas = [i for i, ins in enumerate(valid.code) if ins.opcode == "dma"]
    assert cache.weight_only[dmas].tolist() == [0, 1, 0, 0, 0]
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))


def test_no_weights_are_constant_in_a_program_that_writes_its_constant_pool():
    valid, constant, _ = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes)],
            [
                copy_bytes(MemSpace.OCM, second, MemSpace.DDR, first, nbytes),
                copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes),
            ],
        ]
    )
    assert constant == [0, 0]
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))
    assert first_run[0][0].tobytes() != first_run[0][1].tobytes()


def test_tiles_share_a_weight_cache_slot_and_each_gets_its_own_weights():
    """The same conv (one ONNX node, OCM address, shape) on two tiles whose OCMs hold different
    weights at that address: the tiles share one slot of the weight cache, which repacks when
    the other tile's bytes differ, so each tile's output follows its own weights."""
    channels, outs = 5, 32
    staging = Staging()
    x_addr = staging.add(f16_data(4, (1, 3, 3, channels), True))
    first = staging.add(f16_data(5, (outs, 3, 3, channels), False))
    second = staging.add(f16_data(6, (outs, 3, 3, channels), False))
    w_addr = staging.reserve(outs * 9 * channels * 2)
    out_addr = staging.reserve(outs * 2)
    staging.reserve(outs * 2)  # tile 1's output, copied next to tile 0's
    size = len(staging.blob)
    nbytes = outs * 9 * channels * 2
    scratch = size  # DDR bytes past the constants, before the output entry
    code = [copy_bytes(MemSpace.DDR, 0, MemSpace.OCM, 0, size, tile=1)]
    for tile, source in enumerate((first, second)):
        code.append(copy_bytes(MemSpace.OCM, source, MemSpace.OCM, w_addr, nbytes, tile=tile))
    for tile in (0, 1):
        code.append(
            conv(
                x_addr,
                (1, 3, 3, channels),
                out_addr,
                (1, 1, 1, outs),
                w_addr,
                kernel=(3, 3),
                tile=tile,
            )
        )
    code.append(copy_bytes(MemSpace.OCM, out_addr, MemSpace.DDR, scratch, outs * 2, tile=1))
    code.append(copy_bytes(MemSpace.DDR, scratch, MemSpace.OCM, out_addr + outs * 2, outs * 2))
    program = layer_program(staging, code, out_addr, (2, outs), num_tiles=2)
    program.ddr_size += outs * 2
    program.io[0] = IOEntry("y", False, (2, outs), DType.F16, program.ddr_size - outs * 4)
    program.code[-2] = copy_bytes(
        MemSpace.OCM, out_addr, MemSpace.DDR, program.ddr_size - outs * 4, outs * 4
    )
    valid = prepare(program)
    slots = weight_cache(valid, PACKING).arrays[0].tolist()
    assert slots.count(0) == 2 and slots.count(1) == 0  # the two tiles' convs share one slot
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))
    assert first_run[0][0].tobytes() != first_run[0][1].tobytes()


def test_a_multicast_dma_stores_what_one_dma_per_tile_stores():
    """A multicast to tiles 0, 1 and 2 gives each tile's conv the same input and weights as
    one dma per tile would: the engines agree with each other and with that program, each tile
    computes its own rows, and warm runs, which skip the weight copies the Numba engine made
    of the multicast, still do."""
    from mrvl.sim.cycles import model_cycles

    multicast, separate = prepare(_multicast_program(True)), prepare(_multicast_program(False))
    first_run = run_both(multicast, [])
    assert_same_bytes(first_run, run_both(separate, []))
    rows = [row.tobytes() for row in first_run[0]]
    assert len(set(rows)) == 3 and bytes(len(rows[0])) not in rows
    cache = weight_cache(multicast, PACKING)
    assert cache.origin.tolist() == [0, 0, 0, 1, 1, 1, *range(2, len(multicast.code))]
    assert [(ins.tile, ins.fields["dst_tiles"]) for ins in cache.rows.code[:6]] == [
        (t, 0) for t in (0, 1, 2, 0, 1, 2)
    ]
    assert cache.weight_only[:6].tolist() == [0, 0, 0, 1, 1, 1]  # the weights' copies
    assert cache.skip()[:6].tolist() == [0, 0, 0, 1, 1, 1]
    for _ in range(2):
        assert_same_bytes(first_run, run_both(multicast, []))
    assert weight_cache(separate, PACKING).rows is None
    model_cycles(multicast)  # the tokens order every tile's conv after the multicasts
    model_cycles(separate)


@pytest.mark.parametrize("engine", ["numba", "interp"])
def test_a_reused_memory_reloads_a_constant_pool_the_program_wrote(engine):
    """y = the pool's first 8 bytes, read before a DMA overwrites them with the input x: each
    run must see the pool of the binary, not what the previous run left there."""
    from mrvl.sim import new_memory
    from mrvl.sim.simulator import writes_constant_pool

    pool = bytes(range(100, 116))
    ddr = (0, 0, 0, 1)
    program = Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=64,
        io=[IOEntry("x", True, (8,), DType.I8, 0), IOEntry("y", False, (8,), DType.I8, 16)],
        code=[
            dma(MemSpace.DDR, 32, ddr, MemSpace.DDR, 16, ddr, (1, 1, 1, 8), 1),
            dma(MemSpace.DDR, 0, ddr, MemSpace.DDR, 32, ddr, (1, 1, 1, 8), 1),
            end(),
        ],
        const_base=32,
        consts=pool,
        srcmap=[],
    )
    valid = prepare(program)
    assert writes_constant_pool(valid)
    memory = new_memory(valid)
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-100, 100, 8).astype(np.int8)
        (y,) = run(valid, [x], engine=engine, memory=memory)
        assert y.tobytes() == pool[:8]
    program.code.pop(1)  # no more writes to the pool: a reused Memory keeps it
    kept = prepare(program)
    assert not writes_constant_pool(kept)
    memory = new_memory(kept)
    for _ in range(2):
        (y,) = run(kept, [x], engine=engine, memory=memory)
        assert y.tobytes() == pool[:8]
