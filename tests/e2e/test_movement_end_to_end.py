"""Data movement of modern models on the MLIP, end to end against onnxruntime (issue 21):
copies through rank 5 and 6 (attention's q/k/v split, Swin's window partition), slices with a
negative step, Gather with constant indices, Tile and Expand, reflect and edge Pad, conv1d
(a conv2d over H = 1) and batches beyond 8. Each model is built in code,
must be offloaded whole (in one region), and must pass the fp16 acceptance rule."""

from __future__ import annotations

import numpy as np
import pytest
from e2e.test_shapes_end_to_end import check_offloaded_and_accurate, const, floats, ints, model
from onnx import helper, numpy_helper

import mrvl

node = helper.make_node


def placement(onnx_model, **options) -> dict[str, str]:
    """ONNX node -> where it runs (a region, `cpu` or `folded`)."""
    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model), **options))
    return {row.node: row.target for row in report.rows}


# ---------------------------------------------------------------------------------------------
# Rank 5 and 6


def qkv_split_net(batch=2, tokens=6, heads=2, dim=4):
    """A transformer's q/k/v projection: fc -> reshape [B, T, 3, heads, d] -> transpose
    (2, 0, 3, 1, 4) -> Split on axis 0 -> Squeeze, each head tensor then scaled."""
    rng = np.random.default_rng(21)
    width = heads * dim
    nodes = [
        node("MatMul", ["x", "w"], ["q"], name="qkv"),
        node("Reshape", ["q", "s5"], ["r"], name="reshape"),
        node("Transpose", ["r"], ["t"], name="transpose", perm=[2, 0, 3, 1, 4]),
        node("Split", ["t"], ["a", "b", "c"], name="split", axis=0),
    ]
    outputs = []
    for i, part in enumerate("abc"):
        nodes += [
            node("Squeeze", [part, "ax"], [f"{part}4"], name=f"squeeze{i}"),
            node("Relu", [f"{part}4"], [f"y{i}"], name=f"relu{i}"),
        ]
        outputs.append((f"y{i}", [batch, heads, tokens, dim]))
    inits = [
        const(rng, "w", (width, 3 * width)),
        ints("s5", [batch, tokens, 3, heads, dim]),
        ints("ax", [0]),
    ]
    return model(nodes, inits, [("x", [batch, tokens, width])], outputs)


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_qkv_split_through_rank_5_runs_in_one_region(num_tiles):
    check_offloaded_and_accurate(qkv_split_net(), num_tiles=num_tiles)


def window_partition_net(batch=1, size=8, window=4, c=6):
    """Swin's window partition and its reverse around a 1x1 conv: [B, C, H, W] -> NHWC ->
    reshape [B, H/w, w, W/w, w, C] -> transpose (0, 1, 3, 2, 4, 5) -> [B·nW, w, w, C], and
    back, each a chain through rank 6."""
    rng = np.random.default_rng(22)
    n = size // window
    nodes = [
        node("Conv", ["x", "w1"], ["a"], name="conv1", kernel_shape=[1, 1]),
        node("Transpose", ["a"], ["nhwc"], name="to_nhwc", perm=[0, 2, 3, 1]),
        node("Reshape", ["nhwc", "s6"], ["r6"], name="partition_reshape"),
        node("Transpose", ["r6"], ["t6"], name="partition_transpose", perm=[0, 1, 3, 2, 4, 5]),
        node("Reshape", ["t6", "sw"], ["win"], name="partition_windows"),
        node("Relu", ["win"], ["rw"], name="relu"),
        node("Reshape", ["rw", "s6b"], ["b6"], name="reverse_reshape"),
        node("Transpose", ["b6"], ["u6"], name="reverse_transpose", perm=[0, 1, 3, 2, 4, 5]),
        node("Reshape", ["u6", "s4"], ["back"], name="reverse_merge"),
        node("Transpose", ["back"], ["nchw"], name="to_nchw", perm=[0, 3, 1, 2]),
        node("Conv", ["nchw", "w2"], ["y"], name="conv2", kernel_shape=[1, 1]),
    ]
    inits = [
        const(rng, "w1", (c, c, 1, 1)),
        ints("s6", [batch, n, window, n, window, c]),
        ints("sw", [batch * n * n, window, window, c]),
        ints("s6b", [batch, n, n, window, window, c]),
        ints("s4", [batch, size, size, c]),
        const(rng, "w2", (c, c, 1, 1)),
    ]
    return model(nodes, inits, [("x", [batch, c, size, size])], [("y", [batch, c, size, size])])


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_swin_window_partition_through_rank_6_runs_in_one_region(num_tiles):
    check_offloaded_and_accurate(window_partition_net(), num_tiles=num_tiles)


