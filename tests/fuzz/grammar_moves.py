"""The fuzzer's data-movement forms of issue 21, kept apart from `grammar.py` (which registers
them): Gather with constant indices (a progression, or any, repeated and negative), a window
scramble through rank 6 (Swin's partition as one reshape -> transpose -> reshape), Tile and
Expand, and the steps of a Slice (negative too). (`grammar.emit_pad` makes the reflect and
edge pads.) Each emitter takes the graph under construction and the
layer's parameters, and returns False when the layer does not fit the current tensor."""

from __future__ import annotations

from typing import Any

import numpy as np
from grammar_graph import on_rank


@on_rank(4)
def emit_gather(g, p: dict) -> bool:
    """Gather on `axis` of an NCHW tensor with constant indices (a vector: the rank stays)."""
    x = g.current
    axis = p["axis"]
    size = x.shape[axis]
    picks = [i % size for i in p["picks"]]
    indices = [i - size if negative else i for i, negative in zip(picks, p["negative"])]
    shape = list(x.shape)
    shape[axis] = len(indices)
    idx = g.const(np.array(indices, np.int64), "gi")
    g.set(g.node("Gather", [x.name, idx], tuple(shape), axis=axis))
    return True


def emit_windows(g, p: dict) -> bool:
    """Windows of `size` rows and columns gathered together: [N, C, H, W] -> reshape
    [N, C, H/s, s, W/s, s] -> transpose (0, 1, 2, 4, 3, 5) -> reshape [N, C, H, W]."""
    x = g.current
    s = p["size"]
    if len(x.shape) != 4 or x.shape[2] % s or x.shape[3] % s or x.shape[3] == s:
        return False
    n, c, h, w = x.shape
    six = (n, c, h // s, s, w // s, s)
    r = g.node("Reshape", [x.name, g.const(np.array(six, np.int64), "sh")], six)
    moved = (n, c, h // s, w // s, s, s)
    t = g.node("Transpose", [r.name], moved, perm=[0, 1, 2, 4, 3, 5])
    g.set(g.node("Reshape", [t.name, g.const(np.array(x.shape, np.int64), "sh")], x.shape))
    return True


@on_rank(4)
def emit_repeat(g, p: dict) -> bool:
    """Tile on H and W by small repeats, or Expand of a 1x1 plane (a per-channel vector) to
    `size` x `size`."""
    x = g.current
    n, c, h, w = x.shape
    if p["op"] == "Tile":
        reps = (1, 1, p["rh"], p["rw"])
        shape = (n, c, h * p["rh"], w * p["rw"])
        if reps == (1, 1, 1, 1) or shape[2] * shape[3] > 4096:
            return False
        g.set(g.node("Tile", [x.name, g.const(np.array(reps, np.int64), "rep")], shape))
        return True
    if (h, w) != (1, 1):
        return False
    shape = (n, c, p["size"], p["size"])
    g.set(g.node("Expand", [x.name, g.const(np.array(shape, np.int64), "to")], shape))
    return True


def slice_bounds(size: int, p: dict) -> tuple[int, int, int, int] | None:
    """(start, end, step, kept) of a Slice of an axis of `size` with the drawn parameters;
    None for a slice that keeps the axis whole and in order, or keeps nothing."""
    step = p.get("step", 1)
    start = p["start"] % size
    if step > 0:
        end = start + 1 + (p["len"] % (size - start))
        kept = len(range(start, end, step))
    else:  # from start down to the end (exclusive), -1 meaning past the first element
        end = start - 1 - (p["len"] % (start + 1))
        kept = len(range(start, end, step))
    if kept == 0 or (step == 1 and kept == size):
        return None
    return start, end, step, kept


def draw(kind: str, ch, seed: int) -> Any:
    """The parameters of one of this module's layers, drawn by the chooser `ch`."""
    if kind == "gather":
        count = ch.integer(1, 5)
        return dict(
            axis=ch.choice((1, 2, 3)),
            picks=tuple(ch.integer(0, 11) for _ in range(count)),
            negative=tuple(ch.chance(0.2) for _ in range(count)),
        )
    if kind == "windows":
        return dict(size=ch.choice((2, 3, 4)))
    if kind == "repeat":
        return dict(op=ch.choice(("Tile", "Expand")), rh=ch.integer(1, 3), rw=ch.integer(1, 3),
                    size=ch.choice((2, 5)))  # fmt: skip
    raise AssertionError(kind)


EMITTERS = {"gather": emit_gather, "windows": emit_windows, "repeat": emit_repeat}
KINDS = ("gather", "windows", "repeat")
"""Layer kinds drawn at rank 4, besides `grammar`'s."""
