"""QDQ models in Relax (`mrvl/qdq.py`): the dequantized constants keep their integers, and a
quantized layer is never run in fp16: it is an int8 layer the MLIP runs exactly, or it stays
on the CPU with its reason (uint8 or asymmetric weights, ...)."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from onnx import numpy_helper
from qdq_models import INPUT_SHAPE, quantize_static_qdq, small_cnn
from tvm import relax

import mrvl
from mrvl import qdq
from mrvl.accuracy import reference_session


@pytest.fixture(scope="module")
def qdq_model():
    return quantize_static_qdq(small_cnn())


@pytest.fixture(scope="module")
def imported(qdq_model):
    return mrvl.from_onnx(qdq_model)


def _layer_rows(report):
    return {
        r.node: r for r in report.rows if r.op_type not in ("QuantizeLinear", "DequantizeLinear")
    }


def test_dequantized_constants_keep_their_integers(qdq_model, imported):
    inits = {i.name: numpy_helper.to_array(i) for i in qdq_model.graph.initializer}
    origins = qdq.quantized_constants(imported)
    weights = {o.values.shape: o for o in origins.values() if o.dtype == "int8"}
    for name in ("w1", "w2", "wf"):
        values = inits[f"{name}_quantized"]
        origin = weights[values.shape]
        assert np.array_equal(origin.values, values)
        assert np.array_equal(origin.scale, inits[f"{name}_scale"])
        assert origin.axis == (1 if name == "wf" else 0)  # Gemm's [K, O]: output channels last
    # the folded floats are exactly what DequantizeLinear computes
    for const, origin in origins.items():
        scale = qdq._along(origin.scale, origin.axis, origin.values.ndim)
        zero = qdq._along(origin.zero_point, origin.axis, origin.values.ndim)
        assert np.array_equal(const.value.numpy(), qdq.dequantized(origin.values, scale, zero))


def test_imported_qdq_model_computes_what_onnxruntime_does(qdq_model, imported):
    """The numpy fold of the constants' DequantizeLinear changes nothing TVM computes."""
    x = np.random.default_rng(5).standard_normal(INPUT_SHAPE).astype(np.float32)
    want = reference_session(qdq_model).run(None, {"x": x})[0]
    ex = tvm.compile(imported, target="llvm")
    got = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    scale = 0.0073105855844914913  # the output's quantization step (y_scale)
    assert np.abs(got - want).max() <= 1.5 * scale


def test_quantized_layers_run_in_int8(imported):
    part = mrvl.partition_for_mrvl(imported, num_tiles=1)
    report = mrvl.partition_report(part)
    rows = _layer_rows(report)
    for node in ("/conv1/Conv", "/conv2/Conv", "/add/Add", "/pool/GlobalAveragePool", "/fc/Gemm"):
        assert rows[node].target == "mrvl_region_0" and rows[node].dtype == "int8", rows[node]
    assert report.int8_mac_fraction == 1.0
    assert "100.0 % in int8" in report.summary()


def test_a_kind_not_lowered_in_int8_stays_on_the_cpu(imported, monkeypatch):
    """A quantized layer whose kind has no int8 lowering is never run in fp16 instead."""
    monkeypatch.setattr(qdq, "INT8_READY", qdq.INT8_READY - {"add"})
    part = mrvl.partition_for_mrvl(imported, num_tiles=1)
    row = _layer_rows(mrvl.partition_report(part))["/add/Add"]
    assert row.target == "cpu" and row.dtype is None
    assert row.reason == qdq.NOT_LOWERED.format(kind="add")


def test_float_model_is_partitioned_as_before():
    part = mrvl.partition_for_mrvl(mrvl.from_onnx(small_cnn()), num_tiles=1)
    report = mrvl.partition_report(part)
    assert len(report.regions) == 1 and not report.on_cpu()
    assert {r.dtype for r in report.rows if r.offloaded} == {"float16"}
    assert report.int8_mac_fraction == 0.0


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        # uint8 activations are int8 ones with the zero point moved: the weights decide
        ({"weight_type": "QUInt8", "activation_type": "QUInt8"}, "uint8 weights"),
        (
            {"per_channel": False, "extra_options": {"WeightSymmetric": False}},
            "asymmetric weights",
        ),
    ],
)
def test_forms_the_mlip_cannot_run_stay_on_the_cpu(options, reason):
    from onnxruntime.quantization import QuantType

    options = {k: getattr(QuantType, v) if k.endswith("_type") else v for k, v in options.items()}
    model = quantize_static_qdq(small_cnn(), **options)
    part = mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=1)
    rows = _layer_rows(mrvl.partition_report(part))
    for node in ("/conv1/Conv", "/conv2/Conv", "/fc/Gemm"):
        assert rows[node].target == "cpu"
        assert reason in rows[node].reason, rows[node].reason


def test_a_classifier_is_one_region_with_its_softmax_in_fp16_on_the_mlip():
    """A quantized Softmax runs on the MLIP between the region's own dequant and quant
    (`qdq.FP16_BETWEEN_EDGES`): the classifier is one region with nothing on the CPU, the
    Softmax reported fp16 (no int8 instruction computes it), its QDQ pair in the region."""
    model = quantize_static_qdq(small_cnn(softmax=True))
    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=1))
    assert len(report.regions) == 1
    assert not report.on_cpu(), report.on_cpu()
    rows = {r.node: r for r in report.rows}
    assert rows["/Softmax"].dtype == "float16", rows["/Softmax"]
    assert rows["/fc/Gemm"].dtype == "int8", rows["/fc/Gemm"]
