"""`mrvl.partition_for_mrvl` on every layer: what is offloaded, and why the rest is not.

Each case is a small model. Offloaded cases give the composites made (and their ops);
rejected cases give the reason the report shows for the node that stays on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper
from partition_builders import (
    CONV_W,
    X4,
    conv,
    host_ops,
    ints,
    layer_ops,
    node,
    partitioned,
    rand,
    reason,
    scalar,
)

OFFLOADED = {
    # conv2d: strides, dilation, asymmetric pads, groups; bias, batch norm, activations; pad
    "conv strided dilated asymmetric": (
        [conv(strides=[2, 1], dilations=[2, 2], pads=[0, 1, 2, 0])],
        X4,
        {"c": [2, 4, "h", "w"]},
        [CONV_W],
        [("mrvl.conv2d", ["relax.nn.conv2d"])],
    ),
    "conv grouped + bias": (
        [node("Conv", ["x", "wg", "b"], "c", "/c/Conv", kernel_shape=[1, 1], group=2)],
        X4,
        {"c": [2, 6, 6, 6]},
        [rand("wg", (6, 2, 1, 1)), rand("b", (6,))],
        [("mrvl.conv2d", ["relax.nn.conv2d", "relax.add"])],
    ),
    "conv + trailing BatchNormalization": (
        [conv(), node("BatchNormalization", ["c", "g", "b", "m", "v"], "y", "/bn")],
        X4,
        {"y": [2, 4, 6, 6]},
        [CONV_W, rand("g", (4,)), rand("b", (4,)), rand("m", (4,)), scalar("v", np.ones(4))],
        [("mrvl.conv2d", ["relax.nn.conv2d", "relax.multiply", "relax.add"])],
    ),
    "conv + bias + Mul/Add batch norm + Relu": (
        [
            node("Conv", ["x", "w", "b"], "c", "/c/Conv", kernel_shape=[3, 3]),
            node("Mul", ["c", "s"], "m", "/bn/Mul"),
            node("Add", ["t", "m"], "a", "/bn/Add"),
            node("Relu", ["a"], "y", "/r/Relu"),
        ],
        X4,
        {"y": [2, 4, 4, 4]},
        [CONV_W, rand("b", (4,)), rand("s", (1, 4, 1, 1)), rand("t", (4, 1, 1))],
        [
            (
                "mrvl.conv2d",
                ["relax.nn.conv2d", "relax.add", "relax.multiply", "relax.add", "relax.nn.relu"],
            )
        ],
    ),
    "conv + Clip(0, 6)": (
        [conv(), node("Clip", ["c", "lo", "hi"], "y", "/r6/Clip")],
        X4,
        {"y": [2, 4, 6, 6]},
        [CONV_W, scalar("lo", 0), scalar("hi", 6)],
        [("mrvl.conv2d", ["relax.nn.conv2d", "relax.clip"])],
    ),
    "conv + LeakyRelu": (
        [conv(), node("LeakyRelu", ["c"], "y", "/lr", alpha=0.2)],
        X4,
        {"y": [2, 4, 6, 6]},
        [CONV_W],
        [("mrvl.conv2d", ["relax.nn.conv2d", "relax.nn.leakyrelu"])],
    ),
    "Pad + conv": (
        [node("Pad", ["x", "p"], "q", "/pad"), conv("q", pads=[0, 0, 0, 0])],
        X4,
        {"c": [2, 4, 5, 7]},
        [ints("p", [0, 0, 1, 2, 0, 0, 0, 1]), CONV_W],
        [("mrvl.conv2d", ["relax.nn.pad", "relax.nn.conv2d"])],
    ),
    # pools
    "MaxPool ceil_mode pads": (
        [
            node(
                "MaxPool",
                ["x"],
                "y",
                "/p",
                kernel_shape=[3, 3],
                strides=[2, 2],
                pads=[1, 1, 0, 0],
                ceil_mode=1,
            )
        ],
        X4,
        {"y": [2, 4, "h", "w"]},
        [],
        [("mrvl.maxpool2d", ["relax.nn.max_pool2d"])],
    ),
    "AveragePool count_include_pad ceil_mode": (
        [
            node(
                "AveragePool",
                ["x"],
                "y",
                "/p",
                kernel_shape=[3, 3],
                strides=[2, 2],
                pads=[1, 1, 1, 1],
                ceil_mode=1,
                count_include_pad=1,
            )
        ],
        X4,
        {"y": [2, 4, "h", "w"]},
        [],
        [("mrvl.avgpool2d", ["relax.nn.avg_pool2d"])],
    ),
    "GlobalAveragePool": (
        [node("GlobalAveragePool", ["x"], "y", "/gap")],
        X4,
        {"y": [2, 4, 1, 1]},
        [],
        [("mrvl.global_avgpool2d", ["relax.mean"])],
    ),
    "GlobalMaxPool": (
        [node("GlobalMaxPool", ["x"], "y", "/gmp")],
        X4,
        {"y": [2, 4, 1, 1]},
        [],
        [("mrvl.global_maxpool2d", ["relax.max"])],
    ),
    # fc
    "Gemm alpha beta transB + Relu": (
        [
            node("Gemm", ["v", "wf", "bf"], "g", "/fc", alpha=0.5, beta=2.0, transB=1),
            node("Relu", ["g"], "y", "/r"),
        ],
        {"v": [8, 6]},
        {"y": [8, 3]},
        [rand("wf", (3, 6)), rand("bf", (3,))],
        [("mrvl.fc", ["relax.multiply", "relax.matmul", "relax.add", "relax.nn.relu"])],
    ),
    "MatMul constant weights": (
        [node("MatMul", ["v", "wf"], "y", "/mm")],
        {"v": [2, 6]},
        {"y": [2, 3]},
        [rand("wf", (6, 3))],
        [("mrvl.fc", ["relax.matmul"])],
    ),
    # eltwise, concat, shapes
    "Add + Relu": (
        [node("Add", ["x", "z"], "a", "/add"), node("Relu", ["a"], "y", "/r")],
        {"x": [2, 4, 6, 6], "z": [2, 4, 6, 6]},
        {"y": [2, 4, 6, 6]},
        [],
        [("mrvl.add", ["relax.add", "relax.nn.relu"])],
    ),
    "Sum of two, rank 2": (
        [node("Sum", ["v", "u"], "y", "/sum")],
        {"v": [2, 6], "u": [2, 6]},
        {"y": [2, 6]},
        [],
        [("mrvl.add", ["relax.add"])],
    ),
    "Concat channels (axis -3)": (
        [node("Concat", ["x", "z"], "y", "/cat", axis=-3)],
        {"x": [2, 4, 6, 6], "z": [2, 2, 6, 6]},
        {"y": [2, 6, 6, 6]},
        [],
        [("mrvl.concat", ["relax.concat"])],
    ),
    "Flatten, Reshape 2->4, GAP + Squeeze": (
        [
            node("Flatten", ["x"], "f", "/flat"),
            node("Reshape", ["f", "s"], "y", "/reshape"),
            node("GlobalAveragePool", ["y"], "g", "/gap"),
            node("Squeeze", ["g", "ax"], "q", "/sq"),
        ],
        X4,
        {"q": [2, 9]},
        [ints("s", [2, 9, 4, 4]), ints("ax", [2, 3])],
        [
            ("mrvl.copy", ["relax.reshape", "relax.reshape"]),  # a chain of moves: one copy
            ("mrvl.global_avgpool2d", ["relax.mean"]),
            ("mrvl.reshape", ["relax.squeeze"]),
        ],
    ),
    "Transpose to NHWC and back": (
        [
            node("Transpose", ["x"], "t", "/t1", perm=[0, 2, 3, 1]),
            node("Transpose", ["t"], "y", "/t2", perm=[0, 3, 1, 2]),
        ],
        X4,
        {"y": [2, 4, 6, 6]},
        [],
        [("mrvl.copy", ["relax.permute_dims", "relax.permute_dims"])],
    ),
    # strided copies and concat on any axis
    "Concat on height": (
        [node("Concat", ["x", "z"], "y", "/cat", axis=2)],
        {"x": [2, 4, 6, 6], "z": [2, 4, 1, 6]},
        {"y": [2, 4, 7, 6]},
        [],
        [("mrvl.concat", ["relax.concat"])],
    ),
    "Reshape 4->4": (
        [node("Reshape", ["x", "s"], "y", "/rs")],
        X4,
        {"y": [2, 16, 3, 3]},
        [ints("s", [2, 16, 3, 3])],
        [("mrvl.copy", ["relax.reshape"])],
    ),
    "Flatten axis 2": (
        [node("Flatten", ["x"], "y", "/flat", axis=2)],
        X4,
        {"y": [8, 36]},
        [],
        [("mrvl.copy", ["relax.reshape"])],
    ),
    "Transpose H, W": (
        [node("Transpose", ["x"], "y", "/t", perm=[0, 1, 3, 2])],
        X4,
        {"y": [2, 4, 6, 6]},
        [],
        [("mrvl.copy", ["relax.permute_dims"])],
    ),
    # batches beyond 8 images: in groups of 8 (mrvl-split-batch)
    "conv batch 9": (
        [conv()],
        {"x": [9, 4, 6, 6]},
        {"c": [9, 4, 6, 6]},
        [CONV_W],
        [("mrvl.conv2d", ["relax.nn.conv2d"])],
    ),
    "AveragePool batch 16": (
        [node("AveragePool", ["x"], "y", "/p", kernel_shape=[2, 2])],
        {"x": [16, 4, 6, 6]},
        {"y": [16, 4, 5, 5]},
        [],
        [("mrvl.avgpool2d", ["relax.nn.avg_pool2d"])],
    ),
    # reductions and two tensors that broadcast
    "ReduceMean over channels": (
        [node("ReduceMean", ["x"], "y", "/rm", axes=[1])],
        X4,
        {"y": [2, 1, 6, 6]},
        [],
        [("mrvl.reduce", ["relax.mean"])],
    ),
    "broadcast Add": (
        [node("Add", ["x", "z"], "y", "/add")],
        {"x": [2, 4, 6, 6], "z": [2, 4, 1, 1]},
        {"y": [2, 4, 6, 6]},
        [],
        [("mrvl.binary", ["relax.add"])],
    ),
    "broadcast Mul, not a gate": (
        [node("Mul", ["x", "g"], "y", "/mul")],
        {"x": [2, 4, 6, 6], "g": [2, 4, 1, 6]},
        {"y": [2, 4, 6, 6]},
        [],
        [("mrvl.binary", ["relax.multiply"])],
    ),
    "Sub of two tensors, rank 3": (
        [node("Sub", ["v", "u"], "y", "/sub")],
        {"v": [2, 4, 6], "u": [2, 1, 6]},
        {"y": [2, 4, 6]},
        [],
        [("mrvl.binary", ["relax.subtract"])],
    ),
    "Max of two tensors": (
        [node("Max", ["x", "z"], "y", "/max")],
        {"x": [2, 4, 6, 6], "z": [2, 4, 6, 6]},
        {"y": [2, 4, 6, 6]},
        [],
        [("mrvl.binary", ["relax.maximum"])],
    ),
}


@pytest.mark.parametrize("case", OFFLOADED.values(), ids=OFFLOADED.keys())
def test_layer_is_offloaded(onnx_model, case):
    nodes, inputs, outputs, inits, expected = case
    mod, report = partitioned(onnx_model, nodes, inputs, outputs, inits)
    assert layer_ops(mod) == expected
    assert [r.node for r in report.rows if r.target != "mrvl_region_0"] == []


REJECTED = {
    # node that stays on the CPU, its reason
    "conv float64": (
        [conv(w="w64")],
        X4,
        {"c": [2, 4, 6, 6]},
        [numpy_helper.from_array(np.ones((4, 4, 3, 3)), "w64")],
        {"elem_type": TensorProto.DOUBLE},
        "/c/Conv",
        "dtype float64",
    ),
    "conv dynamic batch": (
        [conv()],
        {"x": ["n", 4, 6, 6]},
        {"c": ["n", 4, 6, 6]},
        [CONV_W],
        {},
        "/c/Conv",
        "dynamic shape",
    ),
    "conv runtime weights": (
        [conv(w="wx")],
        {"x": [2, 4, 6, 6], "wx": [4, 4, 3, 3]},
        {"c": [2, 4, 6, 6]},
        [],
        {},
        "/c/Conv",
        "non-constant weights",
    ),
    "Conv 3-D (a 1-D conv is a 2-D one of H 1, offloaded)": (
        [node("Conv", ["v", "w1"], "c", "/c1", kernel_shape=[3, 3, 3])],
        {"v": [1, 2, 4, 4, 4]},
        {"c": [1, 2, 2, 2, 2]},
        [rand("w1", (2, 2, 3, 3, 3))],
        {},
        "/c1",
        "rank 5",
    ),
    "Softmax": (
        [node("Softmax", ["x"], "y", "/sm")],
        X4,
        {"y": [2, 4, 6, 6]},
        [],
        {},
        "/sm",
        "final softmax kept on the CPU in fp32 (nothing on the MLIP reads it)",
    ),
    "MaxPool dilations": (
        [node("MaxPool", ["x"], "y", "/p", kernel_shape=[2, 2], dilations=[2, 2])],
        X4,
        {"y": [2, 4, 4, 4]},
        [],
        {},
        "/p",
        "attribute dilations=[2, 2]",
    ),
    "MaxPool 3-D": (
        [node("MaxPool", ["v"], "y", "/p", kernel_shape=[2, 2, 2])],
        {"v": [1, 2, 4, 4, 4]},
        {"y": [1, 2, 3, 3, 3]},
        [],
        {},
        "/p",
        "rank 5",
    ),
    "ReduceMean over axes that are not consecutive": (
        [node("ReduceMean", ["x", "ax"], "y", "/rm")],
        X4,
        {"y": [2, 1, 6, 1]},
        [ints("ax", [1, 3])],
        {"opset": 18},
        "/rm",
        "axes [1, 3] are not consecutive",
    ),
    "MatMul of activations, a broadcast that copies": (
        [node("MatMul", ["x", "z"], "y", "/mm")],
        {"x": [2, 1, 5, 6], "z": [1, 4, 6, 3]},
        {"y": [2, 4, 5, 3]},
        [],
        {},
        "/mm",
        "the left operand's leading axes [2, 1] broadcast to [2, 4]: that needs a copy of it",
    ),
    "MatMul rank 6": (  # ranks 3 to 5 ([..., K]) are an FC over the leading axes' rows
        [node("MatMul", ["v", "wf"], "y", "/mm")],
        {"v": [1, 2, 1, 2, 5, 6]},
        {"y": [1, 2, 1, 2, 5, 3]},
        [rand("wf", (6, 3))],
        {},
        "/mm",
        "rank 6",
    ),
    "ReduceSum to a scalar": (
        [node("ReduceSum", ["x"], "y", "/rs", keepdims=0)],
        X4,
        {"y": []},
        [],
        {"opset": 11},
        "/rs",
        "a rank-0 result",
    ),
}


@pytest.mark.parametrize("case", REJECTED.values(), ids=REJECTED.keys())
def test_layer_is_rejected_with_its_reason(onnx_model, case):
    nodes, inputs, outputs, inits, options, name, expected = case
    _, report = partitioned(onnx_model, nodes, inputs, outputs, inits, **options)
    assert reason(report, name) == expected


PADS_NO_CONV_TAKES = {
    "Pad value 1": (
        [node("Pad", ["x", "p", "one"], "q", "/pad"), conv("q", pads=[0, 0, 0, 0])],
        {"c": [2, 4, 6, 6]},
        [ints("p", [0, 0, 1, 1, 0, 0, 1, 1]), scalar("one", 1.0), CONV_W],  # not zero
    ),
    "Pad on channels": (
        [node("Pad", ["x", "p"], "q", "/pad"), conv("q", pads=[0, 0, 0, 0])],
        {"c": [2, 4, 4, 4]},
        [ints("p", [0, 1, 0, 0, 0, 0, 0, 0]), rand("w", (4, 5, 3, 3))],  # not H or W
    ),
}


@pytest.mark.parametrize("case", PADS_NO_CONV_TAKES.values(), ids=PADS_NO_CONV_TAKES.keys())
def test_a_pad_the_conv_cannot_take_is_a_layer_of_its_own(onnx_model, case):
    """The conv is offloaded without the pad (its check refuses it), and the standalone pad
    pattern takes the pad: both on the MLIP, nothing on the host."""
    nodes, outputs, inits = case
    mod, report = partitioned(onnx_model, nodes, X4, outputs, inits)
    assert layer_ops(mod) == [
        ("mrvl.pad", ["relax.nn.pad"]),
        ("mrvl.conv2d", ["relax.nn.conv2d"]),
    ]
    assert host_ops(mod) == []


def test_bad_activation_leaves_the_conv_offloaded(onnx_model):
    # A Relu whose input the Add also reads cannot fuse; the conv+bias layer still forms.
    nodes = [
        node("Conv", ["x", "w", "b"], "c", "/c/Conv", kernel_shape=[1, 1]),
        node("Relu", ["c"], "r", "/r"),
        node("Add", ["c", "r"], "y", "/add"),
    ]
    mod, report = partitioned(
        onnx_model, nodes, X4, {"y": [2, 4, 6, 6]}, [rand("w", (4, 4, 1, 1)), rand("b", (4,))]
    )
    assert layer_ops(mod)[0] == ("mrvl.conv2d", ["relax.nn.conv2d", "relax.add"])
    # ... and the relu, which cannot join it, is a scale_shift layer of its own
    assert layer_ops(mod)[1] == ("mrvl.scale_shift", ["relax.nn.relu"])