@pytest.mark.parametrize("perm", [[0, 3, 1, 4, 2], [4, 3, 2, 1, 0]])
def test_rank5_transpose_as_region_input_and_output(perm):
    """A rank-5 tensor crosses the region boundary both ways: the region converts its input
    and output to and from f16 by one `cvt` over the same bytes."""
    shape = [2, 3, 4, 5, 6]
    nodes = [node("Transpose", ["x"], ["y"], name="transpose", perm=perm)]
    onnx_model = model(nodes, [], [("x", shape)], [("y", [shape[p] for p in perm])])
    check_offloaded_and_accurate(onnx_model, num_tiles=2)


@pytest.mark.parametrize(
    "make",
    [qkv_split_net, window_partition_net, lambda: reverse_sequence_net()],
    ids=["qkv", "windows", "reverse"],
)
def test_nodes_json_of_rank_5_and_6_copies_pass_the_schema(make):
    """The Nodes-JSON of rank-5/6 copies and of a reversed copy (a negative source stride)
    passes the schema."""
    from helpers import region_functions

    from mrvl import json_emitter
    from mrvl.compiler import compile_region

    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(make()))
    for _, function in region_functions(mod):
        compiled = compile_region(function, constants_json=True)
        assert json_emitter.check_pair(compiled.nodes_json, compiled.consts_json) == []


def yolov5_decode_net(anchors=3, classes=3, size=5, stride=8.0):
    """YOLOv5's detect head as its export writes it: conv -> reshape to [N, 3, 5+classes, H, W]
    -> transpose to [N, 3, H, W, 5+classes] -> Sigmoid at rank 5 -> Split into xy, wh and the
    scores; xy * 2 + grid, * stride; (wh * 2) ** 2 * anchor grid; Concat, Reshape to [N, boxes,
    4] and [N, boxes, classes]."""
    rng = np.random.default_rng(32)
    outs = 5 + classes
    grid = rng.integers(0, size, (1, anchors, size, size, 2)).astype(np.float32) - 0.5
    anchor = rng.uniform(10, 60, (1, anchors, size, size, 2)).astype(np.float32)
    nodes = [
        node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        node("Reshape", ["c", "s5"], ["r"], name="reshape"),
        node("Transpose", ["r"], ["t"], name="transpose", perm=[0, 1, 3, 4, 2]),
        node("Sigmoid", ["t"], ["g"], name="sigmoid"),
        node("Split", ["g", "sp"], ["xy", "wh", "conf"], name="split", axis=4),
        node("Mul", ["xy", "two"], ["xy2"], name="xy_times_2"),
        node("Add", ["xy2", "grid"], ["xyg"], name="plus_grid"),
        node("Mul", ["xyg", "stride"], ["xys"], name="times_stride"),
        node("Mul", ["wh", "two"], ["wh2"], name="wh_times_2"),
        node("Pow", ["wh2", "two"], ["whp"], name="squared"),
        node("Mul", ["whp", "anchor"], ["wha"], name="times_anchor"),
        node("Concat", ["xys", "wha"], ["box5"], name="concat", axis=4),
        node("Reshape", ["box5", "sb"], ["boxes"], name="boxes"),
        node("Reshape", ["conf", "ss"], ["scores"], name="scores"),
    ]
    boxes = anchors * size * size
    inits = [
        const(rng, "w", (anchors * outs, 4, 1, 1)),
        ints("s5", [1, anchors, outs, size, size]),
        ints("sp", [2, 2, classes + 1]),
        floats("two", 2.0),
        numpy_helper.from_array(grid, "grid"),
        floats("stride", stride),
        numpy_helper.from_array(anchor, "anchor"),
        ints("sb", [1, boxes, 4]),
        ints("ss", [1, boxes, classes + 1]),
    ]
    outputs = [("boxes", [1, boxes, 4]), ("scores", [1, boxes, classes + 1])]
    return model(nodes, inits, [("x", [1, 4, size, size])], outputs)


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_yolov5_decode_at_rank_5_runs_in_one_region(num_tiles):
    """The Sigmoid, the scalar Muls and the Pow are scale_shifts on a flat view of the rank-5
    tensor, the grid and anchor terms `mrvl.binary`s, the Concat one at rank 5."""
    check_offloaded_and_accurate(yolov5_decode_net(), num_tiles=num_tiles)


