"""PRelu with per-channel slopes and Softmax on rank-5 tensors (a 3-D conv net's activation,
attention over [B, windows, heads, T, T]) on the MLIP, end to end against onnxruntime: the
PRelu as a scale_shift on the 4-D view whose channel axis is the slopes' (`high_rank_prelu`),
the Softmax on the same bytes seen as [outer, length, inner]. One region, both engines with
the same bytes, within max(3 %, the fp16-storage emulation's error)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper
from test_reductions_end_to_end import model, node, run_checked

SHAPE = (1, 3, 4, 5, 6)


@pytest.mark.parametrize(
    "slopes_shape, num_tiles",
    [((3, 1, 1, 1), 1), ((3, 1, 1, 1), 8), ((4, 1, 1), 8), ((6,), 1)],
    ids=["axis1-1tile", "axis1-8tiles", "axis2-8tiles", "last-1tile"],
)
def test_prelu_with_per_channel_slopes_at_rank_5(slopes_shape, num_tiles):
    """x * 2 -> PRelu(slopes along one axis) -> + 0.5: one scale_shift with its PRelu."""
    rng = np.random.default_rng(len(slopes_shape))
    slopes = rng.uniform(0.05, 0.6, slopes_shape).astype(np.float32)
    inits = [
        numpy_helper.from_array(slopes, "slopes"),
        numpy_helper.from_array(np.float32(2.0), "two"),
        numpy_helper.from_array(np.float32(0.5), "half"),
    ]
    nodes = [
        node("Mul", ["x", "two"], ["a"], name="/pre/Mul"),
        node("PRelu", ["a", "slopes"], ["p"], name="/act/PRelu"),
        node("Add", ["p", "half"], ["y"], name="/post/Add"),
    ]
    x = rng.standard_normal(SHAPE).astype(np.float32)
    run_checked(model(nodes, inits, {"x": SHAPE}, list(SHAPE)), {"x": x}, num_tiles=num_tiles)


@pytest.mark.parametrize("axis, num_tiles", [(1, 8), (2, 1), (-1, 1), (-1, 8)])
def test_softmax_at_rank_5(axis, num_tiles):
    """x * 3 -> Softmax(axis) -> * 2: the softmax on [outer, length, inner]."""
    rng = np.random.default_rng(axis % 5)
    inits = [
        numpy_helper.from_array(np.float32(3.0), "three"),
        numpy_helper.from_array(np.float32(2.0), "two"),
    ]
    nodes = [
        node("Mul", ["x", "three"], ["a"], name="/pre/Mul"),
        node("Softmax", ["a"], ["s"], name="/attn/Softmax", axis=axis),
        node("Mul", ["s", "two"], ["y"], name="/post/Mul"),
    ]
    x = rng.standard_normal(SHAPE).astype(np.float32)
    run_checked(model(nodes, inits, {"x": SHAPE}, list(SHAPE)), {"x": x}, num_tiles=num_tiles)
