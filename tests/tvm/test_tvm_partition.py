"""`mrvl.partition_for_mrvl`: which parts of a model become MLIP regions."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix

from mrvl.frontend import from_onnx, node_name_of
from mrvl.partition import partition_for_mrvl, partition_reasons
from mrvl.relax_import import import_region
from mrvl.report import partition_report

COMPOSITES = {
    "mrvl.conv2d", "mrvl.fc", "mrvl.add", "mrvl.mul", "mrvl.maxpool2d", "mrvl.avgpool2d",
    "mrvl.global_avgpool2d", "mrvl.global_maxpool2d", "mrvl.concat", "mrvl.reshape",
    "mrvl.transpose", "mrvl.scale_shift", "mrvl.copy",
    "mrvl.conv_transpose", "mrvl.resize", "mrvl.bmm", "mrvl.softmax",
    "mrvl.layernorm", "mrvl.quantize", "mrvl.dequantize", "mrvl.reduce", "mrvl.binary",
    "mrvl.pad",
}  # fmt: skip


def regions(mod) -> dict[str, relax.Function]:
    return {
        gv.name_hint: f
        for gv, f in mod.functions_items()
        if f.attrs is not None and f.attrs.get("Codegen") == "mrvl"
    }


def bindings(func: relax.Function):
    return [b for block in func.body.blocks for b in block.bindings]


def composites(region: relax.Function) -> list[relax.Function]:
    return [b.value for b in bindings(region) if isinstance(b.value, relax.Function)]


def composite_names(mod) -> list[str]:
    return [str(c.attrs["Composite"]) for r in regions(mod).values() for c in composites(r)]


def host_ops(mod) -> list[str]:
    return [
        b.value.op.name
        for b in bindings(mod["main"])
        if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)
    ]


def const(name, array):
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


def test_pattern_table_is_registered():
    assert {p.name for p in get_patterns_with_prefix("mrvl.")} == COMPOSITES


# -- MNIST ------------------------------------------------------------------------------------


def test_mnist_is_one_region_without_softmax(mnist_partitioned):
    found = regions(mnist_partitioned)
    assert len(found) == 1
    ((name, region),) = found.items()
    assert name == "mrvl_region_0"  # short, file-name safe, in call order
    assert region.attrs["global_symbol"] == name
    assert region.attrs["mrvl.mcpu"] == "cn10ka"
    assert int(region.attrs["mrvl.num_tiles"]) == 8
    main_calls = [b.value for b in bindings(mnist_partitioned["main"])]
    assert [getattr(c.op, "name_hint", None) or c.op.name for c in main_calls] == [
        name,
        "relax.nn.softmax",
    ]


def test_mnist_region_layers(mnist_partitioned):
    assert composite_names(mnist_partitioned) == [
        "mrvl.conv2d", "mrvl.maxpool2d", "mrvl.conv2d", "mrvl.maxpool2d",
        "mrvl.reshape", "mrvl.fc", "mrvl.fc",
    ]  # fmt: skip


def test_node_names_survive_into_region_functions(mnist_model, mnist_partitioned):
    (region,) = regions(mnist_partitioned).values()
    inner = [b.value for c in composites(region) for b in bindings(c)]
    assert all(node_name_of(call) is not None for call in inner)
    assert {node_name_of(call) for call in inner} == {
        n.name for n in mnist_model.graph.node if n.op_type != "Softmax"
    }


def test_target_attrs_follow_the_arguments(mnist_relax):
    (region,) = regions(partition_for_mrvl(mnist_relax, mcpu="cnf10kb", num_tiles=2)).values()
    assert region.attrs["mrvl.mcpu"] == "cnf10kb"
    assert int(region.attrs["mrvl.num_tiles"]) == 2


# -- bad options ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mcpu": "cn99"}, r"unknown mcpu 'cn99'.*cn10ka"),
        ({"num_tiles": 3}, r"num_tiles must be one of \(1, 2, 4, 8\), got 3"),
        ({"num_tiles": 0}, r"num_tiles must be one of"),
        ({"num_tiles": 16}, r"num_tiles must be one of"),
        ({"num_tiles": "8"}, r"num_tiles must be an int"),
        ({"mcpu": "cnf10kb", "num_tiles": 8}, r"num_tiles=8 exceeds the 4 tiles of mcpu 'cnf10kb'"),
    ],
)
def test_bad_target_options(mnist_relax, kwargs, message):
    with pytest.raises(ValueError, match=message):
        partition_for_mrvl(mnist_relax, **kwargs)


# -- what the checks keep on the host ---------------------------------------------------------


def conv_model(
    onnx_model,
    *,
    batch=1,
    channels=4,
    out_channels=4,
    groups=1,
    bias=True,
    relu=True,
    elem_type=TensorProto.FLOAT,
):
    dtype = np.float16 if elem_type == TensorProto.FLOAT16 else np.float32
    w = numpy_helper.from_array(np.ones((out_channels, channels // groups, 3, 3), dtype), "w")
    b = numpy_helper.from_array(np.ones((out_channels,), dtype), "b")
    nodes = [
        helper.make_node(
            "Conv",
            ["x", "w", "b"] if bias else ["x", "w"],
            ["c"],
            name="/c/Conv",
            pads=[1, 1, 1, 1],
            group=groups,
        )
    ]
    out = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"], name="/r/Relu"))
        out = "r"
    nodes.append(helper.make_node("Sin", [out], ["y"], name="/s/Sin"))  # a host op
    return onnx_model(
        nodes,
        {"x": [batch, channels, 5, 5]},
        {"y": [batch, out_channels, 5, 5]},
        [w, b],
        elem_type=elem_type,
    )


@pytest.mark.parametrize(
    ("kwargs", "offloaded"),
    [
        ({}, True),
        ({"bias": False}, True),
        ({"relu": False}, True),
        ({"bias": False, "relu": False}, True),
        ({"batch": 8}, True),
        ({"batch": 9}, True),  # in groups of 8 images (mrvl-split-batch)
        ({"groups": 4}, True),  # depthwise
        ({"groups": 2}, True),  # grouped
        ({"groups": 4, "out_channels": 8}, True),  # depthwise with a channel multiplier
        ({"elem_type": TensorProto.FLOAT16}, False),
    ],
)
def test_conv2d_check(onnx_model, kwargs, offloaded):
    mod = partition_for_mrvl(from_onnx(conv_model(onnx_model, **kwargs)))
    assert composite_names(mod) == (["mrvl.conv2d"] if offloaded else [])
    assert ("relax.nn.conv2d" in host_ops(mod)) != offloaded


def test_conv_bias_relu_fuse_into_one_layer(onnx_model):
    mod = partition_for_mrvl(from_onnx(conv_model(onnx_model)))
    (region,) = regions(mod).values()
    (layer,) = composites(region)
    assert [b.value.op.name for b in bindings(layer)] == [
        "relax.nn.conv2d", "relax.add", "relax.nn.relu",
    ]  # fmt: skip


def test_intermediate_used_outside_is_not_fused(onnx_model):
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="/c/Conv"),
        helper.make_node("Relu", ["c"], ["r"], name="/r/Relu"),
        helper.make_node("Add", ["c", "r"], ["y"], name="/a/Add"),
    ]
    model = onnx_model(
        nodes, {"x": [1, 4, 3, 3]}, {"y": [1, 4, 3, 3]}, [const("w", np.ones((4, 4, 1, 1)))]
    )
    mod = partition_for_mrvl(from_onnx(model))
    # relu cannot join the conv (whose result the add also reads): it is a layer of its own
    assert composite_names(mod) == ["mrvl.conv2d", "mrvl.scale_shift", "mrvl.add"]
    assert host_ops(mod) == []
    assert partition_reasons(mod) == {}


@pytest.mark.parametrize(
    ("attrs", "offloaded"),
    [
        ({}, True),
        ({"pads": [1, 1, 1, 1]}, True),
        ({"ceil_mode": 1}, True),
        ({"dilations": [2, 2]}, False),
    ],
)
def test_maxpool2d_check(onnx_model, attrs, offloaded):
    node = helper.make_node(
        "MaxPool", ["x"], ["y"], name="/p/MaxPool", kernel_shape=[2, 2], strides=[2, 2], **attrs
    )
    mod = partition_for_mrvl(
        from_onnx(onnx_model([node], {"x": [1, 2, 7, 7]}, {"y": [1, 2, "h", "w"]}))
    )
    assert composite_names(mod) == (["mrvl.maxpool2d"] if offloaded else [])


@pytest.mark.parametrize(
    ("gemm_attrs", "batch", "offloaded"),
    [
        ({"transB": 1}, 1, True),
        ({"transB": 0}, 1, True),
        ({"transB": 1}, 8, True),
        ({"transB": 1}, 40, True),  # rows beyond the batch of 8 are tiled
    ],
)
def test_fc_check(onnx_model, gemm_attrs, batch, offloaded):
    shape = (3, 6) if gemm_attrs["transB"] else (6, 3)
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="/fc/Gemm", **gemm_attrs)
    model = onnx_model(
        [node],
        {"x": [batch, 6]},
        {"y": [batch, 3]},
        [const("w", np.ones(shape)), const("b", np.ones(3))],
    )
    mod = partition_for_mrvl(from_onnx(model))
    assert composite_names(mod) == (["mrvl.fc"] if offloaded else [])


def test_matmul_of_two_activations_is_a_bmm_not_an_fc(onnx_model):
    """A MatMul whose right operand arrives at run time is a product of two activations
    (mrvl.bmm), not an FC, which needs constant weights."""
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="/mm/MatMul")
    model = onnx_model([node], {"x": [1, 6], "w": [6, 3]}, {"y": [1, 3]})
    assert composite_names(partition_for_mrvl(from_onnx(model))) == ["mrvl.bmm"]


@pytest.mark.parametrize(
    ("axis", "composite"),
    [(1, "mrvl.reshape"), (2, "mrvl.copy")],  # a flatten that changes the batch is a copy
)
def test_reshape_check(onnx_model, axis, composite):
    nodes = [
        helper.make_node("Sin", ["x"], ["r"], name="/r/Sin"),  # the flatten's input: a var
        helper.make_node("Flatten", ["r"], ["y"], name="/f/Flatten", axis=axis),
    ]
    mod = partition_for_mrvl(from_onnx(onnx_model(nodes, {"x": [2, 3, 4, 5]}, {"y": ["n", "f"]})))
    assert composite_names(mod) == [composite]


# -- every layer: what is offloaded, and why the rest is not ----------------------------------
#
# Each case is a small model. Offloaded cases give the composites made (and their ops);
# rejected cases give the reason the report shows for the node that stays on the CPU.

RNG = np.random.default_rng(0)


def rand(name, shape):
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def scalar(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def node(op, inputs, output, name, **attrs):
    return helper.make_node(op, inputs, [output], name=name, **attrs)


def partitioned(
    onnx_model,
    nodes,
    inputs,
    outputs,
    inits=(),
    *,
    elem_type=TensorProto.FLOAT,
    opset=17,
    **options,
):
    model = onnx_model(nodes, inputs, outputs, inits, elem_type=elem_type, opset=opset)
    mod = partition_for_mrvl(from_onnx(model), **options)
    return mod, partition_report(mod)


def layer_ops(mod) -> list[tuple[str, list[str]]]:
    """(composite name, its ops) for every layer, in region order."""
    return [
        (str(c.attrs["Composite"]),
         [b.value.op.name for b in bindings(c) if isinstance(b.value, relax.Call)])
        for r in regions(mod).values() for c in composites(r)
    ]  # fmt: skip


def reason(report, name):
    (row,) = [r for r in report.rows if r.node == name]
    assert row.target == "cpu", f"{name} runs on {row.target}"
    return row.reason


X4 = {"x": [2, 4, 6, 6]}
CONV_W = rand("w", (4, 4, 3, 3))


def conv(inp="x", out="c", name="/c/Conv", w="w", **attrs):
    attrs.setdefault("kernel_shape", [3, 3])
    attrs.setdefault("pads", [1, 1, 1, 1])
    return node("Conv", [inp, w], out, name, **attrs)


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


# -- deny_nodes, deny_ops, require_mac_layer -------------------------------------------------


def conv_bias_relu_pool():
    nodes = [
        node("Conv", ["x", "w", "b"], "c", "/c/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Relu", ["c"], "r", "/r/Relu"),
        node("MaxPool", ["r"], "y", "/p/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    return nodes, X4, {"y": [2, 4, 3, 3]}, [CONV_W, rand("b", (4,))]


def ops_named(mod, name) -> list[tuple[str, str]]:
    """(function, op) of every call the ONNX node `name` has, anywhere in the module."""
    found = []
    for gv, func in mod.functions_items():

        def visit(expr, where=gv.name_hint):
            if isinstance(expr, relax.Call) and node_name_of(expr) == name:
                found.append((where, expr.op.name))

        relax.analysis.post_order_visit(func, visit)
    return found


def test_denied_node_stays_on_the_cpu_whole(onnx_model):
    mod, report = partitioned(onnx_model, *conv_bias_relu_pool(), deny_nodes=["/c/Conv"])
    # the conv, its bias add and the relu fused after it are all host ops
    assert ops_named(mod, "/c/Conv") == [("main", "relax.nn.conv2d"), ("main", "relax.add")]
    assert host_ops(mod) == ["relax.nn.conv2d", "relax.add", "relax.nn.relu"]
    assert layer_ops(mod) == [("mrvl.maxpool2d", ["relax.nn.max_pool2d"])]
    assert reason(report, "/c/Conv") == "denied by user (deny_nodes)"
    assert reason(report, "/r/Relu") == "denied by user (deny_nodes) (at /c/Conv)"


def test_denied_activation_leaves_the_conv_offloaded(onnx_model):
    mod, report = partitioned(onnx_model, *conv_bias_relu_pool(), deny_nodes="/r/Relu")
    assert layer_ops(mod)[0] == ("mrvl.conv2d", ["relax.nn.conv2d", "relax.add"])
    assert reason(report, "/r/Relu") == "denied by user (deny_nodes)"


def test_denied_conv_bias_is_not_taken_by_another_layer(onnx_model):
    # Denying the Conv denies its calls only: the next ONNX node (an Add of two runtime
    # tensors) is still an mrvl.add layer, and no layer contains a call of the Conv.
    nodes = [conv(), node("Add", ["c", "z"], "y", "/add")]
    mod, report = partitioned(
        onnx_model,
        nodes,
        {"x": [2, 4, 6, 6], "z": [2, 4, 6, 6]},
        {"y": [2, 4, 6, 6]},
        [CONV_W],
        deny_nodes=["/c/Conv"],
    )
    assert all(where == "main" for where, _ in ops_named(mod, "/c/Conv"))
    assert layer_ops(mod) == [("mrvl.add", ["relax.add"])]


def test_deny_ops(onnx_model):
    mod, report = partitioned(onnx_model, *conv_bias_relu_pool(), deny_ops=["MaxPool"])
    assert layer_ops(mod) == [("mrvl.conv2d", ["relax.nn.conv2d", "relax.add", "relax.nn.relu"])]
    assert reason(report, "/p/MaxPool") == "denied by user (deny_ops)"
    mod, report = partitioned(onnx_model, *conv_bias_relu_pool(), deny_ops=["Conv", "MaxPool"])
    assert regions(mod) == {}
    assert {r.reason for r in report.rows} == {
        "denied by user (deny_ops)",
        "denied by user (deny_ops) (at /c/Conv)",
    }


def test_deny_node_wins_over_deny_op(onnx_model):
    _, report = partitioned(
        onnx_model, *conv_bias_relu_pool(), deny_nodes=["/c/Conv"], deny_ops=["Conv"]
    )
    assert reason(report, "/c/Conv") == "denied by user (deny_nodes)"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"deny_nodes": ["/nope"]}, ValueError, "no ONNX node named '/nope'"),
        ({"deny_ops": ["Convolution"]}, ValueError, "'Convolution' is not an ONNX operator"),
        ({"deny_nodes": [3]}, TypeError, "deny_nodes must be strings"),
    ],
)
def test_bad_deny_arguments(mnist_relax, kwargs, error, message):
    with pytest.raises(error, match=message):
        partition_for_mrvl(mnist_relax, **kwargs)


def test_deny_ops_needs_the_recorded_op_types(mnist_relax):
    bare = tvm.IRModule(dict(mnist_relax.functions_items()))  # no mrvl.onnx_nodes attribute
    with pytest.raises(ValueError, match="deny_ops needs the op type"):
        partition_for_mrvl(bare, deny_ops=["Conv"])
    # deny_nodes still works from the spans
    (region,) = regions(partition_for_mrvl(bare, deny_nodes=["/fc2/Gemm"])).values()
    assert "/fc2/Gemm" not in {
        node_name_of(b.value) for c in composites(region) for b in bindings(c)
    }


def test_deny_an_op_type_the_model_lacks_is_fine(mnist_relax):
    assert composite_names(partition_for_mrvl(mnist_relax, deny_ops=["Transpose"])) == (
        composite_names(partition_for_mrvl(mnist_relax))
    )


def pool_sigmoid_conv():
    nodes = [
        node("MaxPool", ["x"], "p", "/p/MaxPool", kernel_shape=[2, 2]),
        node("Sin", ["p"], "s", "/s/Sin"),
        node("Conv", ["s", "w"], "y", "/c/Conv", kernel_shape=[3, 3]),
    ]
    return nodes, X4, {"y": [2, 4, 3, 3]}, [CONV_W]


def test_require_mac_layer_sends_regions_without_conv_or_fc_back(onnx_model):
    mod, _ = partitioned(onnx_model, *pool_sigmoid_conv())
    assert len(regions(mod)) == 2
    mod, report = partitioned(onnx_model, *pool_sigmoid_conv(), require_mac_layer=True)
    assert list(regions(mod)) == ["mrvl_region_0"]
    assert layer_ops(mod) == [("mrvl.conv2d", ["relax.nn.conv2d"])]
    assert host_ops(mod)[0] == "relax.nn.max_pool2d"
    assert reason(report, "/p/MaxPool") == "region without conv/fc (require_mac_layer)"


def test_require_mac_layer_keeps_mnist_whole(mnist_relax, mnist_partitioned):
    mod = partition_for_mrvl(mnist_relax, require_mac_layer=True)
    assert composite_names(mod) == composite_names(mnist_partitioned)


def test_require_mac_layer_with_nothing_left(onnx_model):
    nodes, inputs, outputs, inits = pool_sigmoid_conv()
    mod, report = partitioned(
        onnx_model, nodes, inputs, outputs, inits, deny_ops=["Conv"], require_mac_layer=True
    )
    assert regions(mod) == {}
    assert [r.reason for r in report.rows] == [
        "region without conv/fc (require_mac_layer)",
        "unsupported op Sin",
        "denied by user (deny_ops)",
    ]


def test_relax_batch_norm_form_fuses_before_an_activation():
    # Modules not made by mrvl.from_onnx may keep relax.nn.batch_norm; it fuses when an
    # activation follows (a match cannot end at the TupleGetItem, so a trailing batch_norm
    # cannot: from_onnx turns it into multiply + add for that reason).
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 4, 6, 6), "float32"))
    params = [relax.const(np.full(4, v, np.float32)) for v in (1.0, 0.1, 0.2, 1.5)]
    with bb.function("main", [x]):
        with bb.dataflow():
            c = bb.emit(relax.op.nn.conv2d(x, relax.const(np.ones((4, 4, 3, 3), np.float32))))
            bn = bb.emit(relax.op.nn.batch_norm(c, *params, axis=1, training=False))
            y = bb.emit_output(relax.op.nn.relu(bb.emit(relax.TupleGetItem(bn, 0))))
        bb.emit_func_output(y)
    assert layer_ops(partition_for_mrvl(bb.get())) == [
        ("mrvl.conv2d", ["relax.nn.conv2d", "relax.nn.batch_norm", "relax.nn.relu"])
    ]


def test_an_op_with_an_affine_part_is_not_split(onnx_model):
    """LRN imports as multiply/add/pow/divide: its bias + alpha * x must not become a
    scale_shift layer on the MLIP while the rest of the LRN runs on the CPU."""
    nodes = [
        node("Conv", ["x", "w"], "c", "/c/Conv", kernel_shape=[1, 1]),
        node("LRN", ["c"], "y", "/lrn/LRN", size=3),
    ]
    mod, report = partitioned(onnx_model, nodes, X4, {"y": [2, 4, 6, 6]}, [rand("w", (4, 4, 1, 1))])
    assert [name for name, _ in layer_ops(mod)] == ["mrvl.conv2d"]
    assert reason(report, "/lrn/LRN") == "unsupported op LRN"


# ------------------------------------------------------------- constants on either side, activations


def test_hard_sigmoid_after_conv_folds_with_its_constant_first(onnx_model):
    """TVM writes HardSigmoid as clip(add(multiply(alpha, x), beta), 0, 1): the constant first.
    The conv takes it whole (two affine steps and a clip) and the import does not fail."""
    nodes = [conv(), node("HardSigmoid", ["c"], "y", "/h", alpha=0.2, beta=0.5)]
    mod, _ = partitioned(onnx_model, nodes, X4, {"y": [2, 4, 6, 6]}, [CONV_W])
    assert layer_ops(mod) == [
        ("mrvl.conv2d", ["relax.nn.conv2d", "relax.multiply", "relax.add", "relax.clip"])
    ]
    (region,) = regions(mod).values()
    layer = next(iter(import_region(region).body.block.ops)).body.block.ops
    (op,) = [o for o in layer if o.name == "mrvl.conv2d"]
    assert op.activation.data.value == "clip"
    assert (op.act_min.value.data, op.act_max.value.data) == (0.0, 1.0)


@pytest.mark.parametrize(
    "op, inputs",
    [("Mul", ["k", "x"]), ("Mul", ["x", "k"]), ("Add", ["k", "x"]), ("Sub", ["k", "x"]),
     ("Sub", ["x", "k"]), ("Div", ["x", "k"])],
)  # fmt: skip
def test_a_standalone_constant_op_on_either_side_is_a_scale_shift(onnx_model, op, inputs):
    nodes = [node(op, inputs, "y", "/op")]
    mod, _ = partitioned(onnx_model, nodes, X4, {"y": [2, 4, 6, 6]}, [rand("k", (1, 4, 1, 1))])
    assert composite_names(mod) == ["mrvl.scale_shift"]
    (region,) = regions(mod).values()
    import_region(region)  # no AttributeError: the constant is found on its side


@pytest.mark.parametrize(
    "nodes, inputs, inits",
    [
        ([node("Div", ["k", "x"], "y", "/div")], X4, [rand("k", (1, 4, 1, 1))]),  # c / x
        ([node("Sub", ["x", "k"], "y", "/sub")], X4, [rand("k", (1, 1, 6, 6))]),  # per pixel
        ([node("Mul", ["x", "k"], "y", "/mul")], {"x": [2, 4, 6]}, [rand("k", (1, 4, 1))]),
        ([node("Concat", ["x", "k"], "y", "/cat", axis=1)], X4, [rand("k", (2, 1, 6, 6))]),
    ],
)
def test_a_constant_no_affine_step_takes_is_a_data_operand(onnx_model, nodes, inputs, inits):
    """A constant that is no per-channel or scalar step (c / x, one per pixel, per channel of
    a rank-3 tensor, which is computed as one channel) or a Concat's constant input: an
    operand of mrvl.binary / mrvl.concat, read from DDR (`constant_operands.py`)."""
    out = {"y": [2, 5, 6, 6]} if nodes[0].op_type == "Concat" else {"y": inputs["x"]}
    mod, report = partitioned(onnx_model, nodes, inputs, out, inits)
    assert composite_names(mod) == ["mrvl.concat" if "/cat" in nodes[0].name else "mrvl.binary"]
    assert [r.node for r in report.rows if r.target == "cpu"] == []
    (region,) = regions(mod).values()
    import_region(region)


def test_silu_on_its_own_is_a_scale_shift_and_prelu_fuses_into_fc(onnx_model):
    nodes = [
        node("Sigmoid", ["x"], "s", "/sig"),
        node("Mul", ["s", "x"], "m", "/silu"),
        node("Flatten", ["m"], "f", "/flat"),
        node("Gemm", ["f", "w"], "g", "/fc", transB=1),
        node("PRelu", ["g", "slope"], "y", "/prelu"),
    ]
    inits = [rand("w", (5, 4 * 6 * 6)), rand("slope", (5,))]
    mod, _ = partitioned(onnx_model, nodes, X4, {"y": [2, 5]}, inits)
    assert layer_ops(mod) == [
        ("mrvl.scale_shift", ["relax.sigmoid", "relax.multiply"]),
        ("mrvl.reshape", ["relax.reshape"]),
        ("mrvl.fc", ["relax.matmul", "relax.nn.prelu"]),
    ]


def test_prelu_fuses_into_add(onnx_model):
    """A residual sum followed by PRelu with one slope per channel is one add layer."""
    nodes = [node("Add", ["x", "x"], "a", "/add"), node("PRelu", ["a", "slope"], "y", "/prelu")]
    mod, _ = partitioned(onnx_model, nodes, X4, {"y": [2, 4, 6, 6]}, [rand("slope", (4, 1, 1))])
    assert layer_ops(mod) == [("mrvl.add", ["relax.add", "relax.nn.prelu"])]


def test_a_product_that_is_an_activation_is_not_a_mul_layer(onnx_model):
    """x * sigmoid(x) after an add is the add's SiLU, not a product of two tensors."""
    nodes = [
        node("Add", ["x", "x"], "a", "/add"),
        node("Sigmoid", ["a"], "s", "/sig"),
        node("Mul", ["a", "s"], "y", "/silu"),
    ]
    mod, _ = partitioned(onnx_model, nodes, X4, {"y": [2, 4, 6, 6]})
    assert layer_ops(mod) == [("mrvl.add", ["relax.add", "relax.sigmoid", "relax.multiply"])]


