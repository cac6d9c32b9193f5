"""Data movement and row tiling on the MLIP, end to end against onnxruntime: FC over many
rows, Slice / Split / Concat on any axis, reshape / transpose as strided copies (channel
shuffle, detection heads), nearest and bilinear Resize, ConvTranspose. Each model is built
in code, must be offloaded whole (in one region), and must pass the fp16 acceptance rule."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tvm
from helpers import float_model, offloaded_partition, onnxruntime_outputs
from onnx import TensorProto, helper, numpy_helper
from tvm import relax

import mrvl
from mrvl.accuracy import fp16_agreement

node = helper.make_node


def const(rng, name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def floats(name, values):
    return numpy_helper.from_array(np.array(values, np.float32), name)


def model(nodes, inits, inputs, outputs, opset=17) -> onnx.ModelProto:
    ir_version = 10 if opset >= 11 else 7
    return float_model(
        nodes, inits, inputs, outputs, name="shapes", opset=opset, ir_version=ir_version
    )


def check_offloaded_and_accurate(onnx_model, *, num_tiles=8, regions=1, seed=0):
    """Partition (everything offloaded, in `regions` regions), build, run, and compare every
    output with onnxruntime under the fp16 rule."""
    mod = offloaded_partition(onnx_model, num_tiles=num_tiles, regions=regions)
    rng = np.random.default_rng(seed)
    feeds = {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(
            np.float32
        )
        for i in onnx_model.graph.input
    }
    vm = relax.VirtualMachine(mrvl.build(mod), tvm.cpu())
    result = vm["main"](*[tvm.runtime.tensor(v) for v in feeds.values()])
    results = [result] if isinstance(result, tvm.runtime.Tensor) else list(result)
    references = onnxruntime_outputs(onnx_model, feeds)
    assert len(results) == len(references)
    for got, want in zip(results, references):
        agreement = fp16_agreement(got.numpy(), want)
        assert agreement.passed, str(agreement)


# ---------------------------------------------------------------------------------------------
# FC over any number of rows


def sequence_fc_net(rows=40, k=16, hidden=24):
    """Two Gemms over a sequence of `rows` tokens (more than the MLIP's batch of 8)."""
    rng = np.random.default_rng(1)
    nodes = [
        node("Gemm", ["x", "w1", "b1"], ["g1"], name="fc1", transB=1),
        node("Relu", ["g1"], ["r"], name="relu"),
        node("Gemm", ["r", "w2"], ["y"], name="fc2"),
    ]
    inits = [
        const(rng, "w1", (hidden, k)),
        const(rng, "b1", (hidden,)),
        const(rng, "w2", (hidden, 5)),
    ]
    return model(nodes, inits, [("x", [rows, k])], [("y", [rows, 5])])


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_fc_over_forty_rows(num_tiles):
    check_offloaded_and_accurate(sequence_fc_net(), num_tiles=num_tiles)


def test_fc_rows_are_tiled_when_the_inputs_do_not_fit():
    from mrvl.passes.sched.tiling import plan_fc_layer

    pieces = plan_fc_layer(4096, 1024, 8, 256 * 1024, 1, 64, "fc")
    assert len({p.n0 for p in pieces}) > 1
    covered = np.zeros((4096, 8), int)
    for p in pieces:
        assert 2 * (p.ns * 1024 + p.os * 1024 + p.ns * p.os) + 4 * p.os <= 256 * 1024 - 4 * 64
        covered[p.n0 : p.n0 + p.ns, p.o0 : p.o0 + p.os] += 1
    assert (covered == 1).all()


# ---------------------------------------------------------------------------------------------
# Split, Slice and Concat on any axis; reshape / transpose as strided copies


def split_slice_concat_net(axis):
    """Split on `axis`, a Slice of one part, Concat on another axis: all strided DMA."""
    rng = np.random.default_rng(2)
    other = 3 if axis != 3 else 2
    nodes = [
        node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        node("Split", ["c", "sp"], ["a", "b"], name="split", axis=axis),
        node("Slice", ["b", "st", "en", "ax"], ["s"], name="slice"),
        node("Concat", ["a", "s"], ["y"], name="cat", axis=other),
    ]
    shape = [2, 6, 6, 6]
    a_shape = list(shape)
    a_shape[axis] = 2
    y_shape = list(a_shape)
    y_shape[other] *= 2
    inits = [
        const(rng, "w", (6, 3, 1, 1)),
        ints("sp", [2, 4]),
        ints("st", [1]),
        ints("en", [3]),
        ints("ax", [axis]),
    ]
    return model(nodes, inits, [("x", [2, 3, 6, 6])], [("y", y_shape)])


@pytest.mark.parametrize("axis", [1, 2, 3])
def test_split_slice_concat_on_any_axis(axis):
    check_offloaded_and_accurate(split_slice_concat_net(axis), num_tiles=4)


def channel_shuffle_net(groups=2):
    """ShuffleNetV2's unit: split channels, conv one half, concat, channel shuffle
    (reshape to 5-D -> transpose -> reshape back), then another conv."""
    rng = np.random.default_rng(3)
    c = 8
    nodes = [
        node("Split", ["x", "sp"], ["a", "b"], name="split", axis=1),
        node("Conv", ["b", "w1"], ["cb"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Relu", ["cb"], ["rb"], name="relu1"),
        node("Concat", ["a", "rb"], ["cat"], name="cat", axis=1),
        node("Reshape", ["cat", "s5"], ["r5"], name="shuffle_reshape1"),
        node("Transpose", ["r5"], ["t5"], name="shuffle_transpose", perm=[0, 2, 1, 3, 4]),
        node("Reshape", ["t5", "s4"], ["sh"], name="shuffle_reshape2"),
        node("Conv", ["sh", "w2"], ["y"], name="conv2", kernel_shape=[1, 1]),
    ]
    inits = [
        ints("sp", [c // 2, c // 2]),
        const(rng, "w1", (c // 2, c // 2, 3, 3)),
        ints("s5", [2, groups, c // groups, 5, 7]),
        ints("s4", [2, c, 5, 7]),
        const(rng, "w2", (c, c, 1, 1)),
    ]
    return model(nodes, inits, [("x", [2, c, 5, 7])], [("y", [2, c, 5, 7])])


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_channel_shuffle(num_tiles):
    check_offloaded_and_accurate(channel_shuffle_net(), num_tiles=num_tiles)


def pixel_shuffle_net(op, mode=None, blocksize=2, c=8, h=6, w=10):
    """A conv, then DepthToSpace (DCR or CRD) or SpaceToDepth, then a conv: the pixel shuffle
    of super-resolution and U-Net decoders, and the space-to-depth stem of YOLO-style nets.
    TVM imports either as reshape -> 6-D transpose -> reshape, one strided copy."""
    rng = np.random.default_rng(11)
    attrs = {"blocksize": blocksize} | ({"mode": mode} if mode else {})
    b2 = blocksize * blocksize
    if op == "DepthToSpace":
        out_c, out_h, out_w = c // b2, h * blocksize, w * blocksize
    else:
        out_c, out_h, out_w = c * b2, h // blocksize, w // blocksize
    nodes = [
        node("Conv", ["x", "w1"], ["a"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node(op, ["a"], ["s"], name="shuffle", **attrs),
        node("Conv", ["s", "w2"], ["y"], name="conv2", kernel_shape=[1, 1]),
    ]
    inits = [const(rng, "w1", (c, c, 3, 3)), const(rng, "w2", (out_c, out_c, 1, 1))]
    return model(nodes, inits, [("x", [2, c, h, w])], [("y", [2, out_c, out_h, out_w])])


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize(
    "op, mode", [("DepthToSpace", "DCR"), ("DepthToSpace", "CRD"), ("SpaceToDepth", None)]
)
def test_depth_to_space_and_space_to_depth_are_strided_copies(op, mode, num_tiles):
    check_offloaded_and_accurate(pixel_shuffle_net(op, mode), num_tiles=num_tiles)


def test_depth_to_space_moves_every_element_exactly():
    """Alone between the region's fp16 conversions, the copy gives onnxruntime's result
    rounded to fp16, bit for bit (a data movement computes nothing)."""
    rng = np.random.default_rng(2)
    m = model(
        [node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=3, mode="CRD")],
        [], [("x", [1, 18, 4, 5])], [("y", [1, 2, 12, 15])],
    )  # fmt: skip
    x = rng.standard_normal((1, 18, 4, 5)).astype(np.float32)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(m), num_tiles=2)
    assert [r.target for r in mrvl.partition_report(mod).rows] == ["mrvl_region_0"]
    got = relax.VirtualMachine(mrvl.build(mod), tvm.cpu())["main"](tvm.runtime.tensor(x))
    want = onnxruntime_outputs(m, {"x": x})[0].astype(np.float16).astype(np.float32)
    assert got.numpy().tobytes() == want.tobytes()


def detection_head_net():
    """A YOLO-style head: two scales, each conv -> reshape [N, C, H*W], concatenated on the
    last axis, then transposed to [N, H*W, C]."""
    rng = np.random.default_rng(4)
    nodes = [
        node("Conv", ["x", "w1"], ["p1"], name="head1", kernel_shape=[1, 1]),
        node("MaxPool", ["x"], ["xp"], name="down", kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["xp", "w2"], ["p2"], name="head2", kernel_shape=[1, 1]),
        node("Reshape", ["p1", "s1"], ["f1"], name="flat1"),
        node("Reshape", ["p2", "s2"], ["f2"], name="flat2"),
        node("Concat", ["f1", "f2"], ["cat"], name="cat", axis=2),
        node("Transpose", ["cat"], ["y"], name="transpose", perm=[0, 2, 1]),
    ]
    inits = [
        const(rng, "w1", (7, 4, 1, 1)),
        const(rng, "w2", (7, 4, 1, 1)),
        ints("s1", [1, 7, 64]),
        ints("s2", [1, 7, 16]),
    ]
    return model(nodes, inits, [("x", [1, 4, 8, 8])], [("y", [1, 80, 7])])


def test_detection_head_rank3_reshape_concat_transpose():
    check_offloaded_and_accurate(detection_head_net())


def rank3_decode_net():
    """A YOLOv8-style decode at rank 3 ([N, C, L]): the detection head's conv output reshaped,
    split into box and class channels; Sigmoid on the scores, and on the boxes elementwise
    steps with scalar constants on either side and products and sums of same-shape tensors."""
    rng = np.random.default_rng(5)
    nodes = [
        node("Conv", ["x", "w"], ["p"], name="head", kernel_shape=[1, 1]),
        node("Reshape", ["p", "s"], ["f"], name="flat"),
        node("Split", ["f", "parts"], ["box", "cls"], name="split", axis=1),
        node("Sigmoid", ["cls"], ["scores"], name="sigmoid"),
        node("Sub", ["half", "box"], ["lt"], name="sub"),  # constant on the left
        node("Div", ["box", "two"], ["rb"], name="div"),
        node("Add", ["lt", "rb"], ["sum"], name="add"),  # two tensors
        node("Mul", ["sum", "rb"], ["prod"], name="mul"),
        node("HardSwish", ["prod"], ["boxes"], name="hswish"),
    ]
    inits = [
        const(rng, "w", (12, 4, 1, 1)),
        ints("s", [1, 12, 35]),
        ints("parts", [4, 8]),
        floats("half", [0.5]),
        numpy_helper.from_array(np.array(2.0, np.float32), "two"),
    ]
    return model(
        nodes, inits, [("x", [1, 4, 5, 7])], [("boxes", [1, 4, 35]), ("scores", [1, 8, 35])]
    )


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_rank3_elementwise_decode_is_offloaded(num_tiles):
    check_offloaded_and_accurate(rank3_decode_net(), num_tiles=num_tiles)


# ---------------------------------------------------------------------------------------------
# Resize / Upsample, nearest: a DMA with zero source strides


def resize_net(mode, coordinate_mode, nearest_mode="round_prefer_floor", scales=(2, 2), opset=17):
    """conv -> Resize(scales) -> conv, so that the resize sits between two MLIP layers."""
    rng = np.random.default_rng(5)
    attrs = {"mode": mode, "coordinate_transformation_mode": coordinate_mode}
    if mode == "nearest":
        attrs["nearest_mode"] = nearest_mode
    nodes = [
        node("Conv", ["x", "w1"], ["c"], name="conv1", kernel_shape=[1, 1]),
        node("Resize", ["c", "", "sc"], ["r"], name="resize", **attrs),
        node("Conv", ["r", "w2"], ["y"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    ]
    h, w = 5, 4
    oh, ow = int(h * scales[0]), int(w * scales[1])
    inits = [
        const(rng, "w1", (6, 3, 1, 1)),
        floats("sc", [1, 1, *scales]),
        const(rng, "w2", (4, 6, 3, 3)),
    ]
    return model(nodes, inits, [("x", [2, 3, h, w])], [("y", [2, 4, oh, ow])], opset=opset)


@pytest.mark.parametrize(
    ("coordinate_mode", "nearest_mode"),
    [
        ("asymmetric", "floor"),  # PyTorch's nearest export
        ("half_pixel", "round_prefer_floor"),  # the ONNX default
        ("pytorch_half_pixel", "round_prefer_floor"),
    ],
)
@pytest.mark.parametrize("scales", [(2, 2), (3, 2)])
def test_nearest_resize_integer_factors(coordinate_mode, nearest_mode, scales):
    onnx_model = resize_net("nearest", coordinate_mode, nearest_mode, scales)
    check_offloaded_and_accurate(onnx_model, num_tiles=4)


def test_upsample_opset9_nearest():
    rng = np.random.default_rng(6)
    nodes = [
        node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        node("Upsample", ["c", "sc"], ["y"], name="upsample", mode="nearest"),
    ]
    inits = [const(rng, "w", (4, 3, 1, 1)), floats("sc", [1, 1, 2, 2])]
    onnx_model = model(nodes, inits, [("x", [1, 3, 4, 5])], [("y", [1, 4, 8, 10])], opset=9)
    check_offloaded_and_accurate(onnx_model)


@pytest.mark.parametrize(
    ("coordinate_mode", "nearest_mode", "scales"),
    [
        ("asymmetric", "floor", (1.5, 1.5)),
        # rows 0, 1, 1, 2, 2, ... 4, 4, 4: the first and last output rows break the pattern
        ("asymmetric", "round_prefer_ceil", (2, 2)),
        # align_corners spreads the rows 0 .. H-1 over 0 .. 3H-1: not a repeat
        ("align_corners", "round_prefer_floor", (3, 2)),
    ],
)
def test_nearest_resize_that_is_no_strided_copy_is_a_resize_layer(
    coordinate_mode, nearest_mode, scales
):
    onnx_model = resize_net("nearest", coordinate_mode, nearest_mode, scales)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model))
    composites = [
        str(b.value.attrs["Composite"])
        for region in mod.functions.values()
        if isinstance(region, relax.Function) and region.attrs and "Codegen" in region.attrs
        for b in region.body.blocks[0].bindings
        if isinstance(b.value, relax.Function)
    ]
    assert "mrvl.resize" in composites and "mrvl.copy" not in composites


# ---------------------------------------------------------------------------------------------
# ConvTranspose: zero insertion (DMA) + an ordinary conv


def conv_transpose_net(stride, pads, output_padding, group, kernel=3, dilation=1, c=4):
    rng = np.random.default_rng(7)
    out_c = c if group == c else 6
    attrs = dict(
        kernel_shape=[kernel, kernel],
        strides=[stride, stride],
        pads=pads,
        output_padding=[output_padding, output_padding],
        group=group,
        dilations=[dilation, dilation],
    )
    nodes = [
        node("Conv", ["x", "w1"], ["c"], name="conv", kernel_shape=[1, 1]),
        node("ConvTranspose", ["c", "wt", "bt"], ["t"], name="deconv", **attrs),
        node("Relu", ["t"], ["y"], name="relu"),
    ]
    h, w = 5, 6
    ext = dilation * (kernel - 1)
    oh = (h - 1) * stride - pads[0] - pads[2] + ext + output_padding + 1
    ow = (w - 1) * stride - pads[1] - pads[3] + ext + output_padding + 1
    inits = [
        const(rng, "w1", (c, 3, 1, 1)),
        const(rng, "wt", (c, out_c // group, kernel, kernel)),
        const(rng, "bt", (out_c,)),
    ]
    return model(nodes, inits, [("x", [2, 3, h, w])], [("y", [2, out_c, oh, ow])])


@pytest.mark.parametrize(
    ("stride", "pads", "output_padding", "group", "kernel", "dilation"),
    [
        (2, [1, 1, 1, 1], 1, 1, 3, 1),  # the usual x2 upsampling deconv
        (2, [0, 0, 0, 0], 0, 1, 2, 1),  # kernel 2, stride 2 (U-Net, YOLO heads)
        (3, [1, 0, 2, 1], 2, 1, 3, 1),  # asymmetric pads, output_padding 2
        (2, [1, 1, 1, 1], 1, 4, 3, 1),  # depthwise
        (2, [1, 1, 1, 1], 0, 2, 4, 1),  # grouped
        (1, [1, 1, 1, 1], 0, 1, 3, 2),  # stride 1, dilation 2
    ],
)
def test_conv_transpose(stride, pads, output_padding, group, kernel, dilation):
    onnx_model = conv_transpose_net(stride, pads, output_padding, group, kernel, dilation)
    check_offloaded_and_accurate(onnx_model, num_tiles=4)


def conv_transpose1d_net(stride, pads, output_padding, group, kernel=3, dilation=1, c=4):
    """ConvTranspose1d (rank 3, [N, C, L]) between a conv1d and a Relu: the 2-D transposed
    conv over H = 1, as a conv1d is a conv2d."""
    rng = np.random.default_rng(8)
    out_c = c if group == c else 6
    attrs = dict(kernel_shape=[kernel], strides=[stride], pads=pads,
                 output_padding=[output_padding], group=group, dilations=[dilation])  # fmt: skip
    nodes = [
        node("Conv", ["x", "w1"], ["c"], name="conv", kernel_shape=[1]),
        node("ConvTranspose", ["c", "wt", "bt"], ["t"], name="deconv", **attrs),
        node("Relu", ["t"], ["y"], name="relu"),
    ]
    length = 9
    out_len = (length - 1) * stride - sum(pads) + dilation * (kernel - 1) + output_padding + 1
    inits = [
        const(rng, "w1", (c, 3, 1)),
        const(rng, "wt", (c, out_c // group, kernel)),
        const(rng, "bt", (out_c,)),
    ]
    return model(nodes, inits, [("x", [2, 3, length])], [("y", [2, out_c, out_len])])


@pytest.mark.parametrize(
    ("stride", "pads", "output_padding", "group", "kernel", "dilation"),
    [
        (2, [1, 1], 1, 1, 3, 1),  # x2 upsampling
        (4, [0, 0], 0, 1, 4, 1),  # kernel = stride (a vocoder's upsampling)
        (3, [1, 2], 2, 2, 5, 1),  # asymmetric pads, output_padding 2, grouped
        (1, [1, 1], 0, 4, 3, 2),  # depthwise, dilation 2
    ],
)
def test_conv_transpose1d(stride, pads, output_padding, group, kernel, dilation):
    onnx_model = conv_transpose1d_net(stride, pads, output_padding, group, kernel, dilation)
    check_offloaded_and_accurate(onnx_model, num_tiles=1)


def test_conv_transpose1d_with_pads_beyond_the_kernel_stays_on_the_cpu():
    onnx_model = conv_transpose1d_net(2, [3, 3], 0, 1, kernel=3)
    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model)))
    (row,) = [r for r in report.rows if r.node == "deconv"]
    assert row.target == "cpu" and "beyond the kernel" in row.reason, row


def test_conv_transpose_with_pads_beyond_the_kernel_stays_on_the_cpu():
    onnx_model = conv_transpose_net(2, [3, 3, 3, 3], 0, 1, kernel=3)
    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model)))
    (row,) = [r for r in report.rows if r.node == "deconv"]
    assert row.target == "cpu" and "beyond the kernel" in row.reason, row


# ---------------------------------------------------------------------------------------------
# Resize, bilinear: the `resize` instruction


MODES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]


@pytest.mark.parametrize("coordinate_mode", MODES)
def test_bilinear_resize_between_convs(coordinate_mode):
    check_offloaded_and_accurate(resize_net("linear", coordinate_mode, scales=(2, 2)))


@pytest.mark.parametrize("coordinate_mode", MODES)
@pytest.mark.parametrize("scales", [(2, 2), (4, 3), (1.6, 2.5)])
def test_bilinear_resize_is_exact_up_to_the_f16_rounding(coordinate_mode, scales):
    """Fed an input that is already f16, the MLIP's resize differs from onnxruntime's fp32
    result by at most the final rounding to f16 (half a unit in the last place): the tables
    and the two-tap order add no error of their own. Any factor works by the tables."""
    h, w = 5, 4
    oh, ow = int(h * scales[0]), int(w * scales[1])
    nodes = [
        node("Resize", ["x", "", "sc"], ["y"], name="resize", mode="linear",
             coordinate_transformation_mode=coordinate_mode),
    ]  # fmt: skip
    onnx_model = model(
        nodes, [floats("sc", [1, 1, *scales])], [("x", [2, 3, h, w])], [("y", [2, 3, oh, ow])]
    )
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model))
    assert mrvl.partition_report(mod).rows[0].target == "mrvl_region_0"
    x = np.random.default_rng(8).standard_normal((2, 3, h, w)).astype(np.float16)
    x = x.astype(np.float32)
    vm = relax.VirtualMachine(mrvl.build(mod), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    (ref,) = onnxruntime_outputs(onnx_model, {"x": x})
    half_ulp = np.float32(2.0**-11) * np.maximum(np.abs(ref), np.float32(2.0**-14))
    assert np.all(np.abs(got - ref) <= half_ulp * 1.001), np.abs(got - ref).max()


def test_nearest_resize_that_is_no_strided_copy_runs_by_tables():
    """A nearest resize that is no strided copy uses the resize tables (weights 1 and 0)."""
    check_offloaded_and_accurate(
        resize_net("nearest", "asymmetric", "round_prefer_ceil", scales=(2, 2))
    )


def test_resize_is_cut_into_channel_groups_when_one_row_does_not_fit():
    from mrvl.passes.sched.tiling import plan_resize_layer

    rows = [(r // 2, min(r // 2 + 1, 63)) for r in range(128)]  # x2 bilinear of 64 rows
    pieces = plan_resize_layer(1, 64, 2048, 128, rows, 256 * 1024, 8, 64, "resize")
    assert len({p.c0 for p in pieces}) > 1
    covered = np.zeros((128, 2048), int)
    for p in pieces:
        lo, hi = p.in_row0, p.in_row0 + p.in_rows
        assert all(lo <= a and b < hi for a, b in rows[p.orow0 : p.orow0 + p.rows])
        covered[p.orow0 : p.orow0 + p.rows, p.c0 : p.c0 + p.cs] += 1
    assert (covered == 1).all()


def test_matmul_over_a_sequence():
    """An OCR head (CRNN): MatMul of [N, T, C] by a constant [C, classes], a bias Add, over
    2 x 40 time steps: 80 rows through one FC."""
    rng = np.random.default_rng(9)
    nodes = [
        node("MatMul", ["x", "w"], ["m"], name="head_matmul"),
        node("Add", ["m", "b"], ["y"], name="head_bias"),
    ]
    inits = [const(rng, "w", (32, 11)), const(rng, "b", (11,))]
    onnx_model = model(nodes, inits, [("x", [2, 40, 32])], [("y", [2, 40, 11])])
    check_offloaded_and_accurate(onnx_model, num_tiles=2)


@pytest.mark.parametrize(
    "make",
    [
        detection_head_net,
        channel_shuffle_net,
        lambda: resize_net("linear", "half_pixel"),
        lambda: resize_net("nearest", "asymmetric", "floor"),
        lambda: conv_transpose_net(2, [1, 1, 1, 1], 1, 1, 3, 1),
        lambda: split_slice_concat_net(2),
    ],
    ids=["head", "shuffle", "bilinear", "nearest", "deconv", "split"],
)
def test_nodes_and_constants_json_of_the_new_layers_pass_their_schemas(make):
    from helpers import region_functions

    from mrvl import json_emitter
    from mrvl.compiler import compile_region

    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(make()))
    for _, function in region_functions(mod):
        compiled = compile_region(function, constants_json=True)
        assert json_emitter.check_pair(compiled.nodes_json, compiled.consts_json) == []


def test_slices_computed_from_shape_are_folded_and_offloaded():
    """torchvision's `x.chunk(2, dim=1)` in ShuffleNetV2 exports as Shape -> Gather -> Div ->
    Slice; the shape arithmetic is folded at import, so both halves are static slices."""
    rng = np.random.default_rng(10)
    nodes = [
        node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        node("Shape", ["c"], ["shape"], name="shape"),
        node("Gather", ["shape", "one"], ["channels"], name="gather", axis=0),
        node("Div", ["channels", "two"], ["half"], name="div"),
        node("Unsqueeze", ["half", "zero"], ["half1"], name="unsqueeze"),
        node("Slice", ["c", "zero1", "half1", "one1"], ["a"], name="slice_a"),
        node("Slice", ["c", "half1", "big", "one1"], ["b"], name="slice_b"),
        node("Add", ["a", "b"], ["y"], name="add"),
    ]
    inits = [
        const(rng, "w", (8, 3, 1, 1)),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array(2, np.int64), "two"),
        ints("zero", [0]),
        ints("zero1", [0]),
        ints("one1", [1]),
        ints("big", [1 << 30]),
    ]
    onnx_model = model(nodes, inits, [("x", [1, 3, 5, 5])], [("y", [1, 4, 5, 5])])
    check_offloaded_and_accurate(onnx_model)

    # exported with dynamic axes: the shapes `from_onnx` is given make the arithmetic static
    for axis, name in ((0, "batch"), (2, "height")):
        onnx_model.graph.input[0].type.tensor_type.shape.dim[axis].dim_param = name
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model, {"x": [1, 3, 5, 5]}))
    targets = {r.node: r.target for r in mrvl.partition_report(mod).rows}
    assert targets["slice_a"] == targets["slice_b"] == "mrvl_region_0", targets


def window_pad_net(width: int, window: int = 7):
    """torchvision's Swin pads each plane to whole windows with pads computed from its shape:
    pad_r = (window - W % window) % window, through Shape, Gather, Mod, Sub, ConstantOfShape,
    Concat and Transpose + Reshape into the Pad's pads."""
    rng = np.random.default_rng(12)
    nodes = [
        node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        node("Shape", ["c"], ["shape"], name="shape"),
        node("Gather", ["shape", "three"], ["w_size"], name="gather", axis=0),
        node("Mod", ["w_size", "window"], ["rest"], name="mod"),
        node("Sub", ["window", "rest"], ["short"], name="sub"),
        node("Mod", ["short", "window"], ["pad_r"], name="mod_1"),
        node("Unsqueeze", ["pad_r", "zero"], ["pad_r1"], name="unsqueeze"),
        node("ConstantOfShape", ["seven"], ["zeros"], name="zeros"),
        node("Concat", ["zeros", "pad_r1"], ["pairs"], name="concat", axis=0),
        node("Reshape", ["pairs", "pair_shape"], ["pairs2"], name="reshape"),
        node("Transpose", ["pairs2"], ["pairs3"], name="transpose", perm=[1, 0]),
        node("Reshape", ["pairs3", "flat"], ["pads"], name="reshape_1"),
        node("Pad", ["c", "pads"], ["padded"], name="pad"),
        node("Relu", ["padded"], ["y"], name="relu"),
    ]
    zeros = helper.make_tensor("", TensorProto.INT64, [1], [0])
    nodes[7] = node("ConstantOfShape", ["seven"], ["zeros"], name="zeros", value=zeros)
    inits = [
        const(rng, "w", (8, 3, 1, 1)),
        numpy_helper.from_array(np.array(3, np.int64), "three"),
        numpy_helper.from_array(np.array(window, np.int64), "window"),
        ints("zero", [0]),
        ints("seven", [7]),
        ints("pair_shape", [2, 4]),
        ints("flat", [8]),
    ]
    padded = width + (window - width % window) % window
    return model(nodes, inits, [("x", [1, 3, 7, width])], [("y", [1, 8, 7, padded])])


def test_pads_computed_from_shape_fold_and_zero_pads_vanish():
    """Swin's window pads (Mod, ConstantOfShape, Transpose among the shape arithmetic) fold at
    import; where the windows tile the plane the pads are all zero and the Pad is its input,
    so the conv and the relu run in one region. A non-zero pad folds to a static one."""
    onnx_model = window_pad_net(14)
    check_offloaded_and_accurate(onnx_model)
    mod = mrvl.from_onnx(window_pad_net(12))
    calls = [b.value.op.name for b in mod["main"].body.blocks[0].bindings]
    assert "relax.nn.pad" in calls, calls


def test_global_pool_without_keepdims_feeds_an_fc():
    """x.mean([2, 3]) as torchvision's ShuffleNetV2 and MNASNet write it: ReduceMean with
    keepdims=0, an [N, C] result, then the classifier; one region."""
    rng = np.random.default_rng(11)
    nodes = [
        node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3]),
        node("ReduceMean", ["c", "axes"], ["m"], name="mean", keepdims=0),
        node("Gemm", ["m", "fw"], ["y"], name="fc", transB=1),
    ]
    inits = [const(rng, "w", (6, 3, 3, 3)), ints("axes", [2, 3]), const(rng, "fw", (4, 6))]
    check_offloaded_and_accurate(
        model(nodes, inits, [("x", [2, 3, 7, 7])], [("y", [2, 4])], opset=18)
    )
