"""The int8 instructions give the same bytes on both engines (no tolerance), on generated
shapes, zero points, rescale pairs, clamps and tables; and validation refuses their illegal
fields and out-of-bounds operands with a message naming the instruction."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_builders import (
    ENGINE_SETTINGS,
    Staging,
    conversion_program,
    copy_bytes,
    corrupt_and_run_both,
    end,
    instruction,
    layer_program,
    pool,
    qconv,
    qfc,
    run_both,
    same_on_any_number_of_threads,
)

from mrvl import int8
from mrvl.isa import DType, IOEntry, MemSpace, PoolMode, Program
from mrvl.isa_int8_resize import fixed_point_table
from mrvl.sim import SimulatorError, validate
from mrvl.sim.engines.numba.int8 import (
    SHARED_QCONV_MACS,
    SHARED_QDEPTHWISE_MACS,
    SHARED_QFC_MACS,
    SHARED_QVALUES,
)
from mrvl.strided import interpolation_table

# dequant to f16 saturates on purpose; the warning is tested on its own.
pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")

ZERO_POINTS = st.integers(-128, 127)
SHIFTS = st.integers(-31, 30)
MULTIPLIERS = st.integers(0, 2**31 - 1) | st.integers(2**30, 2**31 - 1)


@st.composite
def clamps(draw):
    lo = draw(st.integers(-128, 127))
    return lo, draw(st.integers(lo, 127))


@st.composite
def int8_finish(draw, staging: Staging, rng: np.random.Generator) -> dict:
    """clamp and lut_addr: a random clamp, and a random table or none."""
    table = draw(st.booleans())
    lut = staging.add(rng.integers(-128, 128, 256).astype(np.int8)) if table else -1
    return {"clamp": draw(clamps()), "lut_addr": lut}


def int8_values(rng: np.random.Generator, shape) -> np.ndarray:
    """int8 data over the whole range, with the extremes on purpose."""
    values = rng.integers(-128, 128, shape).astype(np.int8)
    flat = values.reshape(-1)
    flat[:: max(1, flat.size // 5)] = rng.choice([-128, 127], flat[:: max(1, flat.size // 5)].size)
    return values


def rescale_pairs(rng: np.random.Generator, count: int, wild: bool) -> np.ndarray:
    """int32 [count, 2] pairs: realistic ones (a conv's factors near 2^-8), or any int32
    multiplier and shift (data in OCM: every value has a defined meaning)."""
    if wild:
        return np.stack(
            [rng.integers(-(2**31), 2**31, count), rng.integers(-40, 40, count)], axis=1
        ).astype(np.int32)
    factors = rng.uniform(1e-4, 2e-2, count)
    return np.array([int8.quantize_multiplier(f) for f in factors], np.int32).reshape(count, 2)


@st.composite
def qconv_layers(draw):
    depthwise = draw(st.booleans())
    if depthwise:
        groups, cg, per_group = draw(st.sampled_from([3, 8, 17])), 1, draw(st.integers(1, 2))
    else:
        groups = draw(st.sampled_from([1, 1, 2, 3]))
        cg, per_group = draw(st.sampled_from([1, 2, 5, 33])), draw(st.integers(1, 6))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    height, width = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    pad = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    out_h = max(1, (height + 2 * pad[0] - extent[0]) // stride[0] + 1)
    out_w = max(1, (width + 2 * pad[1] - extent[1]) // stride[1] + 1)
    oc_total = groups * per_group
    oc0 = draw(st.integers(0, oc_total - 1))
    return dict(
        n=draw(st.integers(1, 2)),
        in_hwc=(height, width, groups * cg),
        out_hw=(out_h, out_w),
        kernel=kernel,
        stride=stride,
        dilation=dilation,
        pad=pad,
        groups=groups,
        oc0=oc0,
        oc_total=oc_total,
        tile_channels=draw(st.integers(1, oc_total - oc0)),
        bias=draw(st.booleans()),
        in_zp=draw(ZERO_POINTS),
        out_zp=draw(ZERO_POINTS),
        wild_pairs=draw(st.booleans()),
        partial=draw(st.booleans()),
        acc_out=draw(st.booleans()),
        seed=draw(st.integers(0, 2**16)),
        data=draw(st.data()),
    )


@ENGINE_SETTINGS
@given(qconv_layers())
def test_qconv_engines_agree(layer):
    rng = np.random.default_rng(layer["seed"])
    height, width, channels = layer["in_hwc"]
    in_shape = (layer["n"], height, width, channels)
    out_shape = (layer["n"], *layer["out_hw"], layer["tile_channels"])
    oc = out_shape[3]
    staging = Staging()
    x = staging.add(int8_values(rng, in_shape))
    w = staging.add(int8_values(rng, (oc, *layer["kernel"], channels // layer["groups"])))
    b = staging.add(rng.integers(-(2**20), 2**20, oc).astype(np.int32))
    rq = staging.add(rescale_pairs(rng, oc, layer["wild_pairs"]))
    partial = staging.add(rng.integers(-(2**31), 2**31, out_shape).astype(np.int32))
    out = staging.reserve(4 * int(np.prod(out_shape)))
    finish = layer["data"].draw(int8_finish(staging, rng))
    ins = qconv(
        x, in_shape, out, out_shape, w,
        kernel=layer["kernel"], stride=layer["stride"], pad=layer["pad"],
        dilation=layer["dilation"], groups=layer["groups"],
        oc0=layer["oc0"], oc_total=layer["oc_total"],
        b_addr=b if layer["bias"] else -1, in_zp=layer["in_zp"], out_zp=layer["out_zp"],
        rq_addr=rq, acc_addr=partial if layer["partial"] else -1, acc_out=int(layer["acc_out"]),
        **finish,
    )  # fmt: skip
    dtype = DType.I32 if layer["acc_out"] else DType.I8
    run_both(layer_program(staging, [ins], out, out_shape, dtype=dtype), [])


@settings(max_examples=10, deadline=None, derandomize=True)
@given(
    hw=st.tuples(st.integers(14, 16), st.integers(14, 16)),
    shape=st.sampled_from(
        [((3, 3), 67, 40, 1), ((1, 1), 301, 40, 1), ((3, 3), 64, 64, 2), ((1, 1), 301, 128, 2)]
    ),
    extra_channels=st.integers(0, 9),
    chain=st.sampled_from(["whole", "first", "next", "next_in_place", "over_input"]),
    zps=st.tuples(ZERO_POINTS, ZERO_POINTS),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_qconvs_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    hw, shape, extra_channels, chain, zps, seed, data
):
    """qconvs with at least SHARED_QCONV_MACS multiply-adds are split by output positions over
    the engine's threads (`int8_conv.qconv_kernel`); a chunk may end inside a block's
    positions, channel counts not a multiple of four pad a group, and a chain of input-channel blocks reads and
    writes int32 partial sums apart (stored as computed) or in place, or the output overwrites
    the input (stored once every thread has computed). The interpreter, and the engine on 1, 2
    and 3 threads, give the same bytes and counts."""
    rng = np.random.default_rng(seed)
    kernel, channels, out_channels, stride = shape
    out_channels += extra_channels
    pad = (kernel[0] // 2, kernel[1] // 2)
    in_shape = (1, *hw, channels)
    out_hw = tuple((size + 2 * p - k) // stride + 1 for size, p, k in zip(hw, pad, kernel))
    out_shape = (1, *out_hw, out_channels)
    positions = out_hw[0] * out_hw[1]
    staging = Staging()
    x = staging.add(int8_values(rng, in_shape))
    w = staging.add(int8_values(rng, (out_channels, *kernel, channels)))
    b = staging.add(rng.integers(-(2**20), 2**20, out_channels).astype(np.int32))
    rq = staging.add(rescale_pairs(rng, out_channels, wild=False))
    acc_addr = -1
    if chain.startswith("next"):
        acc_addr = staging.add(rng.integers(-(2**31), 2**31, out_shape).astype(np.int32))
    acc_out = chain in ("first", "next_in_place") and data.draw(st.booleans())
    out_bytes = positions * out_channels * (4 if acc_out else 1)
    out = {"next_in_place": acc_addr, "over_input": x}.get(chain)
    if out is None:
        out = staging.reserve(out_bytes)
    ins = qconv(
        x, in_shape, out, out_shape, w, kernel=kernel, stride=(stride, stride), pad=pad,
        b_addr=b, in_zp=zps[0], out_zp=zps[1], rq_addr=rq, acc_addr=acc_addr,
        acc_out=int(acc_out), **data.draw(int8_finish(staging, rng)),
    )  # fmt: skip
    macs = positions * kernel[0] * kernel[1] * channels * out_channels
    assert macs >= SHARED_QCONV_MACS
    dtype = DType.I32 if acc_out else DType.I8
    same_on_any_number_of_threads(layer_program(staging, [ins], out, out_shape, dtype=dtype))


@settings(max_examples=6, deadline=None, derandomize=True)
@given(
    in_zp=st.sampled_from([-128, 127, -1, 0]),
    channels=st.integers(1, 6),
    kernel=st.sampled_from([(3, 3), (5, 1), (1, 7)]),
    depthwise=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_qconv_padding_at_any_input_zero_point_gives_the_same_bits_on_any_number_of_threads(
    in_zp, channels, kernel, depthwise, seed
):
    """The engine's window holds the input bytes + 128 and in_zp + 128 in the padding and the
    channels it adds up to a multiple of four (`int8_conv.fill_window_rows`); each sum starts at
    -(in_zp + 128)·Σw. At the extreme zero points (bytes 0 and 255), inputs at the extremes
    and every tap reaching the padding, the interpreter and the engine on 1, 2 and 3 threads
    give the same bytes: a qconv big enough to share (where the OCM holds its output), or a
    depthwise one."""
    rng = np.random.default_rng(seed)
    hw = (16, 15)
    pad = (kernel[0] // 2 + 1, kernel[1] // 2 + 1)
    groups = channels if depthwise else 1
    out_hw = tuple(size + 2 * p - k + 1 for size, p, k in zip(hw, pad, kernel))
    taps = int(np.prod(out_hw)) * kernel[0] * kernel[1] * channels
    most = 120_000 // int(np.prod(out_hw))  # output channels the OCM holds
    out_channels = channels if depthwise else min(-(-SHARED_QCONV_MACS // taps) + 3, most)
    in_shape, out_shape = (1, *hw, channels), (1, *out_hw, out_channels)
    staging = Staging()
    x = staging.add(int8_values(rng, in_shape))
    w = staging.add(int8_values(rng, (out_channels, *kernel, channels // groups)))
    b = staging.add(rng.integers(-(2**20), 2**20, out_channels).astype(np.int32))
    rq = staging.add(rescale_pairs(rng, out_channels, wild=False))
    out = staging.reserve(int(np.prod(out_shape)))
    ins = qconv(
        x, in_shape, out, out_shape, w, kernel=kernel, pad=pad, groups=groups, b_addr=b,
        in_zp=in_zp, out_zp=int(rng.integers(-128, 128)), rq_addr=rq, oc_total=out_channels,
        clamp=(-128, 127), lut_addr=-1,
    )  # fmt: skip
    same_on_any_number_of_threads(layer_program(staging, [ins], out, out_shape))


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    shape=st.sampled_from(
        [((28, 28), (3, 3), 1, 1), ((28, 28), (3, 3), 1, 2), ((26, 22), (5, 5), 1, 1)]
        + [((40, 40), (3, 3), 2, 1)]
    ),
    channels=st.sampled_from([48, 45]),
    chain=st.sampled_from(["whole", "next", "over_input"]),
    zps=st.tuples(ZERO_POINTS, ZERO_POINTS),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_depthwise_qconvs_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    shape, channels, chain, zps, seed, data
):
    """Depthwise qconvs (one input channel a group) of at least SHARED_QDEPTHWISE_MACS
    multiply-adds are split by output positions over the threads, each filling the window rows
    its chunks read (`int8_conv.window_rows`), with strides, dilations, a channel slice (oc0),
    int32 partial sums, or the output over the input (stored once every thread has computed).
    The interpreter, and the engine on 1, 2 and 3 threads, give the same bytes and counts."""
    rng = np.random.default_rng(seed)
    hw, kernel, stride, dilation = shape
    pad = tuple((k - 1) * dilation // 2 for k in kernel)
    oc0 = data.draw(st.sampled_from([0, 5]))
    out_channels = channels - oc0
    in_shape = (1, *hw, channels)
    out_hw = tuple(
        (size + 2 * p - (k - 1) * dilation - 1) // stride + 1 for size, p, k in zip(hw, pad, kernel)
    )
    out_shape = (1, *out_hw, out_channels)
    staging = Staging()
    x = staging.add(int8_values(rng, in_shape))
    w = staging.add(int8_values(rng, (out_channels, *kernel, 1)))
    b = staging.add(rng.integers(-(2**20), 2**20, out_channels).astype(np.int32))
    rq = staging.add(rescale_pairs(rng, out_channels, wild=False))
    acc_addr = -1
    if chain == "next":
        acc_addr = staging.add(rng.integers(-(2**31), 2**31, out_shape).astype(np.int32))
    out = x if chain == "over_input" else staging.reserve(int(np.prod(out_shape)))
    ins = qconv(
        x, in_shape, out, out_shape, w, kernel=kernel, stride=(stride, stride), pad=pad,
        dilation=(dilation, dilation), groups=channels, oc0=oc0, oc_total=channels,
        b_addr=b, in_zp=zps[0], out_zp=zps[1], rq_addr=rq, acc_addr=acc_addr,
        **data.draw(int8_finish(staging, rng)),
    )  # fmt: skip
    assert np.prod(out_shape) * kernel[0] * kernel[1] >= SHARED_QDEPTHWISE_MACS
    same_on_any_number_of_threads(layer_program(staging, [ins], out, out_shape, dtype=DType.I8))


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    extra=st.integers(0, 999),
    layout=st.sampled_from(["apart", "in_place", "over_b", "over_table"]),
    zps=st.tuples(ZERO_POINTS, ZERO_POINTS, ZERO_POINTS),
    scales=st.tuples(*[st.floats(1e-3, 1.0)] * 3),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_qadds_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    extra, layout, zps, scales, seed, data
):
    """A qadd of at least SHARED_QVALUES values is split by values over the threads
    (`int8_spans.span_kernel`): each stores its chunks at once when the output is apart from
    what it reads or is an operand itself, and once every chunk is computed when it overlaps
    the other operand at another offset or the table. The interpreter, and the engine on 1, 2
    and 3 threads, give the same bytes and counts."""
    rng = np.random.default_rng(seed)
    count = SHARED_QVALUES + extra
    staging = Staging()
    a = staging.add(int8_values(rng, count))
    b = staging.add(int8_values(rng, count + 128))  # room for an output 64 bytes on
    lut = staging.add(rng.integers(-128, 128, 256).astype(np.int8))
    out = {"in_place": a, "over_b": b + 64, "over_table": lut - 64}.get(layout)
    if out is None:
        out = staging.reserve(count)
    else:
        staging.reserve(count)  # room for an output that runs past the staged bytes
    finish = data.draw(int8_finish(staging, rng))
    if layout == "over_table":
        finish["lut_addr"] = lut
    ins = instruction(
        "qadd", a_addr=a, b_addr=b, out_addr=out, count=count, a_zp=zps[0], b_zp=zps[1],
        out_zp=zps[2], **int8.qadd_params(*scales), **finish,
    )  # fmt: skip
    same_on_any_number_of_threads(layer_program(staging, [ins], out, (count,), dtype=DType.I8))


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    in_hw=st.sampled_from([(56, 56), (47, 53)]),
    channels=st.sampled_from([24, 21]),
    kernel=st.sampled_from([(3, 3), (2, 2), (1, 3)]),
    stride=st.sampled_from([(1, 1), (2, 2)]),
    mode=st.sampled_from(list(PoolMode)),
    count_include_pad=st.integers(0, 1),
    over_input=st.booleans(),
    zps=st.tuples(ZERO_POINTS, ZERO_POINTS),
    rq=st.tuples(MULTIPLIERS, SHIFTS),
    seed=st.integers(0, 2**16),
)
def test_qpools_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    in_hw, channels, kernel, stride, mode, count_include_pad, over_input, zps, rq, seed
):
    """A qpool of at least SHARED_QVALUES output values times taps is split by output
    positions over the threads, its output apart from its input or over it. The
    interpreter, and the engine on 1, 2 and 3 threads, give the same bytes and counts."""
    pad = tuple(k // 2 for k in kernel)
    out_hw = tuple((h + 2 * p - k) // s + 1 for h, p, k, s in zip(in_hw, pad, kernel, stride))
    rng = np.random.default_rng(seed)
    staging = Staging()
    x = staging.add(int8_values(rng, (1, *in_hw, channels)))
    out_shape = (1, *out_hw, channels)
    out = x if over_input else staging.reserve(int(np.prod(out_shape)))
    ins = pool(
        x, (1, *in_hw, channels), out, out_shape, kernel=kernel, mode=mode, in_hw=in_hw,
        stride=stride, pad=pad, pad_end=pad, count_include_pad=count_include_pad,
        opcode="qpool", in_zp=zps[0], out_zp=zps[1], rq=rq,
    )  # fmt: skip
    assert np.prod(out_shape) * kernel[0] * kernel[1] >= SHARED_QVALUES
    same_on_any_number_of_threads(layer_program(staging, [ins], out, out_shape, dtype=DType.I8))


@settings(max_examples=6, deadline=None, derandomize=True)
@given(
    rows=st.integers(1, 3),
    inner=st.sampled_from([512, 777]),
    bias=st.booleans(),
    over_input=st.booleans(),
    zps=st.tuples(ZERO_POINTS, ZERO_POINTS),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_qfcs_the_threads_share_give_the_same_bits_on_any_number_of_threads(
    rows, inner, bias, over_input, zps, seed, data
):
    """A qfc of at least SHARED_QFC_MACS multiply-adds is split by outputs (across its rows)
    over the threads, its output apart from its operands or over its inputs. The
    interpreter, and the engine on 1, 2 and 3 threads, give the same bytes and counts."""
    outs = -(-SHARED_QFC_MACS // (rows * inner)) + data.draw(st.integers(0, 9))
    rng = np.random.default_rng(seed)
    staging = Staging()
    x = staging.add(int8_values(rng, (rows, max(inner, outs))))
    w = staging.add(int8_values(rng, (outs, inner)))
    b = staging.add(rng.integers(-(2**31), 2**31, outs).astype(np.int32))
    rq = staging.add(rescale_pairs(rng, outs, wild=True))
    out = x if over_input else staging.reserve(rows * outs)
    ins = qfc(
        x, rows, inner, outs, w, out, b_addr=b if bias else -1, in_zp=zps[0], out_zp=zps[1],
        rq_addr=rq, **data.draw(int8_finish(staging, rng)),
    )  # fmt: skip
    same_on_any_number_of_threads(layer_program(staging, [ins], out, (rows, outs), dtype=DType.I8))


def test_a_qconvs_cached_weights_are_repacked_when_the_weights_in_ocm_change():
    """Two qconvs of one weight slot (int8_weights.py: same node, weight address, first
    channel and shape), the weights overwritten between them by a DMA: the second must use the
    new weights, on the first run and on a warm one, as the interpreter does."""
    from mrvl.sim import prepare, run

    rng = np.random.default_rng(5)
    in_shape, out_shape = (1, 6, 6, 67), (1, 6, 6, 40)
    staging = Staging()
    x = staging.add(int8_values(rng, in_shape))
    w = staging.add(int8_values(rng, (40, 3, 3, 67)))
    other = staging.add(int8_values(rng, (40, 3, 3, 67)))
    rq = staging.add(rescale_pairs(rng, 40, wild=False))
    size = int(np.prod(out_shape))
    out = staging.reserve(2 * size)
    fields = dict(kernel=(3, 3), pad=(1, 1), in_zp=-3, out_zp=4, rq_addr=rq)
    code = [
        qconv(x, in_shape, out, out_shape, w, **fields),
        copy_bytes(MemSpace.OCM, other, MemSpace.OCM, w, 40 * 9 * 67),
        qconv(x, in_shape, out + size, out_shape, w, **fields),
    ]
    valid = prepare(layer_program(staging, code, out, (2 * size,), dtype=DType.I8))
    expected = run(valid, [], engine="interp")
    assert expected[0][:size].tobytes() != expected[0][size:].tobytes()
    for _ in range(2):
        assert run(valid, [], engine="numba")[0].tobytes() == expected[0].tobytes()


def test_constant_qconv_weights_are_packed_once_and_their_dmas_skipped_on_warm_runs():
    """Two qconvs read weights at one OCM address, each brought there by a DMA from its own
    part of the constant pool: each has a constant slot (packed once, never compared), and
    once a run has packed them, warm runs skip both DMAs (not the first, which also brings
    the input, nor the last); every run gives the interpreter's bytes."""
    from mrvl.sim import prepare, run
    from mrvl.sim.engines.numba.int8_weights import qweight_cache
    from mrvl.sim.weight_cache import CONSTANT

    rng = np.random.default_rng(6)
    in_shape, out_shape = (1, 6, 6, 67), (1, 6, 6, 40)
    nbytes = 40 * 9 * 67
    staging = Staging()
    x = staging.add(int8_values(rng, in_shape))
    first = staging.add(int8_values(rng, (40, 3, 3, 67)))
    second = staging.add(int8_values(rng, (40, 3, 3, 67)))
    w = staging.reserve(nbytes)
    rq = staging.add(rescale_pairs(rng, 40, wild=False))
    size = int(np.prod(out_shape))
    out = staging.reserve(2 * size)
    fields = dict(kernel=(3, 3), pad=(1, 1), in_zp=-3, out_zp=4, rq_addr=rq)
    code = [
        copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w, nbytes),
        qconv(x, in_shape, out, out_shape, w, **fields),
        copy_bytes(MemSpace.DDR, second, MemSpace.OCM, w, nbytes),
        qconv(x, in_shape, out + size, out_shape, w, **fields),
    ]
    valid = prepare(layer_program(staging, code, out, (2 * size,), dtype=DType.I8))
    cache = qweight_cache(valid)
    slots, *_, flags = cache.arrays
    layers = [i for i, ins in enumerate(valid.code) if ins.opcode == "qconv"]
    dmas = [i for i, ins in enumerate(valid.code) if ins.opcode == "dma"]
    assert slots[layers[0]] != slots[layers[1]]
    assert [int(flags[slots[i]]) & CONSTANT for i in layers] == [CONSTANT, CONSTANT]
    assert cache.weight_only[dmas].tolist() == [0, 1, 1, 0] and not cache.skip().any()
    expected = run(valid, [], engine="interp")
    assert expected[0][:size].tobytes() != expected[0][size:].tobytes()
    assert run(valid, [], engine="numba")[0].tobytes() == expected[0].tobytes()
    assert cache.skip()[dmas].tolist() == [0, 1, 1, 0]
    for _ in range(2):
        assert run(valid, [], engine="numba")[0].tobytes() == expected[0].tobytes()


