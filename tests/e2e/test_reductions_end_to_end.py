"""Reductions and broadcasting elementwise ops on the MLIP, end to end against onnxruntime:
ReduceMean / ReduceSum / ReduceMax / ReduceMin over one axis or a run of axes, keepdims both
ways, after a conv (NHWC, the reduced axis where it lies) and on a sequence; a global pool over
a plane larger than a tile, split into bands with fp32 partials (the same bits as the pool
instruction on a part whose tile holds the plane) and one with a batch over 8; Sub, Div, Max,
Min, Add and Mul of two tensors that broadcast (an attention mask, a per-pixel norm, a
lower-rank operand). Each in one region, on both engines with the same bytes, within
max(3 %, the fp16-storage emulation's error). What stays on the CPU says why."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tvm
from helpers import assert_same_bytes, float_model, offloaded_partition, onnxruntime_outputs
from onnx import TensorProto, helper, numpy_helper
from tvm import relax

import mrvl
from mrvl.fp16_emulation import fp16_emulation_outputs, judge
from mrvl.sim import use_engine
from mrvl.target import derive_target

node = helper.make_node


def const(rng, name, shape, scale=0.5):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def model(nodes, inits, inputs: dict, y_shape, opset=13) -> onnx.ModelProto:
    return float_model(
        nodes, inits, inputs.items(), [("y", y_shape)], name="reductions", opset=opset, ir_version=8
    )


def build_and_run(onnx_model, feeds, *, num_tiles=1, mcpu="cn10ka", regions=1):
    """Partition (every node on the MLIP, in `regions` regions), build, run on both engines
    (the same bytes); returns the interpreter's output."""
    mod = offloaded_partition(onnx_model, num_tiles=num_tiles, regions=regions, mcpu=mcpu)
    vm = relax.VirtualMachine(mrvl.build(mod), tvm.cpu())
    outputs = []
    for engine in ("interp", "numba"):
        with use_engine(engine):
            outputs.append([vm["main"](*(tvm.runtime.tensor(v) for v in feeds.values())).numpy()])
    assert_same_bytes(outputs[0], outputs[1])
    return outputs[0][0]


def run_checked(onnx_model, feeds, **kwargs):
    """`build_and_run`, judged within max(3 %, the fp16-storage emulation's error)."""
    got = build_and_run(onnx_model, feeds, **kwargs)
    (want,) = onnxruntime_outputs(onnx_model, feeds)
    verdict = judge([got], [want], fp16_emulation_outputs(onnx_model, feeds))
    assert verdict.passed, str(verdict)
    return got


def reduced_shape(shape, axes, keepdims):
    axes = [a % len(shape) for a in axes]
    if keepdims:
        return [1 if d in axes else n for d, n in enumerate(shape)]
    return [n for d, n in enumerate(shape) if d not in axes]


def conv_reduce(op, shape, axes, keepdims):
    """conv 1x1 -> Reduce<op>(axes, keepdims) -> Sigmoid."""
    rng = np.random.default_rng(len(axes) + keepdims)
    c = shape[1]
    out = reduced_shape(shape, axes, keepdims)
    nodes = [node("Conv", ["x", "w"], ["a"], name="/c/Conv")]
    inits = [const(rng, "w", (c, c, 1, 1))]
    if op == "ReduceSum":  # opset 13: the axes are an input
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        nodes.append(node(op, ["a", "axes"], ["r"], name=f"/r/{op}", keepdims=keepdims))
    else:
        nodes.append(node(op, ["a"], ["r"], name=f"/r/{op}", axes=axes, keepdims=keepdims))
    nodes.append(node("Sigmoid", ["r"], ["y"], name="/act/Sigmoid"))
    return model(nodes, inits, {"x": shape}, out)


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize(
    "shape, axes, keepdims",
    [
        ((2, 16, 5, 6), [1], 1),  # channels: innermost in NHWC, no data moves
        ((2, 8, 7, 6), [2, 3], 0),  # the plane, [N, C]
        ((1, 8, 5, 9), [-1], 1),  # W: a middle axis of NHWC, rows strided by C
        ((3, 4, 5, 6), [1, 2], 0),  # C and H: consecutive in NCHW, not NHWC (converted)
    ],
)
def test_reductions_after_a_conv(op, shape, axes, keepdims, num_tiles):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    run_checked(conv_reduce(op, shape, axes, keepdims), {"x": x}, num_tiles=num_tiles)


def test_a_mean_over_a_sequence_between_fcs():
    """[N, T, K] -> MatMul -> ReduceMean over T -> MatMul: a pooled sequence embedding."""
    rng = np.random.default_rng(1)
    nodes = [
        node("MatMul", ["x", "w1"], ["a"], name="/q/MatMul"),
        node("ReduceMean", ["a"], ["m"], name="/pool/ReduceMean", axes=[1], keepdims=0),
        node("MatMul", ["m", "w2"], ["y"], name="/o/MatMul"),
    ]
    m = model(nodes, [const(rng, "w1", (16, 16)), const(rng, "w2", (16, 8))], {"x": (3, 10, 16)}, (3, 8))
    run_checked(m, {"x": rng.standard_normal((3, 10, 16)).astype(np.float32)}, num_tiles=2)


