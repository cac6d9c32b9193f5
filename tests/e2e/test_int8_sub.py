"""int8 Sub (issue 20): a quantized Sub of two tensors of one shape runs as `qadd` of the first
and the second negated by a table (`passes/graph/fold_qdq_sub.py`), in the one int8 region,
within one step of onnxruntime on the same QDQ model; both engines give the same bytes. A
Sub that broadcasts stays on the CPU with its reason (never in fp16)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from int8_builders import (
    assert_region_engines_agree,
    output_scale,
    qdq_build,
    steps_off_onnxruntime,
)
from onnx import helper as oh

import mrvl
from mrvl import int8
from mrvl.dialects.mrvl import QuantAttr
from mrvl.passes.graph.fold_qdq_sub import NEGATION, negated_quant

sys.path.insert(0, str(Path(__file__).parents[1] / "quantization"))
from qdq_models import _model, _weights, calibration, quantize_static_qdq  # noqa: E402


@pytest.mark.parametrize("zero", [-128, -1, 0, 5, 127])
def test_the_negation_table_is_exact_at_every_zero_point(zero):
    """-q - 1 at zero point -z - 1 dequantizes to minus q at z, for all 256 int8 values."""
    quant = QuantAttr(0.0625, zero)
    q = np.arange(int8.INT8_MIN, int8.INT8_MAX + 1)
    negated = negated_quant(quant)
    assert -128 <= negated.values[1] <= 127
    assert NEGATION.min() >= int8.INT8_MIN and NEGATION.max() <= int8.INT8_MAX
    np.testing.assert_array_equal(
        int8.dequantize_linear(NEGATION, *negated.values),
        -int8.dequantize_linear(q, *quant.values),
    )


def _sub_cnn(broadcast: bool = False):
    """Two convs of x, their difference (or the first minus the second's channel mean, a
    broadcast), as a QDQ model."""
    weight = _weights(0)
    inits = [
        weight("w1", (8, 3, 3, 3), 0.3),
        weight("b1", (8,), 0.1),
        weight("w2", (8 if not broadcast else 1, 3, 3, 3), 0.3),
        weight("b2", (8 if not broadcast else 1,), 0.1),
    ]
    nodes = [
        oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="/c1/Conv", pads=[1, 1, 1, 1]),
        oh.make_node("Conv", ["x", "w2", "b2"], ["c2"], name="/c2/Conv", pads=[1, 1, 1, 1]),
        oh.make_node("Sub", ["c1", "c2"], ["y"], name="/sub/Sub"),
    ]
    model = _model("sub_cnn", nodes, inits, out_shape=(1, 8, 16, 16))
    return quantize_static_qdq(model, op_types_to_quantize=["Conv", "Sub"])


@pytest.fixture(scope="module")
def sub_build():
    qdq = _sub_cnn()
    return (qdq, *qdq_build(qdq, num_tiles=1))


def test_int8_sub_is_a_table_and_a_qadd_in_the_one_region(sub_build):
    _, report, lib = sub_build
    assert len(report.regions) == 1 and not report.on_cpu(), report.summary()
    (sub,) = [r for r in report.rows if r.op_type == "Sub"]
    assert sub.dtype == "int8", sub
    (region,) = lib.mrvl_regions
    opcodes = [ins.opcode for ins in region.program.code]
    assert "qadd" in opcodes and "requant" in opcodes and "binary" not in opcodes, opcodes


def test_int8_sub_is_within_one_step_of_onnxruntime(sub_build):
    qdq, _, lib = sub_build
    steps = steps_off_onnxruntime(qdq, lib, calibration(4, seed=13), output_scale(qdq))
    print(f"sub_cnn: exact {(steps == 0).mean():.4f}, max {steps.max():.0f}")
    assert steps.max() <= 1, steps.max()  # qadd: within one step (docs/isa.md)


def test_int8_sub_region_is_bit_identical_on_both_engines(sub_build):
    _, _, lib = sub_build
    assert_region_engines_agree(lib, [calibration(1, seed=5)[0]["x"]])


def test_an_int8_sub_that_broadcasts_stays_on_the_cpu_with_its_reason():
    qdq = _sub_cnn(broadcast=True)
    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(qdq), num_tiles=1))
    rows = {r.node: r for r in report.rows}
    assert rows["/sub/Sub"].target == "cpu", rows["/sub/Sub"]
    assert "int8 sub of two shapes" in rows["/sub/Sub"].reason, rows["/sub/Sub"].reason
