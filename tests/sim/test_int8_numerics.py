"""The int8 instructions against independent statements of what they compute:

- `quant` and `dequant` against onnxruntime running one QuantizeLinear / DequantizeLinear node
  (bit for bit);
- `qconv` and `qfc` against a plain numpy and Python-integer statement of docs/isa.md (the
  int32 accumulator exactly, then the requantization), and within one step of onnxruntime's
  QLinearConv / QLinearMatMul on the same int8 data (the share exact is reported);
- a conv cut by output rows, by output channels and by input channels (the acc_addr / acc_out
  chain) gives the bytes of one instruction.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper
from sim_builders import (
    ENGINE_SETTINGS,
    Staging,
    conversion_program,
    instruction,
    layer_program,
    qconv,
    qfc,
    run_both,
)

from mrvl import int8
from mrvl.isa import DType

pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


def _session(nodes, inputs, outputs, initializers, opset=19) -> ort.InferenceSession:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _scalar(name: str, value, dtype) -> onnx.TensorProto:
    return helper.make_tensor(name, dtype, [], [value])


def _linear_session(op_type: str, shape, scale: float, zp: int) -> ort.InferenceSession:
    """onnxruntime's QuantizeLinear (float x to int8 y) or DequantizeLinear (int8 x to float
    y) with a scalar scale and zero point."""
    x_type, y_type = (
        (TensorProto.FLOAT, TensorProto.INT8)
        if op_type == "QuantizeLinear"
        else (TensorProto.INT8, TensorProto.FLOAT)
    )
    return _session(
        [helper.make_node(op_type, ["x", "s", "z"], ["y"])],
        [helper.make_tensor_value_info("x", x_type, shape)],
        [helper.make_tensor_value_info("y", y_type, None)],
        [_scalar("s", scale, TensorProto.FLOAT), _scalar("z", zp, TensorProto.INT8)],
    )


# ------------------------------------------------------------------------- quant, dequant


@ENGINE_SETTINGS
@given(
    shape=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 20), st.integers(1, 20)),
    scale=st.floats(2**-12, 16.0, width=32),
    zp=st.integers(-128, 127),
    seed=st.integers(0, 2**16),
)
def test_quant_is_onnxruntime_quantize_linear_bit_for_bit(shape, scale, zp, seed):
    """Ties (x/scale at k + 1/2), values far out of range and infinities included. NaN is
    left out: ONNX does not define it, and onnxruntime's answer depends on the element's
    position (its vector loop gives -128, as the ISA does, its scalar tail does not)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 100 * scale).astype(np.float32)
    flat = x.reshape(-1)
    flat[::3] = (rng.integers(-300, 300, flat[::3].size) + 0.5).astype(np.float32) * np.float32(
        scale
    )
    flat[::11] = rng.choice(np.array([np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0], np.float32))
    session = _linear_session("QuantizeLinear", shape, scale, zp)
    expected = session.run(None, {"x": x})[0]
    perm = (0, 2, 3, 1)  # into NHWC, as a region input is
    program = conversion_program("quant", shape, perm, DType.F32, DType.I8, scale, zp)
    (actual,) = run_both(program, [x])
    np.testing.assert_array_equal(actual, expected.transpose(perm))


@ENGINE_SETTINGS
@given(
    shape=st.tuples(st.integers(1, 2), st.integers(1, 20), st.integers(1, 20), st.integers(1, 3)),
    scale=st.floats(2**-12, 16.0, width=32),
    zp=st.integers(-128, 127),
    seed=st.integers(0, 2**16),
)
def test_dequant_is_onnxruntime_dequantize_linear_bit_for_bit(shape, scale, zp, seed):
    q = np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)
    session = _linear_session("DequantizeLinear", shape, scale, zp)
    expected = session.run(None, {"x": q})[0]
    perm = (0, 3, 1, 2)  # back to NCHW, as a region output is
    program = conversion_program("dequant", shape, perm, DType.I8, DType.F32, scale, zp)
    (actual,) = run_both(program, [q])
    np.testing.assert_array_equal(actual.view(np.int32), expected.transpose(perm).view(np.int32))


