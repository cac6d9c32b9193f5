"""The fuzzer's per-element layers (BatchNormalization, a binary op with a constant, the
activations, Softmax, LayerNormalization), kept apart from `grammar.py` (which draws them and
registers `EMITTERS`)."""

from __future__ import annotations

from grammar_graph import Graph, Value, _f32, _rng, on_rank


@on_rank(2, 4)
def emit_bn(g: Graph, p: dict) -> bool:
    x = g.current
    c = x.shape[1]
    rng = _rng(p["seed"])
    gamma = _f32(rng.uniform(0.5, 1.5, c))
    beta = _f32(rng.standard_normal(c) * 0.2)
    mean = _f32(rng.standard_normal(c) * 0.2)
    var = _f32(rng.uniform(0.5, 2.0, c))
    names = [g.const(a, "bn") for a in (gamma, beta, mean, var)]
    g.set(g.node("BatchNormalization", [x.name, *names], x.shape, epsilon=1e-5))
    return True


def _const_shape(x: Value, kind: str) -> tuple[int, ...] | None:
    c = x.shape[1]
    if kind == "scalar":
        return ()
    if len(x.shape) == 4:  # full and plane: no per-channel step, a binary's constant operand
        return {"channel4": (1, c, 1, 1), "channel3": (c, 1, 1), "full": (1, *x.shape[1:]),
                "plane": (1, 1, *x.shape[2:])}.get(kind, (1, c, 1, 1))  # fmt: skip
    return {"channel4": (1, c), "channel3": (c,), "full": (1, c), "plane": x.shape}.get(kind, (c,))


def emit_binary_const(g: Graph, p: dict) -> bool:
    """Mul/Add/Sub/Div/Max/Min of the current tensor and a constant, the constant on `side`. A Div
    with the constant on the left is made as Mul(c, x), since c / x has poles near 0."""
    x = g.current
    shape = _const_shape(x, p["kind"])
    rng = _rng(p["seed"])
    op = p["op"]
    if op in ("Mul", "Div"):
        magnitude = rng.uniform(0.5, 1.5, shape)
        value = magnitude * rng.choice([-1.0, 1.0], shape) if p.get("signed") else magnitude
    else:
        value = rng.standard_normal(shape) * 0.3
    c = g.const(_f32(value), "k")
    if op == "Div" and p["side"] == "left":
        op = "Mul"
    inputs = [c, x.name] if p["side"] == "left" else [x.name, c]
    g.set(g.node(op, inputs, x.shape))
    return True


def emit_activation(g: Graph, p: dict) -> bool:
    x = g.current
    act = p["act"]
    if act == "Relu":
        g.set(g.node("Relu", [x.name], x.shape))
    elif act == "Clip":
        lo, hi = p["bounds"]
        ins = [x.name, g.const(_f32(lo), "lo")] + (
            [g.const(_f32(hi), "hi")] if hi is not None else []
        )
        g.set(g.node("Clip", ins, x.shape))
    elif act == "LeakyRelu":
        g.set(g.node("LeakyRelu", [x.name], x.shape, alpha=p["alpha"]))
    elif act == "Softmax":
        g.set(g.node("Softmax", [x.name], x.shape, axis=1))
    elif act == "HardSigmoid":
        g.set(g.node("HardSigmoid", [x.name], x.shape, alpha=0.2, beta=0.5))
    elif act == "SiLU":
        s = g.node("Sigmoid", [x.name], x.shape)
        g.set(
            g.node(
                "Mul", [x.name, s.name] if p.get("side") != "left" else [s.name, x.name], x.shape
            )
        )
    else:  # Sigmoid, Tanh, HardSwish
        g.set(g.node(act, [x.name], x.shape))
    return True


def emit_softmax(g: Graph, p: dict) -> bool:
    """Softmax on any axis of a rank-2 or rank-4 tensor: after `to_rank2` a row is the whole
    feature vector, up to 600,000 elements, beyond a tile's OCM (it must stay on the CPU)."""
    x = g.current
    g.set(g.node("Softmax", [x.name], x.shape, axis=p["axis"] % len(x.shape)))
    return True


def emit_layernorm(g: Graph, p: dict) -> bool:
    """LayerNormalization over the last k axes, or the decomposed form older exports write
    (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add); a row of a wide or flattened
    tensor can exceed a tile's OCM (it must stay on the CPU)."""
    x = g.current
    k = min(p["k"], len(x.shape) - 1)
    row = x.shape[-k:]
    rng = _rng(p["seed"])
    scale = g.const(_f32(1 + 0.2 * rng.standard_normal(row)), "g")
    shift = g.const(_f32(0.2 * rng.standard_normal(row)), "b")
    if not p["decomposed"]:
        g.set(g.node("LayerNormalization", [x.name, scale, shift], x.shape, axis=-k, epsilon=1e-5))
        return True
    axes = list(range(len(x.shape) - k, len(x.shape)))  # an attribute at opset 17
    reduced = x.shape[: len(x.shape) - k] + (1,) * k
    mean = g.node("ReduceMean", [x.name], reduced, axes=axes)
    d = g.node("Sub", [x.name, mean.name], x.shape)
    sq = g.node("Pow", [d.name, g.const(_f32(2.0), "two")], x.shape)
    var = g.node("ReduceMean", [sq.name], reduced, axes=axes)
    std = g.node("Sqrt", [g.node("Add", [var.name, g.const(_f32(1e-5), "eps")], reduced).name],
                 reduced)  # fmt: skip
    n = g.node("Div", [d.name, std.name], x.shape)
    g.set(g.node("Add", [g.node("Mul", [n.name, scale], x.shape).name, shift], x.shape))
    return True


EMITTERS = {
    "bn": emit_bn,
    "const": emit_binary_const,
    "act": emit_activation,
    "softmax": emit_softmax,
    "layernorm": emit_layernorm,
}
