"""int8 Add of a constant (issue 20, for issue 21's transformers): the bias Add after a
MatMul of a QDQ model (`DequantizeLinear(int8 bias) + x`, as `mrvl.quantize` writes a ViT's
or BERT's Linear) is a `qadd` of x and the bias's int8 values in the one int8 region
(`passes/graph/fold_qdq_constant_add.py`), within one step of onnxruntime; both engines give
the same bytes. A float constant (no int8 origin) keeps the Add on the CPU with its reason."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import float_model
from int8_builders import (
    assert_region_engines_agree,
    output_scale,
    qdq_build,
    steps_off_onnxruntime,
)
from onnx import helper as oh
from onnx import numpy_helper

import mrvl

TOKENS, WIDTH, OUT = 16, 32, 48


def bias_block(seed: int = 0) -> onnx.ModelProto:
    """x [1, TOKENS, WIDTH] -> MatMul (constant weights) -> + bias [OUT] -> Relu (opset 17)."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((WIDTH, OUT)) * 0.2).astype(np.float32), "w"),
        numpy_helper.from_array((rng.standard_normal(OUT) * 0.5).astype(np.float32), "b"),
    ]
    nodes = [
        oh.make_node("MatMul", ["x", "w"], ["h"], name="/fc/MatMul"),
        oh.make_node("Add", ["b", "h"], ["y0"], name="/fc/Add"),
        oh.make_node("Relu", ["y0"], ["y"], name="/relu/Relu"),
    ]
    x, y = ("x", [1, TOKENS, WIDTH]), ("y", [1, TOKENS, OUT])
    return float_model(nodes, inits, [x], [y], name="bias", opset=17, ir_version=8)


def feeds(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, TOKENS, WIDTH)).astype(np.float32)} for _ in range(count)]


@pytest.fixture(scope="module")
def bias_qdq():
    return mrvl.quantize(bias_block(), feeds(8, seed=1))


@pytest.fixture(scope="module")
def bias_build(bias_qdq):
    return qdq_build(bias_qdq, num_tiles=2)


def test_the_bias_add_is_a_qadd_in_the_one_region(bias_build):
    report, lib = bias_build
    assert len(report.regions) == 1 and not report.on_cpu(), report.summary()
    (add,) = [r for r in report.rows if r.op_type == "Add"]
    assert add.dtype == "int8", add
    (region,) = lib.mrvl_regions
    opcodes = [ins.opcode for ins in region.program.code]
    assert "qadd" in opcodes and "binary" not in opcodes, sorted(set(opcodes))


def test_the_bias_add_is_within_one_step_of_onnxruntime(bias_qdq, bias_build):
    _, lib = bias_build
    steps = steps_off_onnxruntime(bias_qdq, lib, feeds(4, seed=13), output_scale(bias_qdq))
    print(f"bias add: exact {(steps == 0).mean():.4f}, max {steps.max():.0f}")
    assert steps.max() <= 1, steps.max()


def test_the_bias_add_region_is_bit_identical_on_both_engines(bias_build):
    _, lib = bias_build
    assert_region_engines_agree(lib, [feeds(1, seed=5)[0]["x"]])


def test_an_add_of_a_float_constant_runs_in_fp16_between_edges_never_int8(bias_qdq):
    """The same QDQ model with the bias's DequantizeLinear replaced by a float initializer:
    an int8 add has no float operand, so the Add is not an int8 layer. It runs in fp16
    between the region's own dequant and quant (`qdq_binary.py`: fp16's error is within one
    step here) and is reported float16, never int8."""
    model = onnx.ModelProto()
    model.CopyFrom(bias_qdq)
    graph = model.graph
    dq = next(n for n in graph.node if n.output[0].startswith("b_"))
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    floats = (inits[dq.input[0]].astype(np.float32) - inits[dq.input[2]]) * inits[dq.input[1]]
    graph.node.remove(dq)
    graph.initializer.append(numpy_helper.from_array(floats.astype(np.float32), dq.output[0]))
    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=1))
    (add,) = [r for r in report.rows if r.op_type == "Add"]
    assert add.target != "cpu" and add.dtype == "float16", add
