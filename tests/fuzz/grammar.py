"""Random small CNN graphs for differential fuzzing of mrvl against onnxruntime.

A graph is a `Spec`: an input shape, a target (`mcpu`, `num_tiles`) and a list of `Layer`s,
each an op kind with its parameters and its own weight seed. `build_model(spec)` replays the
layers over the current tensor (NCHW f32, static shapes, batch 1-2) and returns an ONNX model
made with `onnx.helper`. A layer whose parameters no longer fit the tensor it meets (after a
shrinker deleted something in front of it) is skipped, so every sub-list of layers is a valid
graph: that is what lets `fuzz.shrink` delete layers freely.

The same generator serves hypothesis (`specs()`, which draws through hypothesis so it shrinks
the usual way) and a plain seeded `random.Random` (`random_spec`, for `scripts/fuzz.py`).

The graph under construction is `grammar_graph.py`'s; the per-element layers' emitters are in
`grammar_pointwise.py` and the shape-changing ones in `grammar_shapes.py`, as the issue-21 forms
are in the modules named below; this module draws every kind and registers their `EMITTERS`.

The grammar covers every operator mrvl offloads today (Conv incl. grouped, depthwise,
dilated and padded; BatchNormalization; Mul/Add by constants on either side; Relu, Clip,
LeakyRelu; the unary layers of `grammar_unary.py` (GELU, Erf, Exp, Log, Sqrt, Pow...,
Max / Min by a constant); MaxPool/AveragePool with pads, ceil_mode and count_include_pad; the
global pools; Gemm/MatMul; MatMul of two activations (attention's Q·Kᵀ and A·V, a shared
operand, reductions longer than a tile); Add and Concat of two tensors; Reshape/Flatten/Squeeze;
Transpose; constant Pad, fused or standalone, rank 2 and 4) and some it does not (Softmax, Sigmoid, Tanh, HardSigmoid, HardSwish, SiLU,
Resize, Slice, Sub/Div by constants, Mul of two tensors, channel shuffle, concat on other axes,
reflect and edge Pad; and, from `grammar_moves.py`, Slice with any step, Gather with constant
indices, Tile, Expand and a window scramble through rank 6; from `grammar_reduce.py`, the
reductions over any axes and Sub / Div / Max / Min / Add / Mul that broadcast; from
`grammar_einsum.py`, Einsum as a transpose, a Linear or a product of two activations, and
forms that stay on the CPU; from `grammar_rank5.py`, PRelu with per-channel slopes, Softmax,
Sigmoid and Add of a constant (after a Transpose) at rank 5; Max / Min by a constant tensor
are `const` layers). It also makes reused identical blocks (one sub-graph with the same weights
at two places), odd sizes (1x1 planes, one channel, prime widths) and layers too big for one
tile's OCM.

Weights are scaled by 1/sqrt(fan-in) so each layer keeps unit-RMS activations unit-RMS, and
the fp16 acceptance rule measures the compiler rather than fp16 overflow.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import grammar_einsum
import grammar_moves
import grammar_pointwise
import grammar_rank5
import grammar_reduce
import grammar_shapes
import numpy as np
import onnx
from grammar_graph import Graph, Value, _conv_out, _f32, _pool_out, _rng, on_rank
from grammar_unary import draw_unary, emit_unary
from onnx import TensorProto, helper

OPSET = 17
MCPUS = ("cn10ka", "cnf10kb")
TILE_COUNTS = (1, 2, 4, 8)
MAX_TILES = {"cn10ka": 8, "cnf10kb": 4}
"""`mrvl/targets/*.json` max_tiles; more is an argument error (ValueError), not a model bug."""
PRIMES = (2, 3, 5, 7, 11, 13, 17)
MAX_MACS = 40_000_000
"""Per graph, so that the simulator (numpy) runs an example in about a second."""
MAX_WEIGHTS = 3_000_000
"""Per conv (elements): 6 MB of fp16, far more than one tile's OCM."""


# ---------------------------------------------------------------------------------------------
# Choosers: where the random decisions come from


class Chooser(Protocol):
    def integer(self, lo: int, hi: int) -> int: ...
    def choice(self, options: Sequence[Any]) -> Any: ...
    def chance(self, p: float) -> bool: ...


