"""Data movement and row tiling on the MLIP, end to end against onnxruntime: FC over many
rows, Slice / Split / Concat on any axis, reshape / transpose as strided copies (channel
shuffle, detection heads), nearest and bilinear Resize, ConvTranspose. Each model is built
in code, must be offloaded whole (in one region), and must pass the fp16 acceptance rule."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax

import mrvl
from mrvl.accuracy import fp16_agreement

from helpers import onnxruntime_outputs

node = helper.make_node


def const(rng, name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def floats(name, values):
    return numpy_helper.from_array(np.array(values, np.float32), name)


def model(nodes, inits, inputs, outputs, opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "shapes",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10 if opset >= 11 else 7
    onnx.checker.check_model(m)
    return m


def check_offloaded_and_accurate(onnx_model, *, num_tiles=8, regions=1, seed=0):
    """Partition (everything offloaded, in `regions` regions), build, run, and compare every
    output with onnxruntime under the fp16 rule."""
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model), num_tiles=num_tiles)
    report = mrvl.partition_report(mod)
    on_cpu = [(r.node, r.reason) for r in report.rows if r.target == "cpu"]
    assert on_cpu == [], f"kept on the CPU: {on_cpu}"
    used = {r.target for r in report.rows if r.offloaded}
    assert len(used) == regions, f"regions {sorted(used)}"
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
