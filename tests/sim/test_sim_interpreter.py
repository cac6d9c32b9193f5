"""The simulator's conv, pool and fc against float64 references and bit-exact invariants
(test_sim_programs.py: whole programs and faults; test_sim_elementwise.py: elementwise
instructions and activations).

Every run goes through both engines (`run_both`): the Numba engine must give the reference
interpreter's bytes on each of these programs."""

from __future__ import annotations

import numpy as np
import pytest
from sim_builders import (
    Staging,
    assert_f16_close,
    conv,
    dma,
    fc,
    layer_program,
    pool,
    random_f16,
    reference_conv,
    reference_pool,
    run_both,
    run_conv,
)

from mrvl.isa import Activation, MemSpace, PoolMode

# Programs here saturate and make NaNs on purpose; the warning is tested in test_saturation.py.
pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


# ------------------------------------------------------------------------------------ conv


@pytest.mark.parametrize(
    "stride, pad, pad_end, dilation",
    [
        ((1, 1), (1, 1), (1, 1), (1, 1)),  # "same" 3x3
        ((2, 2), (1, 0), (0, 1), (1, 1)),  # stride 2, asymmetric padding
        ((1, 2), (2, 2), (2, 2), (2, 2)),  # dilation 2
        ((1, 1), (0, 0), (0, 0), (1, 1)),  # valid
    ],
)
def test_conv_matches_reference(rng, stride, pad, pad_end, dilation):
    x, w, b = (
        random_f16(rng, (2, 9, 8, 5)),
        random_f16(rng, (6, 3, 3, 5)),
        rng.standard_normal(6).astype(np.float32),
    )
    y = run_conv(x, w, b, stride=stride, pad=pad, pad_end=pad_end, dilation=dilation)
    assert_f16_close(
        y, reference_conv(x, w, b, stride=stride, pad=(*pad, *pad_end), dilation=dilation)
    )


def test_conv_without_bias_1x1(rng):
    x, w = random_f16(rng, (1, 4, 4, 16)), random_f16(rng, (8, 1, 1, 16))
    assert_f16_close(run_conv(x, w), reference_conv(x, w, None))


