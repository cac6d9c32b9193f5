"""int8 layers of the zoo's QDQ forms beyond the small CNN's (issue 20): a Dropout between two
QDQ pairs, Caffe2's `Sum`, a per-channel affine (a BatchNormalization after a concat) and a
table activation fused into the layer before it. Each is a small `onnx.helper` model
quantized by `mrvl.quantize`, built in one region and run against onnxruntime on the same
QDQ model, in quantization steps of the output's scale."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from int8_builders import assert_region_engines_agree, qdq_build
from tvm import relax

import mrvl
from mrvl.accuracy import reference_session

sys.path.insert(0, str(Path(__file__).parents[1] / "quantization"))
from qdq_models import affine_cnn, calibration, dropout_cnn, sum_cnn  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_int8_end_to_end import steps  # noqa: E402


def build_and_compare(model, num_tiles: int = 1, inputs: int = 4):
    """The QDQ model's partition report and the largest step of its build's output from
    onnxruntime's on `inputs` seeded inputs."""
    report, lib = qdq_build(model, num_tiles)
    vm = relax.VirtualMachine(lib, tvm.cpu())
    session = reference_session(model)
    worst = 0.0
    for x in calibration(inputs, seed=11):
        got = vm["main"](tvm.runtime.tensor(x["x"])).numpy()
        worst = max(worst, float(steps(model, got, session.run(None, x)[0]).max()))
    return report, worst


def test_dropout_between_qdq_pairs_stays_in_the_region():
    """Regression (light SqueezeNet's QDQ form): Q -> DQ -> Dropout -> Q -> DQ leaves a
    dequantize read by a quantize once TVM drops the Dropout. That pair was checked as a
    layer between them ("a quantized layer with a float input"), left on the CPU, and the
    next region then took an int8 tensor ("... int8 is not a float32 tensor"). Now the pair
    is in the region (`mrvl-fold-qdq` cancels it) and the model is one int8 region."""
    model = mrvl.quantize(dropout_cnn(), calibration(16, seed=2))
    report, worst = build_and_compare(model)
    assert len(report.regions) == 1, report
    assert report.int8_mac_fraction == 1.0
    assert not report.on_cpu()
    assert worst <= 1, worst


@pytest.mark.parametrize("inputs", [2, 3])
def test_caffe2_sum_is_an_int8_add(inputs):
    """`mrvl.quantize` quantizes a `Sum` (onnxruntime leaves it in float: light ResNet-50's
    last residual then split the model in 3 regions); TVM imports it as Adds, which run as
    `qadd`s in the one int8 region."""
    model = mrvl.quantize(sum_cnn(inputs=inputs), calibration(16, seed=2))
    sums = [n for n in model.graph.node if n.op_type == "Sum"]
    producers = {o: n.op_type for n in model.graph.node for o in n.output}
    assert all(producers[i] == "DequantizeLinear" for i in sums[0].input)
    report, worst = build_and_compare(model)
    assert len(report.regions) == 1, report
    assert {r.node: r.dtype for r in report.rows}["/sum/Sum"] == "int8"
    assert report.int8_mac_fraction == 1.0
    assert worst <= 1, worst


def _light_qdq(name: str):
    from mrvl.models.light import load_light_model, random_inputs

    model = load_light_model(name)
    return mrvl.quantize(model, [random_inputs(model, seed=1000 + i) for i in range(8)])


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, regions", [("squeezenet", 1), ("resnet50", 1)]
)  # SqueezeNet: 2 regions while its Softmax was on the CPU (the Reshape after it a second one)
def test_light_qdq_models_build_in_int8(name, regions):
    """The QDQ forms of light SqueezeNet (failed to compile: the Dropout pair) and light
    ResNet-50 (3 regions: its last `Sum` in float) build, every MAC in int8, within 3 steps
    of onnxruntime on the same QDQ model."""
    from mrvl.models.light import random_inputs

    qdq = _light_qdq(name)
    report, lib = qdq_build(qdq, num_tiles=8)
    assert len(report.regions) == regions, report
    assert report.int8_mac_fraction == 1.0
    assert {r.op_type for r in report.on_cpu()} <= {"Softmax", "QuantizeLinear", "DequantizeLinear"}
    vm = relax.VirtualMachine(lib, tvm.cpu())
    feeds = random_inputs(qdq, seed=5)
    got = vm["main"](*[tvm.runtime.tensor(x) for x in feeds.values()]).numpy()
    want = reference_session(qdq).run(None, feeds)[0]
    assert steps(qdq, got, want).max() <= 3


