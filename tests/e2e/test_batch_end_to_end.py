"""Conv, pools, resize and ConvTranspose over more than 8 images on the MLIP (issue 21: no
batch limit): each such layer runs in groups of 8 images (`mrvl-split-batch`), in one region,
on both engines with the same bytes, within max(3 %, the fp16-storage emulation's error); and
each image's result has the bits of the same model run on a batch of that image's group."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper
from test_reductions_end_to_end import build_and_run, const, model, node, run_checked


def batch_model(batch: int):
    """Conv 3x3 -> MaxPool 2x2 -> bilinear Resize x2 -> ConvTranspose 2x2 stride 2 -> Relu,
    over `batch` images of 4x9x7."""
    rng = np.random.default_rng(9)
    inits = [
        const(rng, "w", (6, 4, 3, 3), 0.3),
        const(rng, "wt", (6, 5, 2, 2), 0.3),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc"),
        numpy_helper.from_array(np.array([], np.float32), "roi"),
    ]
    nodes = [
        node("Conv", ["x", "w"], ["a"], name="/c/Conv", pads=[1, 1, 1, 1]),
        node("MaxPool", ["a"], ["b"], name="/p/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        node("Resize", ["b", "roi", "sc"], ["r"], name="/rs/Resize", mode="linear"),
        node("ConvTranspose", ["r", "wt"], ["t"], name="/ct/ConvTranspose", strides=[2, 2]),
        node("Relu", ["t"], ["y"], name="/relu/Relu"),
    ]
    return model(nodes, inits, {"x": (batch, 4, 9, 7)}, (batch, 5, 16, 12))


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_a_batch_of_19_in_groups_of_8_with_each_groups_bits(num_tiles):
    x = np.random.default_rng(1).standard_normal((19, 4, 9, 7)).astype(np.float32)
    whole = run_checked(batch_model(19), {"x": x}, num_tiles=num_tiles)
    for first in (0, 16):  # a full group and the last, short one
        count = min(8, 19 - first)
        part = x[first : first + count]
        alone = build_and_run(batch_model(count), {"x": part}, num_tiles=num_tiles)
        np.testing.assert_array_equal(
            whole[first : first + count].view(np.uint32), alone.view(np.uint32)
        )