def test_a_conv_takes_its_whole_chain_of_affine_steps(onnx_model):
    """Three steps, constants on either side, and an activation: one layer, not a conv and a
    scale_shift (the pattern tries its longest alternative first)."""
    nodes = [
        conv(),
        node("Mul", ["k", "c"], "m", "/mul"),
        node("Sub", ["t", "m"], "s", "/sub"),
        node("Div", ["s", "six"], "d", "/div"),
        node("Tanh", ["d"], "y", "/tanh"),
    ]
    inits = [CONV_W, rand("k", (1, 4, 1, 1)), rand("t", (4, 1, 1)), const("six", np.float32(6))]
    mod, _ = partitioned(onnx_model, nodes, X4, {"y": [2, 4, 6, 6]}, inits)
    assert layer_ops(mod) == [
        (
            "mrvl.conv2d",
            ["relax.nn.conv2d", "relax.multiply", "relax.subtract", "relax.divide", "relax.tanh"],
        )
    ]


def test_a_pool_padded_beyond_its_input_stays_on_the_cpu():
    """ONNX allows a pool's pads up to the kernel, beyond a small input; the ISA's pool pads
    at most the input's extent (its legal ranges), so such a pool stays on the CPU with the
    reason, and the build does not fail (found by the hypothesis fuzzer: a 1x1 input, a 3x1
    max pool padded by 2 at the top)."""
    graph = helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[3, 1],
                          strides=[2, 2], pads=[2, 0, 0, 0])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 1])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod = partition_for_mrvl(from_onnx(model))
    assert "beyond the 1x1 input" in partition_reasons(mod)["pool"]
