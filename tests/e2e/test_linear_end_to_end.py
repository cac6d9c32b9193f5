"""Linear layers of channels-last activations on the MLIP, end to end against onnxruntime: a
MatMul of an activation [..., K] of rank 4 or 5 by a constant [K, N] is an fc over its leading
axes flattened (ConvNeXt's pointwise MLP on an [N, H, W, C] plane, Swin's on [N, G, T, T, C]
windows), with its bias Add, the GELU between the two and a layer-scale Mul fused. One region,
the same bytes on the interpreter and the Numba engine. (Rank 6 stays on the CPU with its
reason: tests/tvm/test_tvm_partition.py.)"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import float_model, offloaded_partition, onnxruntime_outputs, run_on_both_engines
from onnx import helper, numpy_helper
from test_unary_end_to_end import GELU_CONSTANTS, gelu_erf_nodes

import mrvl
from mrvl.fp16_emulation import fp16_emulation_outputs, judge

node = helper.make_node


def weights(rng, name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def model(nodes, inits, x_shape, y_shape) -> onnx.ModelProto:
    return float_model(
        nodes, inits, [("x", x_shape)], [("y", y_shape)], name="linear", opset=18
    )


def convnext_block(c=8, hw=6) -> onnx.ModelProto:
    """A ConvNeXt block as torchvision exports it: depthwise conv (NCHW), Transpose to
    channels-last, LayerNormalization, Linear, GELU (Erf form), Linear, Transpose back, the
    layer scale [C, 1, 1] and the residual Add."""
    rng = np.random.default_rng(21)
    nodes = [
        node("Conv", ["x", "dw", "dwb"], ["c"], name="/dw/Conv", group=c, pads=[1, 1, 1, 1]),
        node("Transpose", ["c"], ["t"], name="/to_nhwc", perm=[0, 2, 3, 1]),
        node("LayerNormalization", ["t", "g", "b"], ["n"], name="/ln", axis=-1),
        node("MatMul", ["n", "w1"], ["h"], name="/fc1/MatMul"),
        node("Add", ["b1", "h"], ["hb"], name="/fc1/Add"),
        *gelu_erf_nodes("hb", "a", "gelu_", "torch"),
        node("MatMul", ["a", "w2"], ["o"], name="/fc2/MatMul"),
        node("Add", ["b2", "o"], ["ob"], name="/fc2/Add"),
        node("Transpose", ["ob"], ["back"], name="/to_nchw", perm=[0, 3, 1, 2]),
        node("Mul", ["scale", "back"], ["s"], name="/layer_scale"),
        node("Add", ["s", "x"], ["y"], name="/residual"),
    ]
    inits = [
        weights(rng, "dw", (c, 1, 3, 3)),
        weights(rng, "dwb", (c,)),
        weights(rng, "g", (c,), 1.0),
        weights(rng, "b", (c,)),
        weights(rng, "w1", (c, 4 * c)),
        weights(rng, "b1", (4 * c,)),
        weights(rng, "w2", (4 * c, c)),
        weights(rng, "b2", (c,)),
        weights(rng, "scale", (c, 1, 1), 1.0),
        *GELU_CONSTANTS,
    ]
    return model(nodes, inits, [1, c, hw, hw], [1, c, hw, hw])


def window_mlp(shape=(2, 3, 4, 4, 8), hidden=12) -> onnx.ModelProto:
    """Swin-style Linear layers on windows [N, G, T, T, C] (rank 5): Linear + bias, GELU,
    Linear + bias, then a layer-scale Mul by a constant [C] on the last axis."""
    rng = np.random.default_rng(22)
    c = shape[-1]
    nodes = [
        node("MatMul", ["x", "w1"], ["h"], name="/fc1/MatMul"),
        node("Add", ["h", "b1"], ["hb"], name="/fc1/Add"),
        *gelu_erf_nodes("hb", "a", "gelu_", "half_first"),
        node("MatMul", ["a", "w2"], ["o"], name="/fc2/MatMul"),
        node("Add", ["o", "b2"], ["ob"], name="/fc2/Add"),
        node("Mul", ["ob", "scale"], ["y"], name="/layer_scale"),
    ]
    inits = [
        weights(rng, "w1", (c, hidden)),
        weights(rng, "b1", (hidden,)),
        weights(rng, "w2", (hidden, c)),
        weights(rng, "b2", (c,)),
        weights(rng, "scale", (c,), 1.0),
        *GELU_CONSTANTS,
    ]
    return model(nodes, inits, list(shape), list(shape))


def run_checked(onnx_model, *, num_tiles):
    """All on the MLIP in one region, the same bytes on both engines, and within max(3 %, the
    fp16-storage emulation's own error) of onnxruntime (DESIGN §9: a residual block's fp16
    noise through LayerNorm and GELU is the emulation's too)."""
    mod = offloaded_partition(onnx_model, num_tiles=num_tiles)
    shape = [d.dim_value for d in onnx_model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    outputs = run_on_both_engines(mrvl.build(mod, num_tiles=num_tiles), x)
    (want,) = onnxruntime_outputs(onnx_model, {"x": x})
    verdict = judge(outputs, [want], fp16_emulation_outputs(onnx_model, {"x": x}))
    assert verdict.passed, str(verdict)


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_a_convnext_block_runs_in_one_region(num_tiles):
    run_checked(convnext_block(), num_tiles=num_tiles)


def test_linear_layers_on_rank_5_windows_with_a_layer_scale_on_the_last_axis():
    run_checked(window_mlp(), num_tiles=4)
