"""An activation and a pool that the quantizer leaves in float between int8 layers (issue 20:
PP-OCRv3-rec's last HardSwish and the AveragePool after it; onnxruntime's QDQ quantizer
quantizes neither): both run in fp16 between the region's own dequant and quant
(`qdq_float_activation.py`), reported fp16, in the one int8 region, within one step of
onnxruntime running the same QDQ model."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from helpers import float_model
from onnx import helper as oh
from onnx import numpy_helper
from tvm import relax

import mrvl
from mrvl.accuracy import reference_session

SHAPE = [1, 8, 6, 10]


def conv_hardswish_pool(seed: int = 0, activation: str = "HardSwish"):
    """conv -> `activation` -> AveragePool (3x2 window, stride 3x2) -> conv -> y."""
    rng = np.random.default_rng(seed)

    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [weight("w1", (16, 8, 1, 1)), weight("b1", (16,)), weight("w2", (8, 16, 1, 1))]
    nodes = [
        oh.make_node("Conv", ["x", "w1", "b1"], ["c"], name="/conv1"),
        oh.make_node(activation, ["c"], ["a"], name="/act"),
        oh.make_node(
            "AveragePool", ["a"], ["p"], name="/pool", kernel_shape=[3, 2], strides=[3, 2]
        ),
        oh.make_node("Conv", ["p", "w2"], ["y"], name="/conv2"),
    ]
    return float_model(
        nodes, inits, [("x", SHAPE)], [("y", [1, 8, 2, 5])], name="hswish_pool", opset=17
    )


def feeds(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(count)]


@pytest.fixture(scope="module")
def hswish_qdq():
    qdq = mrvl.quantize(conv_hardswish_pool(), feeds(16, seed=1))
    quantized = {n.input[0] for n in qdq.graph.node if n.op_type == "QuantizeLinear"}
    assert "a" not in quantized and "p" in quantized  # the chain the quantizer leaves float
    return qdq


def test_hardswish_and_pool_left_in_float_run_in_fp16_in_the_region(hswish_qdq):
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(hswish_qdq), num_tiles=1)
    report = mrvl.partition_report(mod, hswish_qdq)
    assert len(report.regions) == 1 and not report.on_cpu(), report.summary()
    rows = {r.node: r.dtype for r in report.rows}
    assert rows["/act"] == rows["/pool"] == "float16", rows
    assert rows["/conv1"] == rows["/conv2"] == "int8", rows
    vm = relax.VirtualMachine(mrvl.build(mod, target="llvm", num_tiles=1), tvm.cpu())
    session = reference_session(hswish_qdq)
    inits = {i.name: numpy_helper.to_array(i) for i in hswish_qdq.graph.initializer}
    pool_q = next(
        n for n in hswish_qdq.graph.node if n.op_type == "QuantizeLinear" and "p" in n.input
    )
    out_dq = next(n for n in hswish_qdq.graph.node if "y" in n.output)
    scale = float(inits[out_dq.input[1]])
    worst = 0.0
    for f in feeds(4, seed=7):
        got = vm["main"](tvm.runtime.tensor(f["x"])).numpy()
        worst = max(worst, float(np.rint(np.abs(got - session.run(None, f)[0]) / scale).max()))
    print(f"hardswish + pool in fp16: max {worst:.0f} steps (pool at {inits[pool_q.input[1]]})")
    assert worst <= 1, worst