# ------------------------------------------------------------------- qconv and qfc, exactly


def docs_requantize(v: int, multiplier: int, shift: int) -> int:
    """docs/isa.md §4b in Python integers: round(v * m / 2^r), ties toward +inf."""
    r = 31 - min(max(shift, -31), 30)
    return (v * multiplier + (1 << (r - 1))) >> r


def docs_conv_accumulator(x, w, bias, in_zp, stride, pad, dilation, groups):
    """int64 NHWC accumulators of docs/isa.md `qconv` (whole layer, no splits): the input
    padded with in_zp, every tap's (x - in_zp) * w summed exactly, wrapped to int32."""
    top, left, bottom, right = pad
    padded = np.pad(
        x.astype(np.int64) - in_zp, ((0, 0), (top, bottom), (left, right), (0, 0))
    )  # in_zp - in_zp = 0 in the padding
    n, height, width, _ = padded.shape
    oc, kh_count, kw_count, cg = w.shape
    out_h = (height - dilation[0] * (kh_count - 1) - 1) // stride[0] + 1
    out_w = (width - dilation[1] * (kw_count - 1) - 1) // stride[1] + 1
    acc = np.zeros((n, out_h, out_w, oc), np.int64) + bias.astype(np.int64)
    per_group = oc // groups
    for o in range(oc):
        g = o // per_group
        for kh in range(kh_count):
            for kw in range(kw_count):
                rows = slice(kh * dilation[0], kh * dilation[0] + stride[0] * (out_h - 1) + 1)
                cols = slice(kw * dilation[1], kw * dilation[1] + stride[1] * (out_w - 1) + 1)
                patch = padded[:, rows.start : rows.stop : stride[0]]
                patch = patch[:, :, cols.start : cols.stop : stride[1], g * cg : (g + 1) * cg]
                acc[..., o] += patch @ w[o, kh, kw].astype(np.int64)
    return (acc + 2**31) % 2**32 - 2**31


def docs_finish(acc, pairs, out_zp, lo=-128, hi=127):
    y = np.empty(acc.shape, np.int64)
    flat, out = acc.reshape(-1, acc.shape[-1]), y.reshape(-1, acc.shape[-1])
    for i in range(flat.shape[0]):
        for o in range(flat.shape[1]):
            value = out_zp + docs_requantize(int(flat[i, o]), int(pairs[o, 0]), int(pairs[o, 1]))
            out[i, o] = min(hi, max(lo, value))
    return y.astype(np.int8)


@st.composite
def conv_cases(draw):
    groups = draw(st.sampled_from([1, 2, 4]))
    depthwise = draw(st.booleans()) and groups > 1
    cg = 1 if depthwise else draw(st.integers(1, 9))
    per_group = draw(st.integers(1, 4))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    return dict(
        n=draw(st.integers(1, 2)),
        hw=(draw(st.integers(3, 8)), draw(st.integers(3, 8))),
        groups=groups,
        cg=cg,
        oc=groups * per_group,
        kernel=kernel,
        stride=(draw(st.integers(1, 2)), draw(st.integers(1, 2))),
        dilation=(draw(st.integers(1, 2)), draw(st.integers(1, 2))),
        pad=tuple(draw(st.integers(0, k - 1)) for k in kernel * 2),
        in_zp=draw(st.integers(-128, 127)),
        out_zp=draw(st.integers(-128, 127)),
        seed=draw(st.integers(0, 2**16)),
    )


def conv_data(case):
    rng = np.random.default_rng(case["seed"])
    x = rng.integers(-128, 128, (case["n"], *case["hw"], case["groups"] * case["cg"]))
    w = rng.integers(-127, 128, (case["oc"], *case["kernel"], case["cg"]))
    bias = rng.integers(-(2**14), 2**14, case["oc"])
    s_x, s_y = float(rng.uniform(0.01, 0.1)), float(rng.uniform(0.05, 0.5))
    s_w = rng.uniform(0.001, 0.02, case["oc"]).astype(np.float32)
    return x.astype(np.int8), w.astype(np.int8), bias.astype(np.int32), s_x, s_w, s_y


