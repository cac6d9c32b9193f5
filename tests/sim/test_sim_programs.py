"""The simulator on whole programs: DMA and cvt against references, tokens and control, faults,
and region inputs; every run on both engines (`run_both`), as in test_sim_interpreter.py."""

from __future__ import annotations

import numpy as np
import pytest
from sim_builders import (
    Staging,
    conv,
    conv_region_program,
    copy_bytes,
    cvt,
    dma,
    end,
    layer_program,
    random_f16,
    reference_conv,
    run_both,
    run_conv,
)

from mrvl.binary import encode
from mrvl.isa import Activation, DType, IOEntry, MemSpace, Program
from mrvl.sim import SimulatorError, SimulatorInputError
from mrvl.target import get_target

# Programs here saturate and make NaNs on purpose; the warning is tested in test_saturation.py.
pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


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
