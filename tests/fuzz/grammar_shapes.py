"""The fuzzer's shape-changing layers (to rank 2, Reshape, Unflatten, Transpose, channel shuffle,
Resize, Slice), kept apart from `grammar.py` (which draws them and registers `EMITTERS`)."""

from __future__ import annotations

import grammar_moves
import numpy as np
from grammar_graph import Graph, _f32, on_rank


@on_rank(4)
def emit_to_rank2(g: Graph, p: dict) -> bool:
    """Flatten, Reshape(N, -1), or Squeeze of a 1x1 plane."""
    x = g.current
    n = x.shape[0]
    flat = int(np.prod(x.shape[1:]))
    how = p["how"]
    if how == "Squeeze":
        if x.shape[2:] != (1, 1):
            return False
        g.set(g.node("Squeeze", [x.name, g.const(np.array([2, 3], np.int64), "ax")], (n, flat)))
    elif how == "Reshape":
        shape = g.const(np.array([n, -1], np.int64), "sh")
        g.set(g.node("Reshape", [x.name, shape], (n, flat)))
    else:
        g.set(g.node("Flatten", [x.name], (n, flat), axis=1))
    return True


@on_rank(4)
def emit_reshape4(g: Graph, p: dict) -> bool:
    x = g.current
    n, c, h, w = x.shape
    target = {
        "fold_h": (n, c * h, w, 1),
        "merge_hw": (n, c, h * w, 1),
        "all_channels": (n, c * h * w, 1, 1),
        "unflatten": None,
    }[p["to"]]
    if target is None:
        return False
    g.set(g.node("Reshape", [x.name, g.const(np.array(target, np.int64), "sh")], target))
    return True


@on_rank(2)
def emit_unflatten(g: Graph, p: dict) -> bool:
    """(N, F) -> (N, F, 1, 1) so that convs can follow an FC."""
    x = g.current
    target = (x.shape[0], x.shape[1], 1, 1)
    g.set(g.node("Reshape", [x.name, g.const(np.array(target, np.int64), "sh")], target))
    return True


@on_rank(4)
def emit_transpose(g: Graph, p: dict) -> bool:
    x = g.current
    if p["perm"] == "roundtrip":
        t = g.node(
            "Transpose", [x.name], tuple(x.shape[i] for i in (0, 2, 3, 1)), perm=[0, 2, 3, 1]
        )
        g.set(g.node("Transpose", [t.name], x.shape, perm=[0, 3, 1, 2]))
        return True
    perm = list(p["perm"])
    g.set(g.node("Transpose", [x.name], tuple(x.shape[i] for i in perm), perm=perm))
    return True


@on_rank(4)
def emit_channel_shuffle(g: Graph, p: dict) -> bool:
    x = g.current
    n, c, h, w = x.shape
    groups = p["groups"]
    if c % groups or c == groups:
        return False
    five = (n, groups, c // groups, h, w)
    r = g.node("Reshape", [x.name, g.const(np.array(five, np.int64), "sh")], five)
    t = g.node("Transpose", [r.name], (n, c // groups, groups, h, w), perm=[0, 2, 1, 3, 4])
    g.set(g.node("Reshape", [t.name, g.const(np.array(x.shape, np.int64), "sh")], x.shape))
    return True


@on_rank(4)
def emit_resize(g: Graph, p: dict) -> bool:
    x = g.current
    n, c, h, w = x.shape
    f = p["scale"]
    scales = g.const(_f32([1, 1, f, f]), "sc")
    attrs = {"mode": p["mode"]}
    if p["mode"] == "nearest":
        attrs["nearest_mode"] = "floor" if p["ctm"] == "asymmetric" else "round_prefer_floor"
    if p["mode"] == "linear" and p["ctm"] == "align_corners" and (h == 1 or w == 1):
        return False
    attrs["coordinate_transformation_mode"] = p["ctm"]
    g.set(g.node("Resize", [x.name, "", scales], (n, c, h * f, w * f), **attrs))
    return True


@on_rank(4)
def emit_slice(g: Graph, p: dict) -> bool:
    x = g.current
    axis = p["axis"]
    size = x.shape[axis]
    bounds = grammar_moves.slice_bounds(size, p) if size >= 2 else None
    if bounds is None:
        return False
    start, end, step, kept = bounds
    shape = list(x.shape)
    shape[axis] = kept
    ins = [
        x.name,
        g.const(np.array([start], np.int64), "st"),
        g.const(np.array([end if end >= 0 else -(2**62)], np.int64), "en"),
        g.const(np.array([axis], np.int64), "ax"),
    ]
    if step != 1:
        ins.append(g.const(np.array([step], np.int64), "sp"))
    g.set(g.node("Slice", ins, tuple(shape)))
    return True


EMITTERS = {
    "to_rank2": emit_to_rank2,
    "reshape4": emit_reshape4,
    "unflatten": emit_unflatten,
    "transpose": emit_transpose,
    "shuffle": emit_channel_shuffle,
    "resize": emit_resize,
    "slice": emit_slice,
}