def run_qconv(case, x, w, bias, pairs, pad_end) -> np.ndarray:
    top, left = case["pad"][:2]
    extent = [(k - 1) * d + 1 for k, d in zip(case["kernel"], case["dilation"])]
    out_hw = [
        (h + p + e - k) // s + 1
        for h, p, e, k, s in zip(case["hw"], (top, left), pad_end, extent, case["stride"])
    ]
    out_shape = (case["n"], *out_hw, case["oc"])
    staging = Staging()
    xa, wa, ba, ra = staging.add(x), staging.add(w), staging.add(bias), staging.add(pairs)
    out = staging.reserve(int(np.prod(out_shape)))
    ins = qconv(
        xa,
        x.shape,
        out,
        out_shape,
        wa,
        kernel=case["kernel"],
        stride=case["stride"],
        pad=(top, left),
        dilation=case["dilation"],
        groups=case["groups"],
        b_addr=ba,
        in_zp=case["in_zp"],
        out_zp=case["out_zp"],
        rq_addr=ra,
    )
    (y,) = run_both(layer_program(staging, [ins], out, out_shape, dtype=DType.I8), [])
    return y


@ENGINE_SETTINGS
@given(conv_cases())
def test_qconv_is_the_documented_integer_arithmetic(case):
    """Grouped and depthwise, strided, dilated, padded (with in_zp)."""
    x, w, bias, s_x, s_w, s_y = conv_data(case)
    pairs = int8.conv_requant_pairs(s_x, s_w, s_y)
    pad = case["pad"]
    acc = docs_conv_accumulator(
        x, w, bias, case["in_zp"], case["stride"], pad, case["dilation"], case["groups"]
    )
    actual = run_qconv(case, x, w, bias, pairs, pad[2:])
    np.testing.assert_array_equal(actual, docs_finish(acc, pairs, case["out_zp"]))


@ENGINE_SETTINGS
@given(
    rows=st.integers(1, 3),
    inner=st.integers(1, 300),
    outs=st.integers(1, 20),
    in_zp=st.integers(-128, 127),
    out_zp=st.integers(-128, 127),
    seed=st.integers(0, 2**16),
)
def test_qfc_is_the_documented_integer_arithmetic(rows, inner, outs, in_zp, out_zp, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (rows, inner)).astype(np.int8)
    w = rng.integers(-128, 128, (outs, inner)).astype(np.int8)
    bias = rng.integers(-(2**31), 2**31, outs).astype(np.int32)  # wraps, as documented
    pairs = int8.conv_requant_pairs(0.05, rng.uniform(1e-4, 1e-2, outs), 0.3)
    lo, hi = sorted(rng.integers(-128, 128, 2))
    staging = Staging()
    xa, wa, ba, ra = staging.add(x), staging.add(w), staging.add(bias), staging.add(pairs)
    out = staging.reserve(rows * outs)
    ins = qfc(
        xa, rows, inner, outs, wa, out, b_addr=ba, in_zp=in_zp, out_zp=out_zp, rq_addr=ra,
        clamp=(int(lo), int(hi)),
    )  # fmt: skip
    (y,) = run_both(layer_program(staging, [ins], out, (rows, outs), dtype=DType.I8), [])
    acc = bias.astype(np.int64) + (x.astype(np.int64) - in_zp) @ w.astype(np.int64).T
    acc = (acc + 2**31) % 2**32 - 2**31
    np.testing.assert_array_equal(y, docs_finish(acc, pairs, out_zp, int(lo), int(hi)))


# ------------------------------------------------------------- qconv against onnxruntime


