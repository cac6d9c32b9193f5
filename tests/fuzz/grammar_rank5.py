"""The fuzzer's rank-5 activations of issue 21, kept apart from `grammar.py` (which registers
them): the current NCHW tensor x is reshaped to rank 5 (H split in two, or a unit axis
added), goes through a PRelu with per-channel slopes along one of its axes (or one slope), a
Softmax over one of its axes, or YOLOv5's and Swin's elementwise ops (a transpose of the last
four axes, a Sigmoid, an Add of a rank-5 constant with a unit leading axis that broadcasts
along some axes), and is reshaped back. On the MLIP the PRelu is a scale_shift on a 4-D view
of the same bytes whose channel axis is the slopes' (`mrvl.high_rank_prelu`), the Softmax a
softmax on [outer, length, inner]; the reshapes are copies at rank 5. Quantized
(`harness_int8`), the Sigmoid and the Add run in int8 on the rank-4 views of their tensors
(`mrvl.qdq_unit_axis`: the unit axis dropped, or with a batch of two, two neighbouring axes
merged), at either of the grammar's batches (1 and 2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from grammar_graph import on_rank

OPS = ("prelu", "prelu", "softmax", "sigmoid", "add")


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
    elif p["op"] == "softmax":
        y = g.node("Softmax", [five.name], shape5, axis=-1 if p["last"] else axis)
    else:
        y = _elementwise(g, five, p, rng)
    back = g.node("Reshape", [y.name, g.const(np.array(x.shape, np.int64), "s4")], x.shape)
    g.set(back)
    return True


def _elementwise(g, five, p: dict, rng):
    """A Sigmoid or an Add of a constant `[1, ...]` (unit along `axis` when it broadcasts),
    after a transpose of two of the last four axes when `last` is drawn."""
    y = five
    if p["last"]:
        perm = [0, 1, 2, 3, 4]
        perm[p["axis"]], perm[4] = perm[4], perm[p["axis"]]
        y = g.node("Transpose", [y.name], tuple(y.shape[a] for a in perm), perm=perm)
    if p["op"] == "sigmoid":
        return g.node("Sigmoid", [y.name], y.shape)
    const_shape = [1, *y.shape[1:]]
    if p["per_channel"]:
        const_shape[p["axis"]] = 1
    const = rng.standard_normal(const_shape).astype(np.float32)
    return g.node("Add", [y.name, g.const(const, "bias5")], y.shape)


def draw(kind: str, ch, seed: int) -> Any:
    """The parameters of a rank-5 layer, drawn by the chooser `ch`."""
    return dict(op=ch.choice(OPS), axis=ch.choice((1, 2, 3, 4)), per_channel=ch.chance(0.8),
                last=ch.chance(0.2), seed=seed)  # fmt: skip


EMITTERS = {"rank5": emit_rank5}
KINDS = ("rank5",)
"""Layer kinds drawn at rank 4, besides `grammar`'s."""
