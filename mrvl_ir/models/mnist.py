"""The MNIST network of the Marvell BYOC RFC, built with onnx.helper and seeded weights.

    python -m mrvl.models.mnist      # regenerates mnist.onnx next to this file

Softmax is not an MLIP layer, so a run of this model is always a hybrid: the region on the
MLIP, the softmax on the CPU.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mrvl.models import bundled_model_path

ONNX_IR_VERSION = 10
"""onnxruntime 1.31 reads IR versions up to 13; onnx 1.23 writes 14 unless told otherwise."""
OPSET = 17


def _he(rng: np.random.Generator, name: str, shape: tuple[int, ...], fan_in: int):
    data = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
    return numpy_helper.from_array(data.astype(np.float32), name)


def _bias(rng: np.random.Generator, name: str, n: int):
    return numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype(np.float32), name)


def make_mnist_model(seed: int = 0, batch: int = 1) -> onnx.ModelProto:
    """Conv3x3x64+Relu, MaxPool, Conv3x3x32+Relu, MaxPool, Flatten, Gemm256+Relu, Gemm10, Softmax."""
    rng = np.random.default_rng(seed)
    inits = [
        _he(rng, "conv1.weight", (64, 1, 3, 3), 9),
        _bias(rng, "conv1.bias", 64),
        _he(rng, "conv2.weight", (32, 64, 3, 3), 576),
        _bias(rng, "conv2.bias", 32),
        _he(rng, "fc1.weight", (256, 1568), 1568),
        _bias(rng, "fc1.bias", 256),
        _he(rng, "fc2.weight", (10, 256), 256),
        _bias(rng, "fc2.bias", 10),
    ]
    node = helper.make_node
    nodes = [
        node(
            "Conv",
            ["input", "conv1.weight", "conv1.bias"],
            ["c1"],
            name="/conv1/Conv",
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
        ),
        node("Relu", ["c1"], ["r1"], name="/relu1/Relu"),
        node("MaxPool", ["r1"], ["p1"], name="/pool1/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        node(
            "Conv",
            ["p1", "conv2.weight", "conv2.bias"],
            ["c2"],
            name="/conv2/Conv",
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
        ),
        node("Relu", ["c2"], ["r2"], name="/relu2/Relu"),
        node("MaxPool", ["r2"], ["p2"], name="/pool2/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        node("Flatten", ["p2"], ["flat"], name="/flatten/Flatten", axis=1),
        node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["g1"], name="/fc1/Gemm", transB=1),
        node("Relu", ["g1"], ["r3"], name="/relu3/Relu"),
        node("Gemm", ["r3", "fc2.weight", "fc2.bias"], ["logits"], name="/fc2/Gemm", transB=1),
        node("Softmax", ["logits"], ["probabilities"], name="/softmax/Softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "mnist",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 1, 28, 28])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [batch, 10])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mrvl"
    )
    model.ir_version = ONNX_IR_VERSION
    onnx.checker.check_model(model)
    return model


def main() -> None:
    path = bundled_model_path("mnist")
    onnx.save(make_mnist_model(), path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
