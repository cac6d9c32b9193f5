"""Every MLIP layer through the whole flow: ONNX -> partition -> mrvl -> binary -> simulator
-> TVM, against onnxruntime under the fp16 acceptance rule, and all of it offloaded."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import assert_fp16_rule, float_model
from onnx import helper, numpy_helper

import mrvl
from mrvl.placement import node_targets

RNG = np.random.default_rng(7)


def const(name, shape, scale=0.3):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def positive(name, shape):
    return numpy_helper.from_array((RNG.random(shape) + 0.5).astype(np.float32), name)


def model(nodes, inits, inputs, outputs) -> onnx.ModelProto:
    return float_model(nodes, inits, inputs, outputs, name="layers", opset=17)


node = helper.make_node


def residual_net():
    """conv+bias+BN+relu, grouped conv, residual add+relu, concat, ceil-mode max pool,
    count_include_pad avg pool, global average pool, flatten, Gemm with alpha/beta; batch 2."""
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c1", "g", "be", "m", "v"], ["bn"], name="bn1"),
        node("Relu", ["bn"], ["r1"], name="relu1"),
        node("Conv", ["r1", "w2"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=4),
        node("Add", ["c2", "r1"], ["a"], name="add1"),
        node("Relu", ["a"], ["ar"], name="relu2"),
        node("Concat", ["ar", "r1"], ["cat"], name="cat", axis=1),
        node("MaxPool", ["cat"], ["mp"], name="mp", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        node("AveragePool", ["mp"], ["ap"], name="ap", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
             count_include_pad=1),
        node("GlobalAveragePool", ["ap"], ["gap"], name="gap"),
        node("Flatten", ["gap"], ["fl"], name="flat"),
        node("Gemm", ["fl", "wf", "bf"], ["y"], name="fc", alpha=0.5, beta=2.0, transB=1),
    ]  # fmt: skip
    inits = [
        const("w1", (8, 3, 3, 3)), const("b1", (8,)), positive("g", (8,)), const("be", (8,)),
        const("m", (8,)), positive("v", (8,)), const("w2", (8, 2, 3, 3)), const("wf", (5, 16)),
        const("bf", (5,)),
    ]  # fmt: skip
    return model(nodes, inits, [("x", [2, 3, 9, 9])], [("y", [2, 5])])


def activations_net():
    """Pad folded into a strided, dilated conv with asymmetric padding; Clip (relu6); the
    Mul+Add batch-norm form; LeakyRelu; depthwise conv; MatMul with a constant."""
    nodes = [
        node("Pad", ["x", "pads"], ["p"], name="pad"),
        node("Conv", ["p", "w1"], ["c1"], name="conv1", kernel_shape=[3, 3], strides=[2, 2],
             dilations=[2, 1], pads=[0, 1, 1, 0]),
        node("Clip", ["c1", "lo", "hi"], ["r6"], name="relu6"),
        node("Conv", ["r6", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
             group=6),
        node("Mul", ["c2", "scale"], ["s"], name="bn_scale"),
        node("Add", ["s", "shift"], ["t"], name="bn_shift"),
        node("LeakyRelu", ["t"], ["l"], name="leaky", alpha=0.1),
        node("Flatten", ["l"], ["f"], name="flat"),
        node("MatMul", ["f", "wm"], ["y"], name="matmul"),
    ]  # fmt: skip
    inits = [
        numpy_helper.from_array(np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64), "pads"),
        const("w1", (6, 4, 3, 3)),
        numpy_helper.from_array(np.float32(0.0), "lo"),
        numpy_helper.from_array(np.float32(6.0), "hi"),
        const("w2", (6, 1, 3, 3)), const("b2", (6,)),
        positive("scale", (1, 6, 1, 1)), const("shift", (1, 6, 1, 1)),
        const("wm", (6 * 6 * 6, 7)),
    ]  # fmt: skip
    return model(nodes, inits, [("x", [1, 4, 11, 10])], [("y", [1, 7])])


def batch8_net():
    """Batch 8 through conv, max pool and two FCs (relu between), as an MLP head would run."""
    nodes = [
        node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        node("MaxPool", ["c"], ["mp"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        node("Flatten", ["mp"], ["f"], name="flat"),
        node("Gemm", ["f", "w1", "b1"], ["g1"], name="fc1", transB=1),
        node("Relu", ["g1"], ["r"], name="relu"),
        node("Gemm", ["r", "w2"], ["y"], name="fc2"),
    ]
    inits = [
        const("w", (4, 2, 1, 1)),
        const("w1", (12, 36)),
        const("b1", (12,)),
        const("w2", (12, 3)),
    ]
    return model(nodes, inits, [("x", [8, 2, 6, 6])], [("y", [8, 3])])


def shapes_net():
    """Transpose to NHWC and back, GlobalMaxPool, Squeeze; the output stays 4-D NCHW too."""
    nodes = [
        node("Transpose", ["x"], ["t"], name="to_nhwc", perm=[0, 2, 3, 1]),
        node("Transpose", ["t"], ["u"], name="to_nchw", perm=[0, 3, 1, 2]),
        node("Conv", ["u", "w"], ["c"], name="conv", kernel_shape=[3, 3]),
        node("GlobalMaxPool", ["c"], ["g"], name="gmp"),
        node("Squeeze", ["g", "axes"], ["y"], name="squeeze"),
    ]
    inits = [const("w", (5, 3, 3, 3)), numpy_helper.from_array(np.array([2, 3], np.int64), "axes")]
    return model(nodes, inits, [("x", [1, 3, 7, 7])], [("y", [1, 5])])


def preactivation_net():
    """DenseNet's pre-activation: BatchNormalization and Relu with no conv in front of them
    (scale_shift layers), a lone LeakyRelu, then conv; concat of the features."""
    nodes = [
        node("BatchNormalization", ["x", "g", "be", "m", "v"], ["bn"], name="bn0"),
        node("Relu", ["bn"], ["r"], name="relu0"),
        node("Conv", ["r", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("LeakyRelu", ["x"], ["l"], name="leaky", alpha=0.2),
        node("Concat", ["c", "l"], ["y"], name="cat", axis=1),
    ]
    inits = [
        positive("g", (3,)), const("be", (3,)), const("m", (3,)), positive("v", (3,)),
        const("w", (5, 3, 3, 3)),
    ]  # fmt: skip
    return model(nodes, inits, [("x", [2, 3, 6, 6])], [("y", [2, 8, 6, 6])])


NETS = {
    "residual": residual_net,
    "activations": activations_net,
    "batch8": batch8_net,
    "shapes": shapes_net,
    "preactivation": preactivation_net,
}


@pytest.mark.parametrize("name", NETS)
@pytest.mark.parametrize("num_tiles", [1, 8])
def test_network_runs_on_the_mlip_and_matches_onnxruntime(name, num_tiles):
    onnx_model = NETS[name]()
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model), num_tiles=num_tiles)
    targets = node_targets(mod)
    on_cpu = [n.name for n in onnx_model.graph.node if targets.get(n.name, "cpu") == "cpu"]
    assert on_cpu == [], f"kept on the CPU: {on_cpu}"

    lib = mrvl.build(mod)
    feeds = {
        i.name: RNG.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(
            np.float32
        )
        for i in onnx_model.graph.input
    }
    assert_fp16_rule(lib, onnx_model, feeds)
