"""`mrvl.from_onnx`: TVM's importer plus the ONNX node names it drops."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import float_model
from onnx import TensorProto, helper, numpy_helper
from tvm import relax
from tvm.ir.expr import GenericConst

from mrvl.errors import ModelImportError
from mrvl.frontend import from_onnx, node_name_of


def calls(func: relax.Function) -> list[relax.Call]:
    return [
        b.value
        for block in func.body.blocks
        for b in block.bindings
        if isinstance(b.value, relax.Call)
    ]


def op_and_name(func: relax.Function) -> list[tuple[str, str | None]]:
    return [(c.op.name, node_name_of(c)) for c in calls(func)]


def single_node_model(
    node: onnx.NodeProto, in_shape, out_shape, initializers=()
) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_every_call_carries_its_onnx_node_name(mnist_model, mnist_relax):
    # The bias add of Conv/Gemm belongs to the Conv/Gemm node; weight transposes are folded.
    assert op_and_name(mnist_relax["main"]) == [
        ("relax.nn.conv2d", "/conv1/Conv"),
        ("relax.add", "/conv1/Conv"),
        ("relax.nn.relu", "/relu1/Relu"),
        ("relax.nn.max_pool2d", "/pool1/MaxPool"),
        ("relax.nn.conv2d", "/conv2/Conv"),
        ("relax.add", "/conv2/Conv"),
        ("relax.nn.relu", "/relu2/Relu"),
        ("relax.nn.max_pool2d", "/pool2/MaxPool"),
        ("relax.reshape", "/flatten/Flatten"),
        ("relax.matmul", "/fc1/Gemm"),
        ("relax.add", "/fc1/Gemm"),
        ("relax.nn.relu", "/relu3/Relu"),
        ("relax.matmul", "/fc2/Gemm"),
        ("relax.add", "/fc2/Gemm"),
        ("relax.nn.softmax", "/softmax/Softmax"),
    ]
    assert {name for _, name in op_and_name(mnist_relax["main"])} == {
        node.name for node in mnist_model.graph.node
    }


def test_weights_are_folded_constants(mnist_relax):
    matmul = next(c for c in calls(mnist_relax["main"]) if c.op.name == "relax.matmul")
    # Gemm's transB transpose is folded: W arrives as a [K, O] constant.
    assert isinstance(matmul.args[1], GenericConst)
    assert tuple(matmul.args[1].value.shape) == (1568, 256)


def test_path_and_proto_give_the_same_module(mnist_model, mnist_relax, tmp_path):
    path = tmp_path / "mnist.onnx"
    onnx.save(mnist_model, path)
    from_path = from_onnx(path)
    assert op_and_name(from_path["main"]) == op_and_name(mnist_relax["main"])
    assert from_onnx(str(path))["main"].params[0].ty.shape is not None


def test_shape_dict_fixes_a_dynamic_batch():
    node = helper.make_node("Relu", ["x"], ["y"], name="/act/Relu")
    model = single_node_model(node, ["N", 3, 4, 4], ["N", 3, 4, 4])
    mod = from_onnx(model, {"x": [2, 3, 4, 4]})
    assert [int(d) for d in mod["main"].params[0].ty.shape] == [2, 3, 4, 4]
    assert op_and_name(mod["main"]) == [("relax.nn.relu", "/act/Relu")]


def test_unnamed_node_is_named_by_op_type_and_output():
    node = helper.make_node("Relu", ["x"], ["y"])
    mod = from_onnx(single_node_model(node, [1, 4], [1, 4]))
    assert op_and_name(mod["main"]) == [("relax.nn.relu", "Relu:y")]


def test_node_name_of_unnamed_expr_is_none():
    x = relax.Var("x", relax.TensorType((1, 4), "float32"))
    assert node_name_of(relax.op.nn.relu(x)) is None


def test_multi_output_node_names_each_output():
    node = helper.make_node("Split", ["x"], ["a", "b"], name="/split/Split", axis=1, num_outputs=2)
    graph = helper.make_graph(
        [node, helper.make_node("Add", ["a", "b"], ["y"], name="/add/Add")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    names = [name for _, name in op_and_name(from_onnx(model)["main"])]
    assert names[-1] == "/add/Add"
    assert set(names[:-1]) == {"/split/Split"}


# -- malformed models -----------------------------------------------------------------------


def test_unparsable_file(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x08\xff\xff this is not a protobuf")
    with pytest.raises(ModelImportError, match="cannot parse ONNX model"):
        from_onnx(path)


def test_missing_file(tmp_path):
    with pytest.raises(ModelImportError, match="no such file"):
        from_onnx(tmp_path / "absent.onnx")


def test_checker_failure():
    node = helper.make_node("Relu", ["not_defined"], ["y"], name="/act/Relu")
    with pytest.raises(ModelImportError, match="fails the ONNX checker"):
        from_onnx(single_node_model(node, [1, 4], [1, 4]))


def test_operator_tvm_cannot_import():
    node = helper.make_node("Celu", ["x"], ["y"], name="/act/Celu")
    with pytest.raises(ModelImportError, match="Celu"):
        from_onnx(single_node_model(node, [1, 4], [1, 4]))


def test_conversion_failure_names_the_node(capsys):
    node = helper.make_node("Flatten", ["x"], ["y"], name="/bad/Flatten", axis=7)
    with pytest.raises(ModelImportError, match="node '/bad/Flatten' \\(Flatten\\)"):
        from_onnx(single_node_model(node, [1, 2, 3, 4], [1, 24]))
    assert capsys.readouterr().out == ""  # TVM's dump of the failing node's inputs is hidden


def test_constant_only_conv_still_imports():
    # Conv whose data is an initializer: FoldConstant evaluates it; no call is left unnamed.
    w = numpy_helper.from_array(np.ones((2, 1, 1, 1), np.float32), "w")
    c = numpy_helper.from_array(np.ones((1, 1, 2, 2), np.float32), "c")
    nodes = [
        helper.make_node("Conv", ["c", "w"], ["k"], name="/const/Conv"),
        helper.make_node("Add", ["x", "k"], ["y"], name="/add/Add"),
    ]
    shape = [1, 2, 2, 2]
    inputs, outputs = [("x", shape)], [("y", shape)]
    mod = from_onnx(
        float_model(nodes, [w, c], inputs, outputs, name="g", opset=17, ir_version=onnx.IR_VERSION)
    )
    assert op_and_name(mod["main"]) == [("relax.add", "/add/Add")]


# -- normalizations: the forms the MLIP patterns match, same numbers as onnxruntime ----------

RNG = np.random.default_rng(0)


def init(name, array, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(array, dtype), name)


def model_of(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        list(inits),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10  # onnxruntime 1.31 reads up to 13
    return model


def assert_same_numbers(model, mod):
    """TVM's CPU build of `mod` and onnxruntime agree on `model` for a seeded input."""
    import onnxruntime as ort
    import tvm

    feeds = {
        v.name: np.asarray(
            RNG.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim]) * 4,
            np.float32,
        )
        for v in model.graph.input
    }
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), tvm.cpu())
    got = vm["main"](*[tvm.runtime.tensor(v) for v in feeds.values()])
    got = [got] if isinstance(got, tvm.runtime.Tensor) else list(got)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-5, atol=1e-5)


