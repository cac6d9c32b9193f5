"""The fuzzer's rank-5 activations of issue 21, kept apart from `grammar.py` (which registers
them): the current NCHW tensor x is reshaped to rank 5 (H split in two, or a unit axis
added), goes through a PRelu with per-channel slopes along one of its axes (or one slope) or
a Softmax over one of its axes, and is reshaped back. On the MLIP the PRelu is a scale_shift
on a 4-D view of the same bytes whose channel axis is the slopes' (`mrvl.high_rank_prelu`),
the Softmax a softmax on [outer, length, inner]; the reshapes are copies at rank 5.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from grammar_graph import on_rank

OPS = ("prelu", "prelu", "softmax")


def _rank5_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    n, c, h, w = shape
    for f in (2, 3):
        if h % f == 0 and h > f:
            return (n, c, f, h // f, w)
    return (n, c, 1, h, w)


@on_rank(4)
def emit_rank5(g, p: dict) -> bool:
    """Reshape to rank 5, the drawn op, reshape back; False (skipped) off rank 4."""
    x = g.current
    shape5 = _rank5_shape(x.shape)
    rng = np.random.default_rng(p["seed"])
    five = g.node("Reshape", [x.name, g.const(np.array(shape5, np.int64), "s5")], shape5)
    axis = p["axis"]
    if p["op"] == "prelu":
        if p["per_channel"]:
            slopes_shape = (shape5[axis],) + (1,) * (4 - axis)
        else:
            slopes_shape = (1,)
        slopes = rng.uniform(-0.3, 0.6, slopes_shape).astype(np.float32)
        y = g.node("PRelu", [five.name, g.const(slopes, "slope")], shape5)
    else:
        y = g.node("Softmax", [five.name], shape5, axis=-1 if p["last"] else axis)
    back = g.node("Reshape", [y.name, g.const(np.array(x.shape, np.int64), "s4")], x.shape)
    g.set(back)
    return True


def draw(kind: str, ch, seed: int) -> Any:
    """The parameters of a rank-5 layer, drawn by the chooser `ch`."""
    return dict(op=ch.choice(OPS), axis=ch.choice((1, 2, 3, 4)), per_channel=ch.chance(0.8),
                last=ch.chance(0.2), seed=seed)  # fmt: skip


EMITTERS = {"rank5": emit_rank5}
KINDS = ("rank5",)
"""Layer kinds drawn at rank 4, besides `grammar`'s."""