@pytest.mark.parametrize("groups", [2, 6])  # grouped and depthwise
def test_conv_groups(rng, groups):
    x = random_f16(rng, (1, 7, 7, 6))
    w = random_f16(rng, (12, 3, 3, 6 // groups))
    b = rng.standard_normal(12).astype(np.float32)
    y = run_conv(x, w, b, pad=(1, 1), pad_end=(1, 1), groups=groups)
    assert_f16_close(y, reference_conv(x, w, b, pad=(1, 1, 1, 1), groups=groups))


@pytest.mark.parametrize(
    "act, act_a, act_b, reference",
    [
        (Activation.RELU, 0.0, 0.0, lambda v: np.maximum(v, 0)),
        (Activation.CLIP, -0.5, 1.5, lambda v: np.clip(v, -0.5, 1.5)),
        (Activation.LEAKY_RELU, 0.125, 0.0, lambda v: np.where(v < 0, 0.125 * v, v)),
    ],
)
def test_conv_activations(rng, act, act_a, act_b, reference):
    x, w = random_f16(rng, (1, 5, 5, 4)), random_f16(rng, (3, 3, 3, 4))
    y = run_conv(x, w, pad=(1, 1), pad_end=(1, 1), act=act, act_a=act_a, act_b=act_b)
    assert_f16_close(y, reference(reference_conv(x, w, None, pad=(1, 1, 1, 1))))


def tiled_conv_outputs(x, w, b, *, stride, pad, splits):
    """Run the same 3x3 conv as one instruction per output-row range in `splits`, each with
    just the input rows it needs as its window; returns the whole f16 output."""
    n, height, width, channels = x.shape
    out_channels, kh, kw, _ = w.shape
    out_h = (height + 2 * pad - kh) // stride + 1
    out_w = (width + 2 * pad - kw) // stride + 1
    out_shape = (n, out_h, out_w, out_channels)
    staging = Staging()
    w_addr, b_addr = staging.add(w), staging.add(b)
    out_addr = staging.reserve(np.prod(out_shape) * 2)
    compute = []
    for first, stop in zip(splits, splits[1:]):
        row_lo = max(0, first * stride - pad)
        row_hi = min(height, (stop - 1) * stride - pad + kh)
        window = x[:, row_lo:row_hi]
        compute.append(
            conv(
                staging.add(window),
                window.shape,
                out_addr + first * out_w * out_channels * 2,
                (n, stop - first, out_w, out_channels),
                w_addr,
                kernel=(kh, kw),
                b_addr=b_addr,
                row0=row_lo,
                orow0=first,
                stride=(stride, stride),
                pad=(pad, pad),
            )
        )
    (y,) = run_both(layer_program(staging, compute, out_addr, out_shape), [])
    return y


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_row_tiles_equal_one_instruction(rng, stride):
    x, w, b = (
        random_f16(rng, (1, 11, 6, 3)),
        random_f16(rng, (4, 3, 3, 3)),
        rng.standard_normal(4).astype(np.float32),
    )
    out_h = (11 + 2 - 3) // stride + 1
    whole = tiled_conv_outputs(x, w, b, stride=stride, pad=1, splits=[0, out_h])
    split = tiled_conv_outputs(x, w, b, stride=stride, pad=1, splits=[0, 2, out_h])
    np.testing.assert_array_equal(whole.view(np.uint16), split.view(np.uint16))
    assert_f16_close(whole, reference_conv(x, w, b, stride=(stride, stride), pad=(1, 1, 1, 1)))


def test_conv_channel_tiles_select_their_group(rng):
    """Two instructions on two tiles' worth of output channels (oc0 = 0 and 3 of 6, groups=3)
    write the same bits as one instruction for all channels."""
    x, w = random_f16(rng, (1, 5, 5, 6)), random_f16(rng, (6, 3, 3, 2))
    out_shape = (1, 5, 5, 6)
    whole = run_conv(x, w, pad=(1, 1), pad_end=(1, 1), groups=3)
    staging = Staging()
    in_addr = staging.add(x)
    halves = [staging.add(w[:3]), staging.add(w[3:])]
    tiles = [staging.reserve(75 * 2 * 3) for _ in halves]
    compute = [
        conv(
            in_addr,
            x.shape,
            tiles[i],
            (1, 5, 5, 3),
            halves[i],
            kernel=(3, 3),
            pad=(1, 1),
            groups=3,
            oc0=3 * i,
            oc_total=6,
        )
        for i in range(2)
    ]
    # Interleave the two [.., 3] tiles into the [.., 6] output with a strided DMA each.
    out_addr = staging.reserve(150 * 2)
    compute += [
        dma(
            MemSpace.OCM,
            tiles[i],
            (0, 0, 6, 2),
            MemSpace.OCM,
            out_addr + 6 * i,
            (0, 0, 12, 2),
            (1, 1, 25, 3),
            2,
        )
        for i in range(2)
    ]
    (split,) = run_both(layer_program(staging, compute, out_addr, out_shape), [])
    np.testing.assert_array_equal(whole.view(np.uint16), split.view(np.uint16))


def test_conv_accumulates_taps_then_channels_in_fp32():
    """Products along (kw, ci) are [2^24, 1, -2^24, 1] in the documented order kh, kw, ci:
    fp32 gives ((2^24 + 1) - 2^24) + 1 = 1 (the +1 is lost to rounding); channel-major order
    would give 2 and exact arithmetic 2."""
    x = np.array([[[[4096, 1], [4096, 1]]]], np.float16)  # [1, 1, 2, 2]
    w = np.array([[[[4096, 1], [-4096, 1]]]], np.float16)  # [1, KH=1, KW=2, 2]
    assert run_conv(x, w)[0, 0, 0, 0] == 1.0


def test_conv_accumulates_input_channels_in_blocks_of_64():
    """65 channels are two blocks, [0, 64) and [64, 65). Products: 2^24 at (kw 0, ci 0),
    -2^24 at (kw 1, ci 0), 1 at (kw 0, ci 64) and (kw 1, ci 64). Block by block the large
    ones cancel before the ones are added (2); kh, kw, ci over all channels would lose the
    first +1 to rounding (1)."""
    x = np.zeros((1, 1, 2, 65), np.float16)
    x[..., 0], x[..., 64] = 4096, 1
    w = np.zeros((1, 1, 2, 65), np.float16)
    w[0, 0, 0, 0], w[0, 0, 1, 0], w[0, 0, :, 64] = 4096, -4096, 1
    assert run_conv(x, w)[0, 0, 0, 0] == 2.0


def test_conv_split_at_a_block_boundary_continues_the_partial_sums_bit_exactly(rng):
    """A conv over 150 input channels as one instruction, and as two that meet at channel 128
    (a multiple of CONV_CI_BLOCK): the first writes its fp32 accumulator (acc_out), the second
    starts from it (acc_addr) and applies the activation. Same bits, on both engines."""
    x = random_f16(rng, (1, 4, 5, 150))
    w = random_f16(rng, (6, 3, 3, 150), scale=0.1)
    b = rng.standard_normal(6).astype(np.float32)
    whole = run_conv(x, w, b, pad=(1, 1), pad_end=(1, 1), act=Activation.RELU)

    out_shape = (1, 4, 5, 6)
    staging = Staging()
    lo, hi = 128, 150
    x_lo, x_hi = staging.add(x[..., :lo]), staging.add(x[..., lo:hi])
    w_lo, w_hi = staging.add(w[..., :lo]), staging.add(w[..., lo:hi])
    b_addr = staging.add(b)
    partial = staging.reserve(np.prod(out_shape) * 4)
    out_addr = staging.reserve(np.prod(out_shape) * 2)
    common = dict(kernel=(3, 3), pad=(1, 1))
    first = conv(x_lo, (1, 4, 5, lo), partial, out_shape, w_lo, b_addr=b_addr, acc_out=1, **common)
    second = conv(
        x_hi, (1, 4, 5, hi - lo), out_addr, out_shape, w_hi, acc_addr=partial,
        act=Activation.RELU, **common,
    )  # fmt: skip
    (split,) = run_both(layer_program(staging, [first, second], out_addr, out_shape), [])
    assert split.tobytes() == whole.tobytes()


def test_conv_bias_is_the_first_addend():
    x = np.ones((1, 1, 1, 2), np.float16)
    w = np.ones((1, 1, 1, 2), np.float16)
    b = np.array([2.0**24], np.float32)  # 2^24 + 1 + 1 stays 2^24 when the bias comes first
    y = run_conv(x, w, b, act=Activation.CLIP, act_a=0.0, act_b=2.0**24)
    assert y[0, 0, 0, 0] == 65504.0  # and then saturates


def test_conv_output_saturates_instead_of_overflowing():
    x = np.full((1, 1, 1, 4), 60000, np.float16)
    w = np.full((1, 1, 1, 4), -2, np.float16)
    assert run_conv(x, w)[0, 0, 0, 0] == -65504.0


# ------------------------------------------------------------------------------------ pool


def run_pool(x, kernel, *, mode, stride=(1, 1), pad=(0, 0), pad_end=(0, 0), count_include_pad=0):
    n, height, width, channels = x.shape
    out_h = (height + pad[0] + pad_end[0] - kernel[0]) // stride[0] + 1
    out_w = (width + pad[1] + pad_end[1] - kernel[1]) // stride[1] + 1
    out_shape = (n, out_h, out_w, channels)
    staging = Staging()
    in_addr = staging.add(x)
    out_addr = staging.reserve(np.prod(out_shape) * 2)
    ins = pool(
        in_addr,
        x.shape,
        out_addr,
        out_shape,
        kernel=kernel,
        mode=mode,
        in_hw=(height, width),
        stride=stride,
        pad=pad,
        pad_end=pad_end,
        count_include_pad=count_include_pad,
    )
    (y,) = run_both(layer_program(staging, [ins], out_addr, out_shape), [])
    return y


def test_max_pool_padding_never_wins(rng):
    x = -np.abs(random_f16(rng, (1, 6, 6, 3))) - np.float16(1)  # all negative: a zero pad would win
    y = run_pool(x, (3, 3), mode=PoolMode.MAX, stride=(2, 2), pad=(1, 1), pad_end=(1, 1))
    expected = reference_pool(x, (3, 3), mode="max", stride=(2, 2), pad=(1, 1, 1, 1))
    np.testing.assert_array_equal(y.astype(np.float64), expected)  # max is exact


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_avg_pool(rng, count_include_pad):
    x = random_f16(rng, (2, 7, 6, 4))
    y = run_pool(
        x,
        (3, 2),
        mode=PoolMode.AVG,
        stride=(2, 1),
        pad=(1, 1),
        pad_end=(1, 0),
        count_include_pad=count_include_pad,
    )
    expected = reference_pool(
        x,
        (3, 2),
        mode="avg",
        stride=(2, 1),
        pad=(1, 1, 1, 0),
        count_include_pad=bool(count_include_pad),
    )
    assert_f16_close(y, expected)


def test_global_avg_pool_sums_in_fp32(rng):
    x = random_f16(rng, (1, 7, 7, 8))
    y = run_pool(x, (7, 7), mode=PoolMode.AVG)
    taps = x.astype(np.float32).reshape(49, 8)
    acc = np.zeros(8, np.float32)
    for tap in taps:  # order kh, kw
        acc = acc + tap
    np.testing.assert_array_equal(y.reshape(8), (acc / np.float32(49)).astype(np.float16))


def test_pool_row_tiles_equal_one_instruction(rng):
    x = random_f16(rng, (1, 8, 5, 2))
    out_shape = (1, 4, 3, 2)  # 3x3 stride 2 pad 1
    staging = Staging()
    out_addr = staging.reserve(np.prod(out_shape) * 2)
    compute = []
    for first, stop in [(0, 1), (1, 4)]:
        row_lo, row_hi = max(0, first * 2 - 1), min(8, (stop - 1) * 2 - 1 + 3)
        window = x[:, row_lo:row_hi]
        compute.append(
            pool(
                staging.add(window),
                window.shape,
                out_addr + first * 3 * 2 * 2,
                (1, stop - first, 3, 2),
                kernel=(3, 3),
                mode=PoolMode.AVG,
                in_hw=(8, 5),
                row0=row_lo,
                orow0=first,
                stride=(2, 2),
                pad=(1, 1),
                pad_end=(1, 1),
                count_include_pad=1,
            )
        )
    (split,) = run_both(layer_program(staging, compute, out_addr, out_shape), [])
    whole = run_pool(
        x, (3, 3), mode=PoolMode.AVG, stride=(2, 2), pad=(1, 1), pad_end=(1, 1), count_include_pad=1
    )
    np.testing.assert_array_equal(whole.view(np.uint16), split.view(np.uint16))


# -------------------------------------------------------------------------------------- fc


def run_fc(x, w, b=None, **kwargs):
    staging = Staging()
    in_addr, w_addr = staging.add(x), staging.add(w)
    b_addr = -1 if b is None else staging.add(b)
    out_addr = staging.reserve(x.shape[0] * w.shape[0] * 2)
    ins = fc(in_addr, x.shape[0], x.shape[1], w.shape[0], w_addr, out_addr, b_addr=b_addr, **kwargs)
    (y,) = run_both(layer_program(staging, [ins], out_addr, (x.shape[0], w.shape[0])), [])
    return y


def test_fc_matches_reference(rng):
    x, w, b = (
        random_f16(rng, (3, 40)),
        random_f16(rng, (10, 40)),
        rng.standard_normal(10).astype(np.float32),
    )
    assert_f16_close(run_fc(x, w, b), x.astype(np.float64) @ w.astype(np.float64).T + b)
    assert_f16_close(run_fc(x, w), x.astype(np.float64) @ w.astype(np.float64).T)


def test_fc_leaky_relu_multiplies_in_fp32(rng):
    x, w = random_f16(rng, (2, 16)), random_f16(rng, (5, 16))
    acc = np.zeros((2, 5), np.float32)
    for kk in range(16):
        acc = acc + x[:, kk, None].astype(np.float32) * w[None, :, kk].astype(np.float32)
    expected = np.where(acc < 0, np.float32(0.1) * acc, acc).astype(np.float16)
    y = run_fc(x, w, act=Activation.LEAKY_RELU, act_a=0.1)
    np.testing.assert_array_equal(y.view(np.uint16), expected.view(np.uint16))


def test_fc_accumulation_order():
    x = np.array([[4096, 1, 4096, 1]], np.float16)
    w = np.array([[4096, 1, -4096, 1]], np.float16)
    assert run_fc(x, w)[0, 0] == 1.0
