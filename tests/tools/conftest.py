"""Fixtures of the command-line tests: small models written to disk."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from mrvl.models.mnist import ONNX_IR_VERSION


@pytest.fixture(scope="session")
def mnist_path(mnist_model, tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "mnist.onnx"
    onnx.save(mnist_model, path)
    return path


def conv_relu_model(batch="N", ir_version=ONNX_IR_VERSION) -> onnx.ModelProto:
    """x[batch,1,8,8] -> Conv(4 filters, 3x3, pad 1) -> Relu; `batch` may be symbolic."""
    import numpy as np

    w = np.random.default_rng(0).standard_normal((4, 1, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["y"], name="relu"),
        ],
        "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, 8, 8])],
        [onnx.numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=ir_version
    )
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="session")
def conv_relu():
    """`conv_relu_model`, for tests that need a small model with a chosen batch dimension."""
    return conv_relu_model
