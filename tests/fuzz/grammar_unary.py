"""The fuzzer's unary layers of issue 21 (`grammar.py` draws and replays them as kind "unary").

GELU written out in its Erf and tanh forms, Erf, Exp, Log, Sqrt, Reciprocal, Abs, Neg, Pow by
a constant, and Max / Min by a scalar constant (also after a LeakyRelu, as one audio net
writes its lower clip). Ops with a restricted domain get the input they are defined on, as a
model computes them: Log, Sqrt, Reciprocal and Pow 0.5 of `Abs(x) + 0.5`, Exp of
`Clip(x, -8, 4)`; so a mismatch against onnxruntime is a compiler error, not an overflow.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from grammar import Chooser, Graph

OPS = ("gelu_erf", "gelu_tanh", "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Abs", "Neg",
       "Pow", "Max", "Min", "leaky_floor")  # fmt: skip


def draw_unary(ch: Chooser) -> dict[str, Any]:
    op = ch.choice(OPS)
    p: dict[str, Any] = {"op": op, "side": ch.choice(("right", "left"))}
    if op == "Pow":
        p["exponent"] = ch.choice((2.0, 3.0, 0.5))
    if op in ("Max", "Min", "leaky_floor"):
        p["bound"] = ch.choice((-0.4, 0.0, 0.5, 6.0))
    return p


def _f32(value: float) -> np.ndarray:
    return np.array(value, np.float32)


def _pair(p: dict, a: str, b: str) -> list[str]:
    """The two operands of a commutative op, in the drawn order."""
    return [a, b] if p.get("side") != "left" else [b, a]


def emit_unary(g: Graph, p: dict) -> bool:
    x = g.current
    shape = x.shape
    op = p["op"]

    def n(onnx_op: str, inputs: list[str], **attrs):
        return g.node(onnx_op, inputs, shape, **attrs)

    def c(value: float) -> str:
        return g.const(_f32(value), "k")

    if op == "gelu_erf":
        d = n("Div", [x.name, c(math.sqrt(2.0))])
        e = n("Erf", [d.name])
        a = n("Add", _pair(p, e.name, c(1.0)))
        m = n("Mul", _pair(p, x.name, a.name))
        g.set(n("Mul", [m.name, c(0.5)]))
    elif op == "gelu_tanh":
        cube = n("Pow", [x.name, c(3.0)])
        k = n("Mul", _pair(p, cube.name, c(0.044715)))
        i = n("Add", [x.name, k.name])
        b = n("Mul", [i.name, c(math.sqrt(2.0 / math.pi))])
        t = n("Tanh", [b.name])
        a = n("Add", [t.name, c(1.0)])
        h = n("Mul", _pair(p, c(0.5), x.name))
        g.set(n("Mul", [h.name, a.name]))
    elif op in ("Log", "Sqrt", "Reciprocal") or (op == "Pow" and p["exponent"] == 0.5):
        a = n("Abs", [x.name])
        s = n("Add", [a.name, c(0.5)])
        if op == "Pow":
            g.set(n("Pow", [s.name, c(0.5)]))
        else:
            g.set(n(op, [s.name]))
    elif op == "Exp":
        clipped = n("Clip", [x.name, c(-8.0), c(4.0)])
        g.set(n("Exp", [clipped.name]))
    elif op == "Pow":
        g.set(n("Pow", [x.name, c(p["exponent"])]))
    elif op in ("Max", "Min"):
        g.set(n(op, _pair(p, x.name, c(p["bound"]))))
    elif op == "leaky_floor":
        leaky = n("LeakyRelu", [x.name], alpha=0.2)
        g.set(n("Max", _pair(p, leaky.name, c(min(p["bound"], 0.0) - 0.4))))
    else:  # Erf, Abs, Neg
        g.set(n(op, [x.name]))
    return True
