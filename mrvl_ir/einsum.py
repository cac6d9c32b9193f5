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

Anything else (a letter repeated in one operand, a diagonal or a trace, an ellipsis, a letter
summed within one operand, three or more operands, sizes that differ) keeps TVM's
conversion, and so its CPU fallback.
"""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.ir.expr import GenericConst

from .frontend_moves import static_shape

__all__ = ["einsum"]


def _terms(equation: str, operands: int) -> tuple[list[str], str] | None:
    """The operands' letters and the output's (the implicit form: each letter used once, in
    alphabetical order), or None for an ellipsis or a malformed equation."""
    equation = equation.replace(" ", "")
    if "." in equation:
        return None
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != operands or not all(t.isalpha() for t in terms):
        return None
    if not arrow:
        letters = "".join(terms)
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    if not output.isalpha() and output:
        return None
    if any(len(set(t)) != len(t) for t in (*terms, output)):
        return None  # a diagonal or a trace
    return terms, output


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


def _transpose(x, letters: str, output: str):
    if sorted(letters) != sorted(output):
        return None  # a sum over a letter of the one operand
    return relax.op.permute_dims(x, [letters.index(c) for c in output])


def _matmul(bb, a, b, la: str, lb: str, output: str):
    sa, sb = static_shape(a), static_shape(b)
    size = {}
    for letters, shape in ((la, sa), (lb, sb)):
        for c, n in zip(letters, shape, strict=True):
            if size.setdefault(c, n) != n:
                return None  # a broadcast of one letter: TVM's conversion
    if set(output) - set(la) - set(lb):
        return None
    batch = [c for c in output if c in la and c in lb]
    rows = [c for c in output if c in la and c not in lb]
    cols = [c for c in output if c in lb and c not in la]
    summed = [c for c in la if c in lb and c not in output]
    if set(la) != {*batch, *rows, *summed} or set(lb) != {*batch, *cols, *summed}:
        return None  # a letter summed within one operand
    if not rows and not cols and not summed:
        return None  # an elementwise product: no matmul
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


def einsum(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Einsum of one or two static float32 tensors, as a transpose or a matmul (see above)."""
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
    parsed = _terms(equation, len(inputs))
    if parsed is None:
        return None
    terms, output = parsed
    if any(len(t) != len(s) for t, s in zip(terms, shapes, strict=True)):
        return None
    if len(inputs) == 1:
        return _transpose(inputs[0], terms[0], output)
    return _matmul(bb, inputs[0], inputs[1], terms[0], terms[1], output)
