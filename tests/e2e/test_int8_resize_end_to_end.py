"""int8 Resize end to end (issue 20): the bilinear and nearest Resizes of a QDQ model (from
onnxruntime's `quantize_static`) run as `qresize` in the one int8 region, within 3 steps of
onnxruntime running the same QDQ model (a step that one layer rounds differently may grow by
the next conv), and both engines give the same bytes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from int8_builders import (
    assert_region_engines_agree,
    output_scale,
    qdq_build,
    steps_off_onnxruntime,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "quantization"))
from qdq_models import calibration, quantize_static_qdq, resize_cnn  # noqa: E402

RESIZES = {"/up/Resize", "/near/Resize", "/down/Resize"}


@pytest.fixture(scope="module")
def resize_qdq():
    return quantize_static_qdq(resize_cnn())


@pytest.fixture(scope="module")
def resize_build(resize_qdq):
    return qdq_build(resize_qdq, num_tiles=8)


def test_int8_resizes_run_in_the_one_int8_region(resize_build):
    report, lib = resize_build
    assert len(report.regions) == 1, report.summary()
    rows = {r.node: r for r in report.rows}
    assert all(rows[n].dtype == "int8" for n in RESIZES), [rows[n] for n in RESIZES]
    assert {r.dtype for r in report.rows if r.offloaded} == {"int8"}
    (region,) = lib.mrvl_regions
    opcodes = [ins.opcode for ins in region.program.code]
    assert "qresize" in opcodes and "resize" not in opcodes


def test_int8_resizes_are_within_3_steps_of_onnxruntime(resize_qdq, resize_build):
    _, lib = resize_build
    off = steps_off_onnxruntime(resize_qdq, lib, calibration(4, seed=11), output_scale(resize_qdq))
    print(f"resize_cnn: exact {(off == 0).mean():.4f}, within 1 {(off <= 1).mean():.4f}")
    assert off.max() <= 3, off.max()  # DESIGN §9; each qresize alone is within 1 (sim tests)
    assert (off <= 1).mean() >= 0.99, (off <= 1).mean()


def test_int8_resize_region_is_bit_identical_on_both_engines(resize_build):
    _, lib = resize_build
    assert_region_engines_agree(lib, [calibration(1, seed=5)[0]["x"]])
