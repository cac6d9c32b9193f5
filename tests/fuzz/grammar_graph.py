"""The graph a fuzz spec's layers are replayed into (`Graph`, its `Value`s) and the helpers every
emitter shares; `grammar.py` re-exports them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from onnx import helper, numpy_helper


@dataclass
class Value:
    name: str
    shape: tuple[int, ...]


@dataclass
class Graph:
    nodes: list = field(default_factory=list)
    inits: list = field(default_factory=list)
    values: list[Value] = field(default_factory=list)  # every tensor made so far, in order
    current: Value | None = None
    macs: int = 0
    _count: int = 0
    _prefix: str = "L0"

    def fresh(self, hint: str = "t") -> str:
        self._count += 1
        return f"{self._prefix}_{hint}{self._count}"

    def const(self, array: np.ndarray, hint: str = "w") -> str:
        name = self.fresh(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def named_const(self, name: str, array: np.ndarray) -> str:
        """A constant shared by name (reused blocks); made once."""
        if not any(init.name == name for init in self.inits):
            self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: Sequence[str], shape: tuple[int, ...], **attrs) -> Value:
        out = self.fresh("t")
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=self.fresh(op), **attrs))
        value = Value(out, tuple(int(d) for d in shape))
        self.values.append(value)
        return value

    def set(self, value: Value) -> None:
        self.current = value

    def earlier(self, pred: Callable[[tuple[int, ...]], bool]) -> list[Value]:
        return [v for v in self.values[:-1] if pred(v.shape) and v is not self.current]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def _conv_out(size: int, k: int, s: int, d: int, p0: int, p1: int) -> int:
    return (size + p0 + p1 - ((k - 1) * d + 1)) // s + 1


def _pool_out(size: int, k: int, s: int, p0: int, p1: int, ceil_mode: bool) -> int:
    """The output size; 0 when the window does not fit, and also for a ceil_mode whose last
    window would start in the end padding, where ONNX's shape inference (which keeps it)
    and onnxruntime (which drops it) disagree."""
    span = size + p0 + p1 - k
    if span < 0:
        return 0
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p0:
        return 0
    return out


Emitter = Callable[[Graph, dict], bool]
"""Adds a layer to the graph; False (having added nothing) where it does not fit."""


def on_rank(*ranks: int) -> Callable[[Emitter], Emitter]:
    """An emitter for a current tensor of one of `ranks`: on any other it does not fit (False),
    and adds nothing."""

    def wrap(emit: Emitter) -> Emitter:
        @functools.wraps(emit)
        def emit_on_rank(g: Graph, p: dict) -> bool:
            if len(g.current.shape) not in ranks:
                return False
            return emit(g, p)

        return emit_on_rank

    return wrap