class RandomChooser:
    """Decisions from a seeded `random.Random` (the long run in `scripts/fuzz.py`)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self.rng.randrange(len(options))]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p


class DrawChooser:
    """Decisions drawn through hypothesis; each shrinks toward the first option, the low
    end of a range, and False."""

    def __init__(self, draw):
        from hypothesis import strategies as st

        self.draw = draw
        self.st = st

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(self.st.integers(lo, hi))

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self.draw(self.st.integers(0, len(options) - 1))]

    def chance(self, p: float) -> bool:
        return self.draw(self.st.integers(0, 999)) >= round(1000 * (1 - p))


# ---------------------------------------------------------------------------------------------
# Specs


@dataclass(frozen=True)
class Layer:
    op: str
    params: dict[str, Any]

    def __str__(self) -> str:
        shown = {k: v for k, v in self.params.items() if k != "seed"}
        args = ", ".join(f"{k}={v}" for k, v in shown.items())
        return f"{self.op}({args})"


@dataclass(frozen=True)
class Spec:
    input_shape: tuple[int, ...]
    layers: tuple[Layer, ...]
    mcpu: str = "cn10ka"
    num_tiles: int = 1
    seed: int = 0
    extra_output: int | None = None
    """Also output an earlier tensor (index into the tensors made, modulo their count), so
    that a region has results that another region or the CPU also reads."""

    def describe(self) -> str:
        """One line: target, input shape and the layers in order."""
        body = " -> ".join(str(layer) for layer in self.layers) or "identity"
        shape = "x".join(map(str, self.input_shape))
        extra = "" if self.extra_output is None else f"; also outputs #{self.extra_output}"
        return f"{self.mcpu}/{self.num_tiles} tiles, x {shape}: {body}{extra}"


# ---------------------------------------------------------------------------------------------
# Emitters: (graph, params) -> True if the layer was added, False if it does not fit here.
# Each emitter reads the current value, adds nodes, and sets the new current value.


def emit_conv(g: Graph, p: dict, x: Value | None = None, set_current: bool = True):
    x = x or g.current
    if len(x.shape) != 4:
        return False
    n, c, h, w = x.shape
    groups = {"1": 1, "dw": c, "g2": 2, "g3": 3}[p["groups"]]
    cout = p["cout"] if p["groups"] != "dw" else c * p.get("mult", 1)
    if c % groups or cout % groups:
        return False
    kh, kw = p["k"]
    sh, sw = p.get("s", (1, 1))
    dh, dw = p.get("d", (1, 1))
    pads = list(p.get("pads", (0, 0, 0, 0)))
    if p.get("same"):
        pads = [dh * (kh - 1) // 2, dw * (kw - 1) // 2, dh * (kh - 1) // 2, dw * (kw - 1) // 2]
    ho = _conv_out(h, kh, sh, dh, pads[0], pads[2])
    wo = _conv_out(w, kw, sw, dw, pads[1], pads[3])
    if ho < 1 or wo < 1:
        return False
    fan_in = (c // groups) * kh * kw
    if cout * fan_in > MAX_WEIGHTS:
        return False
    rng = _rng(p["seed"])
    weight = _f32(rng.standard_normal((cout, c // groups, kh, kw)) / np.sqrt(fan_in))
    inputs = [x.name]
    if p.get("shared"):
        inputs.append(g.named_const(f"shared_w{p['seed']}", weight))
    else:
        inputs.append(g.const(weight))
    if p.get("bias"):
        bias = _f32(rng.standard_normal(cout) * 0.2)
        inputs.append(
            g.named_const(f"shared_b{p['seed']}", bias) if p.get("shared") else g.const(bias, "b")
        )
    g.macs += n * cout * fan_in * ho * wo
    out = g.node(
        "Conv",
        inputs,
        (n, cout, ho, wo),
        kernel_shape=[kh, kw],
        strides=[sh, sw],
        dilations=[dh, dw],
        pads=pads,
        group=groups,
    )
    if set_current:
        g.set(out)
    return out


@on_rank(4)
def emit_pool(g: Graph, p: dict) -> bool:
    x = g.current
    n, c, h, w = x.shape
    kh, kw = p["k"]
    sh, sw = p["s"]
    dilation = p.get("d", 1) if p["op"] == "MaxPool" else 1
    pads = list(p["pads"])
    if pads[0] >= kh or pads[2] >= kh or pads[1] >= kw or pads[3] >= kw:
        return False
    ceil = bool(p.get("ceil_mode"))
    span_h, span_w = (kh - 1) * dilation + 1, (kw - 1) * dilation + 1
    ho = _pool_out(h, span_h, sh, pads[0], pads[2], ceil)
    wo = _pool_out(w, span_w, sw, pads[1], pads[3], ceil)
    if ho < 1 or wo < 1:
        return False
    attrs = dict(kernel_shape=[kh, kw], strides=[sh, sw], pads=pads, ceil_mode=int(ceil))
    if dilation != 1:
        attrs["dilations"] = [dilation, dilation]
    if p["op"] == "AveragePool":
        attrs["count_include_pad"] = int(p.get("count_include_pad", 0))
    g.set(g.node(p["op"], [x.name], (n, c, ho, wo), **attrs))
    return True


def emit_pad(g: Graph, p: dict) -> bool:
    """Pad with constant pads: zero (folds into a following conv), another value, or the
    reflect/edge modes; on H and W, or (rarely) on channels too; at rank 2 (a standalone
    constant pad), on the features by the left and right pads."""
    x = g.current
    if len(x.shape) == 2 and p["mode"] == "constant":
        n, f = x.shape
        _, left, _, right = p["pads"]
        pads = g.const(np.array([0, left, 0, right], np.int64), "pads")
        value = g.const(_f32(p.get("value", 0.0)), "pv")
        g.set(g.node("Pad", [x.name, pads, value], (n, f + left + right), mode="constant"))
        return True
    if len(x.shape) != 4:
        return False
    n, c, h, w = x.shape
    top, left, bottom, right = p["pads"]
    front = back = p.get("channels", 0)
    if p["mode"] == "reflect" and (max(top, bottom) >= h or max(left, right) >= w or front):
        return False
    if p["mode"] != "constant" and front:
        return False
    pads = np.array([0, front, top, left, 0, back, bottom, right], np.int64)
    ins = [x.name, g.const(pads, "pads")]
    if p["mode"] == "constant":
        ins.append(g.const(_f32(p.get("value", 0.0)), "pv"))
    shape = (n, c + front + back, h + top + bottom, w + left + right)
    g.set(g.node("Pad", ins, shape, mode=p["mode"]))
    return True


@on_rank(4)
def emit_global_pool(g: Graph, p: dict) -> bool:
    x = g.current
    g.set(g.node(p["op"], [x.name], (*x.shape[:2], 1, 1)))
    return True


def _branch(g: Graph, x: Value, p: dict, cout: int) -> Value | None:
    """A shape-keeping conv (k 1 or 3, 'same' padding) from x, for the two-tensor ops."""
    conv = dict(cout=cout, groups="1", k=(p["k"], p["k"]), same=True, seed=p["seed"], bias=True)
    out = emit_conv(g, conv, x, set_current=False)
    if out is False:
        return None
    if p.get("relu"):
        out = g.node("Relu", [out.name], out.shape)
    return out


def emit_add_tensors(g: Graph, p: dict) -> bool:
    """Add of two tensors: the current one and an earlier one of its shape, or a branch."""
    x = g.current
    other = None
    if p["with"] == "earlier":
        same = g.earlier(lambda s: s == x.shape)
        other = same[p["pick"] % len(same)] if same else None
    elif p["with"] == "self":
        other = x
    elif p["with"] == "gap" and len(x.shape) == 4:  # a channel broadcast: (N,C,H,W) + (N,C,1,1)
        other = g.node("GlobalAveragePool", [x.name], (*x.shape[:2], 1, 1))
    if other is None:
        if len(x.shape) == 4:
            other = _branch(g, x, p, x.shape[1])
        else:
            other = _fc(g, x, dict(seed=p["seed"], out=x.shape[1], op="Gemm", bias=True), False)
        if other is None or other is False:
            return False
    op = p.get("op", "Add")
    ins = [x.name, other.name] if p["order"] == 0 else [other.name, x.name]
    g.set(g.node(op, ins, x.shape))
    return True


@on_rank(4)
def emit_concat(g: Graph, p: dict) -> bool:
    x = g.current
    axis = p["axis"]
    n, c, h, w = x.shape
    if p["with"] == "earlier":
        ok = [
            v
            for v in g.earlier(lambda s: len(s) == 4)
            if all(v.shape[i] == x.shape[i] for i in range(4) if i != axis)
        ]
        other = ok[p["pick"] % len(ok)] if ok else None
    elif p["with"] == "self":
        other = x
    else:
        other = None
    if other is None:
        if axis != 1:
            other = x
        else:
            other = _branch(g, x, p, p["cout"])
            if other is None:
                return False
    ins = [x.name, other.name] if p["order"] == 0 else [other.name, x.name]
    shape = list(x.shape)
    shape[axis] += other.shape[axis]
    g.set(g.node("Concat", ins, tuple(shape), axis=axis))
    return True


@on_rank(4)
def emit_squeeze_excite(g: Graph, p: dict) -> bool:
    """x * sigmoid(conv(relu(conv(gap(x))))): a tensor-by-tensor Mul with channel broadcast."""
    x = g.current
    n, c, h, w = x.shape
    s = g.node("GlobalAveragePool", [x.name], (n, c, 1, 1))
    mid = max(1, c // 2)
    s = emit_conv(g, dict(cout=mid, groups="1", k=(1, 1), seed=p["seed"], bias=True), s, False)
    if s is False:
        return False
    s = g.node("Relu", [s.name], s.shape)
    s = emit_conv(g, dict(cout=c, groups="1", k=(1, 1), seed=p["seed"] + 1, bias=True), s, False)
    if s is False:
        return False
    s = g.node(p.get("gate", "Sigmoid"), [s.name], s.shape)
    ins = [x.name, s.name] if p["order"] == 0 else [s.name, x.name]
    g.set(g.node("Mul", ins, x.shape))
    return True


def _fc(g: Graph, x: Value, p: dict, set_current: bool = True):
    if len(x.shape) != 2:
        return False
    n, f = x.shape
    out = p["out"]
    if f * out > MAX_WEIGHTS:
        return False
    rng = _rng(p["seed"])
    weight = rng.standard_normal((f, out)) / np.sqrt(f)
    g.macs += n * f * out
    if p["op"] == "MatMul":
        value = g.node("MatMul", [x.name, g.const(_f32(weight))], (n, out))
    else:
        alpha = p.get("alpha", 1.0)
        trans_b = int(p.get("transB", 0))
        w = weight.T if trans_b else weight
        ins = [x.name, g.const(_f32(w / alpha))]
        attrs = dict(alpha=alpha, transB=trans_b)
        if p.get("bias"):
            beta = p.get("beta", 1.0)
            ins.append(g.const(_f32(rng.standard_normal(out) * 0.2 / beta), "b"))
            attrs["beta"] = beta
        value = g.node("Gemm", ins, (n, out), **attrs)
    if set_current:
        g.set(value)
    return value


@on_rank(4)
def emit_matmul4(g: Graph, p: dict) -> bool:
    """MatMul of a rank-4 tensor by a constant (W, K): a per-row FC, as in attention heads."""
    x = g.current
    n, c, h, w = x.shape
    rng = _rng(p["seed"])
    weight = g.const(_f32(rng.standard_normal((w, p["out"])) / np.sqrt(w)))
    g.macs += n * c * h * w * p["out"]
    g.set(g.node("MatMul", [x.name, weight], (n, c, h, p["out"])))
    return True


@on_rank(4)
def emit_bmm(g: Graph, p: dict) -> bool:
    """MatMul of two activations, as attention computes it, then a scale by 1/sqrt(k) (which
    keeps unit-RMS activations unit-RMS): `qk` x · yᵀ (y a conv branch of x, or x itself)
    [N, C, H, H]; `gram` xᵀ · x [N, C, W, W]; `flat` the channels' gram matrix over the whole
    plane, x viewed as [N, 1, C, H*W] times its transpose, whose reduction (H*W) and rows (C)
    can exceed a tile's OCM; `shared` x · W where W is an activation [W, W] (a branch of a
    one-image GlobalAveragePool, shared by every batch)."""
    x = g.current
    n, c, h, w = x.shape
    form = p["form"]
    if form == "qk":
        y = x if p["self"] else _branch(g, x, p, c)
        if y is None:
            return False
        yt = g.node("Transpose", [y.name], (n, c, w, h), perm=[0, 1, 3, 2])
        a, b, k, out = x, yt, w, (n, c, h, h)
    elif form == "gram":
        xt = g.node("Transpose", [x.name], (n, c, w, h), perm=[0, 1, 3, 2])
        a, b, k, out = xt, x, h, (n, c, w, w)
    elif form == "flat":
        flat = (n, 1, c, h * w)
        v = g.node("Reshape", [x.name, g.const(np.array(flat, np.int64), "sh")], flat)
        vt = g.node("Transpose", [v.name], (n, 1, h * w, c), perm=[0, 1, 3, 2])
        a, b, k, out = v, vt, h * w, (n, 1, c, c)
    else:  # shared: [N, C, H, W] . [W, W], the right operand an activation of the region
        if w > 64:
            return False
        row = g.node("ReduceMean", [x.name], (1, 1, 1, w), axes=[0, 1, 2], keepdims=1)
        mix = g.node("Reshape", [row.name, g.const(np.array((w, 1), np.int64), "sh")], (w, 1))
        b = g.node("MatMul", [mix.name, g.const(_f32(np.ones((1, w))), "ones")], (w, w))
        a, k, out = x, w, (n, c, h, w)
    g.macs += int(np.prod(out)) * k
    product = g.node("MatMul", [a.name, b.name], out)
    scale = g.const(_f32(np.array(1.0 / np.sqrt(k))), "scale")
    g.set(g.node("Mul", [product.name, scale], out))
    return True


def emit_fc(g: Graph, p: dict) -> bool:
    return _fc(g, g.current, p) is not False


@on_rank(4)
def emit_block(g: Graph, p: dict) -> bool:
    """The same conv+relu block, with the same weights, applied `times` times in a row
    (TVM deduplicates identical composite functions)."""
    x = g.current
    conv = dict(cout=x.shape[1], groups=p["groups"], k=(3, 3), same=True, seed=p["seed"],
                bias=p["bias"], shared=p["shared"])  # fmt: skip
    for _ in range(p["times"]):
        out = emit_conv(g, conv)
        if out is False:
            return False
        g.set(g.node("Relu", [out.name], out.shape))
    return True


EMITTERS: dict[str, Callable[[Graph, dict], bool]] = {
    "conv": lambda g, p: emit_conv(g, p) is not False,
    "pool": emit_pool,
    "global_pool": emit_global_pool,
    "pad": emit_pad,
    "add": emit_add_tensors,
    "concat": emit_concat,
    "se": emit_squeeze_excite,
    "fc": emit_fc,
    "matmul4": emit_matmul4,
    "bmm": emit_bmm,
    "block": emit_block,
    "unary": emit_unary,
    **grammar_pointwise.EMITTERS,
    **grammar_shapes.EMITTERS,
    **grammar_moves.EMITTERS,
    **grammar_reduce.EMITTERS,
    **grammar_einsum.EMITTERS,
    **grammar_rank5.EMITTERS,
}


def build_graph(spec: Spec) -> tuple[Graph, list[Layer]]:
    """Replay `spec`'s layers; returns the graph and the layers that were applied."""
    g = Graph()
    x = Value("x", spec.input_shape)
    g.values.append(x)
    g.set(x)
    applied = []
    for index, layer in enumerate(spec.layers):
        g._prefix = f"L{index}"
        mark = (len(g.nodes), len(g.inits), len(g.values), g.macs, g.current)
        if EMITTERS[layer.op](g, layer.params):
            applied.append(layer)
        else:  # undo whatever a failed emitter had added
            del g.nodes[mark[0] :], g.inits[mark[1] :], g.values[mark[2] :]
            g.macs, g.current = mark[3], mark[4]
    return g, applied


