"""`mrvl.partition_for_mrvl`: which parts of a model become MLIP regions."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix

from mrvl.frontend import from_onnx, node_name_of
from mrvl.partition import partition_for_mrvl

COMPOSITES = {"mrvl.conv2d", "mrvl.maxpool2d", "mrvl.fc", "mrvl.reshape"}


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
    (name, region), = found.items()
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


def conv_model(onnx_model, *, batch=1, channels=4, out_channels=4, groups=1, bias=True, relu=True,
               elem_type=TensorProto.FLOAT):
    dtype = np.float16 if elem_type == TensorProto.FLOAT16 else np.float32
    w = numpy_helper.from_array(
        np.ones((out_channels, channels // groups, 3, 3), dtype), "w"
    )
    b = numpy_helper.from_array(np.ones((out_channels,), dtype), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["c"],
                              name="/c/Conv", pads=[1, 1, 1, 1], group=groups)]
    out = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"], name="/r/Relu"))
        out = "r"
    nodes.append(helper.make_node("Sigmoid", [out], ["y"], name="/s/Sigmoid"))  # a host op
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
        ({"batch": 9}, False),
        ({"groups": 4}, True),  # depthwise
        ({"groups": 2}, False),  # grouped, not depthwise
        ({"groups": 4, "out_channels": 8}, False),  # depthwise with a channel multiplier
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
    model = onnx_model(nodes, {"x": [1, 4, 3, 3]}, {"y": [1, 4, 3, 3]},
                       [const("w", np.ones((4, 4, 1, 1)))])
    mod = partition_for_mrvl(from_onnx(model))
    assert composite_names(mod) == ["mrvl.conv2d"]
    assert host_ops(mod) == ["relax.nn.relu", "relax.add"]


@pytest.mark.parametrize(
    ("attrs", "offloaded"),
    [
        ({}, True),
        ({"pads": [1, 1, 1, 1]}, True),
        ({"ceil_mode": 1}, False),
        ({"dilations": [2, 2]}, False),
    ],
)
def test_maxpool2d_check(onnx_model, attrs, offloaded):
    node = helper.make_node("MaxPool", ["x"], ["y"], name="/p/MaxPool", kernel_shape=[2, 2],
                            strides=[2, 2], **attrs)
    mod = partition_for_mrvl(from_onnx(onnx_model([node], {"x": [1, 2, 7, 7]}, {"y": [1, 2, "h", "w"]})))
    assert composite_names(mod) == (["mrvl.maxpool2d"] if offloaded else [])


@pytest.mark.parametrize(
    ("gemm_attrs", "batch", "offloaded"),
    [
        ({"transB": 1}, 1, True),
        ({"transB": 0}, 1, True),
        ({"transB": 1}, 8, True),
        ({"transB": 1}, 9, False),
    ],
)
def test_fc_check(onnx_model, gemm_attrs, batch, offloaded):
    shape = (3, 6) if gemm_attrs["transB"] else (6, 3)
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="/fc/Gemm", **gemm_attrs)
    model = onnx_model([node], {"x": [batch, 6]}, {"y": [batch, 3]},
                       [const("w", np.ones(shape)), const("b", np.ones(3))])
    mod = partition_for_mrvl(from_onnx(model))
    assert composite_names(mod) == (["mrvl.fc"] if offloaded else [])


def test_matmul_with_runtime_weights_stays_on_host(onnx_model):
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="/mm/MatMul")
    model = onnx_model([node], {"x": [1, 6], "w": [6, 3]}, {"y": [1, 3]})
    assert composite_names(partition_for_mrvl(from_onnx(model))) == []


@pytest.mark.parametrize(("axis", "offloaded"), [(1, True), (2, False)])
def test_reshape_check(onnx_model, axis, offloaded):
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="/r/Relu"),  # keep the flatten's input a var
        helper.make_node("Flatten", ["r"], ["y"], name="/f/Flatten", axis=axis),
    ]
    mod = partition_for_mrvl(from_onnx(onnx_model(nodes, {"x": [2, 3, 4, 5]}, {"y": ["n", "f"]})))
    assert composite_names(mod) == (["mrvl.reshape"] if offloaded else [])
