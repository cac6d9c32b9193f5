"""MobileFaceNet's embedding tail in int8 (issue 20): a MatMul to the embedding [N, C], then
a BatchNormalization of that rank-2 tensor, between a dequantize and a quantize. No int8
table computes a per-channel affine, but a depthwise 1x1 int8 conv does, and [N, C] is
[N, 1, 1, C] in NHWC (`passes/graph/fold_qdq_affine.py`): one int8 region, within 1 step of
onnxruntime running the same QDQ model, and the same bytes on both engines.

Then its L2 normalization, x / ReduceL2(x), which the quantizer leaves in float after the
last quantize: it runs in the same region in fp16 (`qdq_float_tail.py`), as in the float
model, within fp16's error of onnxruntime's fp32."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from helpers import float_model
from int8_builders import (
    assert_region_engines_agree,
    output_scale,
    qdq_build,
    steps_off_onnxruntime,
)
from onnx import helper as oh
from onnx import numpy_helper
from tvm import relax

import mrvl
from mrvl.accuracy import reference_session

FEATURES, WIDTH = 24, 16


def embedding_tail(seed: int = 0, normalized: bool = False):
    """x [1, FEATURES] -> MatMul to [1, WIDTH] -> BatchNormalization (rank 2) -> y; with
    `normalized`, y / ReduceL2(y) is the output."""
    rng = np.random.default_rng(seed)

    def constant(name, values):
        return numpy_helper.from_array(np.asarray(values, np.float32), name)

    inits = [
        constant("w", rng.standard_normal((FEATURES, WIDTH)) * FEATURES**-0.5),
        constant("gamma", rng.uniform(0.5, 2.0, WIDTH)),
        constant("beta", rng.uniform(-0.5, 0.5, WIDTH)),
        constant("mean", rng.uniform(-0.3, 0.3, WIDTH)),
        constant("var", rng.uniform(0.2, 2.0, WIDTH)),
    ]
    nodes = [
        oh.make_node("MatMul", ["x", "w"], ["e"], name="/linear/MatMul"),
        oh.make_node(
            "BatchNormalization", ["e", "gamma", "beta", "mean", "var"], ["y"], name="/bn"
        ),
    ]
    if normalized:
        nodes[-1].output[0] = "b"
        nodes += [
            oh.make_node("ReduceL2", ["b"], ["n"], name="/ReduceL2", axes=[1], keepdims=1),
            oh.make_node("Div", ["b", "n"], ["y"], name="/Div"),
        ]
    return float_model(
        nodes, inits, [("x", [1, FEATURES])], [("y", [1, WIDTH])], name="embedding", opset=17
    )


def feeds(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, FEATURES)).astype(np.float32)} for _ in range(count)]


@pytest.fixture(scope="module")
def embedding_build():
    qdq = mrvl.quantize(embedding_tail(), feeds(16, seed=1))
    return (qdq, *qdq_build(qdq, num_tiles=1))


def test_rank_2_batch_norm_is_an_int8_depthwise_conv(embedding_build):
    _, report, lib = embedding_build
    assert len(report.regions) == 1 and not report.on_cpu(), report.summary()
    rows = {r.node: r.dtype for r in report.rows}
    assert rows["/bn"] == "int8", rows
    (region,) = lib.mrvl_regions
    opcodes = [i.opcode for i in region.program.code]
    assert "qconv" in opcodes, opcodes


def test_rank_2_batch_norm_is_within_one_step_of_onnxruntime(embedding_build):
    qdq, _, lib = embedding_build
    steps = steps_off_onnxruntime(qdq, lib, feeds(8, seed=7), output_scale(qdq))
    print(f"rank-2 bn: exact {(steps == 0).mean():.4f}, max {steps.max():.0f}")
    assert steps.max() <= 1, steps.max()


def test_rank_2_batch_norm_is_bit_identical_on_both_engines(embedding_build):
    _, _, lib = embedding_build
    assert_region_engines_agree(lib, [feeds(1, seed=5)[0]["x"]])


def test_l2_normalization_after_the_last_quantize_runs_in_fp16_in_the_region():
    qdq = mrvl.quantize(embedding_tail(normalized=True), feeds(16, seed=1))
    assert not any(n.op_type == "QuantizeLinear" and "n" in n.input for n in qdq.graph.node)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(qdq), num_tiles=1)
    report = mrvl.partition_report(mod, qdq)
    assert len(report.regions) == 1 and not report.on_cpu(), report.summary()
    rows = {r.node: r.dtype for r in report.rows}
    assert rows["/bn"] == "int8" and rows["/ReduceL2"] == rows["/Div"] == "float16", rows
    vm = relax.VirtualMachine(mrvl.build(mod, target="llvm", num_tiles=1), tvm.cpu())
    session = reference_session(qdq)
    for f in feeds(4, seed=7):
        got = vm["main"](tvm.runtime.tensor(f["x"])).numpy()
        want = session.run(None, f)[0]
        # |y| <= 1: f16 roundings of x, of the norm and of the quotient, 2^-11 each
        assert np.abs(got - want).max() <= 3 * 2.0**-11, np.abs(got - want).max()