@ENGINE_SETTINGS
@given(
    rows=st.integers(1, 3),
    inner=st.integers(1, 70),
    outs=st.integers(1, 12),
    bias=st.booleans(),
    in_zp=ZERO_POINTS,
    out_zp=ZERO_POINTS,
    wild=st.booleans(),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_qfc_engines_agree(rows, inner, outs, bias, in_zp, out_zp, wild, seed, data):
    rng = np.random.default_rng(seed)
    staging = Staging()
    x = staging.add(int8_values(rng, (rows, inner)))
    w = staging.add(int8_values(rng, (outs, inner)))
    b = staging.add(rng.integers(-(2**31), 2**31, outs).astype(np.int32))
    rq = staging.add(rescale_pairs(rng, outs, wild))
    out = staging.reserve(rows * outs)
    ins = qfc(
        x,
        rows,
        inner,
        outs,
        w,
        out,
        b_addr=b if bias else -1,
        in_zp=in_zp,
        out_zp=out_zp,
        rq_addr=rq,
        **data.draw(int8_finish(staging, rng)),
    )
    run_both(layer_program(staging, [ins], out, (rows, outs), dtype=DType.I8), [])


@ENGINE_SETTINGS
@given(
    count=st.integers(1, 200),
    zps=st.tuples(ZERO_POINTS, ZERO_POINTS, ZERO_POINTS),
    scales=st.tuples(*[st.floats(1e-3, 1.0)] * 3),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_qadd_engines_agree(count, zps, scales, seed, data):
    rng = np.random.default_rng(seed)
    staging = Staging()
    a, b = staging.add(int8_values(rng, count)), staging.add(int8_values(rng, count))
    out = staging.reserve(count)
    ins = instruction(
        "qadd",
        a_addr=a,
        b_addr=b,
        out_addr=out,
        count=count,
        a_zp=zps[0],
        b_zp=zps[1],
        out_zp=zps[2],
        **int8.qadd_params(*scales),
        **data.draw(int8_finish(staging, rng)),
    )
    run_both(layer_program(staging, [ins], out, (count,), dtype=DType.I8), [])


@ENGINE_SETTINGS
@given(
    pixels=st.integers(1, 40),
    channels=st.integers(1, 12),
    broadcast=st.booleans(),
    zps=st.tuples(ZERO_POINTS, ZERO_POINTS, ZERO_POINTS),
    rq=st.tuples(MULTIPLIERS, SHIFTS),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_qmul_engines_agree(pixels, channels, broadcast, zps, rq, seed, data):
    """Same-shape and per-channel broadcast products, any zero points and pair."""
    rng = np.random.default_rng(seed)
    count = pixels * channels
    staging = Staging()
    a = staging.add(int8_values(rng, count))
    b = staging.add(int8_values(rng, channels if broadcast else count))
    out = staging.reserve(count)
    ins = instruction(
        "qmul",
        a_addr=a,
        b_addr=b,
        out_addr=out,
        count=count,
        channels=channels if broadcast else 0,
        a_zp=zps[0],
        b_zp=zps[1],
        out_zp=zps[2],
        rq=rq,
        **data.draw(int8_finish(staging, rng)),
    )
    run_both(layer_program(staging, [ins], out, (count,), dtype=DType.I8), [])


@ENGINE_SETTINGS
@given(
    count=st.integers(1, 200),
    zps=st.tuples(ZERO_POINTS, ZERO_POINTS),
    rq=st.tuples(MULTIPLIERS, SHIFTS),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_requant_engines_agree(count, zps, rq, seed, data):
    rng = np.random.default_rng(seed)
    staging = Staging()
    x, out = staging.add(int8_values(rng, count)), staging.reserve(count)
    ins = instruction(
        "requant",
        in_addr=x,
        out_addr=out,
        count=count,
        in_zp=zps[0],
        out_zp=zps[1],
        rq=rq,
        **data.draw(int8_finish(staging, rng)),
    )
    run_both(layer_program(staging, [ins], out, (count,), dtype=DType.I8), [])


@ENGINE_SETTINGS
@given(
    n=st.integers(1, 2),
    in_hw=st.tuples(st.integers(1, 7), st.integers(1, 7)),
    channels=st.integers(1, 9),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    mode=st.sampled_from(list(PoolMode)),
    count_include_pad=st.integers(0, 1),
    zps=st.tuples(ZERO_POINTS, ZERO_POINTS),
    rq=st.tuples(MULTIPLIERS, SHIFTS),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_qpool_engines_agree(
    n, in_hw, channels, kernel, stride, mode, count_include_pad, zps, rq, seed, data
):
    kernel = tuple(min(k, h) for k, h in zip(kernel, in_hw))
    pad = tuple(data.draw(st.integers(0, min(k - 1, h))) for k, h in zip(kernel, in_hw))
    pad_end = tuple(data.draw(st.integers(0, min(k - 1, h))) for k, h in zip(kernel, in_hw))
    out_hw = tuple(
        (h + p + e - k) // s + 1 for h, p, e, k, s in zip(in_hw, pad, pad_end, kernel, stride)
    )
    rng = np.random.default_rng(seed)
    staging = Staging()
    x = staging.add(int8_values(rng, (n, *in_hw, channels)))
    out_shape = (n, *out_hw, channels)
    out = staging.reserve(int(np.prod(out_shape)))
    ins = pool(
        x,
        (n, *in_hw, channels),
        out,
        out_shape,
        kernel=kernel,
        mode=mode,
        in_hw=in_hw,
        stride=stride,
        pad=pad,
        pad_end=pad_end,
        count_include_pad=count_include_pad,
        opcode="qpool",
        in_zp=zps[0],
        out_zp=zps[1],
        rq=rq,
    )
    run_both(layer_program(staging, [ins], out, out_shape, dtype=DType.I8), [])


@ENGINE_SETTINGS
@given(
    shape=st.tuples(*[st.integers(1, 4)] * 4),
    perm=st.permutations(range(4)),
    src=st.sampled_from([DType.F32, DType.F16]),
    scale=st.floats(2**-13, 8.0, width=32),
    zp=ZERO_POINTS,
    seed=st.integers(0, 2**16),
)
def test_quant_engines_agree(shape, perm, src, scale, zp, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 128 * scale
    x.reshape(-1)[::5] = np.round(x.reshape(-1)[::5] / scale) * scale + scale / 2  # near ties
    x.reshape(-1)[::7] = rng.choice([np.nan, np.inf, -np.inf, 1e30, -0.0])
    with np.errstate(over="ignore"):
        x = x.astype(np.float32 if src == DType.F32 else np.float16)
    run_both(conversion_program("quant", shape, perm, src, DType.I8, scale, zp), [x])


@ENGINE_SETTINGS
@given(
    shape=st.tuples(*[st.integers(1, 4)] * 4),
    perm=st.permutations(range(4)),
    dst=st.sampled_from([DType.F32, DType.F16]),
    scale=st.floats(2**-13, 1024.0, width=32),
    zp=ZERO_POINTS,
    seed=st.integers(0, 2**16),
)
def test_dequant_engines_agree(shape, perm, dst, scale, zp, seed):
    """To F16, large scales saturate: the counts must agree too (run_both checks them)."""
    q = int8_values(np.random.default_rng(seed), shape)
    run_both(conversion_program("dequant", shape, perm, DType.I8, dst, scale, zp), [q])


# ------------------------------------------------------------------------------- validation


def _requant_program(**fields) -> Program:
    staging = Staging()
    x, out = staging.add(np.zeros(16, np.int8)), staging.reserve(16)
    defaults = dict(in_addr=x, out_addr=out, count=16, in_zp=0, out_zp=0, rq=(1 << 30, 1))
    finish = {"clamp": (-128, 127), "lut_addr": -1}
    ins = instruction("requant", loc=0, **{**defaults, **finish, **fields})
    return layer_program(staging, [ins], out, (16,), dtype=DType.I8, srcmap=["/relu/Relu"])


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"in_zp": 128}, r"in_zp=128 breaks `-128 <= in_zp <= 127`"),
        ({"out_zp": -129}, r"out_zp=-129 breaks `-128 <= out_zp <= 127`"),
        ({"clamp": (5, 4)}, r"clamp=\[5, 4\] breaks `clamp\[0\] <= clamp\[1\]`"),
        ({"clamp": (-200, 4)}, r"clamp=\[-200, 4\] breaks `-128 <= clamp\[d\] <= 127`"),
        ({"rq": (1 << 30, 31)}, r"rq=\[1073741824, 31\] breaks `-31 <= rq\[1\] <= 30`"),
        ({"count": 0}, r"count=0 breaks `count >= 1`"),
        ({"count": 1 << 20}, r"output \[.*\) is outside tile 0's OCM"),
        ({"lut_addr": 262143}, r"int8 table \[.*\) is outside tile 0's OCM"),
    ],
)
def test_illegal_int8_fields_are_refused_naming_the_instruction(fields, message):
    with pytest.raises(SimulatorError, match=r"instruction 1 \(requant, ONNX node '/relu/Relu'\)"):
        validate(_requant_program(**fields))
    with pytest.raises(SimulatorError, match=message):
        validate(_requant_program(**fields))


def test_quant_and_dequant_refuse_other_types_and_bad_scales():
    shape, perm = (1, 2, 3, 4), (0, 1, 2, 3)
    for program, message in [
        (conversion_program("quant", shape, perm, DType.I32, DType.I8, 1.0, 0), "src_dtype"),
        (conversion_program("dequant", shape, perm, DType.I8, DType.I8, 1.0, 0), "dst_dtype"),
        (conversion_program("quant", shape, perm, DType.F32, DType.I8, 0.0, 0), "scale=0.0"),
        (conversion_program("quant", shape, perm, DType.F32, DType.I8, np.inf, 0), "scale=inf"),
        (conversion_program("dequant", shape, perm, DType.I8, DType.F32, np.nan, 0), "scale=nan"),
        (conversion_program("dequant", shape, perm, DType.I8, DType.F32, 1.0, 300), "zp=300"),
    ]:
        with pytest.raises(SimulatorError, match=message):
            validate(program)


def test_a_qconv_whose_pairs_or_partial_sums_leave_the_ocm_is_refused():
    staging = Staging()
    x, w = staging.add(np.zeros((1, 2, 2, 4), np.int8)), staging.add(np.zeros(4, np.int8))
    out = staging.reserve(16)
    for fields, message in [
        ({"rq_addr": 262144 - 4}, "requantization pairs"),
        ({"acc_addr": 262144 - 8}, "partial sums"),
        ({"b_addr": 262144 - 2}, "bias"),
        ({"out_addr": 262144 - 8, "acc_out": 1}, "output tile"),  # int32: 16 bytes
    ]:
        fields = {"out_addr": out, "rq_addr": 0, **fields}
        ins = qconv(x, (1, 2, 2, 4), fields.pop("out_addr"), (1, 2, 2, 1), w, **fields)
        with pytest.raises(SimulatorError, match=message):
            validate(layer_program(staging, [ins], out, (1, 2, 2, 1), dtype=DType.I8))


def _int8_program() -> Program:
    """Every int8 instruction once, on small data: quant and dequant in DDR, the others in
    OCM (each reads the staged constants; their results are not chained)."""
    rng = np.random.default_rng(11)
    staging = Staging()
    x = staging.add(int8_values(rng, (1, 4, 4, 8)))
    w = staging.add(int8_values(rng, (4, 3, 3, 8)))
    b = staging.add(rng.integers(-1000, 1000, 4).astype(np.int32))
    rq = staging.add(rescale_pairs(rng, 8, False))
    lut = staging.add(int8_values(rng, 256))
    f32 = staging.add((rng.standard_normal(32) * 4).astype(np.float32))
    ytab = staging.add(fixed_point_table(interpolation_table(4, 8, "linear", "half_pixel")))
    xtab = staging.add(fixed_point_table(interpolation_table(4, 6, "linear", "align_corners")))
    out = staging.reserve(1024)
    finish = {"clamp": (-100, 120), "lut_addr": lut}
    window = dict(in_addr=x, in_shape=(1, 4, 4, 8), row0=0, orow0=0, stride=(1, 1), pad=(1, 1))
    code = [
        instruction(
            "qconv", **window, out_addr=out, out_shape=(1, 4, 4, 4), kernel=(3, 3),
            dilation=(1, 1), groups=1, oc0=0, oc_total=4, w_addr=w, b_addr=b, in_zp=3,
            out_zp=-2, rq_addr=rq, acc_addr=-1, acc_out=0, **finish,
        ),
        instruction(
            "qpool", **window, out_addr=out, out_shape=(1, 4, 4, 8), kernel=(3, 3),
            mode=int(PoolMode.AVG), in_hw=(4, 4), pad_end=(1, 1), count_include_pad=1,
            in_zp=3, out_zp=0, rq=(1 << 30, 1),
        ),
        qfc(x, 2, 16, 8, w, out, in_zp=1, out_zp=2, rq_addr=rq, **finish),
        instruction(
            "qadd", a_addr=x, b_addr=w, out_addr=out, count=64, a_zp=1, b_zp=-1, out_zp=0,
            **int8.qadd_params(0.1, 0.2, 0.15), **finish,
        ),
        instruction(
            "requant", in_addr=x, out_addr=out, count=64, in_zp=0, out_zp=5,
            rq=(1 << 30, 0), **finish,
        ),
        instruction(
            "qmul", a_addr=x, b_addr=w, out_addr=out, count=64, channels=8, a_zp=1, b_zp=-1,
            out_zp=0, rq=int8.requant_params(0.1 * 0.2, 0.15), **finish,
        ),
        instruction(
            "qresize", in_addr=x, in_shape=(1, 4, 4, 8), row0=0, out_addr=out,
            out_shape=(1, 8, 6, 8), ytab_addr=ytab, xtab_addr=xtab, in_zp=2, out_zp=-1,
            rq=int8.requant_params(0.1 * 2.0**-22, 0.12), **finish,
        ),
    ]  # fmt: skip
    program = layer_program(staging, code, out, (1024,), dtype=DType.I8)
    ddr_out = program.ddr_size
    program.ddr_size += 1024
    conversions = [
        instruction(
            "quant", src_addr=f32, src_dtype=int(DType.F32), src_shape=(1, 2, 4, 4),
            dst_addr=ddr_out, perm=(0, 2, 3, 1), scale=0.05, zp=-3,
        ),
        instruction(
            "dequant", src_addr=x, src_shape=(1, 4, 4, 8), dst_addr=ddr_out + 64,
            dst_dtype=int(DType.F16), perm=(0, 3, 1, 2), scale=0.5, zp=1,
        ),
    ]  # fmt: skip
    program.code[-1:-1] = conversions
    return program


@ENGINE_SETTINGS
@given(data=st.data())
def test_random_corruption_of_int8_instructions_is_rejected_or_runs_the_same(data):
    """Any integer field of an int8 instruction set to an arbitrary value: validation rejects
    it with SimulatorError, or both engines run it to the same bytes (and neither crashes:
    the Numba engine checks nothing itself)."""
    program = _int8_program()
    int8_indices = [i for i, ins in enumerate(program.code) if ins.opcode not in ("dma", "end")]
    ins = program.code[data.draw(st.sampled_from(int8_indices))]
    corrupt_and_run_both(data, program, ins)


def test_the_int8_program_runs_the_same_uncorrupted():
    run_both(_int8_program(), [])


def test_a_damaged_binary_of_int8_instructions_is_a_clear_error():
    """The binary carries the int8 instructions losslessly; a wrong field-word count, an
    opcode byte changed to one no table has, and a cut file are each named."""
    import struct
    import zlib

    from mrvl.binary import HEADER_SIZE, BinaryFormatError, SectionType, decode, encode, read_header

    program = _int8_program()
    data = encode(program)
    decoded = decode(data)  # f32 fields come back as their binary32 values
    assert [ins.opcode for ins in decoded.code] == [ins.opcode for ins in program.code]
    assert encode(decoded) == data
    code = next(s for s in read_header(data).sections if s.type == SectionType.CODE)
    at = code.offset + 4  # the instruction count, then the instructions
    at += 12 + 4 * data[at + 2] + 4 * data[at + 3]  # past the first dma, to the qconv
    assert data[at] == 0x11

    def resealed(changed: bytearray) -> bytes:
        struct.pack_into("<I", changed, HEADER_SIZE - 4, zlib.crc32(bytes(changed[HEADER_SIZE:])))
        return bytes(changed)

    wrong_count = bytearray(data)
    wrong_count[at + 3] = 31  # conv's count, not qconv's 33
    with pytest.raises(BinaryFormatError, match=r"instruction 1 \(qconv\): field count wrong"):
        decode(resealed(wrong_count))
    unknown = bytearray(data)
    unknown[at] = 0x12
    with pytest.raises(BinaryFormatError, match="unknown opcode 0x12 at instruction 1"):
        decode(resealed(unknown))
    with pytest.raises(BinaryFormatError, match="truncated|size"):
        decode(data[: at + 20])


@pytest.mark.parametrize("engine", ["numba", "interp"])
@pytest.mark.parametrize("opcode", ["quant", "dequant"])
def test_a_reused_memory_reloads_a_constant_pool_a_conversion_wrote(engine, opcode):
    """y = the pool's first 8 bytes, read before a quant (or dequant) overwrites them from
    the input: each run on a reused Memory must see the pool of the binary."""
    from mrvl.sim import new_memory, prepare, run
    from mrvl.sim.simulator import writes_constant_pool

    pool = bytes(range(100, 132))
    src, dst = (DType.F32, DType.I8) if opcode == "quant" else (DType.I8, DType.F32)
    dtype_field = {"src_dtype": int(src)} if opcode == "quant" else {"dst_dtype": int(dst)}
    shape = (1, 1, 1, 8)
    program = Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=128,
        io=[IOEntry("x", True, shape, src, 0), IOEntry("y", False, (32,), DType.I8, 64)],
        code=[
            copy_bytes(MemSpace.DDR, 32, MemSpace.DDR, 64, 32),
            instruction(
                opcode, src_addr=0, src_shape=shape, dst_addr=32, perm=(0, 1, 2, 3),
                scale=0.5, zp=1, **dtype_field,
            ),
            end(),
        ],
        const_base=32,
        consts=pool,
        srcmap=[],
    )  # fmt: skip
    valid = prepare(program)
    assert writes_constant_pool(valid)
    memory = new_memory(valid)
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-100, 100, shape)
        x = x.astype(np.float32 if opcode == "quant" else np.int8)
        (y,) = run(valid, [x], engine=engine, memory=memory)
        assert y.tobytes() == pool
