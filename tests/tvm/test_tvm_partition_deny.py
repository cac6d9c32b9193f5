"""`mrvl.partition_for_mrvl`'s `deny_nodes`, `deny_ops` and `require_mac_layer`, and which
layer an affine step fuses into."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from partition_builders import (
    CONV_W,
    X4,
    bindings,
    composite_names,
    composites,
    conv,
    host_ops,
    layer_ops,
    node,
    partitioned,
    rand,
    reason,
    regions,
)
from tvm import relax

from mrvl.frontend import node_name_of
from mrvl.partition import partition_for_mrvl

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