def test_yolov5_decode_gives_the_same_bytes_on_both_engines():
    import tvm
    from tvm import relax

    from mrvl.sim import use_engine

    executable = mrvl.build(mrvl.partition_for_mrvl(mrvl.from_onnx(yolov5_decode_net())))
    vm = relax.VirtualMachine(executable, tvm.cpu())
    x = tvm.runtime.tensor(np.random.default_rng(3).standard_normal((1, 4, 5, 5), np.float32))
    runs = []
    for engine in ("interp", "numba"):
        with use_engine(engine):
            runs.append([out.numpy().tobytes() for out in vm["main"](x)])
    assert runs[0] == runs[1]


def test_rank5_moves_around_a_cpu_op_stay_on_the_cpu():
    """Reshape to rank 5, transpose, an op no MLIP layer computes (Floor), then slices and
    reshapes. Offloading the moves alone would cut them into regions of copies around the
    Floor, so they stay with it."""
    rng = np.random.default_rng(32)
    nodes = [
        node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        node("Reshape", ["c", "s5"], ["r"], name="reshape"),
        node("Transpose", ["r"], ["t"], name="transpose", perm=[0, 1, 3, 4, 2]),
        node("Floor", ["t"], ["g"], name="floor"),
        node("Split", ["g", "sp"], ["xy", "rest"], name="split", axis=4),
        node("Reshape", ["xy", "s3"], ["y"], name="flatten"),
    ]
    inits = [
        const(rng, "w", (12, 4, 1, 1)),
        ints("s5", [1, 3, 4, 5, 5]),
        ints("sp", [2, 2]),
        ints("s3", [1, 75, 2]),
    ]
    onnx_model = model(
        nodes, inits, [("x", [1, 4, 5, 5])], [("y", [1, 75, 2]), ("rest", [1, 3, 5, 5, 2])]
    )
    where = placement(onnx_model)
    assert where["conv"] != "cpu"
    assert all(where[n] == "cpu" for n in ("reshape", "transpose", "split", "flatten")), where


# ---------------------------------------------------------------------------------------------
# Slices with a negative step: a DMA whose source stride is negative