NORMALIZED = {
    # name: (nodes, inputs, outputs, initializers, opset, expected (op, node name) list)
    "Clip(0, 6) -> clip": (
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="/r6/Clip")],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 4, 4]},
        [init("lo", 0), init("hi", 6)],
        17,
        [("relax.clip", "/r6/Clip")],
    ),
    "Clip min only": (
        [helper.make_node("Clip", ["x", "lo"], ["y"], name="/clip")],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 4, 4]},
        [init("lo", -1)],
        17,
        [("relax.clip", "/clip")],
    ),
    "Clip opset 6 attributes": (
        [helper.make_node("Clip", ["x"], ["y"], name="/clip", min=-1.0, max=2.0)],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 4, 4]},
        [],
        6,
        [("relax.clip", "/clip")],
    ),
    "Pad constant 0 -> nn.pad": (
        [helper.make_node("Pad", ["x", "p"], ["y"], name="/pad")],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 7, 5]},
        [init("p", [0, 0, 1, 0, 0, 0, 2, 1], np.int64)],
        17,
        [("relax.nn.pad", "/pad")],
    ),
    "Pad value and axes (opset 18)": (
        [helper.make_node("Pad", ["x", "p", "v", "ax"], ["y"], name="/pad")],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 4, 7]},
        [init("p", [1, 2], np.int64), init("v", 0.5), init("ax", [-1], np.int64)],
        18,
        [("relax.nn.pad", "/pad")],
    ),
    "Sum of three -> add chain": (
        [helper.make_node("Sum", ["x", "z", "x"], ["y"], name="/sum")],
        {"x": [1, 2, 4, 4], "z": [1, 2, 4, 4]},
        {"y": [1, 2, 4, 4]},
        [],
        17,
        [("relax.add", "/sum"), ("relax.add", "/sum")],
    ),
    "BatchNormalization -> multiply, add": (
        [
            helper.make_node(
                "BatchNormalization", ["x", "g", "b", "m", "v"], ["y"], name="/bn", epsilon=1e-3
            )
        ],
        {"x": [2, 3, 4, 4]},
        {"y": [2, 3, 4, 4]},
        [
            init("g", RNG.standard_normal(3)),
            init("b", RNG.standard_normal(3)),
            init("m", RNG.standard_normal(3)),
            init("v", RNG.uniform(0.5, 2, 3)),
        ],
        17,
        [("relax.multiply", "/bn"), ("relax.add", "/bn")],
    ),
    "Max by a scalar -> clip": (
        [helper.make_node("Max", ["x", "c"], ["y"], name="/max")],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 4, 4]},
        [init("c", -0.4)],
        13,
        [("relax.clip", "/max")],
    ),
    "Min by a scalar, constant first -> clip": (
        [helper.make_node("Min", ["c", "x"], ["y"], name="/min")],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 4, 4]},
        [init("c", [6.0])],
        13,
        [("relax.clip", "/min")],
    ),
    "Neg -> multiply by -1": (
        [helper.make_node("Neg", ["x"], ["y"], name="/neg")],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 4, 4]},
        [],
        13,
        [("relax.multiply", "/neg")],
    ),
    "Resize opset 11 with an empty scales input and sizes": (
        [
            helper.make_node(
                "Resize", ["x", "roi", "scales", "sizes"], ["y"], name="/up", mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor",
            )
        ],  # fmt: skip
        {"x": [1, 2, 3, 4]},
        {"y": [1, 2, 6, 8]},
        [init("roi", []), init("scales", []), init("sizes", [1, 2, 6, 8], np.int64)],
        11,
        [("relax.image.resize2d", "/up")],
    ),
    "Resize opset 10 (X, scales), nearest": (
        [helper.make_node("Resize", ["x", "scales"], ["y"], name="/up", mode="nearest")],
        {"x": [1, 2, 3, 4]},
        {"y": [1, 2, 6, 8]},
        [init("scales", [1, 1, 2, 2])],
        10,
        [("relax.image.resize2d", "/up")],
    ),
    "Resize opset 10 (X, scales), linear": (
        [helper.make_node("Resize", ["x", "scales"], ["y"], name="/up", mode="linear")],
        {"x": [1, 2, 3, 4]},
        {"y": [1, 2, 6, 12]},
        [init("scales", [1, 1, 2, 3])],
        10,
        [("relax.image.resize2d", "/up")],
    ),
}


