"""`mrvl.quantize`: post-training quantization of a float ONNX model to a QDQ model.

The calibration and the QDQ writer are onnxruntime's (`quantize_static`); what this module
adds is the form the MLIP runs exactly, and the checks that make bad input one clear error:

- weights: int8, symmetric (zero point 0), one scale per output channel (`per_channel`);
- activations: int8 with a zero point (asymmetric), one scale per tensor;
- biases: int32 at the scale s_in * s_w, which onnxruntime's QDQ writer gives a bias of a
  Conv or Gemm whose input and weight are quantized.

Each BatchNormalization that follows a Conv is folded into it first (`batchnorm_folding`), as
onnxruntime's pre-processing does: the pair is then one int8 layer; each Sum of more than two inputs is made a chain of two-input Sums
(`sum_splitting`), each an int8 add. A model below opset 13 is first converted to opset 13 (`onnx.version_converter`): the
per-channel DequantizeLinear of its weights needs the `axis` that opset 13 gave it, and the
ONNX checker refuses it below.

Calibration data is an array with a leading batch axis (a model with one input), a dict of
such arrays keyed by input name, or an iterable of feed dicts; every feed is checked against
the model's inputs (names, shapes after the batch axis, dtypes) before calibration starts, so
nothing is half done when one is wrong. Layers named in `keep_fp16` are left unquantized.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mrvl.errors import MrvlError

METHODS = ("minmax", "entropy", "percentile")
"""Calibration methods: onnxruntime's calibrators of the same names."""

_CALIBRATOR_OPTIONS = {
    "minmax": {},
    # onnxruntime's defaults for entropy (128 histogram bins for 128 quantized bins) leave the
    # threshold search nothing to choose from, so it returns the min-max range; TensorRT's
    # entropy calibration, which it follows, uses 2048 bins.
    "entropy": {"num_bins": 2048, "num_quantized_bins": 128},
    # the tails of each side apart (its default folds them into one symmetric range, which
    # wastes half of int8 on a ReLU's output)
    "percentile": {"num_bins": 2048, "percentile": 99.999, "symmetric": False},
}


class QuantizeError(MrvlError, ValueError):
    """The model cannot be quantized as asked: bad calibration data, an unknown node, ..."""


Feeds = dict[str, np.ndarray]


def _model_inputs(model) -> dict[str, tuple[tuple[int | None, ...], np.dtype]]:
    """The model's runtime inputs: name -> (shape with None for a dynamic dim, dtype)."""
    import onnx

    initializers = {i.name for i in model.graph.initializer}
    inputs = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        inputs[value.name] = (shape, dtype)
    return inputs


def _batched(name: str, array: Any) -> np.ndarray:
    try:
        array = np.asarray(array)
    except (TypeError, ValueError) as err:
        raise QuantizeError(f"calibration data for '{name}' is not an array ({err})") from None
    if array.ndim == 0 or array.shape[0] == 0:
        raise QuantizeError(f"calibration data for '{name}' has no samples (shape {array.shape})")
    return array


def calibration_feeds(model, calibration: Any) -> list[Feeds]:
    """Every calibration feed, checked against the model's inputs (QuantizeError if not)."""
    inputs = _model_inputs(model)
    if isinstance(calibration, np.ndarray):
        if len(inputs) != 1:
            raise QuantizeError(
                f"the model has {len(inputs)} inputs ({', '.join(inputs)}): give the "
                "calibration data as a dict of arrays keyed by input name"
            )
        calibration = {next(iter(inputs)): calibration}
    if isinstance(calibration, Mapping):
        arrays = {name: _batched(name, array) for name, array in calibration.items()}
        counts = {name: len(array) for name, array in arrays.items()}
        if len(set(counts.values())) > 1:
            raise QuantizeError(f"calibration arrays differ in their sample counts: {counts}")
        count = next(iter(counts.values()), 0)
        feeds: Iterable[Feeds] = (
            {name: array[i : i + 1] for name, array in arrays.items()} for i in range(count)
        )
    elif isinstance(calibration, Iterable) and not isinstance(calibration, str | bytes):
        feeds = calibration
    else:
        raise QuantizeError(
            "calibration data is an array, a dict of arrays keyed by input name, or an "
            f"iterable of feed dicts, not {type(calibration).__name__}"
        )
    checked = [_checked_feed(feed, inputs, k) for k, feed in enumerate(feeds)]
    if not checked:
        raise QuantizeError("the calibration set is empty")
    return checked