def reverse_sequence_net(steps=(-1,), axis=1):
    """A reverse-direction LSTM's input: fc over a sequence [N, T, K], the time axis reversed
    (Slice with step -1, or another step), then another fc."""
    rng = np.random.default_rng(23)
    n, t, k = 2, 7, 8
    step = steps[0]
    start, end = (-1, -(2**62)) if step < 0 else (0, 2**62)
    kept = len(range(t - 1, -1, step)) if step < 0 else len(range(0, t, step))
    nodes = [
        node("MatMul", ["x", "w1"], ["a"], name="fc1"),
        node("Slice", ["a", "st", "en", "ax", "sp"], ["r"], name="reverse"),
        node("MatMul", ["r", "w2"], ["y"], name="fc2"),
    ]
    inits = [
        const(rng, "w1", (k, k)),
        ints("st", [start]),
        ints("en", [end]),
        ints("ax", [axis]),
        ints("sp", [step]),
        const(rng, "w2", (k, 5)),
    ]
    return model(nodes, inits, [("x", [n, t, k])], [("y", [n, kept, 5])])


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize("step", [-1, -2, 3])
def test_slice_with_any_step_is_a_strided_copy(step, num_tiles):
    check_offloaded_and_accurate(reverse_sequence_net((step,)), num_tiles=num_tiles)


def test_flipped_image_between_convs():
    """Both spatial axes reversed (a horizontal and vertical flip) between two convs."""
    rng = np.random.default_rng(24)
    nodes = [
        node("Conv", ["x", "w1"], ["a"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Slice", ["a", "st", "en", "ax", "sp"], ["f"], name="flip"),
        node("Conv", ["f", "w2"], ["y"], name="conv2", kernel_shape=[1, 1]),
    ]
    inits = [
        const(rng, "w1", (4, 3, 3, 3)),
        ints("st", [-1, -1]),
        ints("en", [-(2**62), -(2**62)]),
        ints("ax", [2, 3]),
        ints("sp", [-1, -1]),
        const(rng, "w2", (4, 4, 1, 1)),
    ]
    onnx_model = model(nodes, inits, [("x", [2, 3, 5, 6])], [("y", [2, 4, 5, 6])])
    check_offloaded_and_accurate(onnx_model, num_tiles=2)


# ---------------------------------------------------------------------------------------------
# Gather with constant indices


def unrolled_lstm_inputs_net(steps=4, n=2, k=8):
    """An unrolled LSTM's per-step inputs: fc over [T, N, K], then one Gather per time step
    (a scalar index on axis 0, the last one negative) feeding its own fc, summed."""
    rng = np.random.default_rng(25)
    nodes = [node("MatMul", ["x", "w"], ["a"], name="proj")]
    inits = [const(rng, "w", (k, k))]
    total = None
    for t in range(steps):
        index = t if t < steps - 1 else -1
        inits += [ints(f"i{t}", index), const(rng, f"u{t}", (k, 4))]
        nodes += [
            node("Gather", ["a", f"i{t}"], [f"g{t}"], name=f"gather{t}", axis=0),
            node("MatMul", [f"g{t}", f"u{t}"], [f"h{t}"], name=f"step{t}"),
        ]
        if total is not None:
            nodes.append(node("Add", [total, f"h{t}"], [f"s{t}"], name=f"sum{t}"))
            total = f"s{t}"
        else:
            total = f"h{t}"
    nodes.append(node("Relu", [total], ["y"], name="relu"))
    return model(nodes, inits, [("x", [steps, n, k])], [("y", [n, 4])])


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_unrolled_lstm_gathers_run_in_one_region(num_tiles):
    check_offloaded_and_accurate(unrolled_lstm_inputs_net(), num_tiles=num_tiles)


def gather_net(indices, axis):
    """Gather of constant indices (a vector) between two convs."""
    rng = np.random.default_rng(26)
    shape = [2, 6, 5, 7]
    out = list(shape)
    out[axis] = len(indices)
    nodes = [
        node("Conv", ["x", "w1"], ["a"], name="conv1", kernel_shape=[1, 1]),
        node("Gather", ["a", "i"], ["g"], name="gather", axis=axis),
        node("Conv", ["g", "w2"], ["y"], name="conv2", kernel_shape=[1, 1]),
    ]
    inits = [
        const(rng, "w1", (6, 3, 1, 1)),
        ints("i", indices),
        const(rng, "w2", (4, out[1], 1, 1)),
    ]
    out[1] = 4
    return model(nodes, inits, [("x", [2, 3, 5, 7])], [("y", out)])


@pytest.mark.parametrize(
    "indices, axis",
    [
        ([1, 3, 5], 1),  # a progression: one strided copy
        ([5, 0, 2, 2, -1], 1),  # irregular and repeated: pieces, concatenated
        ([4, 0, 3], 2),
        ([6, 5, 1, 2], 3),
    ],
)
def test_gather_with_constant_indices(indices, axis):
    check_offloaded_and_accurate(gather_net(indices, axis), num_tiles=4)


def test_gather_with_runtime_indices_stays_on_the_cpu_with_its_reason():
    from onnx import TensorProto

    nodes = [node("Gather", ["x", "i"], ["y"], name="gather", axis=1)]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 3]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, 3])],
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx_model.ir_version = 10
    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model)))
    (row,) = report.rows
    # TVM wraps run-time indices in a where(i < 0, i + n, i) that no MLIP layer computes
    assert row.target == "cpu" and row.reason == "unsupported op Gather", row