def build_model(spec: Spec) -> onnx.ModelProto:
    g, _ = build_graph(spec)
    if not g.nodes:  # an empty graph is not a model: make it an identity
        g.set(g.node("Identity", ["x"], spec.input_shape))
    outputs = [g.current]
    made = [v for v in g.values[1:] if v is not g.current]
    if spec.extra_output is not None and made:
        outputs.append(made[spec.extra_output % len(made)])
    graph = helper.make_graph(
        g.nodes,
        "fuzz",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(spec.input_shape))],
        [helper.make_tensor_value_info(v.name, TensorProto.FLOAT, list(v.shape)) for v in outputs],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 10
    return model


def input_array(spec: Spec) -> np.ndarray:
    return _f32(_rng(spec.seed).standard_normal(spec.input_shape))


# ---------------------------------------------------------------------------------------------
# Generation: draw layers that fit the tensor they meet


def conv_params(
    seed: int,
    cout: int,
    k: tuple[int, int],
    *,
    groups: str = "1",
    s: tuple[int, int] = (1, 1),
    d: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] | None = None,
    bias: bool = True,
    **extra,
) -> dict[str, Any]:
    """A conv layer's parameters, as `_draw_conv` draws them and the regression tests write
    them: explicit `pads` [top, left, bottom, right], or 'same' padding when there are none;
    `extra` holds the depthwise multiplier (`mult`)."""
    return dict(cout=cout, groups=groups, k=tuple(k), s=tuple(s), d=tuple(d),
                pads=(0, 0, 0, 0) if pads is None else tuple(pads), same=pads is None, bias=bias,
                seed=seed, **extra)  # fmt: skip