def gap_model(shape):
    nodes = [
        node("GlobalAveragePool", ["x"], ["g"], name="/gap/GlobalAveragePool"),
        node("Relu", ["g"], ["y"], name="/relu/Relu"),
    ]
    return model(nodes, [], {"x": shape}, (shape[0], shape[1], 1, 1))


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_a_global_pool_over_a_plane_larger_than_a_tile_is_split_with_the_pools_bits(num_tiles):
    """A 512x256 plane of 4 channels (1 MB in f16) does not fit cn10ka's 256 KiB tile: the
    window pool refuses it and the reduction takes it, in bands of the plane with fp32
    partials. On a part whose tile holds the plane the pool instruction runs it whole: the
    same bits (the ISA's sums run in the same order)."""
    shape = (1, 4, 512, 256)
    x = (np.random.default_rng(2).random(shape) * 4).astype(np.float32)
    m = gap_model(shape)
    split = run_checked(m, {"x": x}, num_tiles=num_tiles)
    big = derive_target("cn10ka", ocm_bytes_per_tile=4 << 20)
    whole = build_and_run(m, {"x": x}, num_tiles=num_tiles, mcpu=big.name)
    np.testing.assert_array_equal(split.view(np.uint32), whole.view(np.uint32))


def test_a_global_pool_over_a_batch_of_16_runs_as_a_reduction():
    shape = (16, 8, 6, 5)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    run_checked(gap_model(shape), {"x": x}, num_tiles=8)


def binary_model(op, a_shape, b_shape):
    """Two 1x1 convs (their own inputs) combined by `op`, then a Relu."""
    rng = np.random.default_rng(len(a_shape) * 7 + len(b_shape))
    out = list(np.broadcast_shapes(a_shape, b_shape))
    nodes = [
        node("Mul", ["a", "ka"], ["a2"], name="/a/Mul"),
        node("Mul", ["b", "kb"], ["b2"], name="/b/Mul"),
        node(op, ["a2", "b2"], ["r"], name=f"/op/{op}"),
        node("Relu", ["r"], ["y"], name="/relu/Relu"),
    ]
    inits = [const(rng, "ka", (1,)), const(rng, "kb", (1,))]
    return model(nodes, inits, {"a": a_shape, "b": b_shape}, out)


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize("op", ["Sub", "Div", "Max", "Min", "Add", "Mul"])
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((2, 4, 9, 9), (2, 1, 1, 9)),  # attention scores and a mask
        ((2, 6, 5, 7), (2, 1, 5, 7)),  # per pixel, over the channels
        ((3, 5, 8), (5, 8)),  # a lower-rank operand
        ((4, 6), (4, 6)),  # one shape
    ],
)
def test_two_tensors_that_broadcast(op, a_shape, b_shape, num_tiles):
    rng = np.random.default_rng(4)
    feeds = {"a": rng.standard_normal(a_shape).astype(np.float32)}
    b = rng.standard_normal(b_shape).astype(np.float32)
    if op == "Div":  # away from 0: a quotient near a pole is no test of the layer
        b = np.sign(b) * (0.5 + np.abs(b))
    feeds["b"] = b
    if op in ("Add", "Mul") and a_shape == b_shape:  # mrvl.add / mrvl.mul's: not binary's
        return
    run_checked(binary_model(op, a_shape, b_shape), feeds, num_tiles=num_tiles)


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize(
    "shape, axis, keepdims",
    [((2, 8, 5, 6), 1, 1), ((2, 8, 5, 6), 1, 0), ((2, 8, 5, 6), 2, 1), ((3, 10, 16), -1, 0)],
)
def test_argmax_leaves_the_region_as_exact_indices(shape, axis, keepdims, num_tiles):
    """ArgMax after a conv or an fc: the MLIP writes f32 indices, the region's output, which
    TVM's side converts to ONNX's int64. The input makes each maximum lead by far more than
    fp16's noise (one element raised by 4), so the indices must be onnxruntime's exactly."""
    rng = np.random.default_rng(6)
    rank4 = len(shape) == 4
    op = "Conv" if rank4 else "MatMul"
    w = np.eye(shape[1], dtype=np.float32).reshape(shape[1], shape[1], 1, 1) if rank4 else (
        np.eye(shape[-1], dtype=np.float32))  # fmt: skip
    out = reduced_shape(shape, [axis], keepdims)
    nodes = [
        node(op, ["x", "w"], ["a"], name=f"/c/{op}"),
        node("ArgMax", ["a"], ["y"], name="/am/ArgMax", axis=axis, keepdims=keepdims),
    ]
    graph = helper.make_graph(
        nodes, "argmax", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT64, out)],
        [numpy_helper.from_array(w, "w")],
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    x = rng.random(shape).astype(np.float32)
    lead = rng.integers(0, shape[axis], size=reduced_shape(shape, [axis], True))
    np.put_along_axis(x, lead, 4.0 + rng.random(lead.shape).astype(np.float32), axis=axis)
    got = build_and_run(m, {"x": x}, num_tiles=num_tiles)
    (want,) = onnxruntime_outputs(m, {"x": x})
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_what_stays_on_the_cpu_says_why():
    """Axes that are not consecutive, and a reduction to a scalar."""
    rng = np.random.default_rng(5)
    nodes = [
        node("Conv", ["x", "w"], ["a"], name="/c/Conv"),
        node("ReduceMax", ["a"], ["r"], name="/gap/ReduceMax", axes=[1, 3], keepdims=1),
        node("ReduceSum", ["r"], ["y"], name="/all/ReduceSum", keepdims=0),
    ]
    m = model(nodes, [const(rng, "w", (4, 4, 1, 1))], {"x": (1, 4, 3, 5)}, [], opset=11)
    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(m)))
    reasons = {r.node: r.reason for r in report.rows if r.target == "cpu"}
    assert "are not consecutive" in reasons["/gap/ReduceMax"]
    assert "a rank-0 result" in reasons["/all/ReduceSum"]
