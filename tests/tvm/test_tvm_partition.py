"""`mrvl.partition_for_mrvl`: which parts of a model become MLIP regions (MNIST, the options, the
layer checks, constants on either side of an op). test_tvm_partition_layers.py has every
layer's cases, test_tvm_partition_deny.py the deny options and `require_mac_layer`."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from partition_builders import (
    CONV_W,
    X4,
    bindings,
    composite_names,
    composites,
    const,
    conv,
    host_ops,
    layer_ops,
    node,
    partitioned,
    rand,
    regions,
)
from tvm.relax.backend.pattern_registry import get_patterns_with_prefix

from mrvl.frontend import from_onnx, node_name_of
from mrvl.partition import partition_for_mrvl, partition_reasons
from mrvl.relax_import import import_region

COMPOSITES = {
    "mrvl.conv2d", "mrvl.fc", "mrvl.add", "mrvl.mul", "mrvl.maxpool2d", "mrvl.avgpool2d",
    "mrvl.global_avgpool2d", "mrvl.global_maxpool2d", "mrvl.concat", "mrvl.reshape",
    "mrvl.transpose", "mrvl.scale_shift", "mrvl.copy",
    "mrvl.conv_transpose", "mrvl.resize", "mrvl.bmm", "mrvl.softmax",
    "mrvl.layernorm", "mrvl.quantize", "mrvl.dequantize", "mrvl.reduce", "mrvl.binary",
    "mrvl.pad",
}  # fmt: skip


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