# ---------------------------------------------------------------------------------------------
# Batches beyond 8: attention folds heads or windows into the batch


def folded_heads_net(batch=16, tokens=8, heads=8, dim=4):
    """Attention's heads folded into the batch (batch x heads = 128): fc -> reshape ->
    transpose -> reshape [B·h, T, d] -> scale, + a second projection, Relu -> back -> fc."""
    rng = np.random.default_rng(27)
    width = heads * dim
    nodes = [
        node("MatMul", ["x", "w1"], ["q"], name="q_proj"),
        node("MatMul", ["x", "w2"], ["k"], name="k_proj"),
    ]
    for name in ("q", "k"):
        nodes += [
            node("Reshape", [name, "s4"], [f"{name}4"], name=f"{name}_split_heads"),
            node("Transpose", [f"{name}4"], [f"{name}t"], name=f"{name}_transpose",
                 perm=[0, 2, 1, 3]),
            node("Reshape", [f"{name}t", "s3"], [f"{name}b"], name=f"{name}_fold"),
        ]  # fmt: skip
    nodes += [
        node("Mul", ["qb", "scale"], ["qs"], name="scale"),
        node("Add", ["qs", "kb"], ["sum"], name="add"),
        node("Relu", ["sum"], ["r"], name="relu"),
        node("Reshape", ["r", "s4h"], ["r4"], name="unfold"),
        node("Transpose", ["r4"], ["rt"], name="merge_transpose", perm=[0, 2, 1, 3]),
        node("Reshape", ["rt", "s3m"], ["m"], name="merge_heads"),
        node("MatMul", ["m", "w3"], ["y"], name="out_proj"),
    ]
    inits = [
        const(rng, "w1", (width, width)),
        const(rng, "w2", (width, width)),
        ints("s4", [batch, tokens, heads, dim]),
        ints("s3", [batch * heads, tokens, dim]),
        numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
        ints("s4h", [batch, heads, tokens, dim]),
        ints("s3m", [batch, tokens, width]),
        const(rng, "w3", (width, 6)),
    ]
    return model(nodes, inits, [("x", [batch, tokens, width])], [("y", [batch, tokens, 6])])


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_heads_folded_into_a_batch_of_128_run_in_one_region(num_tiles):
    check_offloaded_and_accurate(folded_heads_net(), num_tiles=num_tiles)


def test_a_conv_over_a_batch_beyond_8_runs_in_groups_after_the_copy():
    """A conv's pieces hold every image of the batch (its tiling cuts rows, columns and
    channels), so a batch of 12 runs as groups of 8 and 4 (`mrvl-split-batch`), on the MLIP
    with the copy before it (once the conv stayed on the CPU)."""
    rng = np.random.default_rng(28)
    nodes = [
        node("Transpose", ["x"], ["t"], name="transpose", perm=[0, 1, 3, 2]),
        node("Conv", ["t", "w"], ["y"], name="conv", kernel_shape=[1, 1]),
    ]
    onnx_model = model(
        nodes, [const(rng, "w", (4, 3, 1, 1))], [("x", [12, 3, 5, 6])], [("y", [12, 4, 6, 5])]
    )
    where = placement(onnx_model)
    assert where["conv"] != "cpu" and where["transpose"] != "cpu"


