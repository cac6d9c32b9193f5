"""Constants that layers read as data, end to end against onnxruntime: a binary op with a
constant of a shape that is no per-channel or scalar step (ViT's position embedding, YOLOv8's
anchor grids, Swin's attention biases), either side, after an fc or a conv (its data
permuted into NHWC at import), and at rank 5 between copies (Swin's shifted-window mask); a
Concat with a constant input (ViT's class token); and
ReduceL2 (an L2 normalization's norm) as one `reduce` L2. Each in one region, on both engines
with the same bytes, within max(3 %, the fp16-storage emulation's error)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import onnxruntime_outputs
from onnx import numpy_helper
from test_reductions_end_to_end import build_and_run, const, model, node, run_checked

import mrvl
from mrvl.target import derive_target


def fc_then(op, x_shape, c_shape, *, constant_first=False):
    """[N, T, K] -> MatMul -> `op` with a constant of `c_shape` -> Relu."""
    rng = np.random.default_rng(len(c_shape))
    k = x_shape[-1]
    c = rng.standard_normal(c_shape).astype(np.float32)
    if op == "Div":  # away from 0: a quotient near a pole is no test of the layer
        c = np.sign(c) * (0.5 + np.abs(c))
    args = ["c", "a"] if constant_first else ["a", "c"]
    nodes = [
        node("MatMul", ["x", "w"], ["a"], name="/fc/MatMul"),
        node(op, args, ["r"], name=f"/op/{op}"),
        node("Relu", ["r"], ["y"], name="/relu/Relu"),
    ]
    out = list(np.broadcast_shapes(x_shape, c_shape))
    return model(nodes, [const(rng, "w", (k, k)), numpy_helper.from_array(c, "c")], {"x": x_shape}, out)


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize(
    "op, c_shape, constant_first",
    [
        ("Add", (1, 7, 16), False),  # a position embedding
        ("Sub", (1, 7, 1), True),  # c - x, one value per row: an anchor grid
        ("Mul", (7, 16), False),  # a lower-rank constant
        ("Div", (1, 1, 16), True),  # c / x per feature (no step takes a tensor divisor)
        ("Max", (1, 7, 16), False),
        ("Min", (1, 7, 16), True),
    ],
)
def test_binary_with_a_constant_operand_after_an_fc(op, c_shape, constant_first, num_tiles):
    x = np.random.default_rng(1).standard_normal((2, 7, 16)).astype(np.float32)
    m = fc_then(op, (2, 7, 16), c_shape, constant_first=constant_first)
    run_checked(m, {"x": x}, num_tiles=num_tiles)


def test_a_constant_bias_over_a_conv_plane_is_permuted_into_nhwc():
    """Conv -> Add of a constant [1, C, H, W] (a relative-position bias of a plane): the
    conv's result is NHWC, the constant is made in NHWC at import (no conversion runs)."""
    rng = np.random.default_rng(2)
    nodes = [
        node("Conv", ["x", "w"], ["a"], name="/c/Conv"),
        node("Add", ["a", "bias"], ["y"], name="/bias/Add"),
    ]
    inits = [const(rng, "w", (6, 4, 1, 1)), const(rng, "bias", (1, 6, 5, 3))]
    m = model(nodes, inits, {"x": (2, 4, 5, 3)}, (2, 6, 5, 3))
    run_checked(m, {"x": rng.standard_normal((2, 4, 5, 3)).astype(np.float32)}, num_tiles=2)


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_concat_with_a_constant_input_a_class_token(num_tiles):
    """[N, T, K] -> MatMul -> Concat(class token [N, 1, K], x) on the sequence -> Add of a
    position embedding [1, T + 1, K]: ViT's embedding, one region."""
    rng = np.random.default_rng(3)
    nodes = [
        node("MatMul", ["x", "w"], ["a"], name="/fc/MatMul"),
        node("Concat", ["cls", "a"], ["t"], name="/cls/Concat", axis=1),
        node("Add", ["t", "pos"], ["y"], name="/pos/Add"),
    ]
    inits = [const(rng, "w", (16, 16)), const(rng, "cls", (2, 1, 16)), const(rng, "pos", (1, 9, 16))]
    m = model(nodes, inits, {"x": (2, 8, 16)}, (2, 9, 16))
    run_checked(m, {"x": rng.standard_normal((2, 8, 16)).astype(np.float32)}, num_tiles=num_tiles)


