"""int8 layers of the zoo's QDQ forms beyond the small CNN's (issue 20): a Dropout between two
QDQ pairs, Caffe2's `Sum`, a per-channel affine (a BatchNormalization after a concat) and a
table activation fused into the layer before it. Each is a small `onnx.helper` model
quantized by `mrvl.quantize`, built in one region and run against onnxruntime on the same
QDQ model, in quantization steps of the output's scale."""

from __future__ import annotations

import sys
from pathlib import Path

import onnxruntime as ort
import tvm
from tvm import relax

import mrvl

sys.path.insert(0, str(Path(__file__).parents[1] / "quantization"))
from qdq_models import calibration, dropout_cnn  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_int8_end_to_end import steps  # noqa: E402


def build_and_compare(model, num_tiles: int = 1, inputs: int = 4):
    """The QDQ model's partition report and the largest step of its build's output from
    onnxruntime's on `inputs` seeded inputs."""
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=num_tiles)
    report = mrvl.partition_report(mod, model)
    vm = relax.VirtualMachine(mrvl.build(mod, target="llvm"), tvm.cpu())
    session = ort.InferenceSession(model.SerializeToString())
    worst = 0.0
    for x in calibration(inputs, seed=11):
        got = vm["main"](tvm.runtime.tensor(x["x"])).numpy()
        worst = max(worst, float(steps(model, got, session.run(None, x)[0]).max()))
    return report, worst


def test_dropout_between_qdq_pairs_stays_in_the_region():
    """Regression (light SqueezeNet's QDQ form): Q -> DQ -> Dropout -> Q -> DQ leaves a
    dequantize read by a quantize once TVM drops the Dropout. That pair was checked as a
    layer between them ("a quantized layer with a float input"), left on the CPU, and the
    next region then took an int8 tensor ("... int8 is not a float32 tensor"). Now the pair
    is in the region (`mrvl-fold-qdq` cancels it) and the model is one int8 region."""
    model = mrvl.quantize(dropout_cnn(), calibration(16, seed=2))
    report, worst = build_and_compare(model)
    assert len(report.regions) == 1, report
    assert report.int8_mac_fraction == 1.0
    assert not report.on_cpu()
    assert worst <= 1, worst