@pytest.mark.parametrize("case", NORMALIZED.values(), ids=NORMALIZED.keys())
def test_normalization_keeps_names_and_numbers(case):
    nodes, inputs, outputs, inits, opset, expected = case
    model = model_of(nodes, inputs, outputs, inits, opset)
    mod = from_onnx(model)
    assert op_and_name(mod["main"]) == expected
    assert_same_numbers(model, mod)


KEPT = {
    # TVM's own conversion stays when the rewrite's conditions do not hold
    "Clip with a runtime bound": (
        [helper.make_node("Clip", ["x", "lo"], ["y"], name="/clip")],
        {"x": [1, 2, 4, 4], "lo": []},
        {"y": [1, 2, 4, 4]},
        [],
        17,
    ),
    "Clip min > max": (
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="/clip")],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 4, 4]},
        [init("lo", 1), init("hi", -1)],
        17,
    ),
    "Pad reflect": (
        [helper.make_node("Pad", ["x", "p"], ["y"], name="/pad", mode="reflect")],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 6, 6]},
        [init("p", [0, 0, 1, 1, 0, 0, 1, 1], np.int64)],
        17,
    ),
    "Pad cropping": (
        [helper.make_node("Pad", ["x", "p"], ["y"], name="/pad")],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 3, 4]},
        [init("p", [0, 0, -1, 0, 0, 0, 0, 0], np.int64)],
        17,
    ),
    "Sum with broadcasting": (
        [helper.make_node("Sum", ["x", "z"], ["y"], name="/sum")],
        {"x": [1, 2, 4, 4], "z": [1, 2, 1, 1]},
        {"y": [1, 2, 4, 4]},
        [],
        17,
    ),
    "Max of two tensors": (
        [helper.make_node("Max", ["x", "z"], ["y"], name="/max")],
        {"x": [1, 2, 4, 4], "z": [1, 2, 4, 4]},
        {"y": [1, 2, 4, 4]},
        [],
        17,
    ),
    "Min by a per-channel constant": (
        [helper.make_node("Min", ["x", "c"], ["y"], name="/min")],
        {"x": [1, 2, 4, 4]},
        {"y": [1, 2, 4, 4]},
        [init("c", [[[1.0]], [[2.0]]])],
        17,
    ),
}


