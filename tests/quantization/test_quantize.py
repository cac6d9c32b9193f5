"""`mrvl.quantize` and `mrvlc --quantize int8`: the QDQ model is in the form the MLIP runs
exactly (symmetric int8 weights per output channel, int8 activations with a zero point, int32
biases at s_in * s_w), it tracks the float model, and bad calibration data or an unknown
`keep_fp16` node is one clear error with nothing written."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from helpers import truncated_at
from onnx import numpy_helper

import mrvl
from mrvl.accuracy import reference_session
from mrvl.mixed_precision import AccuracyTargetWarning, output_error, quantization_report
from mrvl.quantization import QuantizeError
from mrvl.tools import mrvlc

SAMPLES = 16


@pytest.fixture(scope="module")
def calibration():
    return np.random.default_rng(3).standard_normal((SAMPLES, 1, 28, 28)).astype(np.float32)


@pytest.fixture(scope="module")
def qdq(mnist_model, calibration):
    return mrvl.quantize(mnist_model, calibration)


def _initializers(model) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def _dequantized(model, op_type: str) -> dict[str, tuple]:
    """For each `op_type` node: its inputs' (quantized value, scale, zero point, axis) where
    a DequantizeLinear of an initializer feeds them, by input position."""
    inits = _initializers(model)
    producers = {out: node for node in model.graph.node for out in node.output}
    found = {}
    for node in model.graph.node:
        if node.op_type != op_type:
            continue
        for position, name in enumerate(node.input):
            dq = producers.get(name)
            if dq is None or dq.op_type != "DequantizeLinear" or dq.input[0] not in inits:
                continue
            axis = next((a.i for a in dq.attribute if a.name == "axis"), 1)
            value, scale, zero = (inits[n] for n in dq.input[:3])
            found[(node.name, position)] = (value, scale, zero, axis)
    return found


def _activation_scale(model, node_name: str) -> float:
    """The scale of the DequantizeLinear that feeds `node_name`'s first input."""
    inits = _initializers(model)
    producers = {out: node for node in model.graph.node for out in node.output}
    node = next(n for n in model.graph.node if n.name == node_name)
    dq = producers[node.input[0]]
    assert dq.op_type == "DequantizeLinear"
    return float(inits[dq.input[1]])


def test_weights_activations_and_biases_in_the_mlip_form(qdq):
    counts = Counter(node.op_type for node in qdq.graph.node)
    assert counts["QuantizeLinear"] > 0 and counts["DequantizeLinear"] > counts["QuantizeLinear"]
    for op_type in ("Conv", "Gemm"):
        found = _dequantized(qdq, op_type)
        layers = {name for name, _ in found}
        assert layers, op_type
        for layer in layers:
            weight, w_scale, w_zero, axis = found[(layer, 1)]
            assert weight.dtype == np.int8 and axis == 0
            assert w_scale.shape == (weight.shape[0],)  # one scale per output channel
            assert not w_zero.any()  # symmetric
            bias, b_scale, b_zero, _ = found[(layer, 2)]
            assert bias.dtype == np.int32 and not b_zero.any()
            s_in = _activation_scale(qdq, layer)
            np.testing.assert_allclose(b_scale, s_in * w_scale, rtol=1e-6)
    inits = _initializers(qdq)
    for node in qdq.graph.node:
        if node.op_type == "QuantizeLinear":
            assert inits[node.input[2]].dtype == np.int8  # activations: int8, with a zero point


def test_qdq_model_tracks_the_float_model(mnist_model, qdq):
    """On other samples than the calibration's, the QDQ model's logits stay within 5 % of the
    range of the float model's (measured: 2.9 % at most, 1.3 % on average), and the class
    agrees on all but at most one."""
    float_run = reference_session(truncated_at(mnist_model, "logits"))
    qdq_run = reference_session(truncated_at(qdq, "logits"))
    name = float_run.get_inputs()[0].name
    agree = 0
    for sample in np.random.default_rng(4).standard_normal((SAMPLES, 1, 1, 28, 28)):
        sample = sample.astype(np.float32)
        want = float_run.run(None, {name: sample})[0]
        got = qdq_run.run(None, {name: sample})[0]
        assert np.abs(got - want).max() <= 0.05 * (want.max() - want.min())
        agree += int(got.argmax() == want.argmax())
    assert agree >= SAMPLES - 1


