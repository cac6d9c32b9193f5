"""Small float CNNs built with onnx.helper and their QDQ forms from onnxruntime's
`quantize_static` (seeded weights and calibration data)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
from onnx import helper as oh

INPUT_SHAPE = (1, 3, 16, 16)


def _weights(seed: int):
    """`weight(name, shape, scale)`: a seeded standard-normal initializer times `scale`, drawn
    in call order from one generator."""
    rng = np.random.default_rng(seed)

    def weight(name, shape, scale):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name
        )

    return weight


def _first_conv(weight) -> list[onnx.TensorProto]:
    """w1, b1: the first conv's, 3 to 8 channels."""
    return [weight("w1", (8, 3, 3, 3), 0.3), weight("b1", (8,), 0.1)]


def _last_conv_and_fc(weight, channels: int) -> list[onnx.TensorProto]:
    """w2, b2 (the last conv's, `channels` to 8) and wf, bf (the fc's, 8 to 10), drawn after
    the layers before them."""
    return [
        weight("w2", (8, channels, 3, 3), 0.2),
        weight("b2", (8,), 0.1),
        weight("wf", (8, 10), 0.3),
        weight("bf", (10,), 0.1),
    ]


def _conv_relu(source: str, index: int) -> list[onnx.NodeProto]:
    """Conv `source` by w{index}, b{index} into c{index}, then ReLU into r{index}."""
    return [
        oh.make_node(
            "Conv",
            [source, f"w{index}", f"b{index}"],
            [f"c{index}"],
            name=f"/conv{index}/Conv",
            pads=[1, 1, 1, 1],
        ),
        oh.make_node("Relu", [f"c{index}"], [f"r{index}"], name=f"/relu{index}/Relu"),
    ]


def _classifier(source: str, output: str = "y") -> list[onnx.NodeProto]:
    """Global average pool, flatten and the fc (wf, bf) of a classifier's end."""
    return [
        oh.make_node("GlobalAveragePool", [source], ["p"], name="/pool/GlobalAveragePool"),
        oh.make_node("Flatten", ["p"], ["f"], name="/flatten/Flatten"),
        oh.make_node("Gemm", ["f", "wf", "bf"], [output], name="/fc/Gemm"),
    ]


def _model(name: str, nodes, inits, out_shape=(1, 10)) -> onnx.ModelProto:
    """The graph `name` of `nodes` from the input x [INPUT_SHAPE] to y [out_shape] (opset
    17)."""
    graph = oh.make_graph(
        nodes,
        name,
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
        inits,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def small_cnn(seed: int = 0, softmax: bool = False) -> onnx.ModelProto:
    """conv-relu-conv-add-relu-global pool-flatten-fc: every kind of layer an int8 classifier
    has (a residual add, a pool, an fc)."""
    weight = _weights(seed)
    inits = [
        *_first_conv(weight),
        *_last_conv_and_fc(weight, 8),
    ]
    nodes = [
        *_conv_relu("x", 1),
        _conv_relu("r1", 2)[0],
        oh.make_node("Add", ["c2", "r1"], ["a"], name="/add/Add"),
        oh.make_node("Relu", ["a"], ["r2"], name="/relu2/Relu"),
        *_classifier("r2", "logits" if softmax else "y"),
    ]
    if softmax:
        nodes.append(oh.make_node("Softmax", ["logits"], ["y"], name="/Softmax", axis=1))
    return _model("small_cnn", nodes, inits)


def concat_cnn(seed: int = 0) -> onnx.ModelProto:
    """conv-relu, two branches (1x1 and 3x3 convs) concatenated, a slice, conv, global
    pool, fc: the data movement of an int8 Inception or ShuffleNet, whose concat inputs have
    scales of their own."""
    weight = _weights(seed)
    inits = [
        *_first_conv(weight),
        weight("wa", (4, 8, 1, 1), 0.5),
        weight("ba", (4,), 0.1),
        weight("wb", (4, 8, 3, 3), 0.1),
        weight("bb", (4,), 0.1),
        *_last_conv_and_fc(weight, 6),
        _ints("starts", [1]),
        _ints("ends", [7]),
        _ints("axes", [1]),
    ]
    nodes = [
        *_conv_relu("x", 1),
        oh.make_node("Conv", ["r1", "wa", "ba"], ["ca"], name="/a/Conv"),
        oh.make_node("Conv", ["r1", "wb", "bb"], ["cb"], name="/b/Conv", pads=[1, 1, 1, 1]),
        oh.make_node("Concat", ["ca", "cb"], ["cat"], name="/cat/Concat", axis=1),
        oh.make_node("Slice", ["cat", "starts", "ends", "axes"], ["sl"], name="/slice/Slice"),
        *_conv_relu("sl", 2),
        *_classifier("r2"),
    ]
    return _model("concat_cnn", nodes, inits)


def shuffle_cnn(seed: int = 0) -> onnx.ModelProto:
    """conv-relu, a channel shuffle (reshape to groups at rank 5, transpose, reshape back,
    as ShuffleNet has), conv, global pool, fc: a quantizer puts a QDQ pair after each move."""
    weight = _weights(seed)
    inits = [
        *_first_conv(weight),
        *_last_conv_and_fc(weight, 8),
        _ints("groups", [1, 2, 4, 16, 16]),
        _ints("flat", [1, 8, 16, 16]),
    ]
    nodes = [
        *_conv_relu("x", 1),
        oh.make_node("Reshape", ["r1", "groups"], ["g"], name="/shuffle/Reshape"),
        oh.make_node("Transpose", ["g"], ["gt"], name="/shuffle/Transpose", perm=[0, 2, 1, 3, 4]),
        oh.make_node("Reshape", ["gt", "flat"], ["sh"], name="/shuffle/Reshape_1"),
        *_conv_relu("sh", 2),
        *_classifier("r2"),
    ]
    return _model("shuffle_cnn", nodes, inits)


def calibration(count: int = 8, seed: int = 1) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal(INPUT_SHAPE).astype(np.float32)} for _ in range(count)]


