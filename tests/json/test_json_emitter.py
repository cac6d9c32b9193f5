"""Nodes-JSON / Constants-JSON emission from the `mrvl` dialect, and their schemas.

Modules are built in Python (op constructors) or parsed from tiny textual IR; no TVM needed.
"""

from __future__ import annotations

import base64
import copy
import json

import numpy as np
import pytest
from jsonschema import Draft202012Validator
from xdsl.dialects import func, test
from xdsl.dialects.builtin import ModuleOp, StringAttr, f32
from xdsl.parser import Parser

from mrvl import json_emitter as je
from mrvl.dialects import mrvl, mrvl_context
from mrvl.errors import CompileError
from mrvl.locations import name_location

SYMBOL = "region"


def _at(op, name):
    op.location = name_location(name)
    return op


def _act(kind: str, **params: float) -> dict:
    return mrvl.activation(kind, **params)


def conv_pool_fc_module():
    """NCHW input -> conv (bias, relu, asymmetric pads) -> maxpool -> flatten -> fc (bias)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    b = np.array([0.5, -1.25, 2.0, 0.0], np.float32)
    fw = rng.standard_normal((3, 16)).astype(np.float32)
    fb = np.array([1.0, -2.0, 3.5], np.float32)

    fn = func.FuncOp(
        SYMBOL,
        ([mrvl.tensor([1, 2, 6, 6], f32, "NCHW")], [mrvl.tensor([1, 3], f32, "NC")]),
    )
    (x,) = fn.body.block.args
    to_nhwc = _at(mrvl.LayoutConvertOp(x, "NHWC"), "/conv1/Conv")
    cw = mrvl.ConstantOp(f"{SYMBOL}_mrvl_const_0", w, "OHWI")
    cb = mrvl.ConstantOp(f"{SYMBOL}_mrvl_const_1", b, "O")
    conv = _at(
        mrvl.Conv2DOp(
            to_nhwc.output,
            cw.result,
            cb.result,
            mrvl.tensor([1, 4, 5, 4], f32, "NHWC"),
            strides=(2, 1),
            pads=(1, 0, 2, 1),
            activation=_act("relu"),
        ),
        "/conv1/Conv",
    )
    pool = _at(
        mrvl.MaxPool2DOp(
            conv.output, mrvl.tensor([1, 2, 2, 4], f32, "NHWC"), kernel=(2, 2), strides=(2, 2)
        ),
        "/pool1/MaxPool",
    )
    to_nchw = _at(mrvl.LayoutConvertOp(pool.output, "NCHW"), "/flatten/Flatten")
    flat = _at(mrvl.ReshapeOp(to_nchw.output, mrvl.tensor([1, 16], f32, "NC")), "/flatten/Flatten")
    fcw = mrvl.ConstantOp(f"{SYMBOL}_mrvl_const_2", fw, "OI")
    fcb = mrvl.ConstantOp(f"{SYMBOL}_mrvl_const_3", fb, "O")
    fc = _at(
        mrvl.FullyConnectedOp(flat.output, fcw.result, fcb.result, mrvl.tensor([1, 3], f32, "NC")),
        "/fc1/Gemm",
    )
    fn.body.block.add_ops(
        [to_nhwc, cw, cb, conv, pool, to_nchw, flat, fcw, fcb, fc, func.ReturnOp(fc.output)]
    )
    module = ModuleOp([fn])
    module.verify()
    return module, {op.const_name.data: op for op in (cw, cb, fcw, fcb)}


def conv_then(tail: str):
    """NHWC-input conv (1x1, no bias) followed by a `reshape` or an NHWC->NCHW `convert`."""
    w = np.arange(6, dtype=np.float32).reshape(3, 1, 1, 2) - 2.5
    out = (
        mrvl.tensor([1, 12], f32, "NC")
        if tail == "reshape"
        else mrvl.tensor([1, 3, 2, 2], f32, "NCHW")
    )
    fn = func.FuncOp(SYMBOL, ([mrvl.tensor([1, 2, 2, 2], f32, "NHWC")], [out]))
    (x,) = fn.body.block.args
    cw = mrvl.ConstantOp(f"{SYMBOL}_mrvl_const_0", w, "OHWI")
    conv_type = mrvl.tensor([1, 2, 2, 3], f32, "NHWC")
    conv = _at(mrvl.Conv2DOp(x, cw.result, None, conv_type), "/c/Conv")
    if tail == "reshape":
        last = _at(mrvl.ReshapeOp(conv.output, out), "/r/Reshape")
    else:
        last = _at(mrvl.LayoutConvertOp(conv.output, "NCHW"), "/c/Conv")
    fn.body.block.add_ops([cw, conv, last, func.ReturnOp(last.output)])
    module = ModuleOp([fn])
    module.verify()
    return module


FP16_IR = """
func.func @region(%x: tensor<1x1x8x8xf32, #mrvl.layout<NCHW>>) -> tensor<1x10xf32, #mrvl.layout<NC>> {
  %0 = mrvl.cast %x : tensor<1x1x8x8xf32, #mrvl.layout<NCHW>> -> tensor<1x1x8x8xf16, #mrvl.layout<NCHW>> loc("/conv1/Conv")
  %1 = mrvl.layout_convert %0 : tensor<1x1x8x8xf16, #mrvl.layout<NCHW>> -> tensor<1x8x8x1xf16, #mrvl.layout<NHWC>> loc("/conv1/Conv")
  %w = mrvl.constant "region_mrvl_const_0" = dense<[[[[1.0], [-2.0], [0.5]], [[1.0], [1.0], [1.0]], [[3.0], [1.0], [1.0]]], [[[1.0], [1.0], [1.0]], [[1.0], [1.0], [1.0]], [[1.0], [1.0], [1.0]]], [[[1.0], [1.0], [1.0]], [[1.0], [1.0], [1.0]], [[1.0], [1.0], [1.0]]], [[[1.0], [1.0], [1.0]], [[1.0], [1.0], [1.0]], [[1.0], [1.0], [1.0]]]]> : tensor<4x3x3x1xf16> -> tensor<4x3x3x1xf16, #mrvl.layout<OHWI>>
  %b = mrvl.constant "region_mrvl_const_1" = dense<[0.5, -0.5, 1.0, 2.0]> : tensor<4xf32> -> tensor<4xf32, #mrvl.layout<O>>
  %2 = mrvl.conv2d %1, %w bias %b strides [2, 2] pads [1, 0, 1, 2] act clip min 0.0 max 6.0 : (tensor<1x8x8x1xf16, #mrvl.layout<NHWC>>, tensor<4x3x3x1xf16, #mrvl.layout<OHWI>>, tensor<4xf32, #mrvl.layout<O>>) -> tensor<1x4x4x4xf16, #mrvl.layout<NHWC>> loc("/conv1/Conv")
  %3 = mrvl.avgpool2d %2 kernel [3, 3] strides [2, 2] pads [1, 1, 1, 1] count_include_pad : tensor<1x4x4x4xf16, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf16, #mrvl.layout<NHWC>> loc("/pool1/AveragePool")
  %4 = mrvl.layout_convert %3 : tensor<1x2x2x4xf16, #mrvl.layout<NHWC>> -> tensor<1x4x2x2xf16, #mrvl.layout<NCHW>> loc("/flatten/Flatten")
  %5 = mrvl.reshape %4 : tensor<1x4x2x2xf16, #mrvl.layout<NCHW>> -> tensor<1x16xf16, #mrvl.layout<NC>> loc("/flatten/Flatten")
  %fw = mrvl.constant "region_mrvl_const_2" = dense<0.25> : tensor<10x16xf16> -> tensor<10x16xf16, #mrvl.layout<OI>>
  %6 = mrvl.fc %5, %fw act leaky_relu alpha 0.125 : (tensor<1x16xf16, #mrvl.layout<NC>>, tensor<10x16xf16, #mrvl.layout<OI>>) -> tensor<1x10xf16, #mrvl.layout<NC>> loc("/fc1/Gemm")
  %7 = mrvl.cast %6 : tensor<1x10xf16, #mrvl.layout<NC>> -> tensor<1x10xf32, #mrvl.layout<NC>> loc("/fc1/Gemm")
  func.return %7 : tensor<1x10xf32, #mrvl.layout<NC>>
}
"""


def parse(text: str) -> ModuleOp:
    module = Parser(mrvl_context(), text).parse_module()
    module.verify()
    return module


def layers(nodes: dict) -> list[dict]:
    return [n for n in nodes["nodes"] if n["op"] == "tvm_op"]


@pytest.fixture(scope="module")
def emitted():
    module, constants = conv_pool_fc_module()
    nodes, consts = je.emit_json(module, SYMBOL)
    return nodes, consts, constants


# ---------------------------------------------------------------------------------------------
# Emission
# ---------------------------------------------------------------------------------------------


def test_schemas_are_valid_draft_2020_12():
    for schema in (je.nodes_schema(), je.consts_schema()):
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(schema)


def test_documents_validate(emitted):
    nodes, consts, _ = emitted
    assert je.check_nodes(nodes) == []
    assert je.check_consts(consts) == []
    assert je.check_pair(nodes, consts) == []
    je.validate(nodes, consts)
    json.dumps(nodes), json.dumps(consts)  # plain JSON, nothing numpy left inside


def test_graph_structure(emitted):
    nodes, _, _ = emitted
    assert [n["op"] for n in nodes["nodes"]] == ["input", "tvm_op", "tvm_op", "tvm_op"]
    assert [n["attrs"]["layer_name"] for n in layers(nodes)] == [["Conv2D"], ["Maxpool2D"], ["FC"]]
    assert [n["name"] for n in layers(nodes)] == [f"tvmgen_mrvl_main_{k}" for k in range(3)]
    assert [n["attrs"]["mrvl_nodes_idx"] for n in layers(nodes)] == [[1], [2], [3]]
    assert [n["inputs"] for n in layers(nodes)] == [[[0, 0, 0]], [[1, 0, 0]], [[2, 0, 0]]]
    assert nodes["symbol"] == SYMBOL
    assert nodes["arg_nodes"] == [0]
    assert nodes["heads"] == [[3, 0, 0]]
    assert (nodes["batch_size"], nodes["num_subgraph_inputs"], nodes["num_subgraph_outputs"]) == (
        "1",
        "1",
        "1",
    )
    shapes = [[1, 2, 6, 6], [1, 4, 5, 4], [1, 2, 2, 4], [1, 3]]
    assert nodes["attrs"]["shape"] == ["list_shape", shapes]
    assert nodes["attrs"]["dltype"] == ["list_str", ["float32"] * 4]
    assert "node_row_ptr" not in nodes  # upstream deleted it from the final Nodes-JSON


def test_input_keeps_tvm_nchw_shape(emitted):
    nodes, _, _ = emitted
    inp = nodes["nodes"][0]
    assert inp == {
        "op": "input",
        "name": f"{SYMBOL}_i0",
        "inputs": [],
        "input_id": ["0"],
        "attrs": {
            "layer_name": ["input"],
            "dtype": ["float32"],
            "shape": [[1, 2, 6, 6]],
            "data_layout": ["NCHW"],
        },
    }


def test_conv_attributes(emitted):
    nodes, consts, constants = emitted
    conv = layers(nodes)[0]["attrs"]
    assert conv["padding"] == ["1", "0", "2", "1"]  # [top, left, bottom, right]
    assert conv["strides"] == ["2", "1"]
    assert conv["dilation"] == ["1", "1"]
    assert conv["groups"] == ["1"]
    assert conv["channels"] == ["4"]
    assert conv["kernel_size"] == ["3", "3"]
    assert conv["data_layout"] == ["NHWC"] and conv["out_layout"] == ["NHWC"]
    assert conv["kernel_layout"] == ["OHWI"]
    assert conv["data_layout_shape"] == ["1", "6", "6", "2"]  # the NHWC view of the input
    assert conv["out_layout_shape"] == ["1", "4", "5", "4"]
    assert conv["shape"] == [[1, 4, 5, 4]] and conv["dtype"] == ["float32"]
    assert conv["activation_type"] == ["relu"]
    assert conv["num_inputs"] == "3" and conv["num_outputs"] == "1"
    assert conv["func_name"] == ["n0_Conv2D_NHWC"]
    assert conv["composite_name"] == ["mrvl.conv2d_nhwc2nhwc"]
    assert conv["onnx_node"] == ["/conv1/Conv"]
    assert conv["bias_layout"] == ["---O"]

    w = constants[f"{SYMBOL}_mrvl_const_0"].numpy()
    assert conv["kernel_const_name"] == [f"{SYMBOL}_mrvl_const_0"]
    assert conv["kernel_const"]["name"] == f"{SYMBOL}_mrvl_const_0"
    assert conv["kernel_const"]["shape"] == [4, 3, 3, 2]
    assert conv["kernel_const"]["dtype"] == "float32"
    assert float(conv["kernel_const"]["min"]) == float(w.min())
    assert float(conv["kernel_const"]["max"]) == float(w.max())
    assert conv["bias_const"] == {
        "shape": [1, 4],  # upstream writes a 1-D constant as [1, n]
        "dtype": "float32",
        "min": "-1.25",
        "max": "2",
        "name": f"{SYMBOL}_mrvl_const_1",
    }
    assert conv["gamma_const"] == {} and conv["var_const"] == {}


def test_pool_attributes(emitted):
    nodes, _, _ = emitted
    pool = layers(nodes)[1]["attrs"]
    assert pool["pool_size"] == ["2", "2"] and pool["kernel_layout_shape"] == ["2", "2"]
    assert pool["strides"] == ["2", "2"]
    assert pool["padding"] == ["0", "0", "0", "0"]
    assert pool["kernel_layout"] == ["HW"] and pool["layout"] == ["NHWC"]
    assert pool["kernel_const"] == {} and pool["bias_const"] == {}
    assert "activation_type" not in pool
    assert pool["onnx_node"] == ["/pool1/MaxPool"]


def test_flatten_folds_into_fc(emitted):
    nodes, _, _ = emitted
    fc = layers(nodes)[2]["attrs"]
    assert fc["weights_need_transform"] == ["yes"]
    assert fc["data_layout"] == ["NHWC"] and fc["data_layout_shape"] == ["1", "2", "2", "4"]
    assert fc["out_layout"] == ["NC"] and fc["kernel_layout"] == ["OI"]
    assert fc["units"] == ["3"]
    assert fc["activation_type"] == ["none"]
    assert fc["kernel_const"]["shape"] == [3, 16]
    assert fc["bias_layout"] == ["-O"]
    assert fc["onnx_node"] == ["/fc1/Gemm", "/flatten/Flatten"]
    assert fc["func_name"] == ["n2_FC_NHWC2NC"]


def test_constants_base64_round_trip(emitted):
    _, consts, constants = emitted
    assert set(consts) == {f"{SYMBOL}_mrvl_const_{i}" for i in range(4)}
    for name, op in constants.items():
        entry = consts[name]
        array = op.numpy()
        raw = base64.b64decode(entry["data_base64"], validate=True)
        assert raw == array.astype("<f4").tobytes()
        back = np.frombuffer(raw, dtype="<f4").reshape(array.shape)
        np.testing.assert_array_equal(back, array)
        assert entry["dtype"] == "float32"
        assert float(entry["min"]) == float(array.min())
        assert float(entry["max"]) == float(array.max())
        assert np.prod(entry["shape"]) == array.size


def test_fp16_module_from_text():
    module = parse(FP16_IR)
    nodes, consts = je.emit_json(module, SYMBOL)
    je.validate(nodes, consts)
    conv, pool, fc = layers(nodes)
    # the casts and the input layout conversion are not nodes
    assert len(nodes["nodes"]) == 4 and conv["inputs"] == [[0, 0, 0]]
    assert nodes["nodes"][0]["attrs"]["dtype"] == ["float32"]
    assert conv["attrs"]["dtype"] == ["float16"]
    assert conv["attrs"]["activation_type"] == ["clip"]
    assert conv["attrs"]["activation_min"] == ["0"] and conv["attrs"]["activation_max"] == ["6"]
    assert conv["attrs"]["padding"] == ["1", "0", "1", "2"]
    assert conv["attrs"]["kernel_const"]["dtype"] == "float16"
    kernel = conv["attrs"]["kernel_const"]
    assert (kernel["min"], kernel["max"]) == ("-2", "3")
    assert conv["attrs"]["bias_const"]["dtype"] == "float32"  # biases stay f32
    assert pool["attrs"]["layer_name"] == ["Avgpool2D"]
    assert pool["attrs"]["count_include_pad"] == ["1"]
    assert pool["attrs"]["padding"] == ["1", "1", "1", "1"]
    assert fc["attrs"]["activation_type"] == ["leaky_relu"]
    assert fc["attrs"]["activation_alpha"] == ["0.125"]
    assert fc["attrs"]["bias_const"] == {} and "bias_const_name" not in fc["attrs"]
    assert fc["attrs"]["num_inputs"] == "2"
    assert nodes["heads"] == [[3, 0, 0]]

    w = consts["region_mrvl_const_0"]
    assert w["dtype"] == "float16" and w["shape"] == [4, 3, 3, 1]
    raw = base64.b64decode(w["data_base64"])
    assert len(raw) == 4 * 9 * 2
    weight_op = next(op for op in module.walk() if isinstance(op, mrvl.ConstantOp))
    assert raw == weight_op.numpy().astype("<f2").tobytes()


def test_reshape_that_is_not_a_flatten_into_fc_is_a_node():
    nodes, consts = je.emit_json(conv_then("reshape"), SYMBOL)
    je.validate(nodes, consts)
    conv, reshape = layers(nodes)
    assert conv["inputs"] == [[0, 0, 0]] and reshape["inputs"] == [[1, 0, 0]]
    assert nodes["nodes"][0]["attrs"]["data_layout"] == ["NHWC"]
    assert conv["attrs"]["activation_type"] == ["none"]
    assert conv["attrs"]["num_inputs"] == "2"
    assert reshape["attrs"]["layer_name"] == ["reshape"]
    assert reshape["attrs"]["newshape"] == ["1", "12"]
    assert reshape["attrs"]["data_layout"] == ["NHWC"]
    assert reshape["attrs"]["out_layout"] == ["NC"]
    assert reshape["attrs"]["onnx_node"] == ["/r/Reshape"]
    assert nodes["heads"] == [[2, 0, 0]]


def test_layout_conversion_at_the_output_is_a_layout_transform_node():
    nodes, consts = je.emit_json(conv_then("convert"), SYMBOL)
    je.validate(nodes, consts)
    _, transform = layers(nodes)
    attrs = transform["attrs"]
    assert attrs["layer_name"] == ["layout_transform"]
    assert (attrs["src_layout"], attrs["dst_layout"]) == (["NHWC"], ["NCHW"])
    assert attrs["shape"] == [[1, 3, 2, 2]]
    assert attrs["func_name"] == ["n1_layout_transform_NHWC2NCHW"]
    assert nodes["heads"] == [[2, 0, 0]]


def test_write_json(tmp_path, emitted):
    nodes, consts, _ = emitted
    path_nodes, path_consts = je.write_json(tmp_path / "out", SYMBOL, nodes, consts)
    assert path_nodes.name == f"{SYMBOL}-nodes.json"
    assert path_consts.name == f"{SYMBOL}-consts.json"
    assert json.loads(path_nodes.read_text()) == nodes
    assert json.loads(path_consts.read_text()) == consts


def test_symbol_selects_the_function():
    a, _ = conv_pool_fc_module()
    b = conv_then("reshape")
    (fa,), (fb,) = a.body.block.ops, b.body.block.ops
    fb.sym_name = StringAttr("other")
    fa.detach(), fb.detach()
    both = ModuleOp([fa, fb])
    nodes, _ = je.emit_json(both, "other")
    assert [n["attrs"]["layer_name"] for n in layers(nodes)] == [["Conv2D"], ["reshape"]]
    with pytest.raises(CompileError, match="no function 'missing'.*region, other"):
        je.emit_json(both, "missing")


def test_unknown_op_is_a_compile_error_naming_the_onnx_node():
    fn = func.FuncOp(SYMBOL, ([mrvl.tensor([1, 4], f32, "NC")], [mrvl.tensor([1, 4], f32, "NC")]))
    (x,) = fn.body.block.args
    odd = _at(test.TestOp([x], [mrvl.tensor([1, 4], f32, "NC")]), "/odd/Softmax")
    fn.body.block.add_ops([odd, func.ReturnOp(odd.results[0])])
    with pytest.raises(CompileError, match=r"test.op.*no Nodes-JSON form.*/odd/Softmax"):
        je.emit_json(ModuleOp([fn]), SYMBOL)


# ---------------------------------------------------------------------------------------------
# Validation of corrupted documents
# ---------------------------------------------------------------------------------------------


def corrupt(doc, edit):
    doc = copy.deepcopy(doc)
    edit(doc)
    return doc


def test_missing_padding_is_reported_with_path_and_layer(emitted):
    nodes, _, _ = emitted
    bad = corrupt(nodes, lambda d: d["nodes"][1]["attrs"].pop("padding"))
    with pytest.raises(CompileError) as err:
        je.validate_nodes(bad)
    text = str(err.value)
    assert "invalid Nodes-JSON" in text
    assert "$.nodes[1].attrs (Conv2D 'tvmgen_mrvl_main_0')" in text
    assert "'padding' is a required property" in text


def set_attrs(i: int, **values):
    return lambda d: d["nodes"][i]["attrs"].update(values)


def set_const(field: str, value):
    return lambda c: c[f"{SYMBOL}_mrvl_const_1"].update({field: value})


CONV = "$.nodes[1].attrs"


@pytest.mark.parametrize(
    ("edit", "where", "what"),
    [
        (set_attrs(1, padding=["1", "0", "2"]), f"{CONV}.padding", "too short"),
        (set_attrs(1, padding=[1, 0, 2, 1]), f"{CONV}.padding[0]", "is not of type 'string'"),
        (set_attrs(1, padding=["1", "0", "-2", "1"]), f"{CONV}.padding[2]", "does not match"),
        (lambda d: d["nodes"][1].update(op="kernel"), "$.nodes[1].op", "'tvm_op' was expected"),
        (set_attrs(1, layer_name=["Conv3D"]), f"{CONV}.layer_name[0]", "is not one of"),
        (set_attrs(1, kernel_layout=["OIHW"]), f"{CONV}.kernel_layout", "OHWI"),
        (set_attrs(1, paddings=["1", "0", "2", "1"]), CONV, "'paddings' was unexpected"),
        (
            lambda d: d["nodes"][1]["attrs"]["kernel_const"].pop("min"),
            f"{CONV}.kernel_const",
            "'min' is a required property",
        ),
        (set_attrs(1, kernel_const={}), f"{CONV}.kernel_const", "should be non-empty"),
        (set_attrs(1, activation_type=["clip"]), CONV, "'activation_min' is a required property"),
        (set_attrs(0, dtype="float32"), "$.nodes[0].attrs.dtype", "is not of type 'array'"),
        (lambda d: d["heads"].append([3, 1, 0]), "$.heads[1][1]", "0 was expected"),
        (lambda d: d.pop("arg_nodes"), "$", "'arg_nodes' is a required property"),
    ],
)
def test_schema_catches_corruption(emitted, edit, where, what):
    nodes, _, _ = emitted
    messages = je.check_nodes(corrupt(nodes, edit))
    assert any(m.startswith(where) and what in m for m in messages), messages


@pytest.mark.parametrize(
    ("edit", "what"),
    [
        (
            lambda d: d["nodes"][2].update(inputs=[[3, 0, 0]]),
            "$.nodes[2].inputs[0] (Maxpool2D 'tvmgen_mrvl_main_1'): node 3 is not an earlier node",
        ),
        (lambda d: d["heads"].__setitem__(0, [9, 0, 0]), "$.heads[0]: node 9 does not exist"),
        (lambda d: d.update(num_subgraph_outputs="2"), "$.num_subgraph_outputs"),
        (set_attrs(3, mrvl_nodes_idx=[7]), "$.nodes[3].attrs.mrvl_nodes_idx: must be [3]"),
        (lambda d: d["attrs"]["shape"][1].pop(), "$.attrs.shape"),
        (
            lambda d: d["nodes"][1]["attrs"]["kernel_const"].update(name="elsewhere"),
            "name does not match kernel_const_name",
        ),
    ],
)
def test_structure_checks(emitted, edit, what):
    nodes, _, _ = emitted
    messages = je.check_nodes(corrupt(nodes, edit))
    assert any(what in m for m in messages), messages


@pytest.mark.parametrize(
    ("edit", "what"),
    [
        (set_const("data_base64", "AAAA*wAAAL8="), "data_base64: 'AAAA*wAAAL8=' does not match"),
        (set_const("data_base64", "AAAAPwAAAL8="), "8 bytes, but shape [1, 4] of float32 needs 16"),
        (lambda c: c[f"{SYMBOL}_mrvl_const_1"].pop("dtype"), "'dtype' is a required property"),
        (set_const("dtype", "float64"), "is not one of"),
        (set_const("min", -1.25), "is not of type 'string'"),
        (set_const("min", "3"), "min 3 is greater than max 2"),
    ],
)
def test_consts_validation_catches_corruption(emitted, edit, what):
    _, consts, _ = emitted
    bad = corrupt(consts, edit)
    messages = je.check_consts(bad)
    assert any(what in m for m in messages), messages
    with pytest.raises(CompileError, match="invalid Constants-JSON"):
        je.validate_consts(bad)


def test_pair_checks_constant_references(emitted):
    nodes, consts, _ = emitted
    missing = corrupt(consts, lambda c: c.pop(f"{SYMBOL}_mrvl_const_2"))
    messages = je.check_pair(nodes, missing)
    assert any(
        m.startswith("$.nodes[3].attrs.kernel_const (FC") and "is not in the Constants-JSON" in m
        for m in messages
    ), messages
    skewed = corrupt(nodes, lambda d: d["nodes"][1]["attrs"]["kernel_const"].update(max="99"))
    messages = je.check_pair(skewed, consts)
    assert any("$.nodes[1].attrs.kernel_const" in m and ".max: '99'" in m for m in messages)


def test_write_json_refuses_invalid_documents(tmp_path, emitted):
    nodes, consts, _ = emitted
    bad = corrupt(nodes, lambda d: d["nodes"][1]["attrs"].pop("strides"))
    with pytest.raises(CompileError, match="'strides' is a required property"):
        je.write_json(tmp_path, SYMBOL, bad, consts)
    assert not list(tmp_path.iterdir())


def test_sum_concat_and_global_pool_nodes():
    """Sum2D takes both activations, Concat its axis in NHWC, a whole-plane pool is global."""
    from xdsl.dialects import func as xfunc
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Block, Region

    from mrvl.dialects import mrvl as m
    from mrvl.json_emitter import emit_json, validate

    t = m.tensor((1, 4, 4, 8), m.f32, "NHWC")
    block = Block(arg_types=[t, t])
    a, b = block.args
    add = m.AddOp(a, b, activation=m.activation("relu"))
    cat = m.ConcatOp([add.output, a], m.tensor((1, 4, 4, 16), m.f32, "NHWC"))
    gap = m.AvgPool2DOp(cat.output, m.tensor((1, 1, 1, 16), m.f32, "NHWC"), kernel=(4, 4))
    block.add_ops([add, cat, gap, xfunc.ReturnOp(gap.output)])
    fn = xfunc.FuncOp("r", ([t, t], [gap.output.type]), Region(block))
    nodes, consts = emit_json(ModuleOp([fn]), "r")
    validate(nodes, consts)
    layers = [n for n in nodes["nodes"] if n["op"] == "tvm_op"]
    assert [n["attrs"]["layer_name"][0] for n in layers] == ["Sum2D", "Concat", "GlobalAvgpool2D"]
    assert layers[0]["inputs"] == [[0, 0, 0], [1, 0, 0]]
    assert layers[0]["attrs"]["activation_type"] == ["relu"]
    assert layers[1]["attrs"]["axis"] == ["3"]
