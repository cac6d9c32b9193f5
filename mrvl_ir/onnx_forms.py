"""ONNX forms that `frontend.py` rewrites before TVM's importer sees them.

Two kinds, each applied only when the node's inputs are what the rewrite needs:

- **Matchable forms** (`NORMALIZATIONS`: each returns the node's Relax value, or None to keep
  TVM's conversion):
  - `Max` / `Min` of a float tensor and one scalar constant → `relax.clip(x, c, +inf)` /
    `relax.clip(x, -inf, c)`, the same values in fp32 (TVM: broadcast_to + stack + max, which
    no pattern can read). A clip fuses into the layer before it as its CLIP bounds; a clip of
    a relu or a clip is one clip (`activation_forms.py`).
  - `Max` / `Min` of two or more float tensors (no constants) → a chain of
    `relax.maximum` / `relax.minimum`, which broadcast as ONNX's multidirectional rule does
    (TVM: broadcast_to + stack + max); `mrvl.binary` reads each.
  - `Neg` of a float tensor → `relax.multiply(x, -1)`, exact in fp32, so it folds into the
    layer before it as a scale of -1 like any other affine step.
  - `Einsum` that is a transpose or a (batched) matmul → `permute_dims` / `matmul`
    (`einsum.py`).
- **Valid inputs TVM rejects** (`INPUT_FIXES`: each returns the inputs to convert with, or
  None to keep them):
  - `Resize` (opsets 11-13) with an empty `scales` tensor and a `sizes` input, as older
    PyTorch exports write it: ONNX says an empty input is absent, onnxruntime runs it, and
    TVM asserts "Only one of scales and sizes can be provided". The empty `scales` (and an
    empty `roi`) become absent inputs.
"""

from __future__ import annotations

import math

import numpy as np
from tvm import relax
from tvm.ir.expr import GenericConst

from .einsum import einsum

__all__ = ["INPUT_FIXES", "NORMALIZATIONS"]

_FLOAT_DTYPES = ("float16", "float32", "float64")


def _float_tensor(expr) -> bool:
    ty = getattr(expr, "ty", None)
    return isinstance(ty, relax.TensorType) and str(ty.dtype) in _FLOAT_DTYPES and ty.ndim >= 0


def _scalar_constant(expr) -> float | None:
    if not isinstance(expr, GenericConst):
        return None
    array = expr.value.numpy()
    return float(array.reshape(())) if array.size == 1 else None


def _tensor_and_scalar(inputs: list) -> tuple[relax.Expr, float] | None:
    """(x, c) when the node has two inputs, a float tensor x (not a constant) and a scalar
    constant c that does not broadcast x to a larger rank, either way round."""
    if len(inputs) != 2 or any(i is None for i in inputs):
        return None
    for x, c in ((inputs[0], inputs[1]), (inputs[1], inputs[0])):
        value = _scalar_constant(c)
        if value is None or isinstance(x, GenericConst) or not _float_tensor(x):
            continue
        if c.ty.ndim > x.ty.ndim or math.isnan(value):  # NaN: ONNX gives NaN everywhere
            return None
        return x, value
    return None


def _pairwise(bb, inputs, op) -> relax.Expr | None:
    """op folded over two or more float tensors of static shapes, not all constants (a
    constant tensor is an operand of `mrvl.binary`, `constant_operands.py`), or None."""
    if len(inputs) < 2 or any(i is None or not _float_tensor(i) for i in inputs):
        return None
    if all(isinstance(i, GenericConst) for i in inputs):
        return None
    if any(getattr(i.ty.shape, "values", None) is None for i in inputs):
        return None
    total = inputs[0]
    for operand in inputs[1:-1]:
        total = bb.emit(op(total, operand))
    return op(total, inputs[-1])


def _max(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Max(x, c) with c a scalar constant → clip(x, c, +inf); Max of tensors (one may be a
    constant) → maximum."""
    pair = _tensor_and_scalar(inputs)
    if pair is None:
        return _pairwise(bb, inputs, relax.op.maximum)
    return relax.op.clip(pair[0], pair[1], math.inf)


def _min(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Min(x, c) with c a scalar constant → clip(x, -inf, c); Min of tensors (one may be a
    constant) → minimum."""
    pair = _tensor_and_scalar(inputs)
    if pair is None:
        return _pairwise(bb, inputs, relax.op.minimum)
    return relax.op.clip(pair[0], -math.inf, pair[1])


def _neg(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Neg(x) of a float tensor → x * -1."""
    x = inputs[0]
    if isinstance(x, GenericConst) or not _float_tensor(x):
        return None
    return relax.op.multiply(x, relax.const(-1.0, str(x.ty.dtype)))


NORMALIZATIONS = {"Max": _max, "Min": _min, "Neg": _neg, "Einsum": einsum}


def _is_empty(expr) -> bool:
    return isinstance(expr, GenericConst) and int(np.prod(expr.value.shape)) == 0


def _resize_inputs(inputs: list, opset: int) -> list | None:
    """Resize's empty `roi` and `scales` (opset 11+: X, roi, scales, sizes) are absent."""
    if opset < 11 or len(inputs) < 4 or inputs[3] is None or not _is_empty(inputs[2]):
        return None
    roi = None if inputs[1] is None or _is_empty(inputs[1]) else inputs[1]
    return [inputs[0], roi, None, *inputs[3:]]


INPUT_FIXES = {"Resize": _resize_inputs}
