"""YOLOv8's box decoding in int8 (issue 20): the box distances minus and plus the anchor
points ([1, 2, N] constants), then times the strides ([1, N]). No int8 instruction computes
an op of a tensor and such a constant, so each runs in fp16 between the region's own dequant
and quant (`mrvl/qdq_binary.py`), reported as fp16; zoo YOLOv8n's QDQ form was 2 regions with
these three on the CPU. An Add of a constant that dequantizes int8 values is exact in int8
and takes that form instead."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tvm
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from tvm import relax

import mrvl
from mrvl.accuracy import reference_session
from mrvl.qdq import TensorQuant
from mrvl.qdq_binary import fp16_error_in_steps

N = 96  # anchors


def _box_decode(seed: int = 0) -> onnx.ModelProto:
    """conv 1x1 to 4 channels -> [1, 4, N] -> split into the two distances -> anchors - lt,
    anchors + rb -> concat -> times the strides."""
    rng = np.random.default_rng(seed)
    anchors = (rng.integers(0, 12, (1, 2, N)) + 0.5).astype("f4")
    strides = np.where(np.arange(N) < N // 2, 8.0, 16.0).astype("f4").reshape(1, N)
    inits = [
        numpy_helper.from_array((rng.standard_normal((4, 8, 1, 1)) * 0.5).astype("f4"), "w"),
        numpy_helper.from_array(np.array([1, 4, N], np.int64), "rows"),
        numpy_helper.from_array(np.array([2, 2], np.int64), "halves"),
        numpy_helper.from_array(anchors, "anchors"),
        numpy_helper.from_array(strides, "strides"),
    ]
    nodes = [
        oh.make_node("Conv", ["x", "w"], ["c"], name="/head/Conv"),
        oh.make_node("Reshape", ["c", "rows"], ["r"], name="/head/Reshape"),
        oh.make_node("Split", ["r", "halves"], ["lt", "rb"], name="/head/Split", axis=1),
        oh.make_node("Sub", ["anchors", "lt"], ["x1y1"], name="/detect/Sub"),
        oh.make_node("Add", ["anchors", "rb"], ["x2y2"], name="/detect/Add"),
        oh.make_node("Concat", ["x1y1", "x2y2"], ["xyxy"], name="/detect/Concat", axis=1),
        oh.make_node("Mul", ["xyxy", "strides"], ["boxes"], name="/detect/Mul"),
    ]
    graph = oh.make_graph(
        nodes,
        "box_decode",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 12])],
        [oh.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, N])],
        inits,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_box_decoding_runs_on_the_mlip_in_fp16_between_edges():
    rng = np.random.default_rng(5)
    feeds = [{"x": rng.standard_normal((1, 8, 8, 12)).astype(np.float32)} for _ in range(4)]
    qdq = mrvl.quantize(_box_decode(), feeds)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(qdq), num_tiles=1)
    report = mrvl.partition_report(mod, qdq)
    assert len(report.regions) == 1 and not report.on_cpu(), report.summary()
    rows = {r.node: r for r in report.rows}
    for node in ("/detect/Sub", "/detect/Mul"):
        assert rows[node].dtype == "float16", rows[node]  # never reported int8
    # the anchors dequantize int8 values (mrvl.quantize quantizes them as a weight): their
    # Add is exact in int8, the `qadd` of a constant (`qdq_match._int8_constant_add`)
    assert rows["/detect/Add"].dtype == "int8", rows["/detect/Add"]
    assert rows["/head/Conv"].dtype == "int8", rows["/head/Conv"]
    lib = mrvl.build(mod, target="llvm")
    x = feeds[0]["x"]
    got = relax.VirtualMachine(lib, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    (want,) = reference_session(qdq).run(None, {"x": x})
    inits = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    producer = {o: n for n in qdq.graph.node for o in n.output}
    scale = float(inits[producer["boxes"].input[1]])
    steps = np.rint(np.abs(got.astype(np.float64) - want) / scale)
    assert steps.max() <= 2, steps.max()  # the bound below one step, and the edges' roundings


@pytest.mark.parametrize(
    ("name", "constant", "expected"),
    [
        # |x| <= 128 * 0.1, |c| <= 12, |y| <= 128 * 0.1: (12.8 + 12 + 12.8) / 2048 / 0.1 steps
        ("relax.subtract", np.array([12.0, -3.0]), (12.8 + 12.0 + 12.8) / 2048 / 0.1),
        ("relax.multiply", np.array([8.0, 16.0]), 4 * 12.8 / 2048 / 0.1),
        ("relax.divide", np.array([0.0, 2.0]), None),  # a division by zero: not in fp16
        ("relax.add", np.array([1e5]), None),  # beyond fp16's range
    ],
)
def test_fp16_error_bound(name, constant, expected):
    quant = TensorQuant(0.1, 0)
    got = fp16_error_in_steps(name, constant, quant, quant)
    assert got == (None if expected is None else pytest.approx(expected))


def test_a_constant_far_larger_than_the_result_stays_on_the_cpu():
    """A sum with a constant 1000 times the result's range errs by more than a step in fp16:
    not accepted (the bound grows with |c| / s_y)."""
    quant = TensorQuant(0.001, 0)
    assert fp16_error_in_steps("relax.add", np.array([100.0]), quant, quant) > 1
