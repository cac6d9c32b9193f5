"""A quantized ReduceMean in int8 code (issue 20): no int8 instruction reduces a row, so it
runs in fp16 between the region's own dequant and quant (`mrvl/qdq_reduce.py`), reported as
fp16; zoo TC-ResNet8's mean over time was on the CPU, its QDQ form 2 regions."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tvm
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from tvm import relax

import mrvl
from mrvl.accuracy import reference_session
from mrvl.qdq import TensorQuant
from mrvl.qdq_reduce import reduce_error_in_steps


def _conv1d_mean(seed: int = 0) -> onnx.ModelProto:
    """TC-ResNet's tail in small: Conv1d -> Relu -> ReduceMean over time -> Gemm."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((16, 8, 3)) * 0.3).astype("f4"), "w"),
        numpy_helper.from_array((rng.standard_normal((4, 16)) * 0.3).astype("f4"), "fc"),
    ]
    nodes = [
        oh.make_node("Conv", ["x", "w"], ["c"], name="/conv/Conv", pads=[1, 1]),
        oh.make_node("Relu", ["c"], ["r"], name="/relu/Relu"),
        oh.make_node("ReduceMean", ["r"], ["m"], name="/pool/ReduceMean", axes=[2], keepdims=0),
        oh.make_node("Gemm", ["m", "fc"], ["y"], name="/fc/Gemm", transB=1),
    ]
    graph = oh.make_graph(
        nodes,
        "conv1d_mean",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 40])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        inits,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_int8_mean_over_time_runs_on_the_mlip_in_fp16_between_edges():
    rng = np.random.default_rng(6)
    feeds = [{"x": rng.standard_normal((1, 8, 40)).astype(np.float32)} for _ in range(4)]
    qdq = mrvl.quantize(_conv1d_mean(), feeds)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(qdq), num_tiles=1)
    report = mrvl.partition_report(mod, qdq)
    assert len(report.regions) == 1 and not report.on_cpu(), report.summary()
    rows = {r.node: r for r in report.rows}
    assert rows["/pool/ReduceMean"].dtype == "float16", rows["/pool/ReduceMean"]
    assert rows["/conv/Conv"].dtype == "int8", rows["/conv/Conv"]  # a Conv1d folds too
    lib = mrvl.build(mod, target="llvm")
    x = feeds[0]["x"]
    got = relax.VirtualMachine(lib, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    (want,) = reference_session(qdq).run(None, {"x": x})
    inits = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    producer = {o: n for n in qdq.graph.node for o in n.output}
    scale = float(inits[producer["y"].input[1]])
    assert np.rint(np.abs(got.astype(np.float64) - want) / scale).max() <= 2


def test_reduce_error_bound():
    quant = TensorQuant(0.1, 0)
    # |x| = |y| = 12.8: (12.8 (2^-11 + 40 * 2^-24) + 12.8 * 2^-11) / 0.1 steps
    want = (12.8 * (2.0**-11 + 40 * 2.0**-24) + 12.8 * 2.0**-11) / 0.1
    assert reduce_error_in_steps(40, quant, quant) == pytest.approx(want)
    assert reduce_error_in_steps(40, TensorQuant(1.0, 0), TensorQuant(0.01, 0)) > 1