@functools.cache
def _affine_qdq(form: str):
    """`affine_cnn(form=form)` quantized by `mrvl.quantize`, once (both tests of the "bn"
    form use it)."""
    return mrvl.quantize(affine_cnn(form=form), calibration(16, seed=2))


@pytest.mark.parametrize("form", ["bn", "muladd"])
def test_per_channel_affine_is_a_depthwise_int8_conv(form):
    """DenseNet's BatchNormalization after a concat (and a Mul + Add by per-channel
    constants) between a dequantize and a quantize runs as a depthwise 1x1 `qconv` in the one
    int8 region (`fold_qdq_affine.py`), within 1 step of onnxruntime's float affine."""
    report, worst = build_and_compare(_affine_qdq(form))
    assert len(report.regions) == 1, report
    rows = {r.node: r.dtype for r in report.rows}
    for node in ["/bn"] if form == "bn" else ["/mul", "/add"]:
        assert rows[node] == "int8", (node, rows)
    assert worst <= 1, worst


def test_per_channel_affine_is_bit_identical_on_both_engines():
    _, lib = qdq_build(_affine_qdq("bn"), num_tiles=2)
    (region,) = lib.mrvl_regions
    convs = [i for i in region.program.code if i.opcode == "qconv"]
    assert len(convs) >= 3, [i.opcode for i in region.program.code]
    (feed,) = calibration(1, seed=5)
    assert_region_engines_agree(lib, [feed["x"]])


@pytest.mark.parametrize(
    "scales", [(0.05, 3, 1 / 255, -128, 0.04, -5), (0.2, -20, 1 / 256, -128, 0.1, -100)]
)
def test_silu_table_is_onnxruntime_qdq_on_every_input(scales):
    """x * sigmoid(x) as one table (`fold_qdq_gated_tables.gated_table` of the sigmoid's
    `int8.int8_table`) equals onnxruntime's DQ -> Sigmoid -> Q -> DQ -> Mul -> Q on each of
    the 256 int8 inputs: the table is exact where the qmul it replaces was within 1 step."""
    from onnx import TensorProto, helper

    from mrvl import int8
    from mrvl.passes.graph.fold_qdq_gated_tables import gated_table

    s_x, z_x, s_g, z_g, s_y, z_y = scales
    inits = [
        helper.make_tensor(n, t, [], [v])
        for n, t, v in [
            ("sx", TensorProto.FLOAT, s_x), ("zx", TensorProto.INT8, z_x),
            ("sg", TensorProto.FLOAT, s_g), ("zg", TensorProto.INT8, z_g),
            ("sy", TensorProto.FLOAT, s_y), ("zy", TensorProto.INT8, z_y),
        ]
    ]  # fmt: skip
    nodes = [
        helper.make_node("DequantizeLinear", ["q", "sx", "zx"], ["x"]),
        helper.make_node("Sigmoid", ["x"], ["g"]),
        helper.make_node("QuantizeLinear", ["g", "sg", "zg"], ["gq"]),
        helper.make_node("DequantizeLinear", ["gq", "sg", "zg"], ["gd"]),
        helper.make_node("Mul", ["x", "gd"], ["m"]),
        helper.make_node("QuantizeLinear", ["m", "sy", "zy"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "silu",
        [helper.make_tensor_value_info("q", TensorProto.INT8, [256])],
        [helper.make_tensor_value_info("out", TensorProto.INT8, [256])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    session = reference_session(model)
    (want,) = session.run(None, {"q": np.arange(-128, 128, dtype=np.int8)})
    sigmoid = int8.int8_table(lambda v: 1 / (1 + np.exp(-v)), s_x, z_x, s_g, z_g)
    got = gated_table(sigmoid, (s_x, z_x), (s_g, z_g), (s_y, z_y))
    np.testing.assert_array_equal(got, want)
