"""A standalone constant Pad on the MLIP, end to end against onnxruntime: after a conv (NHWC,
the widths permuted into it), with a nonzero value, on the batch and channel axes a conv
could not take, before a pool, at rank 2 and 3 (a sequence), and at rank 5 between moves;
each in one region, on both engines with the same bytes, within max(3 %, the fp16-storage
emulation's error). Two DMA passes per pad: a fill and the interior copy."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper
from test_reductions_end_to_end import const, model, node, run_checked


def pad_model(x_shape, pads, value, before=None, after=None, opset=13):
    """[before] -> Pad(pads, value) -> [after]: a conv or MatMul in front, a relu or pool
    behind (none if not asked)."""
    rng = np.random.default_rng(sum(pads))
    rank = len(x_shape)
    nodes, inits, current = [], [], "x"
    if before == "Conv":
        inits.append(const(rng, "w", (x_shape[1], x_shape[1], 1, 1)))
        nodes.append(node("Conv", ["x", "w"], ["a"], name="/c/Conv"))
        current = "a"
    elif before == "MatMul":
        inits.append(const(rng, "w", (x_shape[-1], x_shape[-1])))
        nodes.append(node("MatMul", ["x", "w"], ["a"], name="/m/MatMul"))
        current = "a"
    inits += [
        numpy_helper.from_array(np.array(pads, np.int64), "pads"),
        numpy_helper.from_array(np.array(value, np.float32), "value"),
    ]
    out = [n + pads[d] + pads[rank + d] for d, n in enumerate(x_shape)]
    last = "y" if after is None else "p"
    nodes.append(node("Pad", [current, "pads", "value"], [last], name="/pad/Pad"))
    if after == "MaxPool":
        nodes.append(node("MaxPool", ["p"], ["y"], name="/pool/MaxPool", kernel_shape=[2, 2]))
        out = [*out[:2], out[2] - 1, out[3] - 1]
    elif after == "Relu":
        nodes.append(node("Relu", ["p"], ["y"], name="/relu/Relu"))
    return model(nodes, inits, {"x": x_shape}, out, opset=opset)


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize(
    "x_shape, pads, value, before, after",
    [
        ((2, 8, 5, 6), [0, 0, 1, 2, 0, 0, 3, 1], 0.0, "Conv", "Relu"),  # H and W, NHWC
        ((2, 8, 5, 6), [0, 1, 1, 0, 0, 2, 0, 1], 1.5, "Conv", "MaxPool"),  # channels, a value
        ((1, 4, 3, 3), [1, 0, 0, 0, 2, 0, 0, 0], -2.0, "Conv", None),  # the batch
        ((3, 20), [0, 2, 0, 5], 0.25, "MatMul", "Relu"),  # rank 2: features
        ((2, 7, 16), [0, 3, 0, 0, 1, 0], 0.0, "MatMul", None),  # rank 3: the sequence
    ],
)
def test_a_standalone_pad(x_shape, pads, value, before, after, num_tiles):
    x = np.random.default_rng(0).standard_normal(x_shape).astype(np.float32)
    run_checked(pad_model(x_shape, pads, value, before, after), {"x": x}, num_tiles=num_tiles)


def test_a_pad_at_rank_5_between_moves():
    """[N, T, 3, heads, d] (attention's q/k/v through rank 5) padded on d, then moved back
    to rank 3: the pad copies into the interior of a rank-5 result (more dimensions than a
    descriptor's 4 are walked one DMA per index)."""
    shape5 = (1, 4, 3, 2, 5)
    pads = [0, 0, 0, 1, 1, 0, 0, 0, 0, 2]
    out5 = [n + pads[d] + pads[5 + d] for d, n in enumerate(shape5)]
    flat = (1, 4 * 3 * 2 * 5)
    inits = [
        numpy_helper.from_array(np.array(shape5, np.int64), "s5"),
        numpy_helper.from_array(np.array(pads, np.int64), "pads"),
        numpy_helper.from_array(np.array(0.5, np.float32), "value"),
        numpy_helper.from_array(np.array([1, int(np.prod(out5)) // 1], np.int64), "s2"),
    ]
    nodes = [
        node("Reshape", ["x", "s5"], ["r"], name="/split/Reshape"),
        node("Pad", ["r", "pads", "value"], ["p"], name="/pad/Pad"),
        node("Reshape", ["p", "s2"], ["y"], name="/merge/Reshape"),
    ]
    m = model(nodes, inits, {"x": flat}, [1, int(np.prod(out5))])
    x = np.random.default_rng(1).standard_normal(flat).astype(np.float32)
    run_checked(m, {"x": x}, num_tiles=2)
