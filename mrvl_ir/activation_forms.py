"""Which Relax expressions are a fused activation, and with which parameters.

TVM 0.27's ONNX frontend writes several activations as formulas (docs: the forms below), and
exporters write others as formulas of their own. One function, `split_activation`, recognizes
them all from the layer's last call; the partition checks and the region importer both call
it, so a composite is offloaded exactly when the importer can read it.

    relu(x), leakyrelu(x), clip(x, lo, hi)            RELU, LEAKY_RELU, CLIP
    sigmoid(x), tanh(x)                               SIGMOID, TANH
    nn.prelu(x, slopes) on channels                   PRELU
    x * sigmoid(x)                                    SILU (ONNX Mul of a tensor and its Sigmoid)
    x * (clip(x + 3, 0, 6) / 6)                       HARD_SWISH (TVM's HardSwish)
    (x * clip(x + 3, 0, 6)) / 6                       HARD_SWISH (written out: x * relu6(x+3) / 6)
    x * clip(x * (1/6) + 0.5, 0, 1)                   HARD_SWISH (Mul of x and its HardSigmoid)
    x * tanh(log(1 + exp(x)))                         MISH (TVM's Mish)

Multiplications and additions may have their operands either way round. HardSigmoid
(`clip(alpha * x + beta, 0, 1)`) needs no form of its own: its multiply and add are affine
steps that fold exactly into the layer's scale and shift, followed by CLIP [0, 1].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from tvm import relax
from tvm.ir.expr import GenericConst

Resolve = Callable[[relax.Expr], relax.Expr]
"""Maps a variable to the expression bound to it (identity for anything else)."""


class ActivationFormError(Exception):
    """An expression that has an activation's shape but not its constants (why, in words)."""

    def __init__(self, reason: str, at: relax.Expr):
        super().__init__(reason)
        self.reason = reason
        self.at = at


@dataclass
class FusedActivationForm:
    kind: str  # mrvl.dialects.mrvl.ActivationKind value
    params: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)
    """The calls that make up the activation (the root last)."""


def op_name(expr) -> str:
    return getattr(getattr(expr, "op", None), "name", "") if isinstance(expr, relax.Call) else ""


