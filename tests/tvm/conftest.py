"""Fixtures for the TVM integration tests (the MNIST model comes from tests/conftest.py)."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from mrvl.models.mnist import ONNX_IR_VERSION


def make_onnx_model(
    nodes, inputs, outputs, initializers=(), *, elem_type=TensorProto.FLOAT, opset=17
):
    """A checked model from nodes; `inputs`/`outputs` map tensor names to shapes."""
    graph = helper.make_graph(
        nodes,
        "test",
        [helper.make_tensor_value_info(n, elem_type, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, elem_type, s) for n, s in outputs.items()],
        list(initializers),
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ONNX_IR_VERSION
    )
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="session")
def onnx_model():
    """`make_onnx_model`, for tests that build small graphs."""
    return make_onnx_model


@pytest.fixture(scope="session")
def mnist_relax(mnist_model):
    """MNIST imported by `mrvl.from_onnx`; shared, as passes return new modules."""
    from mrvl.frontend import from_onnx

    return from_onnx(mnist_model)