def onnxruntime_qlinearconv(case, x, w, bias, s_x, s_w, s_y) -> np.ndarray:
    top, left, bottom, right = case["pad"]
    node = helper.make_node(
        "QLinearConv",
        ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"],
        ["y"],
        strides=list(case["stride"]),
        dilations=list(case["dilation"]),
        pads=[top, left, bottom, right],
        group=case["groups"],
    )
    oc = w.shape[0]
    session = _session(
        [node],
        [helper.make_tensor_value_info("x", TensorProto.INT8, None)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [
            _scalar("sx", s_x, TensorProto.FLOAT),
            _scalar("zx", case["in_zp"], TensorProto.INT8),
            helper.make_tensor(
                "w",
                TensorProto.INT8,
                w.transpose(0, 3, 1, 2).shape,
                w.transpose(0, 3, 1, 2).ravel(),
            ),
            helper.make_tensor("sw", TensorProto.FLOAT, [oc], s_w.tolist()),
            helper.make_tensor("zw", TensorProto.INT8, [oc], [0] * oc),
            _scalar("sy", s_y, TensorProto.FLOAT),
            _scalar("zy", case["out_zp"], TensorProto.INT8),
            helper.make_tensor("b", TensorProto.INT32, [oc], bias.tolist()),
        ],
        opset=13,
    )
    (y,) = session.run(None, {"x": x.transpose(0, 3, 1, 2).copy()})
    return y.transpose(0, 2, 3, 1)


def onnxruntime_qdq_conv(case, x, w, bias, s_x, s_w, s_y) -> np.ndarray:
    """The same layer as a QDQ model (DequantizeLinear -> Conv -> QuantizeLinear), run in
    fp32 with onnxruntime's graph optimizations off (so not fused into QLinearConv)."""
    top, left, bottom, right = case["pad"]
    oc = w.shape[0]
    w_oihw = w.transpose(0, 3, 1, 2)
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"]),
        helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], axis=0),
        helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["bf"], axis=0),
        helper.make_node(
            "Conv",
            ["xf", "wf", "bf"],
            ["yf"],
            strides=list(case["stride"]),
            dilations=list(case["dilation"]),
            pads=[top, left, bottom, right],
            group=case["groups"],
        ),
        helper.make_node("QuantizeLinear", ["yf", "sy", "zy"], ["y"]),
    ]
    s_b = (np.float32(s_x) * s_w).astype(np.float32)
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT8, None)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [
            _scalar("sx", s_x, TensorProto.FLOAT),
            _scalar("zx", case["in_zp"], TensorProto.INT8),
            helper.make_tensor("w", TensorProto.INT8, w_oihw.shape, w_oihw.ravel()),
            helper.make_tensor("sw", TensorProto.FLOAT, [oc], s_w.tolist()),
            helper.make_tensor("zw", TensorProto.INT8, [oc], [0] * oc),
            helper.make_tensor("b", TensorProto.INT32, [oc], bias.tolist()),
            helper.make_tensor("sb", TensorProto.FLOAT, [oc], s_b.tolist()),
            helper.make_tensor("zb", TensorProto.INT32, [oc], [0] * oc),
            _scalar("sy", s_y, TensorProto.FLOAT),
            _scalar("zy", case["out_zp"], TensorProto.INT8),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    (y,) = session.run(None, {"x": x.transpose(0, 3, 1, 2).copy()})
    return y.transpose(0, 2, 3, 1)


def test_qconv_is_within_one_step_of_onnxruntime(record_property):
    """onnxruntime's QLinearConv requantizes in fp32 (its factor rounded to fp32, ties to
    even), and its QDQ form (DequantizeLinear, an fp32 Conv, QuantizeLinear) also sums in
    fp32: the ISA's exact sum and Q31 rule differ from them by ties and fp32 roundings, at
    most one step. The shares of exact elements are reported (`record_property`; printed
    with -s)."""
    rng = np.random.default_rng(7)
    exact = {"QLinearConv": 0, "QDQ Conv": 0}
    total = 0
    for index in range(12):
        case = dict(
            n=1,
            hw=(9, 7),
            groups=[1, 2, 8][index % 3],
            cg=[6, 3, 1][index % 3],
            oc=[8, 6, 8][index % 3],
            kernel=(3, 3),
            stride=(1 + index % 2, 1),
            dilation=(1, 1 + index % 2),
            pad=(1, 1, 1, 1),
            in_zp=int(rng.integers(-128, 128)),
            out_zp=int(rng.integers(-128, 128)),
            seed=int(rng.integers(2**16)),
        )
        x, w, bias, s_x, s_w, s_y = conv_data(case)
        pairs = int8.conv_requant_pairs(s_x, s_w, s_y)
        actual = run_qconv(case, x, w, bias, pairs, case["pad"][2:]).astype(np.int64)
        total += actual.size
        for name, reference in (
            ("QLinearConv", onnxruntime_qlinearconv),
            ("QDQ Conv", onnxruntime_qdq_conv),
        ):
            expected = reference(case, x, w, bias, s_x, s_w, s_y).astype(np.int64)
            assert actual.shape == expected.shape
            steps = np.abs(actual - expected)
            assert steps.max() <= 1, f"case {index}: {steps.max()} steps from {name}"
            exact[name] += int((steps == 0).sum())
    for name, count in exact.items():
        record_property(f"qconv_exact_share_vs_{name.replace(' ', '_')}", count / total)
        print(
            f"qconv vs onnxruntime {name}: {count}/{total} exact ({count / total:.2%}), all within 1"
        )
        assert count / total > 0.9  # a tie or an fp32 rounding is rare


@ENGINE_SETTINGS
@given(
    rows=st.integers(1, 4),
    inner=st.integers(1, 200),
    outs=st.integers(1, 16),
    zps=st.tuples(st.integers(-128, 127), st.integers(-128, 127)),
    seed=st.integers(0, 2**16),
)
def test_qfc_is_within_one_step_of_onnxruntime_qlinearmatmul(rows, inner, outs, zps, seed):
    """QLinearMatMul (no bias) with per-column weight scales: y = x . W^T."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (rows, inner)).astype(np.int8)
    w = rng.integers(-127, 128, (outs, inner)).astype(np.int8)
    s_x, s_y = float(np.float32(rng.uniform(0.01, 0.1))), float(np.float32(rng.uniform(0.1, 2)))
    s_w = rng.uniform(0.001, 0.02, outs).astype(np.float32)
    session = _session(
        [helper.make_node("QLinearMatMul", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.INT8, [rows, inner])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [
            _scalar("sx", s_x, TensorProto.FLOAT),
            _scalar("zx", zps[0], TensorProto.INT8),
            helper.make_tensor("w", TensorProto.INT8, [inner, outs], w.T.ravel()),
            helper.make_tensor("sw", TensorProto.FLOAT, [outs], s_w.tolist()),
            helper.make_tensor("zw", TensorProto.INT8, [outs], [0] * outs),
            _scalar("sy", s_y, TensorProto.FLOAT),
            _scalar("zy", zps[1], TensorProto.INT8),
        ],
        opset=13,
    )
    (expected,) = session.run(None, {"x": x})
    staging = Staging()
    pairs = int8.conv_requant_pairs(s_x, s_w, s_y)
    xa, wa, ra = staging.add(x), staging.add(w), staging.add(pairs)
    out = staging.reserve(rows * outs)
    ins = qfc(xa, rows, inner, outs, wa, out, in_zp=zps[0], out_zp=zps[1], rq_addr=ra)
    (y,) = run_both(layer_program(staging, [ins], out, (rows, outs), dtype=DType.I8), [])
    assert np.abs(y.astype(np.int64) - expected.astype(np.int64)).max() <= 1


# ---------------------------------------------------------------------- splits and chains


def test_a_qconv_cut_by_rows_channels_and_input_blocks_gives_the_bytes_of_one():
    """Output rows (orow0 with the window's row0), output channels (oc0 of a grouped layer)
    and input channels (partial sums through acc_out and acc_addr, the bias in the first
    piece) each compute exactly what one instruction over the whole layer computes."""
    rng = np.random.default_rng(3)
    n, h, w_, c, oc, groups = 1, 7, 5, 10, 6, 2
    cg = c // groups
    x = rng.integers(-128, 128, (n, h, w_, c)).astype(np.int8)
    w = rng.integers(-127, 128, (oc, 3, 3, cg)).astype(np.int8)
    bias = rng.integers(-5000, 5000, oc).astype(np.int32)
    pairs = int8.conv_requant_pairs(0.05, rng.uniform(0.002, 0.01, oc), 0.2)
    common = dict(kernel=(3, 3), pad=(1, 1), in_zp=-9, out_zp=4, clamp=(-100, 100))
    out_shape = (n, h, w_, oc)

    staging = Staging()
    xa, wa, ba, ra = staging.add(x), staging.add(w), staging.add(bias), staging.add(pairs)
    whole_out = staging.reserve(int(np.prod(out_shape)))
    whole = qconv(
        xa, x.shape, whole_out, out_shape, wa, groups=groups, b_addr=ba, rq_addr=ra, **common
    )
    (expected,) = run_both(
        layer_program(staging, [whole], whole_out, out_shape, dtype=DType.I8), []
    )

    # By rows: output rows [0, 3) and [3, 7), each given the input rows it needs.
    staging = Staging()
    wa, ba, ra = staging.add(w), staging.add(bias), staging.add(pairs)
    out = staging.reserve(int(np.prod(out_shape)))
    pieces = []
    for orow0, rows in ((0, 3), (3, 4)):
        first, last = max(0, orow0 - 1), min(h, orow0 + rows + 1)
        window = staging.add(np.ascontiguousarray(x[:, first:last]))
        piece_out = out + orow0 * w_ * oc
        pieces.append(
            qconv(
                window,
                (n, last - first, w_, c),
                piece_out,
                (n, rows, w_, oc),
                wa,
                row0=first,
                orow0=orow0,
                groups=groups,
                b_addr=ba,
                rq_addr=ra,
                **common,
            )
        )
    (by_rows,) = run_both(layer_program(staging, pieces, out, out_shape, dtype=DType.I8), [])
    np.testing.assert_array_equal(by_rows, expected)

    # By output channels: [0, 2), [2, 5) (crossing the group boundary at 3) and [5, 6).
    channel_outs = []
    for oc0, count in ((0, 2), (2, 3), (5, 1)):
        staging = Staging()
        xa = staging.add(x)
        wa = staging.add(np.ascontiguousarray(w[oc0 : oc0 + count]))
        ba = staging.add(bias[oc0 : oc0 + count])
        ra = staging.add(np.ascontiguousarray(pairs[oc0 : oc0 + count]))
        tile_shape = (n, h, w_, count)
        out = staging.reserve(int(np.prod(tile_shape)))
        ins = qconv(
            xa, x.shape, out, tile_shape, wa, groups=groups, oc0=oc0, oc_total=oc,
            b_addr=ba, rq_addr=ra, **common,
        )  # fmt: skip
        channel_outs.append(
            run_both(layer_program(staging, [ins], out, tile_shape, dtype=DType.I8), [])[0]
        )
    np.testing.assert_array_equal(np.concatenate(channel_outs, axis=3), expected)

    # By input channels, groups = 1: channels [0, 4) then [4, 10) through int32 partial sums.
    w1 = rng.integers(-127, 128, (oc, 3, 3, c)).astype(np.int8)
    staging = Staging()
    xa, wa, ba, ra = staging.add(x), staging.add(w1), staging.add(bias), staging.add(pairs)
    out = staging.reserve(int(np.prod(out_shape)))
    one = qconv(xa, x.shape, out, out_shape, wa, b_addr=ba, rq_addr=ra, **common)
    (whole_c,) = run_both(layer_program(staging, [one], out, out_shape, dtype=DType.I8), [])
    staging = Staging()
    blocks = [(0, 4), (4, 10)]
    windows = [staging.add(np.ascontiguousarray(x[..., a:b])) for a, b in blocks]
    weights = [staging.add(np.ascontiguousarray(w1[..., a:b])) for a, b in blocks]
    ba, ra = staging.add(bias), staging.add(pairs)
    partial = staging.reserve(4 * int(np.prod(out_shape)))
    out = staging.reserve(int(np.prod(out_shape)))
    chain = [
        qconv(
            windows[0], (n, h, w_, 4), partial, out_shape, weights[0], b_addr=ba, acc_out=1,
            **common,
        ),
        qconv(
            windows[1], (n, h, w_, 6), out, out_shape, weights[1], acc_addr=partial,
            rq_addr=ra, **common,
        ),
    ]  # fmt: skip
    (chained,) = run_both(layer_program(staging, chain, out, out_shape, dtype=DType.I8), [])
    np.testing.assert_array_equal(chained, whole_c)


# ------------------------------------------------------------- qpool against onnxruntime


@pytest.mark.parametrize("mode", ["MaxPool", "AveragePool", "GlobalAveragePool"])
def test_qpool_is_within_one_step_of_onnxruntime_qdq_pools(mode, record_property):
    """DequantizeLinear -> pool -> QuantizeLinear in fp32 with the same scale and zero point
    on both sides (what onnxruntime's quantizer writes for pools), against `qpool` with the
    identity pair. Max is exact; an average rounds its ties to even there and away from zero
    here (TFLite's rule), so it may be one step off; the share exact is reported."""
    from mrvl.isa import PoolMode

    rng = np.random.default_rng(9)
    s, z = 0.05, -7
    x = rng.integers(-128, 128, (2, 9, 11, 5)).astype(np.int8)
    global_pool = mode == "GlobalAveragePool"
    kernel, stride, pads = (
        ((9, 11), (1, 1), (0, 0, 0, 0)) if global_pool else ((3, 3), (2, 2), (1, 1, 1, 1))
    )
    attrs = (
        {}
        if global_pool
        else dict(kernel_shape=list(kernel), strides=list(stride), pads=list(pads))
    )
    if mode == "AveragePool":
        attrs["count_include_pad"] = 0
    session = _session(
        [
            helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"]),
            helper.make_node(mode, ["xf"], ["yf"], **attrs),
            helper.make_node("QuantizeLinear", ["yf", "s", "z"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.INT8, None)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [_scalar("s", s, TensorProto.FLOAT), _scalar("z", z, TensorProto.INT8)],
    )
    (expected,) = session.run(None, {"x": x.transpose(0, 3, 1, 2).copy()})
    expected = expected.transpose(0, 2, 3, 1)
    out_shape = expected.shape
    staging = Staging()
    xa, out = staging.add(x), staging.reserve(int(np.prod(out_shape)))
    ins = instruction(
        "qpool", in_addr=xa, in_shape=x.shape, row0=0, out_addr=out, out_shape=out_shape,
        orow0=0, kernel=kernel, stride=stride, pad=pads[:2],
        mode=int(PoolMode.MAX if mode == "MaxPool" else PoolMode.AVG), in_hw=(9, 11),
        pad_end=pads[2:], count_include_pad=0, in_zp=z, out_zp=z, rq=(1 << 30, 1),
    )  # fmt: skip
    (actual,) = run_both(layer_program(staging, [ins], out, out_shape, dtype=DType.I8), [])
    steps = np.abs(actual.astype(np.int64) - expected.astype(np.int64))
    assert steps.max() <= (0 if mode == "MaxPool" else 1)
    share = float((steps == 0).mean())
    record_property(f"qpool_{mode}_exact_share_vs_onnxruntime", share)
    print(f"qpool {mode} vs onnxruntime QDQ: {share:.2%} exact")
    assert share > 0.9