def _activation_scales(model) -> tuple[float, ...]:
    inits = _initializers(model)
    return tuple(
        float(inits[node.input[1]]) for node in model.graph.node if node.op_type == "QuantizeLinear"
    )


def test_methods_choose_their_own_ranges(mnist_model, calibration, qdq):
    """Entropy and percentile clip what min-max keeps: no wider range anywhere, and a
    narrower one somewhere (entropy runs with 2048 histogram bins; onnxruntime's default of
    128 for 128 quantized bins gave exactly the min-max ranges)."""
    minmax = _activation_scales(qdq)
    for method in ("entropy", "percentile"):
        scales = _activation_scales(mrvl.quantize(mnist_model, calibration, method=method))
        assert len(scales) == len(minmax)
        assert all(s <= m * (1 + 1e-6) for s, m in zip(scales, minmax)), method
        assert any(s < m * 0.99 for s, m in zip(scales, minmax)), method


def test_feeds_as_dict_and_iterable_give_the_array_result(mnist_model, calibration, qdq):
    name = mnist_model.graph.input[0].name
    by_dict = mrvl.quantize(mnist_model, {name: calibration})
    by_feeds = mrvl.quantize(mnist_model, ({name: x[None]} for x in calibration))
    for model in (by_dict, by_feeds):
        assert model.graph.SerializeToString() == qdq.graph.SerializeToString()


def test_keep_fp16_leaves_the_layer_in_float(mnist_model, calibration):
    model = mrvl.quantize(mnist_model, calibration, keep_fp16=["/fc2/Gemm"])
    quantized_layers = {name for name, _ in _dequantized(model, "Gemm")}
    assert "/fc2/Gemm" not in quantized_layers and "/fc1/Gemm" in quantized_layers


@pytest.mark.parametrize(
    ("calibration", "message"),
    [
        (np.zeros((0, 1, 28, 28), np.float32), "has no samples"),
        ([], "the calibration set is empty"),
        (
            np.zeros((4, 1, 27, 28), np.float32),
            "has shape (1, 1, 27, 28), the model wants 1x1x28x28",
        ),
        (np.full((2, 1, 28, 28), "a"), "is <U1, the model wants float32"),
        ({"image": np.zeros((2, 1, 28, 28), np.float32)}, "names 'image', which the model"),
        ([{"input": np.zeros((1, 1, 28, 28), np.float32)}, 3], "feed 1 is a int, not a dict"),
        ("digits.npy", "not str"),
    ],
)
def test_bad_calibration_is_one_clear_error(mnist_model, calibration, message):
    with pytest.raises(QuantizeError) as err:
        mrvl.quantize(mnist_model, calibration)
    assert message in str(err.value)


def test_unknown_keep_fp16_node_and_method(mnist_model, calibration):
    with pytest.raises(QuantizeError, match="no node named 'fc9'"):
        mrvl.quantize(mnist_model, calibration, keep_fp16=["fc9"])
    with pytest.raises(QuantizeError, match="unknown calibration method 'kl'"):
        mrvl.quantize(mnist_model, calibration, method="kl")


