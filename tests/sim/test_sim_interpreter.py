"""The simulator against float64 references, bit-exact invariants and its faults.

Every run goes through both engines (`run_both`): the Numba engine must give the reference
interpreter's bytes on each of these programs."""

from __future__ import annotations

import numpy as np
import pytest
from sim_builders import (
    Staging,
    add,
    assert_f16_close,
    conv,
    conv_region_program,
    copy_bytes,
    cvt,
    dma,
    end,
    fc,
    instruction,
    layer_program,
    pool,
    random_f16,
    reference_conv,
    reference_pool,
    run_both,
)

from mrvl.binary import encode
from mrvl.isa import Activation, DType, IOEntry, MemSpace, PoolMode, Program
from mrvl.sim import SimulatorError, SimulatorInputError
from mrvl.target import get_target

# Programs here saturate and make NaNs on purpose; the warning is tested in test_saturation.py.
pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


def run_conv(x, w, b=None, *, stride=(1, 1), pad=(0, 0), dilation=(1, 1), groups=1, **kwargs):
    """One conv instruction over the whole input; output size from the bottom/right padding
    that the reference uses (pad is [top, left], pad_end [bottom, right])."""
    pad_end = kwargs.pop("pad_end", (0, 0))
    n, height, width, _ = x.shape
    out_channels, kh, kw, _ = w.shape
    out_h = (height + pad[0] + pad_end[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    out_w = (width + pad[1] + pad_end[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out_shape = (n, out_h, out_w, out_channels)
    staging = Staging()
    in_addr, w_addr = staging.add(x), staging.add(w)
    b_addr = -1 if b is None else staging.add(b)
    out_addr = staging.reserve(np.prod(out_shape) * 2)
    ins = conv(
        in_addr,
        x.shape,
        out_addr,
        out_shape,
        w_addr,
        kernel=(kh, kw),
        b_addr=b_addr,
        stride=stride,
        pad=pad,
        dilation=dilation,
        groups=groups,
        **kwargs,
    )
    (y,) = run_both(layer_program(staging, [ins], out_addr, out_shape), [])
    return y


@pytest.fixture
def rng():
    return np.random.default_rng(0)


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


# ------------------------------------------------------------------------------- dma, cvt


def test_dma_strided_box_transposes(rng):
    """A [2,3,4,5] f16 tensor copied to OCM and back with the destination strides of its
    [3,5,2,4] transpose."""
    x = random_f16(rng, (2, 3, 4, 5))
    dst_strides = (
        4 * 2,
        40 * 2,
        1 * 2,
        8 * 2,
    )  # x[i0, i1, i2, i3] -> y[i1, i3, i0, i2], y strides (40, 8, 4, 1)
    program = Program(
        target="cn10ka",
        num_tiles=2,
        ddr_size=2 * x.nbytes,
        io=[IOEntry("y", False, (3, 5, 2, 4), DType.F16, x.nbytes)],
        code=[
            dma(MemSpace.DDR, 0, x.strides, MemSpace.OCM, 64, dst_strides, x.shape, 2, tile=1),
            copy_bytes(MemSpace.OCM, 64, MemSpace.DDR, x.nbytes, x.nbytes, tile=1),
            end(),
        ],
        const_base=0,
        consts=x.tobytes(),
        srcmap=[],
    )
    (y,) = run_both(program, [])
    np.testing.assert_array_equal(y, x.transpose(1, 3, 0, 2))


def test_dma_negative_and_zero_strides():
    """Source stride 0 broadcasts, a negative stride reverses."""
    x = np.arange(4, dtype=np.float32)
    program = Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=16 + 32,
        io=[IOEntry("y", False, (2, 4), DType.F32, 16)],
        code=[
            dma(MemSpace.DDR, 12, (0, 0, 0, -4), MemSpace.DDR, 16, (0, 0, 16, 4), (1, 1, 2, 4), 4),
            end(),
        ],
        const_base=0,
        consts=x.tobytes(),
        srcmap=[],
    )
    (y,) = run_both(program, [])
    np.testing.assert_array_equal(y, [[3, 2, 1, 0], [3, 2, 1, 0]])


def test_dma_overlapping_destination_faults():
    program = Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=64,
        io=[],
        code=[
            dma(MemSpace.DDR, 0, (0, 0, 0, 4), MemSpace.DDR, 32, (0, 0, 0, 2), (1, 1, 1, 4), 4),
            end(),
        ],
        const_base=0,
        consts=b"",
        srcmap=[],
    )
    with pytest.raises(SimulatorError, match=r"instruction 0 \(dma.*overlap"):
        run_both(program, [])


def test_region_io_through_cvt_and_conv(rng):
    """f32 NCHW input -> cvt f16 NHWC -> OCM -> conv -> DDR -> cvt f32 NCHW output."""
    x = (rng.standard_normal((1, 3, 6, 6))).astype(np.float32)
    w, b = random_f16(rng, (4, 3, 3, 3)), rng.standard_normal(4).astype(np.float32)
    y = run_both(conv_region_program(w, b), [x])[0]
    assert y.dtype == np.float32 and y.shape == (1, 4, 6, 6)
    x16 = x.astype(np.float16).transpose(0, 2, 3, 1)
    expected = reference_conv(x16, w, b, pad=(1, 1, 1, 1)).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(y, expected, rtol=2**-10, atol=2**-14)
    assert run_both(encode(conv_region_program(w, b)), [x])[0].tobytes() == y.tobytes()


def test_cvt_rounds_and_saturates():
    x = np.array([1e6, -np.inf, 1 + 2**-11, np.nan], np.float32).reshape(1, 1, 1, 4)
    program = Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=32,
        io=[
            IOEntry("x", True, (1, 1, 1, 4), DType.F32, 0),
            IOEntry("y", False, (4, 1, 1, 1), DType.F16, 16),
        ],
        code=[
            cvt(0, DType.F32, (1, 1, 1, 4), 16, DType.F16, (3, 1, 2, 0)),
            end(),
        ],
        const_base=0,
        consts=b"",
        srcmap=[],
    )
    (y,) = run_both(program, [x])
    assert y.reshape(-1).view(np.uint16).tolist() == [0x7BFF, 0xFBFF, 0x3C00, 0x7E00]


# -------------------------------------------------------------------- control, tokens, faults


def small_program(code, **kwargs) -> Program:
    values = dict(
        target="cn10ka",
        num_tiles=2,
        ddr_size=256,
        io=[],
        code=code,
        const_base=0,
        consts=b"",
        srcmap=["/layer/Conv", "/layer/Relu"],
    )
    values.update(kwargs)
    return Program(**values)


def test_tokens_order_instructions():
    program = small_program(
        [
            copy_bytes(MemSpace.DDR, 0, MemSpace.OCM, 0, 8, signal=7),
            copy_bytes(MemSpace.OCM, 0, MemSpace.DDR, 8, 8, waits=(7,), signal=8),
            end(waits=(7, 8)),
        ]
    )
    assert run_both(program, []) == []


def test_wait_on_token_never_signalled_faults():
    program = small_program(
        [copy_bytes(MemSpace.DDR, 0, MemSpace.OCM, 0, 8, waits=(3,), loc=1), end()]
    )
    with pytest.raises(
        SimulatorError, match=r"instruction 0 \(dma, ONNX node '/layer/Relu'\): waits on token 3"
    ):
        run_both(program, [])


def test_token_signalled_later_does_not_count():
    program = small_program(
        [
            copy_bytes(MemSpace.DDR, 0, MemSpace.DDR, 8, 8, waits=(5,)),
            copy_bytes(MemSpace.DDR, 0, MemSpace.DDR, 8, 8, signal=5),
            end(),
        ]
    )
    with pytest.raises(SimulatorError, match="token 5"):
        run_both(program, [])


def test_end_stops_execution():
    bad = copy_bytes(MemSpace.DDR, 0, MemSpace.DDR, 1 << 20, 8)
    assert run_both(small_program([end(), bad]), []) == []
    with pytest.raises(SimulatorError, match=r"instruction 0 \(dma, no ONNX node\): .*outside DDR"):
        run_both(small_program([bad, end()]), [])


def test_missing_end_faults():
    with pytest.raises(SimulatorError, match="no end"):
        run_both(small_program([copy_bytes(MemSpace.DDR, 0, MemSpace.DDR, 8, 8)]), [])


def test_tile_beyond_num_tiles_faults():
    with pytest.raises(SimulatorError, match=r"instruction 0 \(dma.*tile 2 >= num_tiles 2"):
        run_both(
            small_program([copy_bytes(MemSpace.DDR, 0, MemSpace.OCM, 0, 8, tile=2), end()]), []
        )


def test_bad_enum_value_faults(rng):
    staging = Staging()
    x_addr, w_addr = (
        staging.add(random_f16(rng, (1, 2, 2, 1))),
        staging.add(np.ones((1, 1, 1, 1), np.float16)),
    )
    ins = conv(x_addr, (1, 2, 2, 1), 0, (1, 2, 2, 1), w_addr, kernel=(1, 1), act=99, loc=0)
    program = layer_program(staging, [ins], 0, (1, 2, 2, 1), srcmap=["/c/Conv"])
    with pytest.raises(
        SimulatorError,
        match=r"instruction 1 \(conv, ONNX node '/c/Conv'\): act=99 is not a valid Activation",
    ):
        run_both(program, [])


def test_ocm_size_comes_from_the_target():
    near_end = get_target("cnf10kb").ocm_bytes_per_tile + 1000
    program = small_program([copy_bytes(MemSpace.DDR, 0, MemSpace.OCM, near_end, 8), end()])
    assert run_both(program, []) == []  # cn10ka has the larger OCM
    with pytest.raises(SimulatorError, match="tile 0's OCM"):
        run_both(program, [], target="cnf10kb")


def test_unknown_target_and_too_many_tiles():
    with pytest.raises(SimulatorError, match="unknown mcpu 'cn99'"):
        run_both(small_program([end()], target="cn99"), [])
    with pytest.raises(SimulatorError, match="16 tiles"):
        run_both(small_program([end()], num_tiles=16), [])


# ----------------------------------------------------------------------------------- inputs


def input_program() -> Program:
    return small_program(
        [end()],
        ddr_size=1024,
        io=[
            IOEntry("image", True, (1, 3, 4, 4), DType.F32, 0),
            IOEntry("mask", True, (4,), DType.F32, 256),
        ],
    )


@pytest.mark.parametrize(
    "inputs, message",
    [
        ([np.zeros((1, 3, 4, 4), np.float32)], r"expected 2 inputs \('image', 'mask'\), got 1"),
        (
            [np.zeros((1, 3, 4, 4), np.float64), np.zeros(4, np.float32)],
            "input 'image': expected dtype float32, got float64",
        ),
        (
            [np.zeros((1, 3, 4, 4), np.float32), np.zeros(5, np.float32)],
            r"input 'mask': expected shape \(4,\), got \(5,\)",
        ),
        (
            [np.zeros((1, 3, 4, 4), np.float32), [0.0] * 4],
            "input 'mask': expected a float32 array .* got list",
        ),
    ],
)
def test_bad_inputs_are_rejected(inputs, message):
    with pytest.raises(SimulatorInputError, match=message):
        run_both(input_program(), inputs)


def test_inputs_land_at_their_ddr_address():
    program = input_program()
    program.io.append(IOEntry("echo", False, (4,), DType.F32, 256))
    mask = np.array([1, -2, 3.5, 0], np.float32)
    (echo,) = run_both(program, [np.zeros((1, 3, 4, 4), np.float32), mask])
    np.testing.assert_array_equal(echo, mask)


def test_ieee_overflow_and_nan_are_results_not_warnings(recwarn):
    """IEEE results, silently: inf * 65504 = inf saturates, inf * 0 = NaN becomes the canonical
    NaN, and an fp32 overflow in the leaky product saturates."""
    x = np.array([[[[np.inf], [1.0]]]], np.float16)  # [1, 1, 2, 1]
    w = np.array([[[[0.0], [65504.0]]]], np.float16)  # [1, 1, 2, 1]
    y = run_conv(x, w, pad=(0, 1), pad_end=(0, 0))
    assert y.view(np.uint16).reshape(-1).tolist() == [0x7BFF, 0x7E00]
    leaky = run_conv(
        np.full((1, 1, 1, 1), -60000, np.float16),
        np.ones((1, 1, 1, 1), np.float16),
        act=Activation.LEAKY_RELU,
        act_a=3e38,
    )
    assert leaky[0, 0, 0, 0] == -65504.0
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def run_add(a, b, **kwargs):
    staging = Staging()
    a_addr, b_addr = staging.add(a), staging.add(b)
    out_addr = staging.reserve(a.size * 2)
    ins = add(a_addr, b_addr, out_addr, a.size, **kwargs)
    (y,) = run_both(layer_program(staging, [ins], out_addr, a.shape), [])
    return y


def test_add_rounds_the_fp32_sum_to_f16(rng):
    a, b = random_f16(rng, (2, 3, 4, 5)), random_f16(rng, (2, 3, 4, 5))
    expected = (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(run_add(a, b).view(np.uint16), expected.view(np.uint16))


def test_add_relu_and_saturation():
    a = np.array([60000, -3, 1, -65504], np.float16)
    b = np.array([60000, 1, 2, -65504], np.float16)
    np.testing.assert_array_equal(run_add(a, b, act=Activation.RELU), [65504, 0, 3, 0])
    np.testing.assert_array_equal(run_add(a, b), [65504, -2, 3, -65504])


def test_scale_is_a_per_channel_affine_map_with_two_fp32_roundings(rng):
    x = random_f16(rng, (3, 2, 5))  # NHWC-ordered, 5 channels innermost
    s = rng.standard_normal(5).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    staging = Staging()
    x_addr, s_addr, b_addr = staging.add(x), staging.add(s), staging.add(b)
    out_addr = staging.reserve(x.size * 2)
    ins = instruction(
        "scale",
        in_addr=x_addr,
        out_addr=out_addr,
        count=x.size,
        channels=5,
        s_addr=s_addr,
        b_addr=b_addr,
        act=int(Activation.RELU),
        act_a=0.0,
        act_b=0.0,
        act_addr=-1,
    )
    (y,) = run_both(layer_program(staging, [ins], out_addr, x.shape), [])
    acc = (x.astype(np.float32) * s) + b
    expected = np.where(acc < 0, np.float32(0), acc).astype(np.float16)
    np.testing.assert_array_equal(y.view(np.uint16), expected.view(np.uint16))


# ------------------------------------------------------------------ activations: tables, PRELU


def _f16_bits(values: np.ndarray) -> np.ndarray:
    return values.view(np.uint16)


def test_table_activation_looks_up_the_f16_rounded_accumulator(rng):
    from sim_builders import lut

    from mrvl.act_tables import activation_table

    x = random_f16(rng, (1, 3, 3, 4), scale=4.0)
    w = random_f16(rng, (5, 1, 1, 4))
    b = rng.standard_normal(5).astype(np.float32)
    table = activation_table(Activation.SILU)
    staging = Staging()
    x_addr, w_addr, b_addr, t_addr = (staging.add(a) for a in (x, w, b, table))
    out_addr = staging.reserve(3 * 3 * 5 * 2)
    code = [
        lut(t_addr, Activation.SILU),
        conv(
            x_addr,
            x.shape,
            out_addr,
            (1, 3, 3, 5),
            w_addr,
            kernel=(1, 1),
            b_addr=b_addr,
            act=Activation.SILU,
        ),
    ]
    (y,) = run_both(layer_program(staging, code, out_addr, (1, 3, 3, 5)), [])
    no_act = conv(x_addr, x.shape, out_addr, (1, 3, 3, 5), w_addr, kernel=(1, 1), b_addr=b_addr)
    (plain,) = run_both(layer_program(staging, [no_act], out_addr, (1, 3, 3, 5)), [])
    # the conv without activation stores f16(acc): exactly the table's index
    expected = table[_f16_bits(plain)]
    np.testing.assert_array_equal(_f16_bits(y), _f16_bits(expected))
    silu = plain.astype(np.float64) / (1 + np.exp(-plain.astype(np.float64)))
    np.testing.assert_allclose(y.astype(np.float64), silu, rtol=2**-10, atol=2**-14)


@pytest.mark.parametrize(
    "loads, message",
    [
        ([], "act SILU .* needs its table, but no lut loaded a table on tile 0"),
        ([Activation.SIGMOID], "act SILU .* tile 0's table memory holds SIGMOID"),
    ],
)
def test_table_activation_without_its_table_faults(rng, loads, message):
    from sim_builders import lut

    from mrvl.act_tables import activation_table

    x = random_f16(rng, (1, 2, 2, 1))
    staging = Staging()
    x_addr, w_addr = staging.add(x), staging.add(np.ones((1, 1, 1, 1), np.float16))
    t_addr = staging.add(activation_table(Activation.SIGMOID))
    code = [lut(t_addr, act) for act in loads] + [
        conv(x_addr, x.shape, 0, x.shape, w_addr, kernel=(1, 1), act=Activation.SILU)
    ]
    with pytest.raises(SimulatorError, match=message):
        run_both(layer_program(staging, code, 0, x.shape), [])


def test_lut_of_a_non_table_activation_and_beyond_the_table_memory_fault():
    from sim_builders import lut

    from mrvl.target import Target

    staging = Staging()
    t_addr = staging.add(np.zeros(1 << 16, np.float16))
    program = layer_program(staging, [lut(t_addr, Activation.RELU)], 0, (1,))
    with pytest.raises(SimulatorError, match="act=RELU breaks `act in TABLE_ACTIVATIONS`"):
        run_both(program, [])
    small = get_target("cn10ka").__dict__ | {"act_table_bytes_per_tile": 1024}
    program = layer_program(staging, [lut(t_addr, Activation.TANH)], 0, (1,))
    with pytest.raises(SimulatorError, match="does not fit the tile's 1024-byte"):
        run_both(program, [], target=Target(**small))


def test_prelu_uses_per_channel_slopes_on_conv_fc_and_scale(rng):
    x = random_f16(rng, (1, 2, 3, 4))
    w = random_f16(rng, (4, 1, 1, 4))
    slopes = np.array([0.25, -1.0, 0.0, 3.0], np.float32)
    staging = Staging()
    x_addr, w_addr, s_addr = staging.add(x), staging.add(w), staging.add(slopes)
    out_addr = staging.reserve(x.size * 2)
    ins = conv(
        x_addr,
        x.shape,
        out_addr,
        x.shape,
        w_addr,
        kernel=(1, 1),
        act=Activation.PRELU,
        act_addr=s_addr,
    )
    (y,) = run_both(layer_program(staging, [ins], out_addr, x.shape), [])
    (acc,) = run_both(
        layer_program(
            staging,
            [conv(x_addr, x.shape, out_addr, x.shape, w_addr, kernel=(1, 1))],
            out_addr,
            x.shape,
        ),
        [],
    )
    # acc here is f16(acc); PRELU acts on the fp32 accumulator, so compare within an f16 ulp
    expected = np.where(acc < 0, slopes * acc.astype(np.float32), acc.astype(np.float32))
    assert_f16_close(y, expected.astype(np.float64))
    assert np.all((y < 0) == (expected < 0))

    xs = random_f16(rng, (6, 4))
    staging = Staging()
    xa, ws, sa = staging.add(xs), staging.add(random_f16(rng, (4, 4))), staging.add(slopes)
    out = staging.reserve(6 * 4 * 2)
    one, zero = staging.add(np.ones(4, np.float32)), staging.add(np.zeros(4, np.float32))
    scale = instruction(
        "scale",
        in_addr=xa,
        out_addr=out,
        count=24,
        channels=4,
        s_addr=one,
        b_addr=zero,
        act=int(Activation.PRELU),
        act_a=0.0,
        act_b=0.0,
        act_addr=sa,
    )
    (y,) = run_both(layer_program(staging, [scale], out, (6, 4)), [])
    xf = xs.astype(np.float32)
    expected = np.where(xf < 0, slopes * xf, xf).astype(np.float16)
    np.testing.assert_array_equal(_f16_bits(y), _f16_bits(expected))
    (y,) = run_both(
        layer_program(
            staging, [fc(xa, 6, 4, 4, ws, out, act=Activation.PRELU, act_addr=sa)], out, (6, 4)
        ),
        [],
    )
    assert y.shape == (6, 4)


def test_prelu_on_add_uses_the_slope_of_each_element_s_channel(rng):
    """`add` with `channels` C: element i is channel i mod C of NHWC pixels (a residual sum
    followed by PRelu); the slope acts on the fp32 sum, then one f16 rounding."""
    slopes = np.array([0.25, -1.0, 0.0, 3.0], np.float32)
    a, b = random_f16(rng, (6, 4)), random_f16(rng, (6, 4))
    staging = Staging()
    a_addr, b_addr, s_addr = staging.add(a), staging.add(b), staging.add(slopes)
    out = staging.reserve(a.size * 2)
    fields = dict(a_addr=a_addr, b_addr=b_addr, out_addr=out, count=24, act_a=0.0, act_b=0.0)
    ins = instruction("add", **fields, channels=4, act=int(Activation.PRELU), act_addr=s_addr)
    (y,) = run_both(layer_program(staging, [ins], out, (6, 4)), [])
    acc = a.astype(np.float32) + b.astype(np.float32)
    expected = np.where(acc < 0, slopes * acc, acc).astype(np.float16)
    np.testing.assert_array_equal(_f16_bits(y), _f16_bits(expected))
    no_channels = instruction(
        "add", **fields, channels=0, act=int(Activation.PRELU), act_addr=s_addr
    )
    with pytest.raises(SimulatorError, match="add has no channels for PRELU slopes"):
        run_both(layer_program(staging, [no_channels], out, (6, 4)), [])
    ragged = instruction("add", **fields, channels=5, act=int(Activation.PRELU), act_addr=s_addr)
    with pytest.raises(SimulatorError, match="channels=5 breaks `channels == 0 or count % channels == 0`"):
        run_both(layer_program(staging, [ragged], out, (6, 4)), [])


def run_mul(a, b, channels, **act):
    staging = Staging()
    a_addr, b_addr = staging.add(a), staging.add(b)
    out = staging.reserve(a.size * 2)
    fields = {"act": int(Activation.NONE), "act_a": 0.0, "act_b": 0.0} | act
    ins = instruction(
        "mul", a_addr=a_addr, b_addr=b_addr, out_addr=out, count=a.size, channels=channels, **fields
    )
    (y,) = run_both(layer_program(staging, [ins], out, (a.size,)), [])
    return y


def test_mul_is_an_exact_product_rounded_once(rng):
    a, b = random_f16(rng, 40, 100.0), random_f16(rng, 40, 100.0)
    expected = (a.astype(np.float32) * b.astype(np.float32)).clip(-65504, 65504)
    y = run_mul(a, b, 0)
    np.testing.assert_array_equal(_f16_bits(y), _f16_bits(expected.astype(np.float16)))


def test_mul_broadcasts_b_per_channel(rng):
    a = random_f16(rng, (5, 3))  # 5 pixels, 3 channels
    s = random_f16(rng, 3)
    y = run_mul(a.reshape(-1), s, 3, act=int(Activation.RELU))
    acc = a.astype(np.float32) * s.astype(np.float32)
    expected = np.where(acc < 0, 0, acc).astype(np.float16).reshape(-1)
    np.testing.assert_array_equal(_f16_bits(y), _f16_bits(expected))
    with pytest.raises(SimulatorError, match="channels=4 breaks `channels == 0 or count % channels == 0`"):
        run_mul(a.reshape(-1), np.ones(4, np.float16), 4)
