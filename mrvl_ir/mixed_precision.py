"""Mixed precision: the fewest layers kept in float that bring a QDQ model within an accuracy
target of the float model (`mrvl.quantize(..., accuracy_target=)`).

How sensitive each layer is comes from onnxruntime's QDQ debugging tools (`qdq_loss_debug`):
the float model and the all-int8 QDQ model run on the calibration data with every
intermediate tensor saved, and each tensor the QDQ model quantizes gets its signal to
quantization noise ratio (SQNR, dB) against the float model's. A layer's sensitivity is the
SQNR it loses: that of the tensor it reads minus that of the tensor it writes (following its
single-use activation, Relu or Clip, to the tensor the QDQ model quantizes after it).

The layers are then kept in float, the most sensitive first: the fewest of them that bring the
outputs within the target is found by bisection over that order (the error falls as layers are
kept; the found prefix is checked), each candidate written from the same calibration ranges.
The report (which layers were kept and why, the errors before and after) is stored in the
model's metadata, where Netron shows it, and read back by `quantization_report`.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPORT_KEY = "mrvl.quantization"
"""The metadata entry of a QDQ model that holds its quantization report (JSON)."""

_PASS_THROUGH = frozenset({"Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSwish"})
"""Ops after a layer that its QDQ quantization happens after (fused with the layer)."""


class AccuracyTargetWarning(UserWarning):
    """Even with every candidate layer in float, the outputs miss the accuracy target."""


def output_error(model, qdq, feeds: Sequence[dict[str, np.ndarray]]) -> float:
    """The largest relative error of `qdq`'s outputs against `model`'s over `feeds`: per
    output, max |q - f| over the largest |f|."""
    import onnxruntime as ort

    from mrvl.accuracy import reference_session

    options = ["CPUExecutionProvider"]
    reference = ort.InferenceSession(model.SerializeToString(), providers=options)
    quantized = reference_session(qdq)  # the QDQ model's meaning on any CPU
    worst = 0.0
    for feed in feeds:
        for want, got in zip(reference.run(None, feed), quantized.run(None, feed)):
            scale = max(float(np.abs(want).max()), np.finfo(np.float32).tiny)
            worst = max(worst, float(np.abs(got.astype(np.float64) - want).max()) / scale)
    return worst


def sensitivities(model, qdq, feeds, work: Path) -> dict[str, float]:
    """SQNR (dB) each quantized layer of `model` loses in `qdq`, by node name."""
    import onnx
    from onnxruntime.quantization.qdq_loss_debug import (
        collect_activations,
        compute_activation_error,
        create_activation_matching,
        modify_model_output_intermediate_tensors,
    )

    activations = {}
    for name, proto in (("float", model), ("qdq", qdq)):
        path, augmented = work / f"{name}-debug.onnx", work / f"{name}-augmented.onnx"
        onnx.save(proto, path)
        modify_model_output_intermediate_tensors(path, augmented)
        activations[name] = collect_activations(str(augmented), iter(feeds))
    matching = create_activation_matching(activations["qdq"], activations["float"])
    sqnr = {t: e["xmodel_err"] for t, e in compute_activation_error(matching).items()}
    consumers: dict[str, list] = {}
    for node in model.graph.node:
        for tensor in node.input:
            consumers.setdefault(tensor, []).append(node)
    losses = {}
    for node in _quantized_layers(model, qdq):
        source = node.input[0]
        written = node.output[0]
        for _ in range(3):  # through a fused activation to the tensor quantized after it
            users = consumers.get(written, [])
            if written in sqnr or len(users) != 1 or users[0].op_type not in _PASS_THROUGH:
                break
            written = users[0].output[0]
        if source in sqnr and written in sqnr:
            losses[node.name] = sqnr[source] - sqnr[written]
    return losses


def _quantized_layers(model, qdq) -> list:
    """The nodes of `model` whose weights `qdq` quantized (their weight is fed through a
    DequantizeLinear there), in graph order."""
    dequantized = {node.input[0] for node in qdq.graph.node if node.op_type == "DequantizeLinear"}
    return [
        node
        for node in model.graph.node
        if len(node.input) > 1 and any(f"{w}_quantized" in dequantized for w in node.input[1:2])
    ]


def search(model, feeds, writer, keep_fp16: Sequence[str], target: float):
    """The QDQ model with the fewest layers beyond `keep_fp16` in float whose outputs are
    within `target`, and its report."""
    asked = list(keep_fp16)
    qdq = writer.write(asked)
    start_error = output_error(model, qdq, feeds)
    report: dict[str, Any] = {
        "accuracy_target": target,
        "error_with_asked_layers_only": start_error,
        "kept": [{"node": n, "why": "asked"} for n in asked],
    }
    if start_error <= target:
        report.update(output_error=start_error, reached=True)
        return qdq, report
    losses = sensitivities(model, qdq, feeds, writer.work)
    order = sorted((n for n in losses if n not in asked), key=lambda n: -losses[n])
    errors: dict[int, tuple[float, Any]] = {0: (start_error, qdq)}

    def tried(count: int) -> float:
        if count not in errors:
            candidate = writer.write(asked + order[:count])
            errors[count] = (output_error(model, candidate, feeds), candidate)
        return errors[count][0]

    low, high = 0, len(order)  # error(low) > target; find the least count within it
    if tried(high) > target:
        low = high
    while high - low > 1:
        middle = (low + high) // 2
        if tried(middle) <= target:
            high = middle
        else:
            low = middle
    count = high
    final_error, qdq = errors[count][0], errors[count][1]
    reached = final_error <= target
    if not reached:
        warnings.warn(
            f"with all {len(order)} ranked layers in float the outputs are {final_error:.3g} "
            f"from the float model's, beyond the accuracy target {target}",
            AccuracyTargetWarning,
            stacklevel=3,
        )
    for rank, name in enumerate(order[:count], 1):
        report["kept"].append(
            {
                "node": name,
                "why": f"sensitivity rank {rank} of {len(order)}: loses "
                f"{losses[name]:.1f} dB of SQNR in int8",
            }
        )
    report.update(output_error=final_error, reached=reached, candidates_written=len(errors))
    return qdq, report


def write_report(model, report: dict[str, Any]) -> None:
    for entry in list(model.metadata_props):
        if entry.key == REPORT_KEY:
            model.metadata_props.remove(entry)
    prop = model.metadata_props.add()
    prop.key, prop.value = REPORT_KEY, json.dumps(report)


def quantization_report(model) -> dict[str, Any] | None:
    """What `mrvl.quantize` recorded in a QDQ model: the method, the layers kept in float and
    why, and with an accuracy target the output errors."""
    for entry in model.metadata_props:
        if entry.key == REPORT_KEY:
            return json.loads(entry.value)
    return None
