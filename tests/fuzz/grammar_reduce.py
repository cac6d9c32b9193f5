"""The fuzzer's reductions and broadcasting elementwise ops of issue 21, kept apart from
`grammar.py` (which registers them): ReduceMean / ReduceSum / ReduceMax / ReduceMin over one
axis or a run of axes (and, now and then, axes that are not consecutive, which stay on the
CPU), keepdims either way, back to rank 4 by an Unsqueeze where it dropped axes; and Sub, Div,
Max, Min, Add, Mul of the current tensor and a reduction of it, which broadcasts back over the
reduced axes (x - mean(x), x / max(x), the shapes attention masks and norms take). A
reduction over the whole plane of a large tensor is a global pool larger than a tile."""

from __future__ import annotations

from typing import Any

import numpy as np
from grammar_graph import on_rank

REDUCE_OPS = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")
BINARY_OPS = ("Sub", "Div", "Max", "Min", "Add", "Mul")
AXES = ((1,), (2,), (3,), (2, 3), (1, 2), (1, 2, 3), (1, 3))
"""Axes of an NCHW tensor a reduction takes; (1, 3) is not consecutive."""


def _reduce(g, x, op: str, axes, keepdims: bool):
    shape = [1 if d in axes else n for d, n in enumerate(x.shape)]
    if not keepdims:
        shape = [n for d, n in enumerate(x.shape) if d not in axes]
    if op == "ReduceSum":  # opset 13+: the axes are an input
        axes_in = g.const(np.array(axes, np.int64), "ax")
        return g.node(op, [x.name, axes_in], tuple(shape), keepdims=int(keepdims))
    return g.node(op, [x.name], tuple(shape), axes=list(axes), keepdims=int(keepdims))


@on_rank(4)
def emit_reduce(g, p: dict) -> bool:
    """A reduction of an NCHW tensor, brought back to rank 4 (Unsqueeze) without keepdims."""
    x = g.current
    axes = p["axes"]
    r = _reduce(g, x, p["op"], axes, p["keepdims"])
    if not p["keepdims"]:
        back = g.const(np.array(axes, np.int64), "ax")
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
        r = g.node("Unsqueeze", [r.name, back], shape)
    g.set(r)
    return True


@on_rank(4)
def emit_broadcast(g, p: dict) -> bool:
    """x op reduce(x): the reduction (keepdims) broadcasts back over its axes; with `swap`
    the small operand comes first. A Div's divisor is kept away from 0 (its absolute value
    plus 1: Abs and Add by a constant run on the MLIP as well)."""
    x = g.current
    small = _reduce(g, x, p["reduce"], p["axes"], True)
    if p["op"] == "Div":
        positive = g.node("Abs", [small.name], small.shape)
        small = g.node("Add", [positive.name, g.const(np.array(1.0, np.float32), "one")], small.shape)
    ins = [small.name, x.name] if p["swap"] else [x.name, small.name]
    if p["op"] == "Div":
        ins = [x.name, small.name]
    g.set(g.node(p["op"], ins, x.shape))
    return True


def draw(kind: str, ch, seed: int) -> Any:
    """The parameters of one of this module's layers, drawn by the chooser `ch`."""
    if kind == "reduce":
        return dict(op=ch.choice(REDUCE_OPS), axes=ch.choice(AXES), keepdims=ch.chance(0.6))
    return dict(
        op=ch.choice(BINARY_OPS),
        reduce=ch.choice(REDUCE_OPS),
        axes=ch.choice(AXES[:-1]),
        swap=ch.chance(0.3),
    )


EMITTERS = {"reduce": emit_reduce, "broadcast": emit_broadcast}
KINDS = ("reduce", "broadcast")
"""Layer kinds drawn at rank 4, besides `grammar`'s."""