@pytest.mark.parametrize("case", KEPT.values(), ids=KEPT.keys())
def test_tvm_conversion_kept_when_the_rewrite_does_not_apply(case):
    nodes, inputs, outputs, inits, opset = case
    model = model_of(nodes, inputs, outputs, inits, opset)
    mod = from_onnx(model)
    ops = [op for op, _ in op_and_name(mod["main"])]
    assert not {"relax.clip", "relax.nn.pad"} & set(ops)
    assert ops != ["relax.add"]
    assert {name for _, name in op_and_name(mod["main"])} == {nodes[0].name}
    assert_same_numbers(model, mod)


def test_helper_bindings_belong_to_their_own_node():
    # Gemm(transA) emits its transpose before the MatMul above it is bound: the transpose is
    # still the Gemm's, not the MatMul's.
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["y"], name="/mm"),
        helper.make_node("Gemm", ["x", "w2"], ["z"], name="/gemm", transA=1),
    ]
    model = model_of(
        nodes,
        {"x": [2, 4]},
        {"y": [2, 3], "z": [4, 3]},
        [init("w", np.ones((4, 3))), init("w2", np.ones((2, 3)))],
    )
    assert sorted(op_and_name(from_onnx(model)["main"])) == [
        ("relax.matmul", "/gemm"),
        ("relax.matmul", "/mm"),
        ("relax.permute_dims", "/gemm"),
    ]


def test_onnx_nodes_are_recorded_in_graph_order(mnist_model, mnist_relax):
    from mrvl.frontend import onnx_nodes_of

    assert list(onnx_nodes_of(mnist_relax).items()) == [
        (n.name, n.op_type) for n in mnist_model.graph.node
    ]
    unnamed = from_onnx(single_node_model(helper.make_node("Relu", ["x"], ["y"]), [1, 4], [1, 4]))
    assert onnx_nodes_of(unnamed) == {"Relu:y": "Relu"}


def test_weight_layout_ops_fold_without_tvm_fold_constant(monkeypatch, mnist_model):
    # FoldConstant compiles every op it folds with LLVM; the bias reshapes and the Gemm weight
    # transposes are folded in numpy instead, so it does not run at all here.
    def no_fold_constant():
        raise AssertionError("FoldConstant ran")

    monkeypatch.setattr(relax.transform, "FoldConstant", no_fold_constant)
    mod = from_onnx(mnist_model)
    conv = next(c for c in calls(mod["main"]) if c.op.name == "relax.nn.conv2d")
    add = next(c for c in calls(mod["main"]) if c.op.name == "relax.add")
    assert isinstance(conv.args[1], GenericConst)
    assert tuple(add.args[1].value.shape) == (1, 64, 1, 1)


def test_other_constant_computations_still_fold():
    # A weight computed by ConstantOfShape is folded by TVM's FoldConstant.
    nodes = [
        helper.make_node(
            "ConstantOfShape",
            ["s"],
            ["w"],
            name="/w",
            value=numpy_helper.from_array(np.array([0.5], np.float32)),
        ),
        helper.make_node("Conv", ["x", "w"], ["y"], name="/c/Conv"),
    ]
    model = model_of(
        nodes, {"x": [1, 2, 4, 4]}, {"y": [1, 3, 4, 4]}, [init("s", [3, 2, 1, 1], np.int64)]
    )
    mod = from_onnx(model)
    assert op_and_name(mod["main"]) == [("relax.nn.conv2d", "/c/Conv")]
    assert isinstance(calls(mod["main"])[0].args[1], GenericConst)
    assert_same_numbers(model, mod)


def test_dropout_at_inference_is_the_identity():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="/r"),
        helper.make_node("Dropout", ["r"], ["d", "mask"], name="/drop"),  # mask unused
        helper.make_node("Sigmoid", ["d"], ["y"], name="/s"),
    ]
    model = model_of(nodes, {"x": [2, 8]}, {"y": [2, 8]})
    mod = from_onnx(model)
    assert op_and_name(mod["main"]) == [("relax.nn.relu", "/r"), ("relax.sigmoid", "/s")]
    assert_same_numbers(model, mod)


def test_dropout_whose_mask_is_used_is_kept():
    nodes = [helper.make_node("Dropout", ["x"], ["y", "mask"], name="/drop")]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8]),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 8]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert [op for op, _ in op_and_name(from_onnx(model)["main"])] == ["relax.nn.dropout"]