# ---------------------------------------------------------------------------------------------
# Tile and Expand: repeats are source strides of 0


def repeat_net(op, repeats, in_shape=(2, 3, 4, 5)):
    """A conv, then Tile (repeats) or Expand (to a shape), then a conv."""
    rng = np.random.default_rng(29)
    c = in_shape[1]
    if op == "Tile":
        out = [d * r for d, r in zip(in_shape, repeats)]
    else:
        out = [max(d, r) for d, r in zip(in_shape, repeats)]
    nodes = [
        node("Conv", ["x", "w1"], ["a"], name="conv1", kernel_shape=[1, 1]),
        node(op, ["a", "r"], ["t"], name=op.lower()),
        node("Conv", ["t", "w2"], ["y"], name="conv2", kernel_shape=[1, 1]),
    ]
    inits = [
        const(rng, "w1", (c, c, 1, 1)),
        ints("r", repeats),
        const(rng, "w2", (4, out[1], 1, 1)),
    ]
    out[1] = 4
    return model(nodes, inits, [("x", list(in_shape))], [("y", out)])


@pytest.mark.parametrize(
    "op, repeats, in_shape",
    [
        ("Tile", [1, 1, 2, 3], (2, 3, 4, 5)),
        ("Tile", [1, 2, 1, 1], (2, 3, 4, 5)),
        ("Expand", [2, 3, 4, 5], (2, 3, 1, 5)),  # a column broadcast over rows
        ("Expand", [1, 3, 4, 5], (1, 3, 1, 1)),  # a per-channel value over the plane
    ],
)
def test_tile_and_expand_are_strided_copies(op, repeats, in_shape):
    check_offloaded_and_accurate(repeat_net(op, repeats, in_shape), num_tiles=2)


def test_a_tile_of_more_than_6_dimensions_stays_on_the_cpu():
    """Every axis repeated: the copy needs 8 dimensions, one DMA's walk cannot hold it."""
    where = placement(repeat_net("Tile", [2, 2, 2, 2], (2, 3, 4, 5)))
    assert where["tile"] == "cpu" and where["conv1"] != "cpu"


# ---------------------------------------------------------------------------------------------
# Reflect and edge Pad: one constant-index take per padded axis, each a few strided pieces


def border_pad_net(mode, pads=(0, 0, 1, 2, 0, 0, 2, 1)):
    """A conv, a standalone Pad (reflect or edge) on H and W, then an unpadded 3x3 conv (a
    style-transfer or speech net's reflection padding)."""
    rng = np.random.default_rng(30)
    h, w = 6, 7
    oh, ow = h + pads[2] + pads[6] - 2, w + pads[3] + pads[7] - 2
    nodes = [
        node("Conv", ["x", "w1"], ["a"], name="conv1", kernel_shape=[1, 1]),
        node("Pad", ["a", "p"], ["pa"], name="pad", mode=mode),
        node("Conv", ["pa", "w2"], ["y"], name="conv2", kernel_shape=[3, 3]),
    ]
    inits = [const(rng, "w1", (4, 3, 1, 1)), ints("p", list(pads)), const(rng, "w2", (5, 4, 3, 3))]
    return model(nodes, inits, [("x", [2, 3, h, w])], [("y", [2, 5, oh, ow])])


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_reflect_and_edge_pads_are_strided_copies(mode, num_tiles):
    check_offloaded_and_accurate(border_pad_net(mode), num_tiles=num_tiles)


# ---------------------------------------------------------------------------------------------
# Conv1d: a conv2d over H = 1