def scalar(expr) -> float | None:
    """The value of a scalar constant (a one-element tensor or a PrimValue), else None."""
    if isinstance(expr, GenericConst):
        array = expr.value.numpy()
        return float(array.reshape(-1)[0]) if array.size == 1 else None
    value = getattr(expr, "value", expr)
    value = getattr(value, "value", value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _same(a, b) -> bool:
    return a is b or (hasattr(a, "same_as") and a.same_as(b))


def _call(resolve: Resolve, expr, name: str) -> relax.Call | None:
    value = resolve(expr)
    return value if op_name(value) == name else None


def _other(call: relax.Call, x) -> relax.Expr | None:
    """The operand of a binary call that is not `x` (None if `x` is not one of them)."""
    a, b = call.args[0], call.args[1]
    if _same(a, x):
        return b
    if _same(b, x):
        return a
    return None


def _near(value: float | None, target: float) -> bool:
    return value is not None and abs(value - target) <= 1e-6 * max(1.0, abs(target))


def _clip_bounds(clip: relax.Call, lo: float, hi: float) -> bool:
    return _near(scalar(clip.args[1]), lo) and _near(scalar(clip.args[2]), hi)


def _relu6_of_x_plus_3(resolve: Resolve, expr, x) -> list | None:
    """[add, clip] when expr is clip(x + 3, 0, 6)."""
    clip = _call(resolve, expr, "relax.clip")
    if clip is None or not _clip_bounds(clip, 0.0, 6.0):
        return None
    add = _call(resolve, clip.args[0], "relax.add")
    if add is None or not _near(scalar(_other(add, x)), 3.0):
        return None
    return [add, clip]


def _gate(resolve: Resolve, gate_expr, x) -> FusedActivationForm | None:
    """The activation x * gate(x), if `gate_expr` is one of the known gates of x."""
    sigmoid = _call(resolve, gate_expr, "relax.sigmoid")
    if sigmoid is not None and _same(sigmoid.args[0], x):
        return FusedActivationForm("silu", calls=[sigmoid])
    divide = _call(resolve, gate_expr, "relax.divide")
    if divide is not None and _near(scalar(divide.args[1]), 6.0):
        parts = _relu6_of_x_plus_3(resolve, divide.args[0], x)
        if parts is not None:
            return FusedActivationForm("hard_swish", calls=[*parts, divide])
    clip = _call(resolve, gate_expr, "relax.clip")
    if clip is not None and _clip_bounds(clip, 0.0, 1.0):
        add = _call(resolve, clip.args[0], "relax.add")
        if add is not None:
            for operand in add.args:
                mul = _call(resolve, operand, "relax.multiply")
                if mul is None:
                    continue
                alpha, beta = scalar(_other(mul, x)), scalar(_other(add, operand))
                if _near(alpha, 1 / 6) and _near(beta, 0.5):
                    return FusedActivationForm("hard_swish", calls=[mul, add, clip])
    tanh = _call(resolve, gate_expr, "relax.tanh")
    log = _call(resolve, tanh.args[0], "relax.log") if tanh is not None else None
    add = _call(resolve, log.args[0], "relax.add") if log is not None else None
    if add is not None:
        for operand in add.args:
            exp = _call(resolve, operand, "relax.exp")
            if (
                exp is not None
                and _same(exp.args[0], x)
                and _near(scalar(_other(add, operand)), 1.0)
            ):
                return FusedActivationForm("mish", calls=[exp, add, log, tanh])
    return None


def split_activation(
    root: relax.Call, resolve: Resolve
) -> tuple[FusedActivationForm | None, relax.Expr]:
    """The fused activation that `root` (a layer's last call) computes, and its input.

    (None, root) when root is not an activation. Raises ActivationFormError for an activation
    whose constants the MLIP cannot take (clip bounds that are not constants, ...).
    """
    name = op_name(root)
    if name == "relax.nn.relu":
        return FusedActivationForm("relu", calls=[root]), root.args[0]
    if name == "relax.nn.leakyrelu":
        form = FusedActivationForm("leaky_relu", {"alpha": float(root.attrs.alpha)}, [root])
        return form, root.args[0]
    if name == "relax.clip":
        low, high = scalar(root.args[1]), scalar(root.args[2])
        if low is None or high is None:
            raise ActivationFormError("non-constant clip bounds", root)
        if low > high:
            raise ActivationFormError(f"attribute min={low:g} > max={high:g}", root)
        return FusedActivationForm("clip", {"act_min": low, "act_max": high}, [root]), root.args[0]
    if name in ("relax.sigmoid", "relax.tanh"):
        return FusedActivationForm(name.split(".")[-1], calls=[root]), root.args[0]
    if name == "relax.nn.prelu":
        slopes = root.args[1]
        if not isinstance(slopes, GenericConst):
            raise ActivationFormError("non-constant PRelu slopes", root)
        values = slopes.value.numpy().astype(np.float64).reshape(-1)
        if values.size != 1 and int(root.attrs.axis) != 1:
            raise ActivationFormError(f"PRelu slopes on axis {int(root.attrs.axis)}", root)
        return FusedActivationForm("prelu", {"slopes": values}, [root]), root.args[0]
    if name == "relax.multiply":
        for x, gate_expr in ((root.args[0], root.args[1]), (root.args[1], root.args[0])):
            form = _gate(resolve, gate_expr, x)
            if form is not None:
                form.calls.append(root)
                return form, x
        return None, root
    if name == "relax.divide" and _near(scalar(root.args[1]), 6.0):
        mul = _call(resolve, root.args[0], "relax.multiply")
        if mul is not None:
            for x, other in ((mul.args[0], mul.args[1]), (mul.args[1], mul.args[0])):
                parts = _relu6_of_x_plus_3(resolve, other, x)
                if parts is not None:
                    return FusedActivationForm("hard_swish", calls=[*parts, mul, root]), x
    return None, root