def quantize_static_qdq(model: onnx.ModelProto, **options) -> onnx.ModelProto:
    """`model` through onnxruntime's `quantize_static` in QDQ format (per channel, int8
    unless `options` say otherwise), calibrated on `calibration()`."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter(calibration())

        def get_next(self):
            return next(self.feeds, None)

    settings = {
        "quant_format": QuantFormat.QDQ,
        "per_channel": True,
        "activation_type": QuantType.QInt8,
        "weight_type": QuantType.QInt8,
        **options,
    }
    with tempfile.TemporaryDirectory() as work:
        source, target = Path(work) / "float.onnx", Path(work) / "qdq.onnx"
        onnx.save(model, source)
        quantize_static(source, target, Reader(), **settings)
        return onnx.load(target)


def activation_cnn(seed: int = 0) -> onnx.ModelProto:
    """conv-HardSwish, a squeeze-excitation gate (global pool, 1x1 conv, ReLU, 1x1 conv,
    HardSigmoid, Mul broadcast over the plane), conv-Sigmoid, SiLU (x * Sigmoid x), Tanh,
    global pool, fc: the int8 table activations and Muls of MobileNetV3, EfficientNet and
    RegNetY."""
    rng = np.random.default_rng(seed)

    def weight(name, shape, scale):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name
        )

    inits = [
        weight("w1", (8, 3, 3, 3), 0.4),
        weight("b1", (8,), 0.1),
        weight("ws1", (4, 8, 1, 1), 0.5),
        weight("bs1", (4,), 0.1),
        weight("ws2", (8, 4, 1, 1), 0.5),
        weight("bs2", (8,), 0.1),
        weight("w2", (8, 8, 3, 3), 0.2),
        weight("b2", (8,), 0.1),
        weight("wf", (8, 10), 0.3),
        weight("bf", (10,), 0.1),
    ]
    nodes = [
        oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="/conv1/Conv", pads=[1, 1, 1, 1]),
        oh.make_node("HardSwish", ["c1"], ["h1"], name="/act1/HardSwish"),
        oh.make_node("GlobalAveragePool", ["h1"], ["g"], name="/se/pool/GlobalAveragePool"),
        oh.make_node("Conv", ["g", "ws1", "bs1"], ["s1"], name="/se/fc1/Conv"),
        oh.make_node("Relu", ["s1"], ["r1"], name="/se/relu/Relu"),
        oh.make_node("Conv", ["r1", "ws2", "bs2"], ["s2"], name="/se/fc2/Conv"),
        oh.make_node("HardSigmoid", ["s2"], ["gate"], name="/se/gate/HardSigmoid",
                     alpha=1.0 / 6, beta=0.5),
        oh.make_node("Mul", ["h1", "gate"], ["se"], name="/se/Mul"),
        oh.make_node("Conv", ["se", "w2", "b2"], ["c2"], name="/conv2/Conv", pads=[1, 1, 1, 1]),
        oh.make_node("Sigmoid", ["c2"], ["sg"], name="/act2/Sigmoid"),
        oh.make_node("Mul", ["c2", "sg"], ["silu"], name="/act2/Mul"),
        oh.make_node("Tanh", ["silu"], ["t"], name="/act3/Tanh"),
        oh.make_node("GlobalAveragePool", ["t"], ["p"], name="/pool/GlobalAveragePool"),
        oh.make_node("Flatten", ["p"], ["f"], name="/flatten/Flatten"),
        oh.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="/fc/Gemm"),
    ]  # fmt: skip
    return _model("activation_cnn", nodes, inits)


def dropout_cnn(seed: int = 0) -> onnx.ModelProto:
    """conv-relu-dropout-conv-classifier: a Dropout (inference: the identity) between two
    quantized tensors, which a QDQ model writes as Q -> DQ -> Dropout -> Q -> DQ."""
    weight = _weights(seed)
    inits = [*_first_conv(weight), *_last_conv_and_fc(weight, 8)]
    nodes = [
        *_conv_relu("x", 1),
        oh.make_node("Dropout", ["r1"], ["d1"], name="/drop/Dropout"),
        *_conv_relu("d1", 2),
        *_classifier("r2"),
    ]
    return _model("dropout_cnn", nodes, inits)


def sum_cnn(seed: int = 0, inputs: int = 2) -> onnx.ModelProto:
    """The small CNN's residual as a Caffe2-style `Sum` of `inputs` tensors (the first conv's
    ReLU, the second conv, and for 3 its ReLU too): a Sum of two is an Add."""
    weight = _weights(seed)
    inits = [*_first_conv(weight), *_last_conv_and_fc(weight, 8)]
    terms = ["c2", "r1", "r1b"][:inputs]
    nodes = [
        *_conv_relu("x", 1),
        _conv_relu("r1", 2)[0],
        oh.make_node("Relu", ["c2"], ["r1b"], name="/relu1b/Relu"),
        oh.make_node("Sum", terms, ["a"], name="/sum/Sum"),
        oh.make_node("Relu", ["a"], ["r2"], name="/relu2/Relu"),
        *_classifier("r2"),
    ]
    if inputs < 3:
        nodes = [n for n in nodes if n.name != "/relu1b/Relu"]
    return _model("sum_cnn", nodes, inits)


def affine_cnn(seed: int = 0, form: str = "bn") -> onnx.ModelProto:
    """DenseNet's transition: conv-relu, concat with the input, then a per-channel affine
    that no conv absorbs (`form` "bn": a BatchNormalization; "muladd": a Mul and an Add by
    per-channel constants), a ReLU and the last conv."""
    weight = _weights(seed)
    rng = np.random.default_rng(seed + 1)
    channels = 11
    inits = [*_first_conv(weight), *_last_conv_and_fc(weight, channels)]

    def per_channel(name, low, high):
        values = rng.uniform(low, high, (channels,)).astype(np.float32)
        if form == "muladd":
            values = values.reshape(channels, 1, 1)
        return numpy_helper.from_array(values, name)

    nodes = [*_conv_relu("x", 1), oh.make_node("Concat", ["r1", "x"], ["cat"], axis=1)]
    if form == "bn":
        inits += [
            per_channel("gamma", 0.5, 2.0),
            per_channel("beta", -0.5, 0.5),
            per_channel("mean", -0.3, 0.3),
            per_channel("var", 0.2, 2.0),
        ]
        nodes.append(
            oh.make_node(
                "BatchNormalization", ["cat", "gamma", "beta", "mean", "var"], ["bn"], name="/bn"
            )
        )
    else:
        inits += [per_channel("mul_c", -1.5, 1.5), per_channel("add_c", -0.5, 0.5)]
        nodes += [
            oh.make_node("Mul", ["cat", "mul_c"], ["m"], name="/mul"),
            oh.make_node("Add", ["m", "add_c"], ["bn"], name="/add"),
        ]
    nodes += [
        oh.make_node("Relu", ["bn"], ["br"], name="/bn_relu"),
        *_conv_relu("br", 2),
        *_classifier("r2"),
    ]
    return _model("affine_cnn", nodes, inits)


def resize_cnn(seed: int = 0) -> onnx.ModelProto:
    """conv-relu, a bilinear 2x upsample (half_pixel), conv-relu, a nearest resize to 23x23
    (no whole factor: not a copy) and a bilinear one to 13x13 (align_corners): the Resizes of
    a segmenter's or detector's decoder. The output is the last resize's, [1, 8, 13, 13]."""
    weight = _weights(seed)
    inits = [
        *_first_conv(weight),
        weight("w2", (8, 8, 3, 3), 0.2),
        weight("b2", (8,), 0.1),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "twice"),
        _ints("size23", [1, 8, 23, 23]),
        _ints("size13", [1, 8, 13, 13]),
    ]
    nodes = [
        *_conv_relu("x", 1),
        oh.make_node("Resize", ["r1", "", "twice"], ["up"], name="/up/Resize", mode="linear",
                     coordinate_transformation_mode="half_pixel"),
        *_conv_relu("up", 2),
        oh.make_node("Resize", ["r2", "", "", "size23"], ["near"], name="/near/Resize",
                     mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor"),
        oh.make_node("Resize", ["near", "", "", "size13"], ["y"], name="/down/Resize",
                     mode="linear", coordinate_transformation_mode="align_corners"),
    ]  # fmt: skip
    return _model("resize_cnn", nodes, inits, out_shape=(1, 8, 13, 13))