def _checked_feed(feed: Any, inputs, k: int) -> Feeds:
    if not isinstance(feed, Mapping):
        raise QuantizeError(f"calibration feed {k} is a {type(feed).__name__}, not a dict")
    unknown = sorted(set(feed) - set(inputs))
    missing = sorted(set(inputs) - set(feed))
    if unknown:
        raise QuantizeError(
            f"calibration feed {k} names {', '.join(map(repr, unknown))}, which the model "
            f"does not have (its inputs: {', '.join(inputs)})"
        )
    if missing:
        raise QuantizeError(f"calibration feed {k} lacks input {', '.join(map(repr, missing))}")
    out = {}
    for name, (shape, dtype) in inputs.items():
        value = np.asarray(feed[name])
        if value.ndim != len(shape) or any(
            want is not None and got != want for got, want in zip(value.shape, shape)
        ):
            want = "x".join("?" if d is None else str(d) for d in shape)
            raise QuantizeError(
                f"calibration feed {k}: input '{name}' has shape {value.shape}, the model "
                f"wants {want}"
            )
        if not np.can_cast(value.dtype, dtype, casting="same_kind"):
            raise QuantizeError(
                f"calibration feed {k}: input '{name}' is {value.dtype}, the model wants {dtype}"
            )
        out[name] = np.ascontiguousarray(value, dtype=dtype)
    return out


class _NoPreprocessingHint(logging.Filter):
    """onnxruntime suggests its shape-inference pre-processing on every call, on the root
    logger; its quantizer infers the shapes it needs itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-process" not in record.getMessage()


class _Reader:
    """onnxruntime's CalibrationDataReader over checked feeds."""

    def __init__(self, feeds: Sequence[Feeds]):
        self._feeds: Iterator[Feeds] = iter(feeds)

    def get_next(self) -> Feeds | None:
        return next(self._feeds, None)


EXTRA_QUANTIZED_OPS = ("Sum",)
"""Op types quantized beyond onnxruntime's defaults (`op_types_to_quantize` when none is
given): Caffe2's `Sum` (light ResNet-50) is an Add of its inputs, and onnxruntime left it in
float, and every layer after it up to the next Conv or Gemm with it."""


def _op_types_to_quantize() -> list[str]:
    """onnxruntime's default op types for QDQ (its QLinear and QDQ registries, as
    `quantize_static` takes them when given none) and `EXTRA_QUANTIZED_OPS`."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return sorted({*QLinearOpsRegistry, *QDQRegistry, *EXTRA_QUANTIZED_OPS})


class _QdqWriter:
    """Calibrates once, then writes the QDQ model for any set of float layers: the ranges are
    onnxruntime's calibration cache, which `quantize_static` reads instead of calibrating."""

    def __init__(self, model, feeds: Sequence[Feeds], method: str, per_channel: bool, work):
        import onnx
        from onnxruntime.quantization import CalibrationMethod
        from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data

        self.work = Path(work)
        self.source = self.work / "float.onnx"
        self.ranges = self.work / "ranges.json"
        self.per_channel = per_channel
        self.calibrate = {
            "minmax": CalibrationMethod.MinMax,
            "entropy": CalibrationMethod.Entropy,
            "percentile": CalibrationMethod.Percentile,
        }[method]
        onnx.save(model, self.source)
        with _onnxruntime_errors(), contextlib.redirect_stdout(io.StringIO()):  # its progress
            calibrator = create_calibrator(
                self.source,
                augmented_model_path=str(self.work / "augmented.onnx"),
                calibrate_method=self.calibrate,
                extra_options=_CALIBRATOR_OPTIONS[method],
            )
            calibrator.collect_data(_Reader(feeds))
            save_tensors_data(calibrator.compute_data(), self.ranges)

    def write(self, keep_fp16: Sequence[str]):
        """The QDQ model with the nodes of `keep_fp16` left in float."""
        import onnx
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

        target = self.work / "qdq.onnx"
        with _onnxruntime_errors():
            quantize_static(
                self.source,
                target,
                None,
                calibration_cache_path=self.ranges,
                quant_format=QuantFormat.QDQ,
                per_channel=self.per_channel,
                activation_type=QuantType.QInt8,
                weight_type=QuantType.QInt8,
                nodes_to_exclude=list(keep_fp16),
                op_types_to_quantize=_op_types_to_quantize(),
                calibrate_method=self.calibrate,
                extra_options={"ActivationSymmetric": False, "WeightSymmetric": True},
            )
        return onnx.load(target)


