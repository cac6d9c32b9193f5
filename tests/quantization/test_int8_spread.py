"""scripts/int8_reference_spread.py and scripts/int8_layer_rules.py: onnxruntime's two forms
of a QDQ model's int8 result (fused integer kernels, or DQ → fp32 op → Q), the steps between
results, the three requantization rules, and the int8 triage's feeds by input name."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
from helpers import load_module  # noqa: E402
from qdq_models import calibration, quantize_static_qdq, small_cnn  # noqa: E402

spread = load_module("mrvl_int8_reference_spread", ROOT / "scripts" / "int8_reference_spread.py")
rules = load_module("mrvl_int8_layer_rules", ROOT / "scripts" / "int8_layer_rules.py")


def conv_chain() -> onnx.ModelProto:
    """conv(3 -> 8, 3x3) - relu - conv(8 -> 8, 3x3, stride 2): each QDQ pair with one reader,
    so onnxruntime fuses both convs on x86."""
    rng = np.random.default_rng(5)

    def weight(name, shape, scale):
        return onnx.numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name
        )

    nodes = [
        oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="/conv1/Conv", pads=[1] * 4),
        oh.make_node("Relu", ["c1"], ["r1"], name="/relu1/Relu"),
        oh.make_node("Conv", ["r1", "w2", "b2"], ["y"], name="/conv2/Conv", pads=[1] * 4,
                     strides=[2, 2]),
    ]  # fmt: skip
    inits = [
        weight("w1", (8, 3, 3, 3), 0.3), weight("b1", (8,), 0.1),
        weight("w2", (8, 8, 3, 3), 0.2), weight("b2", (8,), 0.1),
    ]  # fmt: skip
    graph = oh.make_graph(
        nodes, "conv_chain", [oh.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 16, 16))],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits,
    )  # fmt: skip
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def chain():
    return quantize_static_qdq(conv_chain())


@pytest.fixture(scope="module")
def feeds():
    return calibration(1, seed=7)[0]


def test_onnxruntime_fuses_a_chain_but_not_a_residual_block(chain):
    """A Q read by two DequantizeLinears (a residual) keeps its int8 pair, which x86 does not
    fuse: small_cnn's convs run in fp32 between DQ and Q, the chain's in QLinearConv."""
    counts = spread.kernel_counts(chain)
    assert counts["integer"]["QLinearConv"] == 2, counts
    assert "Conv" not in counts["float"], counts
    residual = spread.kernel_counts(quantize_static_qdq(small_cnn()))
    assert residual["float"]["Conv"] == 2, residual
    assert rules.fused_layers(chain)["/conv2/Conv"] == "integer"


def test_steps_and_their_summary():
    a = np.array([0.0, 0.5, 1.0, 2.5], np.float32)
    b = np.array([0.0, 0.0, 1.0, 1.0], np.float32)
    steps = spread.steps_between(a, b, 0.5)
    assert steps.tolist() == [0, 1, 0, 3]
    assert spread.step_summary(steps) == {"exact": 0.5, "1": 0.75, "3": 1.0, "max": 3.0}
    found = spread.spread({"ort-on": {"t": a}, "ort-off": {"t": b}}, [("t", 0.5)])
    assert list(found) == [("ort-off", "ort-on")]
    with pytest.raises(ValueError, match="cannot be compared"):
        spread.steps_between(a, b[:2], 0.5)


def test_rules_differ_at_a_tie():
    """acc · 1 · 0.5 / 1 lands on x.5: mrvl's Q31 rule goes up, onnxruntime's fp32 rule and
    the exact one to even; below a tie all three agree."""
    acc = np.array([[5], [-5], [7], [4]], np.int64)
    got = {r: rules.requantize_rule(r, acc, 1.0, [0.5], 1.0, 0).ravel().tolist() for r in rules.RULES}
    assert got["q31"] == [3, -2, 4, 2]
    assert got["mlas"] == [2, -2, 4, 2]
    assert got["exact"] == [2, -2, 4, 2]
    with pytest.raises(ValueError, match="one of"):
        rules.requantize_rule("floor", acc, 1.0, [0.5], 1.0, 0)


def test_conv_accumulator_is_onnxruntimes_conv():
    """Small integers, so onnxruntime's fp32 Conv is exact: strides, dilations, asymmetric
    pads and groups."""
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (1, 4, 9, 8)).astype(np.int64)
    w = rng.integers(-3, 4, (6, 2, 3, 2)).astype(np.int64)
    attrs = {"group": 2, "strides": [2, 1], "dilations": [2, 1], "pads": [1, 0, 2, 1]}
    node = oh.make_node("Conv", ["x", "w"], ["y"], name="conv", **attrs)
    graph = oh.make_graph(
        [node], "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(w.astype(np.float32), "w")],
    )  # fmt: skip
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    (want,) = spread.ort_session(model, False).run(None, {"x": x.astype(np.float32)})
    got = rules.conv_accumulator(x, w, node)
    np.testing.assert_array_equal(got, np.moveaxis(want, 1, -1).astype(np.int64))


def test_pair_saturated_sums_are_exact_until_a_pair_overflows_int16():
    """Below int16 the paired sums are the exact accumulator of x - zero point (padding at
    the zero point adds nothing); 255 · 127 twice is 64,770 and saturates at 32,767."""
    rng = np.random.default_rng(4)
    node = oh.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 0, 1, 1], strides=[2, 1])
    x = rng.integers(0, 40, (1, 3, 6, 5))
    w = rng.integers(-20, 21, (4, 3, 3, 3))
    got = rules.conv_pair_saturated(x, 17, w, node)
    np.testing.assert_array_equal(got, rules.conv_accumulator(x - 17, w, node))
    x = np.full((1, 2, 1, 1), 255)
    w = np.full((1, 2, 1, 1), 127)
    plain = oh.make_node("Conv", ["x", "w"], ["y"], name="conv")
    assert rules.conv_pair_saturated(x, 0, w, plain).ravel().tolist() == [32767]
    assert rules.conv_accumulator(x, w, plain).ravel().tolist() == [64770]
    grouped = oh.make_node("Conv", ["x", "w"], ["y"], name="conv", group=2)
    with pytest.raises(ValueError, match="group-1"):
        rules.conv_pair_saturated(x, 0, w[:, :1].repeat(2, 0), grouped)


def test_fused_convs_follow_the_mlas_rule_and_mrvl_the_q31_rule(chain, feeds):
    """Each conv run alone on mrvl's int8 inputs (the first on the graph input's quantize):
    onnxruntime's fused kernel gives the `mlas` rule's result bit for bit (on its own sums,
    pair-saturated on a CPU without VNNI: `rules.ORT_SATURATES_PAIRS`), and mrvl the `q31`
    rule's (the numpy emulation of its
    engines), so a rule's count against onnxruntime is what mrvl would change."""
    tensors = rules.quantized_tensors(chain)
    by_name = {t.name: t for t in tensors}
    mrvl = {
        k: rules._as_signed(v, by_name[k].zero_point, by_name[k].elem_type)[0]
        for k, v in rules.mrvl_int8(chain, feeds, tensors).items()
    }
    mrvl.update(rules.input_quantizes(chain, feeds))
    diffs = [d for d in rules.layer_diffs(chain, tensors, mrvl) if d.rules]
    assert [d.node for d in diffs] == ["/conv1/Conv", "/conv2/Conv"], diffs  # ReLU folded
    assert all(d.kind == "integer" for d in diffs), diffs
    for d in diffs:
        assert d.rules["mlas"]["on"] == 0, d
        assert d.rules["q31"]["mrvl"] == 0, d
        assert d.rules["q31"]["on"] == d.differ["on"], d


