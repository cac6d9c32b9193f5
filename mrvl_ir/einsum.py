"""`Einsum` forms that are a transpose or a (batched) matmul, rewritten for `frontend.py`
(registered in its `_NORMALIZATIONS`) before TVM's importer sees them.

TVM converts every Einsum to `relax.einsum`, which no pattern reads, so attention written as
`bhid,bhjd->bhij` (Q·Kᵀ) or `bhij,bhjd->bhid` (A·V) stayed on the CPU. Here:

- one operand whose output is a permutation of its letters (`nchw->nhwc`) → `permute_dims`,
  a strided copy;
- two operands where every letter is a batch letter (in both operands and the output), a row
  letter (the first operand and the output), a column letter (the second and the output) or
  a summed letter (both operands, not the output) → each operand permuted to
  [batch..., rows..., summed...] and [batch..., summed..., columns...], several letters of a
  kind merged by a reshape, one `relax.matmul`, and the result reshaped and permuted to the
  output's order. A transposed operand is a `permute_dims` before the matmul, the form
  `MatMul(Q, Transpose(K))` imports as, which the `mrvl.bmm` and `mrvl.fc` patterns read.

- a letter summed within one operand only (`bij->bi`, `ij,jk->k`) → a `relax.sum` over it
  first, a reduction on the MLIP;
- two operands with no summed, row or column letter (`ij,ij->ij`, `bhi,bhi->hbi`) → both
  permuted to the output's order and one `relax.multiply`;
- an ellipsis (`...ij,...jk->...ik`, attention as PyTorch writes it) stands for fresh letters,
  one per axis it covers, aligned from the right across the operands as NumPy broadcasts
  them; the implicit output puts them first.

- a letter twice in one operand (`bii->bi`, a diagonal; `ii->`, a trace with the sum above)
  → the operand permuted to put the two axes last, reshaped to merge them, and every
  (n+1)-th element of the merged axis kept (`strided_slice`): a strided copy of the
  diagonal, which then stands for the letter once.

- a letter of size 1 in one operand and n in the other (an ellipsis axis NumPy broadcasts:
  `...ij,...jk->...ik` of [2, 1, 5, 6] and [2, 3, 6, 7]) → that operand expanded to n first
  (`broadcast_to`, a strided copy of stride 0), then as above.

Anything else (a letter three times in one operand; three or more operands; a letter of
sizes that are not 1 and n; a broadcast of a constant) keeps TVM's conversion, and so its
CPU fallback, exactly.
"""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.ir.expr import GenericConst

from .frontend_moves import static_shape

__all__ = ["einsum"]


def _without_ellipsis(equation: str, ranks: list[int]) -> str | None:
    """`equation` with each operand's `...` replaced by fresh letters for the axes it covers
    (the same letters, right-aligned, in every operand and in the output), or None if the
    ranks leave an ellipsis a negative count of axes."""
    if "..." not in equation:
        return equation
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(ranks):
        return None
    covered = []
    for term, rank in zip(terms, ranks, strict=True):
        letters = term.replace("...", "")
        if term.count("...") > 1 or (term.count("...") == 0 and len(letters) != rank):
            return None
        covered.append(rank - len(letters) if "..." in term else 0)
    if min(covered) < 0:
        return None
    fresh = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in equation][: max(covered)]
    if len(fresh) < max(covered):
        return None
    ellipsis = lambda n: "".join(fresh[len(fresh) - n :]) if n else ""  # noqa: E731
    terms = [t.replace("...", ellipsis(n)) for t, n in zip(terms, covered, strict=True)]
    if arrow:
        output = output.replace("...", ellipsis(max(covered)))
    else:
        letters = "".join(terms)
        singles = sorted(c for c in set(letters) if letters.count(c) == 1 and c not in fresh)
        output = ellipsis(max(covered)) + "".join(singles)
    return ",".join(terms) + "->" + output


