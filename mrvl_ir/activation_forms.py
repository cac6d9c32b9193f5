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
    erf, exp, log, sqrt, abs (relax ops of x)         ERF, EXP, LOG, SQRT, ABS (`UNARY_TABLES`)
    nn.gelu(x), nn.gelu_tanh(x)                       GELU, GELU_TANH (ONNX Gelu, opset 20)
    power(x, p), p a scalar constant                  POW (alpha = p)
    1 / x                                             RECIPROCAL (TVM's Reciprocal)
    x * (1 + erf(x / sqrt 2)) * 0.5, and the orders   GELU (as exporters write it; `_gelu`)
    x * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2 GELU_TANH (x^3 as power or products)
    clip(relu(x) | clip(x, ...), lo, hi)              CLIP (a clip of a clip is one clip; ONNX
                                                      Max / Min by a constant import as clips)
    clip(leakyrelu(x), lo, +inf)                      LEAKY_FLOOR (alpha, beta = lo): the lower
                                                      clip `Max(LeakyRelu(x), c)` of audio nets

Multiplications and additions may have their operands either way round. A GELU written out is
read as one activation (one table lookup), never as a chain. HardSigmoid
(`clip(alpha * x + beta, 0, 1)`) needs no form of its own: its multiply and add are affine
steps that fold exactly into the layer's scale and shift, followed by CLIP [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from tvm import relax
from tvm.ir.expr import GenericConst

from .formula_constants import (
    GELU_ERF_DIVISOR,
    GELU_HALF,
    GELU_ONE,
    GELU_TANH_CUBIC,
    GELU_TANH_SCALE,
    near_constant,
)

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


def prim_float(expr) -> float | None:
    """The value of a PrimValue, an IntImm/FloatImm or a Python number, else None."""
    value = getattr(expr, "value", expr)
    value = getattr(value, "value", value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def scalar(expr) -> float | None:
    """The value of a scalar constant (a one-element tensor or a PrimValue), else None."""
    if isinstance(expr, GenericConst):
        array = expr.value.numpy()
        return float(array.reshape(-1)[0]) if array.size == 1 else None
    return prim_float(expr)


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


def _clip_bounds(clip: relax.Call, lo: float, hi: float) -> bool:
    return near_constant(scalar(clip.args[1]), lo) and near_constant(scalar(clip.args[2]), hi)


def _relu6_of_x_plus_3(resolve: Resolve, expr, x) -> list | None:
    """[add, clip] when expr is clip(x + 3, 0, 6)."""
    clip = _call(resolve, expr, "relax.clip")
    if clip is None or not _clip_bounds(clip, 0.0, 6.0):
        return None
    add = _call(resolve, clip.args[0], "relax.add")
    if add is None or not near_constant(scalar(_other(add, x)), 3.0):
        return None
    return [add, clip]


def _gate(resolve: Resolve, gate_expr, x) -> FusedActivationForm | None:
    """The activation x * gate(x), if `gate_expr` is one of the known gates of x."""
    sigmoid = _call(resolve, gate_expr, "relax.sigmoid")
    if sigmoid is not None and _same(sigmoid.args[0], x):
        return FusedActivationForm("silu", calls=[sigmoid])
    divide = _call(resolve, gate_expr, "relax.divide")
    if divide is not None and near_constant(scalar(divide.args[1]), 6.0):
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
                if near_constant(alpha, 1 / 6) and near_constant(beta, 0.5):
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
                and near_constant(scalar(_other(add, operand)), 1.0)
            ):
                return FusedActivationForm("mish", calls=[exp, add, log, tanh])
    return None


UNARY_TABLES: dict[str, str] = {
    "relax.erf": "erf",
    "relax.exp": "exp",
    "relax.log": "log",
    "relax.sqrt": "sqrt",
    "relax.abs": "abs",
    "relax.nn.gelu": "gelu",
    "relax.nn.gelu_tanh": "gelu_tanh",
}
"""Relax ops of one tensor that are each one table activation (`isa.TABLE_ACTIVATIONS`)."""

ONNX_ACTIVATION_OPS = frozenset(
    {"Erf", "Exp", "Log", "Sqrt", "Abs", "Gelu", "Pow", "Reciprocal", "Neg", "Max", "Min"}
)
"""ONNX ops (beyond the classic ones) whose whole node can be a layer's fused activation or a
scale_shift of its own (Neg is a scale of -1, Max / Min by a constant a clip)."""


def _products(resolve: Resolve, expr) -> list[tuple[list, list]]:
    """Each way to read expr as a product of two or three terms: (factors, multiplies)."""
    call = _call(resolve, expr, "relax.multiply")
    if call is None:
        return []
    readings = [([call.args[0], call.args[1]], [call])]
    for inner_expr, third in ((call.args[0], call.args[1]), (call.args[1], call.args[0])):
        inner = _call(resolve, inner_expr, "relax.multiply")
        if inner is not None:
            readings.append(([inner.args[0], inner.args[1], third], [inner, call]))
    return readings


def _cube(resolve: Resolve, expr, x) -> list | None:
    """The calls of x^3 written as power(x, 3), (x * x) * x or x * (x * x)."""
    power = _call(resolve, expr, "relax.power")
    if power is not None and _same(power.args[0], x) and near_constant(scalar(power.args[1]), 3.0):
        return [power]
    for factors, muls in _products(resolve, expr):
        if len(factors) == 3 and all(_same(f, x) for f in factors):
            return muls
    return None


def _scaled(resolve: Resolve, expr, x, factor: float) -> relax.Call | None:
    """The call if expr is x * factor, factor * x or x / (1 / factor)."""
    mul = _call(resolve, expr, "relax.multiply")
    if mul is not None and near_constant(scalar(_other(mul, x)), factor):
        return mul
    div = _call(resolve, expr, "relax.divide")
    if div is not None and _same(div.args[0], x) and near_constant(scalar(div.args[1]), 1 / factor):
        return div
    return None


def _gelu_inner(resolve: Resolve, g) -> tuple[str, relax.Expr, list] | None:
    """(kind, x, calls) when g is erf(x / sqrt 2) or tanh(sqrt(2/pi) (x + 0.044715 x^3))."""
    erf = _call(resolve, g, "relax.erf")
    if erf is not None:
        arg = resolve(erf.args[0])
        for x in list(getattr(arg, "args", []))[:2]:
            step = _scaled(resolve, erf.args[0], x, 1 / GELU_ERF_DIVISOR)
            if step is not None:
                return "gelu", x, [step, erf]
        return None
    tanh = _call(resolve, g, "relax.tanh")
    if tanh is None:
        return None
    arg = resolve(tanh.args[0])
    # sqrt(2/pi) * (x + 0.044715 x^3)
    if op_name(arg) == "relax.multiply":
        for inner_expr in arg.args:
            add = _call(resolve, inner_expr, "relax.add")
            if add is None or not near_constant(scalar(_other(arg, inner_expr)), GELU_TANH_SCALE):
                continue
            for x, cubic in ((add.args[0], add.args[1]), (add.args[1], add.args[0])):
                term = _call(resolve, cubic, "relax.multiply")
                if term is None:
                    continue
                for cube_expr in term.args:
                    cube = _cube(resolve, cube_expr, x)
                    if cube is not None and near_constant(
                        scalar(_other(term, cube_expr)), GELU_TANH_CUBIC
                    ):
                        return "gelu_tanh", x, [*cube, term, add, arg, tanh]
    # sqrt(2/pi) x + 0.044715 sqrt(2/pi) x^3 (onnxruntime's FastGelu as TVM writes it)
    if op_name(arg) == "relax.add":
        for linear_expr, cubic in ((arg.args[0], arg.args[1]), (arg.args[1], arg.args[0])):
            linear = _call(resolve, linear_expr, "relax.multiply")
            term = _call(resolve, cubic, "relax.multiply")
            if linear is None or term is None:
                continue
            for x in linear.args:
                if not near_constant(scalar(_other(linear, x)), GELU_TANH_SCALE):
                    continue
                for cube_expr in term.args:
                    cube = _cube(resolve, cube_expr, x)
                    factor = scalar(_other(term, cube_expr))
                    if cube is not None and near_constant(
                        factor, GELU_TANH_CUBIC * GELU_TANH_SCALE
                    ):
                        return "gelu_tanh", x, [linear, *cube, term, arg, tanh]
    return None


def _gelu(resolve: Resolve, root: relax.Call) -> tuple[FusedActivationForm, relax.Expr] | None:
    """GELU written out: the product of x, 0.5 (or a division by 2) and 1 + erf(...) or
    1 + tanh(...), in any order and grouping."""
    if op_name(root) == "relax.divide" and near_constant(scalar(root.args[1]), 2.0):
        readings = [([*f, GELU_HALF], [*m, root]) for f, m in _products(resolve, root.args[0])]
    else:
        readings = _products(resolve, root)
    for factors, calls in readings:
        halves = [
            f for f in factors if near_constant(f if isinstance(f, float) else scalar(f), 0.5)
        ]
        rest = [f for f in factors if not any(f is h for h in halves)]
        if len(factors) != 3 or len(halves) != 1 or len(rest) != 2:
            continue
        for x_factor, sum_factor in ((rest[0], rest[1]), (rest[1], rest[0])):
            add = _call(resolve, sum_factor, "relax.add")
            if add is None:
                continue
            for g in add.args:
                if not near_constant(scalar(_other(add, g)), GELU_ONE):
                    continue
                inner = _gelu_inner(resolve, g)
                if inner is not None and _same(inner[1], x_factor):
                    kind, x, inner_calls = inner
                    return FusedActivationForm(kind, calls=[*inner_calls, add, *calls]), x
    return None


def _clip_of(resolve: Resolve, root: relax.Call) -> tuple[FusedActivationForm, relax.Expr]:
    """A clip, with the clips and relus it applies to folded in: clip(clip(x, l1, h1), l, h)
    is clip(x, clip(l1, l, h), clip(h1, l, h)) exactly (both are monotone)."""
    low, high = scalar(root.args[1]), scalar(root.args[2])
    if low is None or high is None:
        raise ActivationFormError("non-constant clip bounds", root)
    if low > high:
        raise ActivationFormError(f"attribute min={low:g} > max={high:g}", root)
    calls, x = [root], root.args[0]
    while True:
        inner = resolve(x)
        name = op_name(inner)
        if name == "relax.nn.relu":
            inner_low, inner_high = 0.0, math.inf
        elif name == "relax.clip":
            inner_low, inner_high = scalar(inner.args[1]), scalar(inner.args[2])
            if inner_low is None or inner_high is None or inner_low > inner_high:
                break
        else:
            break
        low, high = min(max(inner_low, low), high), min(max(inner_high, low), high)
        calls.insert(0, inner)
        x = inner.args[0]
    leaky = _call(resolve, x, "relax.nn.leakyrelu")
    if leaky is not None and high == math.inf:  # Max(LeakyRelu(x), c): one table
        params = {"alpha": float(leaky.attrs.alpha), "beta": low}
        return FusedActivationForm("leaky_floor", params, [leaky, *calls]), leaky.args[0]
    return FusedActivationForm("clip", {"act_min": low, "act_max": high}, calls), x


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
        return _clip_of(resolve, root)
    if name in ("relax.sigmoid", "relax.tanh"):
        return FusedActivationForm(name.split(".")[-1], calls=[root]), root.args[0]
    if name in UNARY_TABLES:
        return FusedActivationForm(UNARY_TABLES[name], calls=[root]), root.args[0]
    if name == "relax.power":
        if not isinstance(root.args[1], GenericConst):
            raise ActivationFormError("Pow by a tensor exponent", root)
        exponent = scalar(root.args[1])
        if exponent is None:
            raise ActivationFormError("Pow by a non-scalar exponent", root)
        return FusedActivationForm("pow", {"alpha": exponent}, [root]), root.args[0]
    if name == "relax.divide" and near_constant(scalar(root.args[0]), 1.0):
        if isinstance(root.args[0], GenericConst) and not isinstance(root.args[1], GenericConst):
            return FusedActivationForm("reciprocal", calls=[root]), root.args[1]
    if name in ("relax.multiply", "relax.divide"):
        gelu = _gelu(resolve, root)
        if gelu is not None:
            return gelu
    if name == "relax.nn.prelu":
        slopes = root.args[1]
        if not isinstance(slopes, GenericConst):
            raise ActivationFormError("non-constant PRelu slopes", root)
        values = slopes.value.numpy().astype(np.float64).reshape(-1)
        rank = len(getattr(getattr(root, "ty", None), "shape", None) or ())
        if values.size != 1 and int(root.attrs.axis) != 1 and rank != 5:  # 5: high_rank_prelu
            raise ActivationFormError(f"PRelu slopes on axis {int(root.attrs.axis)}", root)
        return FusedActivationForm("prelu", {"slopes": values}, [root]), root.args[0]
    if name == "relax.multiply":
        for x, gate_expr in ((root.args[0], root.args[1]), (root.args[1], root.args[0])):
            form = _gate(resolve, gate_expr, x)
            if form is not None:
                form.calls.append(root)
                return form, x
        return None, root
    if name == "relax.divide" and near_constant(scalar(root.args[1]), 6.0):
        mul = _call(resolve, root.args[0], "relax.multiply")
        if mul is not None:
            for x, other in ((mul.args[0], mul.args[1]), (mul.args[1], mul.args[0])):
                parts = _relu6_of_x_plus_3(resolve, other, x)
                if parts is not None:
                    return FusedActivationForm("hard_swish", calls=[*parts, mul, root]), x
    return None, root
