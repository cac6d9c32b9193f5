"""The `qresize` instruction: integer two-tap interpolation of int8 data, as docs/isa.md
states it, on both engines byte for byte, its faults, and within one step of onnxruntime's
DequantizeLinear -> Resize -> QuantizeLinear."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_builders import ENGINE_SETTINGS, Staging, instruction, layer_program, run_both
from test_int8_engines import ZERO_POINTS, int8_values

from mrvl import int8
from mrvl.isa import DType
from mrvl.isa_int8_resize import (
    RESIZE_ONE,
    RESIZE_WEIGHT_BITS,
    fixed_point_table,
    requantize_half_even,
)
from mrvl.sim import SimulatorError, run
from mrvl.strided import interpolation_table

SUM_BITS = 2 * RESIZE_WEIGHT_BITS


def qresize_program(x, ytab, xtab, row0, *, in_zp=0, out_zp=0, rq=None, finish=None):
    """x (int8 NHWC window from input row `row0`) resized by the int32 tables."""
    staging = Staging()
    n, _, _, c = x.shape
    out_shape = (n, len(ytab), len(xtab), c)
    x_addr, y_addr, t_addr = staging.add(x), staging.add(ytab), staging.add(xtab)
    out = staging.reserve(int(np.prod(out_shape)))
    ins = instruction(
        "qresize",
        in_addr=x_addr,
        in_shape=tuple(x.shape),
        row0=row0,
        out_addr=out,
        out_shape=out_shape,
        ytab_addr=y_addr,
        xtab_addr=t_addr,
        in_zp=in_zp,
        out_zp=out_zp,
        rq=rq or int8.quantize_multiplier(2.0**-SUM_BITS),
        **(finish or {"clamp": (-128, 127), "lut_addr": -1}),
    )
    return layer_program(staging, [ins], out, out_shape, dtype=DType.I8)


def documented(x, ytab, xtab, row0, in_zp, out_zp, rq):
    """docs/isa.md's loop, one element at a time, in Python integers."""
    n, _, _, c = x.shape
    out = np.zeros((n, len(ytab), len(xtab), c), np.int8)
    d = x.astype(np.int64) - in_zp
    for r, (y0, y1, wy1) in enumerate(ytab):
        wy0 = RESIZE_ONE - wy1
        for q, (x0, x1, wx1) in enumerate(xtab):
            wx0 = RESIZE_ONE - wx1
            top = wx0 * d[:, y0 - row0, x0] + wx1 * d[:, y0 - row0, x1]
            bottom = wx0 * d[:, y1 - row0, x0] + wx1 * d[:, y1 - row0, x1]
            acc = wy0 * top + wy1 * bottom
            out[:, r, q] = np.clip(out_zp + requantize_half_even(acc, *rq), -128, 127)
    return out


@pytest.mark.parametrize("mode", ["half_pixel", "align_corners", "asymmetric"])
def test_qresize_follows_the_documented_arithmetic(mode):
    rng = np.random.default_rng(0)
    x = int8_values(rng, (2, 4, 5, 3))  # input rows 2..5 of a 7-row tensor
    ytab = fixed_point_table(interpolation_table(7, 14, "linear", mode)[5:9])
    xtab = fixed_point_table(interpolation_table(5, 11, "linear", mode))
    rq = int8.requant_params(0.02 * 2.0**-SUM_BITS, 0.03)
    (y,) = run_both(qresize_program(x, ytab, xtab, 2, in_zp=-7, out_zp=4, rq=rq), [])
    np.testing.assert_array_equal(y, documented(x, ytab, xtab, 2, -7, 4, rq))


def test_nearest_and_integer_factors_are_exact():
    """Weights 1, 0 copy the input; a factor-2 half_pixel bilinear of a constant is it."""
    rng = np.random.default_rng(1)
    x = int8_values(rng, (1, 3, 4, 5))
    ytab = fixed_point_table(interpolation_table(3, 7, "nearest_neighbor", "asymmetric"))
    xtab = fixed_point_table(interpolation_table(4, 9, "nearest_neighbor", "asymmetric"))
    (y,) = run_both(qresize_program(x, ytab, xtab, 0, in_zp=3, out_zp=3), [])
    np.testing.assert_array_equal(y, x[:, ytab[:, 0]][:, :, xtab[:, 0]])
    assert set(fixed_point_table(interpolation_table(6, 12, "linear", "half_pixel"))[:, 2]) <= {
        0,
        RESIZE_ONE // 4,
        3 * RESIZE_ONE // 4,
    }


@ENGINE_SETTINGS
@given(
    n=st.integers(1, 2),
    size=st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 9)),
    out=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    method=st.sampled_from(["linear", "nearest_neighbor"]),
    zps=st.tuples(ZERO_POINTS, ZERO_POINTS),
    wild=st.booleans(),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_qresize_engines_agree(n, size, out, method, zps, wild, seed, data):
    """Any window, factor, zero points, pair, clamp and table; wild weights (outside
    [0, 2^11], which the machine clamps) too."""
    rng = np.random.default_rng(seed)
    h, w, c = size
    x = int8_values(rng, (n, h, w, c))
    ytab = fixed_point_table(interpolation_table(h, out[0], method, "half_pixel"))
    xtab = fixed_point_table(interpolation_table(w, out[1], method, "asymmetric"))
    if wild:
        ytab[:, 2] = rng.integers(-5000, 5000, len(ytab))
    rq = (int(rng.integers(2**30, 2**31)), int(rng.integers(-31, -15)))
    finish = data.draw(st.sampled_from([None, {"clamp": (-100, 90), "lut_addr": -1}]))
    run_both(
        qresize_program(x, ytab, xtab, 0, in_zp=zps[0], out_zp=zps[1], rq=rq, finish=finish), []
    )


