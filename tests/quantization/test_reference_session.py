"""mrvl.accuracy.reference_session: the onnxruntime session int8 results are judged against
gives a QDQ model's meaning on every x86 CPU, also where onnxruntime's fused uint8 × int8
kernels add products in int16 pairs with saturation (AVX2 without VNNI)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as nh

from mrvl.accuracy import int8_pairs_saturate, reference_session


def overflowing_conv() -> onnx.ModelProto:
    """A QDQ 1x1 conv of two uint8 channels at 255 with int8 weights at 127: one pair of
    products is 64,770, past int16; the output quantizes at 1000 a step, so the exact
    result is 65 steps and a pair saturated at 32,767 gives 33."""
    consts = {
        "s1": np.float32(1.0), "z1": np.uint8(0), "wq": np.full((1, 2, 1, 1), 127, np.int8),
        "sw": np.float32(1.0), "zw": np.int8(0), "s2": np.float32(1000.0), "z2": np.uint8(0),
    }  # fmt: skip
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "s1", "z1"], ["xq"]),
        oh.make_node("DequantizeLinear", ["xq", "s1", "z1"], ["xd"]),
        oh.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"]),
        oh.make_node("Conv", ["xd", "wd"], ["c"], name="conv"),
        oh.make_node("QuantizeLinear", ["c", "s2", "z2"], ["cq"]),
        oh.make_node("DequantizeLinear", ["cq", "s2", "z2"], ["y"]),
    ]
    graph = oh.make_graph(
        nodes, "overflowing_conv", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 1, 1])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [nh.from_array(np.asarray(v), k) for k, v in consts.items()],
    )  # fmt: skip
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_reference_session_gives_the_qdq_models_meaning():
    model = overflowing_conv()
    feed = {"x": np.full((1, 2, 1, 1), 255, np.float32)}
    for given in (model, model.SerializeToString()):
        (got,) = reference_session(given).run(None, feed)
        assert got.ravel().tolist() == [65000.0]
    (fused,) = ort.InferenceSession(model.SerializeToString()).run(None, feed)
    # the premise of int8_pairs_saturate: where it holds, the fused kernel saturates
    assert fused.ravel().tolist() == ([33000.0] if int8_pairs_saturate() else [65000.0])


def test_a_float_model_keeps_the_default_optimizations():
    options = ort.SessionOptions()
    graph = oh.make_graph(
        [oh.make_node("Relu", ["x"], ["y"])], "g",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )  # fmt: skip
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    session = reference_session(model, options)
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert session.run(None, {"x": np.array([-1, 2], np.float32)})[0].tolist() == [0, 2]