def _terms(equation: str, operands: int) -> tuple[list[str], str] | None:
    """The operands' letters and the output's (the implicit form: each letter used once, in
    alphabetical order), or None for a malformed equation; a letter may be twice in one
    operand (a diagonal), not in the output."""
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != operands or not all(t.isalpha() for t in terms):
        return None
    if not arrow:
        letters = "".join(terms)
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if not output.isalpha() and output:
        return None
    if len(set(output)) != len(output) or any(t.count(c) > 2 for t in terms for c in t):
        return None
    return terms, output


def _diagonals(bb, x, letters: str):
    """`x` with the diagonal taken of each letter it has twice (a strided copy), and its
    letters left; None for a constant or axes of different sizes."""
    for c in dict.fromkeys(letters):
        if letters.count(c) < 2:
            continue
        shape = static_shape(x)
        first, second = letters.index(c), letters.rindex(c)
        n = shape[first]
        if isinstance(x, GenericConst) or shape[second] != n:
            return None
        rest = [i for i in range(len(letters)) if i not in (first, second)]
        perm = [*rest, first, second]
        if perm != list(range(len(perm))):
            x = bb.emit(relax.op.permute_dims(x, perm))
        x = bb.emit(relax.op.reshape(x, [*(shape[i] for i in rest), n * n]))
        x = bb.emit(relax.op.strided_slice(x, axes=[len(rest)], begin=[0], end=[n * n],
                                           strides=[n + 1]))  # fmt: skip
        letters = "".join(letters[i] for i in rest) + c
    return x, letters


def _permuted(bb, x, letters: str, order: str):
    perm = [letters.index(c) for c in order]
    if perm == list(range(len(perm))):
        return x
    if isinstance(x, GenericConst):
        return relax.const(np.ascontiguousarray(x.value.numpy().transpose(perm)))
    return bb.emit(relax.op.permute_dims(x, perm))


def _reshaped(bb, x, shape: list[int]):
    if list(static_shape(x)) == shape:
        return x
    if isinstance(x, GenericConst):
        return relax.const(np.ascontiguousarray(x.value.numpy().reshape(shape)))
    return bb.emit(relax.op.reshape(x, shape))


def _sums_a_constant(x, letters: str, keep) -> bool:
    """Whether `x` is a constant with a letter to sum out (TVM's conversion folds that)."""
    return isinstance(x, GenericConst) and any(c not in keep for c in letters)


def _summed_alone(bb, x, letters: str, keep):
    """`x` with the letters not in `keep` summed out (a `relax.sum`), and its letters left."""
    axes = [i for i, c in enumerate(letters) if c not in keep]
    if not axes:
        return x, letters
    return bb.emit(relax.op.sum(x, axis=axes)), "".join(c for c in letters if c in keep)


def _transpose(bb, x, letters: str, output: str):
    if set(output) - set(letters) or _sums_a_constant(x, letters, output):
        return None
    if sorted(letters) == sorted(output):
        return relax.op.permute_dims(x, [letters.index(c) for c in output])
    axes = [i for i, c in enumerate(letters) if c not in output]
    kept = "".join(c for c in letters if c in output)
    total = relax.op.sum(x, axis=axes)  # the frontend binds the node's last call itself
    if kept == output:
        return total
    return relax.op.permute_dims(bb.emit(total), [kept.index(c) for c in output])


def _broadcasts(x, letters: str, size: dict) -> bool:
    return list(static_shape(x)) != [size[c] for c in letters]


def _broadcast(bb, x, letters: str, size: dict):
    """`x` expanded along each of its letters of size 1 that the other operand has n > 1
    times (an ellipsis axis NumPy broadcasts): ONNX Expand, a strided copy of stride 0."""
    if not _broadcasts(x, letters, size):
        return x
    return bb.emit(relax.op.broadcast_to(x, [size[c] for c in letters]))