PER_CHANNEL_OPSET = 13
"""The first opset whose QuantizeLinear / DequantizeLinear have an `axis` (per channel)."""


def _at_least_opset_13(model):
    """`model` converted to opset 13 when it is older (node names are kept, so `keep_fp16`
    still names its nodes)."""
    from onnx import version_converter

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None or opset >= PER_CHANNEL_OPSET:
        return model
    try:
        return version_converter.convert_version(model, PER_CHANNEL_OPSET)
    except Exception as err:  # noqa: BLE001 - the converter raises plain errors
        text = next((ln for ln in str(err).splitlines() if ln.strip()), type(err).__name__)
        raise QuantizeError(
            f"the model is at opset {opset}, and per-channel quantization needs opset "
            f"{PER_CHANNEL_OPSET}; onnx could not convert it: {text}"
        ) from None


@contextlib.contextmanager
def _onnxruntime_errors():
    """onnxruntime's failures as one QuantizeError line; its pre-processing hint muted."""
    hint = _NoPreprocessingHint()
    logging.getLogger().addFilter(hint)
    try:
        yield
    except QuantizeError:
        raise
    except Exception as err:  # noqa: BLE001 - onnxruntime raises plain errors
        text = next((ln for ln in str(err).splitlines() if ln.strip()), type(err).__name__)
        raise QuantizeError(f"onnxruntime could not quantize the model: {text}") from None
    finally:
        logging.getLogger().removeFilter(hint)


def quantize(
    model: Any,
    calibration: Any,
    *,
    method: str = "minmax",
    per_channel: bool = True,
    keep_fp16: Sequence[str] = (),
    accuracy_target: float | None = None,
):
    """`model` (an `onnx.ModelProto` or a path) as a QDQ model calibrated on `calibration`.

    `method` is "minmax", "entropy" or "percentile"; `per_channel` gives each output channel
    of a weight its own scale; the nodes named in `keep_fp16` stay in float. With
    `accuracy_target` (the largest relative error of the outputs against the float model's
    on the calibration data, e.g. 0.02), the fewest further layers are kept in float, the
    most sensitive first, until the outputs are within it (`mixed_precision.py`). Which
    layers were kept, and why, is in the model's metadata (`quantization_report`).
    """
    import onnx

    from mrvl.batchnorm_folding import fold_batch_norms
    from mrvl.mixed_precision import search, write_report
    from mrvl.sum_splitting import split_sums

    if method not in METHODS:
        raise QuantizeError(f"unknown calibration method {method!r}: one of {', '.join(METHODS)}")
    if accuracy_target is not None and not accuracy_target > 0:
        raise QuantizeError(f"accuracy_target must be > 0, got {accuracy_target}")
    if not isinstance(model, onnx.ModelProto):
        try:
            model = onnx.load(os.fspath(model))
        except Exception as err:  # noqa: BLE001 - protobuf's decode errors have no common base
            raise QuantizeError(f"cannot read the model {model}: {err}") from None
    names = {node.name for node in model.graph.node}
    unknown = [name for name in keep_fp16 if name not in names]
    if unknown:
        raise QuantizeError(
            f"keep_fp16: the model has no node named {', '.join(map(repr, unknown))}"
        )
    model = fold_batch_norms(_at_least_opset_13(model), keep=set(keep_fp16))
    model = split_sums(model, keep=set(keep_fp16))
    feeds = calibration_feeds(model, calibration)
    with tempfile.TemporaryDirectory(prefix="mrvl-quantize-") as work:
        writer = _QdqWriter(model, feeds, method, per_channel, work)
        if accuracy_target is None:
            qdq = writer.write(keep_fp16)
            report = {"method": method, "kept": [{"node": n, "why": "asked"} for n in keep_fp16]}
        else:
            qdq, report = search(model, feeds, writer, keep_fp16, accuracy_target)
            report["method"] = method
    write_report(qdq, report)
    return qdq
