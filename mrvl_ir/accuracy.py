"""How close an MLIP result is to the fp32 reference, judged as Marvell's tooling does.

fp16 acceptance (DESIGN §9): elements whose reference magnitude is below max|ref| / 100 are
ignored; every other element must be within 3 % relative error.
"""

from __future__ import annotations

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
