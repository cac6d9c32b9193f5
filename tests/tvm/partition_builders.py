"""Builders of the partitioning tests: small ONNX graphs, and what a partitioned module holds
(its regions, their composites and ops, the host's ops, the report's reasons)."""

from __future__ import annotations

import numpy as np
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax

from mrvl.frontend import from_onnx
from mrvl.partition import partition_for_mrvl
from mrvl.report import partition_report


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
