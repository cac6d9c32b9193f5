"""The fuzzer's Einsum layers of issue 21, kept apart from `grammar.py` (which registers them):
the forms `mrvl_ir/einsum.py` rewrites to a transpose or a matmul, on the current NCHW tensor
x, and forms it leaves to TVM (a sum within one operand, an elementwise product), which stay
on the CPU:

- a transpose of two axes (`nchw->ncwh`, `nchw->nhcw`);
- a Linear over W by a constant, as written or transposed (`nchw,wk->nchk`, `nchw,kw->nchk`);
- x times its own transpose, attention's Q·Kᵀ with Q = K (`nchw,ncvw->nchv`) and Xᵀ·X
  (`nchw,nchv->ncwv`), scaled by 1/W or 1/H to keep unit RMS;
- `nchw->nch` kept at rank 4 by an Unsqueeze, and `nchw,nchw->nchw`;
- a diagonal: the diagonal of x·xᵀ (`nchh->nch`, each row's sum of squares), scaled by 1/W
  and kept at rank 4 by an Unsqueeze;
- a broadcast: x against its mean over the channels, [N, 1, H, W] transposed, with an
  ellipsis (`...hw,...wv->...hv`, the size-1 axis broadcast to C), scaled by 1/W.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from grammar_graph import on_rank

FORMS = ("transpose_hw", "transpose_ch", "linear", "linear_t", "gram_rows", "gram_cols",
         "sum_w", "product", "diagonal", "broadcast")  # fmt: skip


def _einsum(g, inputs: list[str], equation: str, shape: tuple[int, ...]):
    return g.node("Einsum", inputs, shape, equation=equation)


@on_rank(4)
def emit_einsum(g, p: dict) -> bool:
    """One Einsum of the drawn form on x; False (skipped) off rank 4."""
    x = g.current
    n, c, h, w = x.shape
    form = p["form"]
    rng = np.random.default_rng(p["seed"])
    if form == "transpose_hw":
        out = _einsum(g, [x.name], "nchw->ncwh", (n, c, w, h))
    elif form == "transpose_ch":
        out = _einsum(g, [x.name], "nchw->nhcw", (n, h, c, w))
    elif form in ("linear", "linear_t"):
        k = p["k"]
        weight = (rng.standard_normal((w, k)) / np.sqrt(w)).astype(np.float32)
        if form == "linear":
            out = _einsum(g, [x.name, g.const(weight, "w")], "nchw,wk->nchk", (n, c, h, k))
        else:
            out = _einsum(g, [x.name, g.const(weight.T.copy(), "w")], "nchw,kw->nchk", (n, c, h, k))
    elif form in ("gram_rows", "gram_cols"):
        rows = form == "gram_rows"
        equation = "nchw,ncvw->nchv" if rows else "nchw,nchv->ncwv"
        gram = _einsum(g, [x.name, x.name], equation, (n, c, h, h) if rows else (n, c, w, w))
        scale = g.const(np.array(1.0 / (w if rows else h), np.float32), "k")
        out = g.node("Mul", [gram.name, scale], gram.shape)
    elif form == "sum_w":
        total = _einsum(g, [x.name], "nchw->nch", (n, c, h))
        out = g.node(
            "Unsqueeze", [total.name, g.const(np.array([3], np.int64), "ax")], (n, c, h, 1)
        )
    elif form == "diagonal":
        gram = _einsum(g, [x.name, x.name], "nchw,ncvw->nchv", (n, c, h, h))
        diagonal = _einsum(g, [gram.name], "nchh->nch", (n, c, h))
        scaled = g.node("Mul", [diagonal.name, g.const(np.array(1.0 / w, np.float32), "k")],
                        diagonal.shape)  # fmt: skip
        out = g.node(
            "Unsqueeze", [scaled.name, g.const(np.array([3], np.int64), "ax")], (n, c, h, 1)
        )
    elif form == "broadcast":
        mean = g.node("ReduceMean", [x.name], (n, 1, h, w), axes=[1], keepdims=1)
        mean_t = g.node("Transpose", [mean.name], (n, 1, w, h), perm=[0, 1, 3, 2])
        product = _einsum(g, [x.name, mean_t.name], "...hw,...wv->...hv", (n, c, h, h))
        scale = g.const(np.array(1.0 / w, np.float32), "k")
        out = g.node("Mul", [product.name, scale], product.shape)
    else:  # product
        out = _einsum(g, [x.name, x.name], "nchw,nchw->nchw", x.shape)
    g.set(out)
    return True


def draw(kind: str, ch, seed: int) -> Any:
    """The parameters of an Einsum layer, drawn by the chooser `ch`."""
    return dict(form=ch.choice(FORMS), k=ch.choice((1, 3, 8, 16)), seed=seed)


EMITTERS = {"einsum": emit_einsum}
KINDS = ("einsum",)
"""Layer kinds drawn at rank 4, besides `grammar`'s."""