def _matmul(bb, a, b, la: str, lb: str, output: str):
    sa, sb = static_shape(a), static_shape(b)
    size = {}
    for letters, shape in ((la, sa), (lb, sb)):
        for c, n in zip(letters, shape, strict=True):
            if size.setdefault(c, n) != n and 1 not in (size[c], n):
                return None
            size[c] = max(size[c], n)
    if set(output) - set(la) - set(lb):
        return None
    keep_a, keep_b = set(lb) | set(output), set(la) | set(output)
    if _sums_a_constant(a, la, keep_a) or _sums_a_constant(b, lb, keep_b):
        return None
    if any(isinstance(x, GenericConst) and _broadcasts(x, letters, size)
           for x, letters in ((a, la), (b, lb))):  # fmt: skip
        return None
    a, b = (_broadcast(bb, x, letters, size) for x, letters in ((a, la), (b, lb)))
    a, la = _summed_alone(bb, a, la, keep_a)
    b, lb = _summed_alone(bb, b, lb, keep_b)
    batch = [c for c in output if c in la and c in lb]
    rows = [c for c in output if c in la and c not in lb]
    cols = [c for c in output if c in lb and c not in la]
    summed = [c for c in la if c in lb and c not in output]
    if not rows and not cols and not summed:  # an elementwise product
        order = "".join(batch)
        return relax.op.multiply(_permuted(bb, a, la, order), _permuted(bb, b, lb, order))
    extent = lambda letters: int(np.prod([size[c] for c in letters]))  # noqa: E731
    batch_shape = [size[c] for c in batch]
    left = _permuted(bb, a, la, "".join(batch + rows + summed))
    right = _permuted(bb, b, lb, "".join(batch + summed + cols))
    left = _reshaped(bb, left, [*batch_shape, extent(rows), extent(summed)])
    right = _reshaped(bb, right, [*batch_shape, extent(summed), extent(cols)])
    product = relax.op.matmul(left, right)
    natural = batch + rows + cols
    shape = [size[c] for c in natural]
    if [*batch_shape, extent(rows), extent(cols)] != shape:
        product = relax.op.reshape(bb.emit(product), shape)
    if natural != list(output):
        product = relax.op.permute_dims(bb.emit(product), [natural.index(c) for c in output])
    return product


class _DryRun:
    """A block builder that binds nothing: `emit` only normalizes (types inferred), so a
    rewrite can be tried whole before any of its bindings is made."""

    def __init__(self, bb):
        self.bb = bb

    def emit(self, expr):
        return self.bb.normalize(expr)


def einsum(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Einsum of one or two static float32 tensors, as a transpose, a sum, a product or a
    matmul (see above); None, with nothing bound, for another form."""
    if _rewritten(_DryRun(bb), inputs, attrs) is None:
        return None
    return _rewritten(bb, inputs, attrs)


def _rewritten(bb, inputs, attrs) -> relax.Expr | None:
    equation = attrs.get("equation")
    if isinstance(equation, bytes):
        equation = equation.decode()
    if not isinstance(equation, str) or not 1 <= len(inputs) <= 2:
        return None
    shapes = [static_shape(x) for x in inputs]
    if any(s is None for s in shapes) or any(str(x.ty.dtype) != "float32" for x in inputs):
        return None
    if all(isinstance(x, GenericConst) for x in inputs):
        return None
    equation = _without_ellipsis(equation.replace(" ", ""), [len(s) for s in shapes])
    parsed = None if equation is None else _terms(equation, len(inputs))
    if parsed is None:
        return None
    terms, output = parsed
    if any(len(t) != len(s) for t, s in zip(terms, shapes, strict=True)):
        return None
    if any(len(set(t)) != len(t) for t in terms):
        taken = [_diagonals(bb, x, t) for x, t in zip(inputs, terms, strict=True)]
        if any(d is None for d in taken):
            return None
        inputs, terms = [d[0] for d in taken], [d[1] for d in taken]
    if len(inputs) == 1:
        return _transpose(bb, inputs[0], terms[0], output)
    return _matmul(bb, inputs[0], inputs[1], terms[0], terms[1], output)
