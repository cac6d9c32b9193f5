"""How close an MLIP result is to the fp32 reference, judged as Marvell's tooling does.

fp16 acceptance (DESIGN §9): elements whose reference magnitude is below max|ref| / 100 are
ignored; every other element must be within 3 % relative error.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

FP16_IGNORE_BELOW = 1 / 100
FP16_MAX_RELATIVE_ERROR = 0.03


@dataclass(frozen=True)
class Agreement:
    checked: int
    ignored: int
    max_relative_error: float
    max_abs_error: float
    passed: bool

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (
            f"{verdict}: max relative error {self.max_relative_error:.3e} over {self.checked} "
            f"elements (limit {FP16_MAX_RELATIVE_ERROR:.0%}; {self.ignored} elements below "
            f"max|ref|/100 ignored), max absolute error {self.max_abs_error:.3e}"
        )


def fp16_agreement(result: np.ndarray, reference: np.ndarray) -> Agreement:
    """Compare an MLIP result with the fp32 reference under the fp16 acceptance rule."""
    result = np.asarray(result, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if result.shape != reference.shape:
        raise ValueError(f"shape {result.shape} does not match the reference {reference.shape}")
    if not np.all(np.isfinite(result)):
        return Agreement(result.size, 0, float("inf"), float("inf"), False)
    abs_err = np.abs(result - reference)
    scale = np.abs(reference).max(initial=0.0)
    significant = _significant(reference)
    rel = abs_err[significant] / np.abs(reference[significant])
    max_rel = float(rel.max(initial=0.0))
    return Agreement(
        checked=int(significant.sum()),
        ignored=int(result.size - significant.sum()),
        max_relative_error=max_rel,
        max_abs_error=float(abs_err.max(initial=0.0)),
        # An empty comparison proves nothing: it never passes.
        passed=result.size > 0
        and max_rel <= FP16_MAX_RELATIVE_ERROR
        and (scale > 0 or abs_err.max(initial=0) == 0),
    )


def _significant(reference: np.ndarray) -> np.ndarray:
    """The elements the rule judges: |ref| at least max|ref|/100 (none of an all-zero ref)."""
    magnitude = np.abs(reference)
    scale = magnitude.max(initial=0.0)
    if scale == 0.0:
        return np.zeros(reference.shape, bool)
    return magnitude >= scale * FP16_IGNORE_BELOW


def relative_errors(result: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The relative error of every element the fp16 rule judges (float64, flat; +inf where
    the result is not finite)."""
    result = np.asarray(result, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if result.shape != reference.shape:
        raise ValueError(f"shape {result.shape} does not match the reference {reference.shape}")
    significant = _significant(reference)
    with np.errstate(invalid="ignore"):
        error = np.abs(result[significant] - reference[significant]) / np.abs(
            reference[significant]
        )
    return np.where(np.isfinite(error), error, np.inf)


QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})


@functools.cache
def int8_pairs_saturate() -> bool:
    """Whether onnxruntime's fused x86 uint8 × int8 kernels on this CPU add each two
    neighbouring products in int16 with saturation before summing in int32 (MLAS's VPMADDUBSW
    kernels, chosen on AVX2 or AVX-512 BW without AVX-VNNI or AVX-512 VNNI; its SSE4.1 kernel
    widens first and its VNNI ones sum four products exactly). Where a pair overflows, such a
    session's int8 conv is not what the QDQ model means (up to 52 steps on LR-ASPP's output;
    onnxruntime's own documentation advises `reduce_range` for such CPUs)."""
    from llvmlite import binding

    try:
        have = {name for name, on in binding.get_host_cpu_features().items() if on}
    except RuntimeError:  # LLVM cannot tell: not an x86 CPU it knows
        return False
    if have & {"avxvnni", "avx512vnni"}:
        return False
    return bool(have & {"avx2", "avx512bw"})


def reference_session(model, options=None):
    """onnxruntime's CPU session that mrvl's results are judged against (`model`: an
    `onnx.ModelProto` or its bytes). A QDQ model on a CPU whose int8 kernels saturate pairs
    (`int8_pairs_saturate`) runs with graph optimizations off: DequantizeLinear → fp32 op →
    QuantizeLinear as written, which is the model's meaning, instead of the fused kernels."""
    import onnx
    import onnxruntime as ort

    proto = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(model)
    if options is None:
        options = ort.SessionOptions()
        options.log_severity_level = 3
    if int8_pairs_saturate() and any(n.op_type in QDQ_OPS for n in proto.graph.node):
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