def conv1d_net(batch=2, c=6, length=40):
    """A keyword-spotting style 1-D stack: conv1d (k 3, pads 1) + BatchNormalization + Relu,
    a depthwise conv1d (k 5, stride 2, dilation 2) after a zero Pad, a residual Add of a
    strided 1x1 conv1d, a conv1d with bias and Clip."""
    rng = np.random.default_rng(31)
    out_len = (length - 1) // 2 + 1  # the depthwise conv's (pads 4 + 4, extent 9, stride 2)
    nodes = [
        node("Conv", ["x", "w1"], ["a"], name="conv1", kernel_shape=[3], pads=[1, 1]),
        node("BatchNormalization", ["a", "g", "b", "m", "v"], ["bn"], name="bn"),
        node("Relu", ["bn"], ["r"], name="relu"),
        node("Pad", ["r", "p"], ["pr"], name="pad"),
        node("Conv", ["pr", "w2"], ["dw"], name="depthwise", kernel_shape=[5], strides=[2],
             dilations=[2], group=c),
        node("Conv", ["r", "w3"], ["sk"], name="skip", kernel_shape=[1], strides=[2]),
        node("Add", ["dw", "sk"], ["s"], name="add"),
        node("Conv", ["s", "w4", "b4"], ["c4"], name="conv4", kernel_shape=[3], pads=[1, 1]),
        node("Clip", ["c4", "lo", "hi"], ["y"], name="clip"),
    ]  # fmt: skip
    inits = [
        const(rng, "w1", (c, 3, 3)),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), "g"),
        const(rng, "b", (c,)),
        const(rng, "m", (c,)),
        numpy_helper.from_array(rng.uniform(0.5, 2.0, c).astype(np.float32), "v"),
        ints("p", [0, 0, 4, 0, 0, 4]),
        const(rng, "w2", (c, 1, 5)),
        const(rng, "w3", (c, c, 1)),
        const(rng, "w4", (8, c, 3)),
        const(rng, "b4", (8,)),
        numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
        numpy_helper.from_array(np.array(6.0, np.float32), "hi"),
    ]
    return model(nodes, inits, [("x", [batch, 3, length])], [("y", [batch, 8, out_len])])


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_conv1d_stack_runs_in_one_region(num_tiles):
    check_offloaded_and_accurate(conv1d_net(), num_tiles=num_tiles)


# ---------------------------------------------------------------------------------------------
# The two engines give the same bytes on these copies (negative and zero strides, walks)


ENGINE_NETS = {
    "qkv": qkv_split_net,
    "windows": window_partition_net,
    "reverse": reverse_sequence_net,
    "lstm": unrolled_lstm_inputs_net,
    "heads": folded_heads_net,
    "tile": lambda: repeat_net("Tile", [1, 1, 2, 3]),
    "reflect": lambda: border_pad_net("reflect"),
    "conv1d": conv1d_net,
    "gather": lambda: gather_net([5, 0, 2, 2, -1], 1),
}


@pytest.mark.parametrize("name", sorted(ENGINE_NETS))
def test_engines_agree_on_the_movement_nets(name):
    import tvm
    from helpers import assert_same_bytes
    from tvm import relax

    from mrvl.sim import use_engine

    onnx_model = ENGINE_NETS[name]()
    lib = mrvl.build(mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model), num_tiles=8))
    rng = np.random.default_rng(5)
    args = [
        tvm.runtime.tensor(
            rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(
                np.float32
            )
        )
        for i in onnx_model.graph.input
    ]
    vm = relax.VirtualMachine(lib, tvm.cpu())
    outputs = []
    for engine in ("interp", "numba"):
        with use_engine(engine):
            result = vm["main"](*args)
        results = [result] if isinstance(result, tvm.runtime.Tensor) else list(result)
        outputs.append([r.numpy() for r in results])
    assert_same_bytes(outputs[0], outputs[1])