def test_mrvlc_quantize_writes_the_qdq_model_and_runs_it_in_int8(
    mnist_model, calibration, tmp_path, capsys
):
    model_path = tmp_path / "mnist.onnx"
    onnx.save(mnist_model, model_path)
    data = tmp_path / "calib.npy"
    np.save(data, calibration)
    out = tmp_path / "out"
    argv = [str(model_path), "--quantize", "int8", "--calibration", str(data), "--report",
            "-o", str(out), "--keep-fp16", "/fc2/Gemm"]  # fmt: skip
    assert mrvlc.main(argv) == 0
    captured = capsys.readouterr()
    assert f"quantized on {SAMPLES} calibration samples (minmax)" in captured.out
    rows = {line.split()[0]: line.split() for line in captured.out.splitlines() if line[:1] == "/"}
    assert rows["/conv1/Conv"][3] == "int8"  # node, op, runs on, dtype
    assert rows["/fc2/Gemm"][3] == "float16"  # kept in float: fp16 on the MLIP
    written = onnx.load(out / "mnist.qdq.onnx")
    assert "/fc2/Gemm" not in {name for name, _ in _dequantized(written, "Gemm")}


@pytest.mark.parametrize(
    ("extra", "message", "status"),
    [
        ([], "--quantize int8 needs --calibration DATA", 2),
        (["--calibration", "CALIB", "--keep-fp16", "nope"], "no node named 'nope'", 2),
        (["--calibration", "MISSING"], "no such file or folder", 1),
    ],
)
def test_mrvlc_quantize_errors_are_one_line(
    mnist_model, calibration, tmp_path, capsys, extra, message, status
):
    model_path = tmp_path / "mnist.onnx"
    onnx.save(mnist_model, model_path)
    np.save(tmp_path / "calib.npy", calibration)
    paths = {"CALIB": str(tmp_path / "calib.npy"), "MISSING": str(tmp_path / "missing")}
    extra = [paths.get(a, a) for a in extra]
    out = tmp_path / "out"
    assert mrvlc.main([str(model_path), "--quantize", "int8", "-o", str(out), *extra]) == status
    err = capsys.readouterr().err.strip()
    assert err.startswith("mrvlc: error:") and message in err and "\n" not in err
    assert not (out / "mnist.qdq.onnx").exists()


def test_accuracy_target_keeps_the_fewest_sensitive_layers(mnist_model, calibration):
    """The kept layers bring the outputs within the target, and one fewer of them (in the
    order of sensitivity) does not; the report says which and why."""
    target = 0.05
    model = mrvl.quantize(mnist_model, calibration, accuracy_target=target)
    report = quantization_report(model)
    kept = [entry["node"] for entry in report["kept"]]
    feeds = [{"input": x[None]} for x in calibration]
    assert report["reached"] and kept
    assert report["error_with_asked_layers_only"] > target
    assert output_error(mnist_model, model, feeds) == report["output_error"] <= target
    fewer = mrvl.quantize(mnist_model, calibration, keep_fp16=kept[:-1])
    assert output_error(mnist_model, fewer, feeds) > target
    assert all("dB of SQNR" in entry["why"] for entry in report["kept"])
    assert {"/fc2/Gemm", "/conv1/Conv"} <= set(kept)  # first and last layer: the most sensitive


def test_an_unreachable_target_warns(mnist_model, calibration):
    with pytest.warns(AccuracyTargetWarning, match="beyond the accuracy target 1e-09"):
        model = mrvl.quantize(mnist_model, calibration, accuracy_target=1e-9)
    report = quantization_report(model)
    assert not report["reached"] and report["output_error"] > 1e-9
    with pytest.raises(QuantizeError, match="accuracy_target must be > 0"):
        mrvl.quantize(mnist_model, calibration, accuracy_target=0)


def test_report_of_asked_layers(mnist_model, calibration):
    model = mrvl.quantize(mnist_model, calibration, keep_fp16=["/conv1/Conv"], method="entropy")
    assert quantization_report(model) == {
        "method": "entropy",
        "kept": [{"node": "/conv1/Conv", "why": "asked"}],
    }


