"""`mrvl.partition_report`: every ONNX node, where it runs, why not on the MLIP, its MACs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tvm
from onnx import helper, numpy_helper

from mrvl.frontend import from_onnx
from mrvl.partition import partition_for_mrvl
from mrvl.placement import placement
from mrvl.report import FOLDED_REASON, partition_report


def reference_macs(model: onnx.ModelProto) -> dict[str, int]:
    """MACs per node from ONNX shape inference: conv N·OH·OW·O·KH·KW·C/g, Gemm/MatMul N·K·O."""
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
    }
    shapes.update({i.name: list(i.dims) for i in model.graph.initializer})
    macs = {}
    for node in model.graph.node:
        if node.op_type == "Conv":
            n, o, oh, ow = shapes[node.output[0]]
            _, c_per_group, kh, kw = shapes[node.input[1]]
            macs[node.name] = n * oh * ow * o * kh * kw * c_per_group
        elif node.op_type in ("Gemm", "MatMul"):
            n, o = shapes[node.output[0]]
            macs[node.name] = n * shapes[node.input[0]][1] * o
        else:
            macs[node.name] = 0
    return macs


def test_mnist_report(mnist_model, mnist_partitioned):
    report = partition_report(mnist_partitioned, mnist_model)
    assert [(r.node, r.op_type) for r in report.rows] == [
        (n.name, n.op_type) for n in mnist_model.graph.node
    ]
    assert {r.node: r.macs for r in report.rows} == reference_macs(mnist_model)
    assert report.rows[0].macs == 1 * 28 * 28 * 64 * 3 * 3 * 1
    *offloaded, softmax = report.rows
    assert {r.target for r in offloaded} == {"mrvl_region_0"}
    assert all(r.reason is None for r in offloaded)
    assert (softmax.target, softmax.reason) == ("cpu", "final softmax kept on the CPU in fp32 (nothing on the MLIP reads it)")
    assert report.offloaded_mac_fraction == 1.0
    assert report.regions == ["mrvl_region_0"]


def test_report_without_the_model_reads_the_recorded_nodes(mnist_model, mnist_partitioned):
    assert (
        partition_report(mnist_partitioned).rows
        == partition_report(mnist_partitioned, mnist_model).rows
    )


def test_report_needs_a_model_when_nothing_is_recorded(mnist_partitioned):
    bare = tvm.IRModule(dict(mnist_partitioned.functions_items()))
    with pytest.raises(ValueError, match="pass the ONNX model"):
        partition_report(bare)


def test_report_prints_a_table(mnist_partitioned):
    text = str(partition_report(mnist_partitioned))
    lines = text.splitlines()
    assert lines[0].split() == [
        "ONNX",
        "node",
        "op",
        "runs",
        "on",
        "dtype",
        "MACs",
        "why",
        "not",
        "on",
        "the",
        "MLIP",
    ]
    assert any(
        line.startswith("/conv1/Conv") and "float16" in line and "451,584" in line for line in lines
    )
    assert "final softmax kept on the CPU in fp32 (nothing on the MLIP reads it)" in lines[-2]
    assert lines[-1] == (
        "10 of 11 ONNX nodes on the MLIP in 1 region(s), 1 on the CPU; "
        "4,468,224 of 4,468,224 MACs (100.0 %) on the MLIP"
    )


def test_placement_agrees_with_the_report(mnist_model, mnist_partitioned):
    rows = partition_report(mnist_partitioned, mnist_model).rows
    assert [(p.node, p.op_type, p.target) for p in placement(mnist_partitioned, mnist_model)] == [
        (r.node, r.op_type, r.target) for r in rows
    ]


def conv_bn_relu_net(onnx_model):
    """conv+BN+relu twice, then a global pool and a Gemm: ResNet's shape in miniature."""
    rng = np.random.default_rng(1)

    def w(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    def bn(i, out, name):
        return helper.make_node("BatchNormalization", [i, "g", "b", "m", "v"], [out], name=name)

    nodes = [
        helper.make_node(
            "Conv", ["x", "w1"], ["c1"], name="/conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]
        ),
        bn("c1", "n1", "/bn1"),
        helper.make_node("Relu", ["n1"], ["r1"], name="/relu1"),
        helper.make_node(
            "Conv",
            ["r1", "w2"],
            ["c2"],
            name="/conv2",
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            group=2,
        ),
        bn("c2", "n2", "/bn2"),
        helper.make_node("Relu", ["n2"], ["r2"], name="/relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="/gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="/flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="/fc", transB=1),
    ]
    inits = [
        w("w1", 8, 3, 3, 3),
        w("w2", 8, 4, 3, 3),
        w("g", 8),
        w("b", 8),
        w("m", 8),
        numpy_helper.from_array(rng.uniform(0.5, 2, 8).astype(np.float32), "v"),
        w("wf", 10, 8),
        w("bf", 10),
    ]
    return onnx_model(nodes, {"x": [4, 3, 16, 16]}, {"y": [4, 10]}, inits)


def test_conv_bn_relu_net_is_one_region(onnx_model):
    model = conv_bn_relu_net(onnx_model)
    report = partition_report(partition_for_mrvl(from_onnx(model)), model)
    assert {r.target for r in report.rows} == {"mrvl_region_0"}
    macs = {r.node: r.macs for r in report.rows}
    assert macs == reference_macs(model)
    assert macs["/conv1"] == 4 * 16 * 16 * 8 * 3 * 3 * 3
    assert macs["/conv2"] == 4 * 8 * 8 * 8 * 3 * 3 * 4
    assert macs["/fc"] == 4 * 8 * 10
    assert report.offloaded_mac_fraction == 1.0


def test_fraction_with_a_denied_conv(onnx_model):
    model = conv_bn_relu_net(onnx_model)
    mod = partition_for_mrvl(from_onnx(model), deny_nodes=["/conv2"])
    report = partition_report(mod)
    by_node = {r.node: r for r in report.rows}
    assert [n for n, r in by_node.items() if r.target == "cpu"] == ["/conv2", "/bn2", "/relu2"]
    assert by_node["/conv2"].reason == "denied by user (deny_nodes)"
    assert by_node["/bn2"].reason == "denied by user (deny_nodes) (at /conv2)"
    macs = reference_macs(model)
    assert report.total_macs == sum(macs.values())
    assert report.offloaded_mac_fraction == pytest.approx(1 - macs["/conv2"] / sum(macs.values()))
    assert len(report.regions) == 2


def test_folded_nodes(onnx_model):
    nodes = [
        helper.make_node(
            "Constant",
            [],
            ["k"],
            name="/k",
            value=numpy_helper.from_array(np.ones((1, 2), np.float32)),
        ),
        helper.make_node("Identity", ["x"], ["i"], name="/id"),
        helper.make_node("Pow", ["i", "k"], ["y"], name="/pow"),
    ]
    model = onnx_model(nodes, {"x": [1, 2]}, {"y": [1, 2]})
    report = partition_report(partition_for_mrvl(from_onnx(model)))
    assert [(r.node, r.target, r.reason) for r in report.rows] == [
        ("/k", "folded", FOLDED_REASON),
        ("/id", "folded", FOLDED_REASON),
        ("/pow", "cpu", "Pow by a non-scalar exponent"),
    ]
    assert report.offloaded_mac_fraction == 0.0


def test_mrvlc_report(mnist_model, tmp_path, capsys):
    from mrvl.tools.mrvlc import main

    path = tmp_path / "mnist.onnx"
    onnx.save(mnist_model, path)
    assert main([str(path), "--report"]) == 0
    out = capsys.readouterr().out
    assert "/softmax/Softmax" in out and "final softmax kept on the CPU in fp32 (nothing on the MLIP reads it)" in out
    assert out.strip().endswith("(100.0 %) on the MLIP")
    assert not (tmp_path / "model.so").exists()
