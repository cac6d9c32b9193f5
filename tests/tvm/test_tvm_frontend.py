"""`mrvl.from_onnx`: TVM's importer plus the ONNX node names it drops."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
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


def single_node_model(node: onnx.NodeProto, in_shape, out_shape, initializers=()) -> onnx.ModelProto:
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
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2, 2])],
        [w, c],
    )
    mod = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert op_and_name(mod["main"]) == [("relax.add", "/add/Add")]