def test_concat_with_a_constant_input_on_the_channels():
    rng = np.random.default_rng(4)
    nodes = [
        node("Conv", ["x", "w"], ["a"], name="/c/Conv"),
        node("Concat", ["a", "k"], ["y"], name="/cat/Concat", axis=1),
    ]
    m = model(nodes, [const(rng, "w", (4, 3, 1, 1)), const(rng, "k", (1, 2, 5, 6))], {"x": (1, 3, 5, 6)}, (1, 6, 5, 6))
    run_checked(m, {"x": rng.standard_normal((1, 3, 5, 6)).astype(np.float32)}, num_tiles=2)


def l2_norm_model(shape, axes):
    """Conv 1x1 -> x / ReduceL2(x, axes, keepdims): an L2 normalization (a face embedding)."""
    rng = np.random.default_rng(len(shape))
    nodes = [
        node("Conv", ["x", "w"], ["a"], name="/c/Conv"),
        node("ReduceL2", ["a"], ["n"], name="/ReduceL2", axes=axes, keepdims=1),
        node("Div", ["a", "n"], ["y"], name="/Div"),
    ]
    return model(nodes, [const(rng, "w", (shape[1], shape[1], 1, 1))], {"x": shape}, list(shape))


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize("shape, axes", [((2, 16, 1, 1), [1]), ((2, 8, 5, 6), [2, 3])])
def test_reduce_l2_is_one_reduction(shape, axes, num_tiles):
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    run_checked(l2_norm_model(shape, axes), {"x": x}, num_tiles=num_tiles)


def test_reduce_l2_over_a_plane_larger_than_a_tile_is_split_with_the_same_bits():
    """A 512x256 plane of 2 channels does not fit cn10ka's 256 KiB tile: bands with fp32
    partial sums of squares, one square root at the end: the bits of a part whose tile holds
    the plane."""
    shape = (1, 2, 512, 256)
    rng = np.random.default_rng(6)
    nodes = [node("ReduceL2", ["x"], ["y"], name="/ReduceL2", axes=[2, 3], keepdims=1)]
    m = model(nodes, [], {"x": shape}, [1, 2, 1, 1])
    x = rng.random(shape).astype(np.float32)
    split = run_checked(m, {"x": x}, num_tiles=2)
    big = derive_target("cn10ka", ocm_bytes_per_tile=4 << 20)
    whole = build_and_run(m, {"x": x}, num_tiles=2, mcpu=big.name)
    np.testing.assert_array_equal(split.view(np.uint32), whole.view(np.uint32))
    (want,) = onnxruntime_outputs(m, {"x": x})
    np.testing.assert_allclose(split, want, rtol=2e-3)


def test_what_stays_on_the_cpu_says_why():
    """A ReduceL2 to a rank-1 result (as any reduction to one)."""
    rng = np.random.default_rng(7)
    nodes = [
        node("MatMul", ["x", "w"], ["a"], name="/fc/MatMul"),
        node("ReduceL2", ["a"], ["y"], name="/ReduceL2", axes=[1], keepdims=0),
    ]
    m = model(nodes, [const(rng, "w", (4, 4))], {"x": (3, 4)}, [3])
    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(m)))
    reasons = {r.node: r.reason for r in report.rows if r.target == "cpu"}
    assert "a rank-1 result" in reasons["/ReduceL2"], reasons


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_a_shifted_window_mask_add_at_rank_5(num_tiles):
    """Swin's shifted-window attention: scores [B·windows, heads, T, T] seen as
    [B, windows, heads, T, T] plus a constant mask [1, windows, 1, T, T], and back: the
    reshapes are copies, the Add a binary op at rank 5 (4 merged dimensions), one region."""
    rng = np.random.default_rng(8)
    shape5, shape4 = [2, 3, 2, 5, 5], [6, 2, 5, 5]
    mask = np.where(rng.random((1, 3, 1, 5, 5)) < 0.3, -100.0, 0.0).astype(np.float32)
    nodes = [
        node("Mul", ["x", "scale"], ["s"], name="/attn/Mul"),
        node("Reshape", ["s", "to5"], ["s5"], name="/attn/Reshape_16"),
        node("Add", ["s5", "mask"], ["m5"], name="/attn/Add_11"),
        node("Reshape", ["m5", "to4"], ["m"], name="/attn/Reshape_17"),
        node("Relu", ["m"], ["y"], name="/attn/Relu"),
    ]
    inits = [
        numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
        numpy_helper.from_array(np.array(shape5, np.int64), "to5"),
        numpy_helper.from_array(mask, "mask"),
        numpy_helper.from_array(np.array(shape4, np.int64), "to4"),
    ]
    m = model(nodes, inits, {"x": shape4}, shape4)
    x = rng.standard_normal(shape4).astype(np.float32)
    run_checked(m, {"x": x}, num_tiles=num_tiles)