def test_mrvlc_accuracy_target(mnist_model, calibration, tmp_path, capsys):
    model_path = tmp_path / "mnist.onnx"
    onnx.save(mnist_model, model_path)
    np.save(tmp_path / "calib.npy", calibration)
    argv = [str(model_path), "--quantize", "int8", "--calibration", str(tmp_path / "calib.npy"),
            "--accuracy-target", "0.05", "--report"]  # fmt: skip
    assert mrvlc.main(argv) == 0
    out = capsys.readouterr().out
    assert "kept in float: /fc2/Gemm (sensitivity rank 1 of 4" in out
    assert "(target 0.05; all int8:" in out


def test_a_model_below_opset_13_is_upgraded_before_quantizing():
    """Opset 11 has no per-channel DequantizeLinear: the model is converted to opset 13
    first, so the QDQ model passes the ONNX checker and runs in onnxruntime."""
    from qdq_models import INPUT_SHAPE, small_cnn

    model = small_cnn()
    del model.opset_import[:]
    model.opset_import.append(onnx.helper.make_opsetid("", 11))
    onnx.checker.check_model(model)
    feeds = np.random.default_rng(4).standard_normal((4, *INPUT_SHAPE[1:])).astype(np.float32)
    qdq = mrvl.quantize(model, feeds)
    onnx.checker.check_model(qdq)
    assert next(o.version for o in qdq.opset_import if o.domain in ("", "ai.onnx")) >= 13
    axes = {
        a.i for n in qdq.graph.node if n.op_type == "DequantizeLinear" for a in n.attribute
        if a.name == "axis"
    }  # fmt: skip
    assert axes, "the weights are quantized per channel"
    session = reference_session(qdq)
    assert session.run(None, {"x": feeds[:1]})[0].shape == (1, 10)


def _conv_bn_model(opset: int = 13) -> onnx.ModelProto:
    """conv (no bias) -> BatchNormalization -> relu, as a Caffe2 or unfused export has it."""
    from onnx import TensorProto
    from onnx import helper as oh

    rng = np.random.default_rng(7)

    def init(name, array):
        return numpy_helper.from_array(array.astype(np.float32), name)

    inits = [
        init("w", rng.standard_normal((4, 3, 3, 3)) * 0.3),
        init("gamma", rng.uniform(0.5, 2.0, 4)),
        init("beta", rng.standard_normal(4) * 0.1),
        init("mean", rng.standard_normal(4) * 0.1),
        init("var", rng.uniform(0.5, 2.0, 4)),
    ]
    nodes = [
        oh.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        oh.make_node(
            "BatchNormalization",
            ["c", "gamma", "beta", "mean", "var"],
            ["n"],
            name="bn",
            epsilon=1e-3,
        ),  # fmt: skip
        oh.make_node("Relu", ["n"], ["y"], name="relu"),
    ]
    graph = oh.make_graph(
        nodes,
        "conv_bn",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        inits,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def test_batch_norm_after_conv_is_folded_before_quantizing():
    """A Conv -> BatchNormalization pair is one int8 conv in the QDQ model (as after
    onnxruntime's pre-processing), the fold computes what the pair did, and a pair named in
    keep_fp16 is left as it was."""
    from mrvl.batchnorm_folding import fold_batch_norms

    model = _conv_bn_model()
    x = np.random.default_rng(8).standard_normal((4, 3, 8, 8)).astype(np.float32)
    folded = fold_batch_norms(model)
    onnx.checker.check_model(folded)
    assert [n.op_type for n in folded.graph.node] == ["Conv", "Relu"]
    assert folded.graph.node[0].name == "conv"

    def run(m, feed):
        sess = reference_session(m)
        return sess.run(None, {"x": feed})[0]

    np.testing.assert_allclose(run(folded, x[:1]), run(model, x[:1]), rtol=1e-5, atol=1e-5)
    qdq = mrvl.quantize(model, x)
    assert "BatchNormalization" not in {n.op_type for n in qdq.graph.node}
    kept = mrvl.quantize(model, x, keep_fp16=["bn"])
    assert "BatchNormalization" in {n.op_type for n in kept.graph.node}
