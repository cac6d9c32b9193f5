"""The constants of activations that exporters write out as formulas, and the tolerance with
which a formula's constant is read as one of them.

Two readers share them: `activation_forms` (the compiler's, on Relax expressions) and
`fp16_emulation` (the judge's, on ONNX graphs), so that the judge reads a formula exactly when
the compiler does. This module imports nothing heavy: the emulation runs without TVM.
"""

from __future__ import annotations

import math

GELU_HALF, GELU_ONE = 0.5, 1.0
GELU_ERF_DIVISOR = math.sqrt(2.0)
GELU_TANH_SCALE = math.sqrt(2.0 / math.pi)
GELU_TANH_CUBIC = 0.044715


def near_constant(value: float | None, target: float) -> bool:
    """Whether a formula's constant `value` (None: not a constant) is `target`, within a
    relative 1e-6 (exporters round constants such as 1/6 or sqrt(2/pi) to fp32)."""
    return value is not None and abs(value - target) <= 1e-6 * max(1.0, abs(target))