def test_triage_takes_feeds_by_input_name():
    from int8_triage import graph_feeds

    model = small_cnn()
    x = np.zeros((1, 3, 16, 16), np.float32)
    assert list(graph_feeds(model, x)) == ["x"]
    assert graph_feeds(model, {"x": x})["x"] is not None
    with pytest.raises(ValueError, match="model's inputs are"):
        graph_feeds(model, {"input_ids": x})


def test_report_counts_layers_by_kind_and_totals_the_rules():
    diffs = [
        rules.LayerDiff("a", "Conv", "/a", "integer", 10, {"on": 0, "off": 1}, {"on": 0, "off": 1},
                        {r: {"mrvl": 0, "on": 0} for r in rules.RULES}),
        rules.LayerDiff("b", "Conv", "/b", "float", 10, {"on": 2, "off": 2}, {"on": 1, "off": 1},
                        {r: {"mrvl": 0, "on": 2} for r in rules.RULES}),
    ]  # fmt: skip
    lines = rules.report(diffs, {"b": 5})
    assert "| integer | Conv | 1 | 0 (0) | 1 (1) |" in lines
    assert "| float | Conv | 1 | 1 (1) | 1 (1) |" in lines
    assert any(line.startswith("- /b (Conv, float): alone 2 of 10") for line in lines)
    assert any("recomputed float layers (10 elements)" in line and "q31 ≠ mrvl 0, on 2" in line
               for line in lines)  # fmt: skip


def test_a_layer_reading_an_unquantized_float_is_not_alone():
    """small_cnn's Add reads a quantized tensor and a conv's; its QDQ form quantizes both, so
    it is alone; the same Add fed by a float op (no quantize between) is not."""
    qdq = quantize_static_qdq(small_cnn())
    tensors = {t.layer.name: t for t in rules.quantized_tensors(qdq)}
    assert rules.layer_group(qdq, tensors["/add/Add"]) is not None
    cut = onnx.ModelProto()
    cut.CopyFrom(qdq)
    producer = {o: n for n in cut.graph.node for o in n.output}
    add = next(n for n in cut.graph.node if n.name == "/add/Add")
    dq = producer[add.input[0]]
    add.input[0] = producer[dq.input[0]].input[0]  # the float before its Q -> DQ pair
    t = next(t for t in rules.quantized_tensors(cut) if t.layer.name == "/add/Add")
    assert rules.layer_group(cut, t) is None