@pytest.mark.parametrize("engine", ["interp", "numba"])
@pytest.mark.parametrize("table", ["row", "column"])
def test_a_table_index_outside_the_window_faults_naming_it(engine, table):
    x = np.zeros((1, 3, 3, 2), np.int8)
    ytab = fixed_point_table(interpolation_table(3, 6, "linear", "half_pixel"))
    xtab = fixed_point_table(interpolation_table(3, 6, "linear", "half_pixel"))
    (ytab if table == "row" else xtab)[2, 1] = 3
    with pytest.raises(SimulatorError, match=f"{table} table indices fall outside"):
        run(qresize_program(x, ytab, xtab, 0), [], engine=engine)


def _ort_qdq_resize(x_nchw, scale, zp, sizes, mode, method):
    """onnxruntime on DequantizeLinear -> Resize -> QuantizeLinear (one scale and zero point,
    as onnxruntime's quantizer writes a Resize)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    s = helper.make_tensor("s", TensorProto.FLOAT, [], [scale])
    z = helper.make_tensor("z", TensorProto.INT8, [], [zp])
    size = helper.make_tensor("size", TensorProto.INT64, [4], list(sizes))
    graph = helper.make_graph(
        [
            helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"]),
            helper.make_node(
                "Resize", ["xf", "", "", "size"], ["yf"], mode=method,
                coordinate_transformation_mode=mode, nearest_mode="floor",
            ),
            helper.make_node("QuantizeLinear", ["yf", "s", "z"], ["y"]),
        ],
        "qdq_resize",
        [helper.make_tensor_value_info("x", TensorProto.INT8, list(x_nchw.shape))],
        [helper.make_tensor_value_info("y", TensorProto.INT8, list(sizes))],
        [s, z, size],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x_nchw})[0]


@pytest.mark.parametrize(
    "in_hw, out_hw, mode",
    [
        ((7, 5), (14, 10), "half_pixel"),
        ((8, 8), (64, 64), "half_pixel"),
        ((5, 6), (13, 9), "align_corners"),
        ((5, 6), (11, 17), "pytorch_half_pixel"),
        ((4, 4), (12, 12), "asymmetric"),
    ],
)
def test_qresize_is_within_one_step_of_onnxruntime_qdq(in_hw, out_hw, mode):
    rng = np.random.default_rng(3)
    scale, zp = 0.037, -11
    x = int8_values(rng, (1, 6, *in_hw))  # NCHW for onnxruntime
    expected = _ort_qdq_resize(x, scale, zp, (1, 6, *out_hw), mode, "linear")
    ytab = fixed_point_table(interpolation_table(in_hw[0], out_hw[0], "linear", mode))
    xtab = fixed_point_table(interpolation_table(in_hw[1], out_hw[1], "linear", mode))
    rq = int8.requant_params(scale * 2.0**-SUM_BITS, scale)
    program = qresize_program(
        x.transpose(0, 2, 3, 1).copy(), ytab, xtab, 0, in_zp=zp, out_zp=zp, rq=rq
    )
    (y,) = run(program, [], engine="interp")
    steps = np.abs(y.transpose(0, 3, 1, 2).astype(int) - expected.astype(int))
    assert steps.max() <= 1, f"{steps.max()} steps"
    # they differ only near a half step of the interpolated value (exactly at one where the
    # weights are exact: ties go up here, to even there), or by the weights' rounding
    # (at most 255 * 2^-12 per axis): never by a step elsewhere
    nhwc = x.transpose(0, 2, 3, 1).copy()
    exact = documented_real(nhwc, ytab, xtab, zp).transpose(0, 3, 1, 2)
    near_half = np.abs(exact - np.floor(exact) - 0.5)
    exact_weights = not ({ytab[:, 2].max(), xtab[:, 2].max()} - {0, 512, 1536})
    bound = 1e-9 if exact_weights else 0.13
    assert np.all(near_half[steps > 0] <= bound), near_half[steps > 0].max()
    print(f"{mode} {in_hw}->{out_hw}: exact {np.mean(steps == 0):.3f}")


def documented_real(x, ytab, xtab, zp):
    """The interpolation of `documented` before its rounding: acc / 2^22 (float64)."""
    d = x.astype(np.float64) - zp
    wy1, wx1 = ytab[:, 2] / RESIZE_ONE, xtab[:, 2] / RESIZE_ONE
    wy0, wx0 = 1 - wy1, 1 - wx1
    rows = wy0[None, :, None, None] * d[:, ytab[:, 0]] + wy1[None, :, None, None] * d[:, ytab[:, 1]]
    return (
        wx0[None, None, :, None] * rows[:, :, xtab[:, 0]]
        + wx1[None, None, :, None] * rows[:, :, xtab[:, 1]]
    )