def _draw_conv(ch: Chooser, g: Graph, seed: int) -> dict | None:
    n, c, h, w = g.current.shape
    big = ch.chance(0.08)
    groups = ch.choice(("1", "dw", "1", "g2", "g3"))
    if big:
        cout = ch.choice((64, 160, 300, 480, 520))
    else:
        cout = ch.choice((1, 2, 3, 4, 5, 7, 8, 12, 16))
    kh = ch.choice((1, 3, 1, 2, 5, 7, 11))
    kw = kh if ch.chance(0.8) else ch.choice((1, 3, 5))
    s = (1, 1) if ch.chance(0.7) else (ch.choice((2, 1, 3)), ch.choice((2, 1, 3)))
    d = (1, 1) if ch.chance(0.8) else (ch.choice((2, 1, 3)), ch.choice((2, 1, 3)))
    if ch.chance(0.4):
        pads, same = (0, 0, 0, 0), True
    else:
        pads, same = tuple(ch.integer(0, 2) for _ in range(4)), False
    p = conv_params(seed, cout, (kh, kw), groups=groups, s=s, d=d, pads=None if same else pads,
                    bias=ch.chance(0.6))  # fmt: skip
    if groups == "dw":
        p["mult"] = ch.choice((1, 2))
    # keep the simulator's work bounded: shrink cout until the MACs fit
    while True:
        trial = Graph(values=[g.current], current=g.current, macs=g.macs)
        if emit_conv(trial, p) is False:
            return None
        if trial.macs <= MAX_MACS or p["cout"] == 1:
            return p if trial.macs <= MAX_MACS else None
        p["cout"] = max(1, p["cout"] // 2)


def _draw_layer(ch: Chooser, g: Graph, seed: int) -> Layer | None:
    rank = len(g.current.shape)
    if rank == 4:
        kinds = ("conv", "conv", "conv", "conv", "conv", "act", "act", "act", "bn", "const",
                 "const", "pool", "pool", "global_pool",
                 "to_rank2", "add", "concat", "block", "transpose", "reshape4", "se",
                 "resize", "slice", "shuffle", "unsupported_act", "pad", "matmul4",
                 "bmm", "unary", "unary", *grammar_moves.KINDS, "softmax", "layernorm",
                 *grammar_reduce.KINDS, *grammar_einsum.KINDS, *grammar_rank5.KINDS)  # fmt: skip
    else:
        kinds = ("fc", "fc", "act", "const", "bn", "add", "unflatten", "unsupported_act",
                 "unary", "softmax", "layernorm", "pad")  # fmt: skip
    kind = ch.choice(kinds)
    if kind in grammar_moves.KINDS:
        return Layer(kind, grammar_moves.draw(kind, ch, seed))
    if kind in grammar_reduce.KINDS:
        return Layer(kind, grammar_reduce.draw(kind, ch, seed))
    if kind in grammar_einsum.KINDS:
        return Layer(kind, grammar_einsum.draw(kind, ch, seed))
    if kind in grammar_rank5.KINDS:
        return Layer(kind, grammar_rank5.draw(kind, ch, seed))
    if kind == "conv":
        p = _draw_conv(ch, g, seed)
        return Layer("conv", p) if p else None
    if kind == "act":
        act = ch.choice(("Relu", "Clip", "LeakyRelu"))
        p = dict(act=act)
        if act == "Clip":
            p["bounds"] = ch.choice(((0.0, 6.0), (-1.0, 1.0), (0.0, 1.0), (-0.5, 3.0), (0.5, None)))
        if act == "LeakyRelu":
            p["alpha"] = ch.choice((0.1, 0.01, 0.2, 1.5))
        return Layer("act", p)
    if kind == "unary":
        return Layer("unary", draw_unary(ch))
    if kind == "unsupported_act":
        act = ch.choice(("Sigmoid", "Softmax", "Tanh", "HardSigmoid", "HardSwish", "SiLU"))
        return Layer("act", dict(act=act, side=ch.choice(("right", "left"))))
    if kind == "bn":
        return Layer("bn", dict(seed=seed))
    if kind == "softmax":
        return Layer("softmax", dict(axis=ch.choice((1, 2, 3, -1))))
    if kind == "layernorm":
        return Layer("layernorm", dict(k=ch.choice((1, 1, 2, 3)), decomposed=ch.chance(0.4),
                                       seed=seed))  # fmt: skip
    if kind == "const":
        op = ch.choice(("Mul", "Add", "Mul", "Add", "Sub", "Div", "Max", "Min"))
        return Layer("const", dict(op=op, side=ch.choice(("right", "left")),
                                   kind=ch.choice(("channel4", "scalar", "channel3", "full",
                                                   "plane")),
                                   signed=ch.chance(0.3), seed=seed))  # fmt: skip
    if kind == "pool":
        op = ch.choice(("MaxPool", "AveragePool"))
        k = ch.choice((2, 3, 1, 5))
        k = (k, k) if ch.chance(0.8) else (k, ch.choice((1, 2, 3)))
        st = ch.choice((2, 1, 3))
        s = (st, st) if ch.chance(0.8) else (st, ch.choice((1, 2)))
        pads = (0, 0, 0, 0) if ch.chance(0.5) else tuple(ch.integer(0, 2) for _ in range(4))
        p = dict(op=op, k=k, s=s, pads=pads, ceil_mode=ch.chance(0.3),
                 count_include_pad=ch.chance(0.5))  # fmt: skip
        if op == "MaxPool" and ch.chance(0.1):
            p["d"] = 2
        return Layer("pool", p)
    if kind == "matmul4":
        return Layer("matmul4", dict(out=ch.choice((1, 4, 7, 16)), seed=seed))
    if kind == "bmm":
        return Layer("bmm", dict(form=ch.choice(("qk", "qk", "gram", "flat", "shared")),
                                 self=ch.chance(0.3), k=ch.choice((1, 3)), seed=seed))  # fmt: skip
    if kind == "pad":
        mode = ch.choice(("constant", "constant", "reflect", "edge"))
        pads = tuple(ch.integer(0, 2) for _ in range(4))
        p = dict(mode=mode, pads=pads, channels=1 if ch.chance(0.1) else 0)
        if mode == "constant":
            p["value"] = ch.choice((0.0, 0.0, 0.5))
        return Layer("pad", p)
    if kind == "global_pool":
        return Layer("global_pool", dict(op=ch.choice(("GlobalAveragePool", "GlobalMaxPool"))))
    if kind == "to_rank2":
        return Layer("to_rank2", dict(how=ch.choice(("Flatten", "Reshape", "Squeeze"))))
    if kind == "reshape4":
        return Layer("reshape4", dict(to=ch.choice(("merge_hw", "fold_h", "all_channels"))))
    if kind == "unflatten":
        return Layer("unflatten", {})
    if kind == "transpose":
        perm = ch.choice(("roundtrip", (0, 2, 3, 1), (0, 3, 1, 2), (0, 1, 3, 2), (1, 0, 2, 3)))
        return Layer("transpose", dict(perm=perm))
    if kind == "shuffle":
        return Layer("shuffle", dict(groups=ch.choice((2, 3, 4))))
    if kind == "add":
        return Layer("add", dict(**{"with": ch.choice(("branch", "earlier", "self", "gap"))},
                                 pick=ch.integer(0, 7), order=ch.integer(0, 1),
                                 k=ch.choice((1, 3)), relu=ch.chance(0.5), seed=seed,
                                 op=ch.choice(("Add", "Add", "Add", "Mul"))))  # fmt: skip
    if kind == "concat":
        axis = 1 if ch.chance(0.8) else ch.choice((2, 3))
        return Layer("concat", dict(axis=axis, **{"with": ch.choice(("branch", "earlier", "self"))},
                                    pick=ch.integer(0, 7), order=ch.integer(0, 1),
                                    k=ch.choice((1, 3)), relu=ch.chance(0.5),
                                    cout=ch.choice((1, 2, 4, 5, 8)), seed=seed))  # fmt: skip
    if kind == "block":
        return Layer("block", dict(groups=ch.choice(("1", "dw")), times=ch.choice((2, 3)),
                                   bias=ch.chance(0.5), shared=ch.chance(0.5), seed=seed))  # fmt: skip
    if kind == "se":
        return Layer("se", dict(order=ch.integer(0, 1), gate=ch.choice(("Sigmoid", "HardSigmoid")),
                                seed=seed))  # fmt: skip
    if kind == "resize":
        mode = ch.choice(("nearest", "linear"))
        ctm = ch.choice(("asymmetric", "half_pixel", "align_corners", "pytorch_half_pixel"))
        return Layer("resize", dict(mode=mode, ctm=ctm, scale=ch.choice((2, 3))))
    if kind == "slice":
        return Layer("slice", dict(axis=ch.choice((1, 2, 3)), start=ch.integer(0, 9),
                                   len=ch.integer(0, 9),
                                   step=ch.choice((1, 1, -1, 2, -2))))  # fmt: skip
    if kind == "fc":
        return Layer("fc", dict(op=ch.choice(("Gemm", "MatMul")), out=ch.choice((1, 3, 10, 17, 64)),
                                alpha=ch.choice((1.0, 0.5, 2.0)), beta=ch.choice((1.0, 0.5)),
                                transB=ch.chance(0.5), bias=ch.chance(0.7), seed=seed))  # fmt: skip
    raise AssertionError(kind)


def _draw_input(ch: Chooser) -> tuple[int, ...]:
    n = ch.choice((1, 2))
    shape = ch.choice(("small", "small", "small", "odd", "wide", "deep"))
    if shape == "small":
        return (n, ch.integer(1, 8), ch.integer(1, 12), ch.integer(1, 12))
    if shape == "odd":
        return (n, ch.choice((1, 3)), ch.choice((1, 2, 3, 5)), ch.choice(PRIMES))
    if shape == "wide":  # rows too big for one tile once channels grow
        return (n, ch.choice((1, 3, 8)), ch.integer(1, 4), ch.choice((61, 97, 131, 257)))
    return (1, ch.choice((96, 240, 480, 512)), ch.integer(2, 6), ch.choice((7, 13, 40, 80)))


AVOIDABLE: dict[str, Callable[[Layer], bool]] = {
    "left-constants": lambda layer: layer.op == "const" and layer.params["side"] == "left",
    "hard-activations": lambda layer: (
        layer.params.get("act") in ("HardSigmoid", "HardSwish")
        or layer.params.get("gate") == "HardSigmoid"
    ),
    "reused-blocks": lambda layer: layer.op == "block",
}
"""Features a long run can leave out (`scripts/fuzz.py --avoid`) while a known bug they
trigger is open, so that it does not hide what comes after it in the same graphs."""


def draw_spec(ch: Chooser, max_layers: int = 8, avoid: frozenset[str] = frozenset()) -> Spec:
    input_shape = _draw_input(ch)
    mcpu = ch.choice(MCPUS)
    num_tiles = min(ch.choice(TILE_COUNTS), MAX_TILES[mcpu])
    seed = ch.integer(0, 2**16)
    g = Graph()
    x = Value("x", input_shape)
    g.values.append(x)
    g.set(x)
    layers: list[Layer] = []
    for index in range(ch.integer(1, max_layers)):
        layer = _draw_layer(ch, g, seed * 1000 + index * 10)
        if layer is None or any(AVOIDABLE[feature](layer) for feature in avoid):
            continue
        g._prefix = f"L{len(layers)}"
        mark = (len(g.nodes), len(g.inits), len(g.values), g.macs, g.current)
        if EMITTERS[layer.op](g, layer.params) and g.macs <= MAX_MACS and _sane(g.current):
            layers.append(layer)
        else:
            del g.nodes[mark[0] :], g.inits[mark[1] :], g.values[mark[2] :]
            g.macs, g.current = mark[3], mark[4]
    extra_output = ch.integer(0, 99) if ch.chance(0.15) else None
    return Spec(input_shape, tuple(layers), mcpu, num_tiles, seed, extra_output)


def _sane(value: Value) -> bool:
    """Keep tensors small enough for a quick simulation."""
    return int(np.prod(value.shape)) <= 600_000


def random_spec(seed: int, max_layers: int = 8, avoid: frozenset[str] = frozenset()) -> Spec:
    return draw_spec(RandomChooser(seed), max_layers, avoid)


def specs(max_layers: int = 8):
    """A hypothesis strategy of `Spec`s."""
    from hypothesis import strategies as st

    @st.composite
    def strategy(draw):
        return draw_spec(DrawChooser(draw), max_layers)

    return strategy()


def without(spec: Spec, index: int) -> Spec:
    return replace(spec, layers=spec.layers[:index] + spec.layers[index + 1 :])
