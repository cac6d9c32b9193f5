"""Normalizations of ONNX data-movement operators for `frontend.from_onnx` (registered in its
`_NORMALIZATIONS`): each returns a Relax form the `mrvl.copy` pattern reads, or None to keep
TVM's own conversion.

- `Tile` with constant repeats → reshape (a unit axis before each repeated one) →
  `broadcast_to` (the repeats) → reshape (each repeat merged into its axis); TVM's converter
  emits a `call_tir`, which no pattern can see through. The chain is one strided copy whose
  repeats are strides of 0.
- `Pad` in reflect or edge mode (from `frontend._pad`) → one `take` of constant indices per
  padded axis, each a copy of a few strided pieces (the reflected or repeated border and
  the middle) that the `mrvl.copy` pattern reads like a Gather.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import GenericConst


def static_shape(expr) -> tuple[int, ...] | None:
    """The shape of a Relax expression whose dims are all known integers, else None."""
    dims = getattr(getattr(getattr(expr, "ty", None), "shape", None), "values", None)
    if dims is None or not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        return None
    return tuple(int(d) for d in dims)


def tile(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Tile(x, repeats) of a static float32 tensor with constant repeats ≥ 1."""
    x, repeats = inputs[0], inputs[1] if len(inputs) > 1 else None
    shape = static_shape(x)
    ty = getattr(x, "ty", None)
    if shape is None or not isinstance(repeats, GenericConst) or str(ty.dtype) != "float32":
        return None
    reps = [int(r) for r in np.asarray(repeats.value.numpy()).reshape(-1)]
    if len(reps) != len(shape) or min(reps, default=1) < 1:
        return None
    if all(r == 1 for r in reps):
        return None  # the identity: TVM's own conversion
    split, broadcast, result = [], [], []
    for size, r in zip(shape, reps):
        if r != 1:
            split.append(1)
            broadcast.append(r)
        split.append(size)
        broadcast.append(size)
        result.append(size * r)
    expanded = bb.emit(relax.op.reshape(x, split))
    repeated = bb.emit(relax.op.broadcast_to(expanded, broadcast))
    return relax.op.reshape(repeated, result)


def pad_by_takes(bb, x, before: list[int], after: list[int], mode: str) -> relax.Expr | None:
    """Reflect or edge padding of a static tensor: axis by axis, x taken at the indices
    `numpy.pad(arange(n), (before, after), mode)` (reflect needs pads below the extent)."""
    shape = static_shape(x)
    if shape is None or not any(before) and not any(after):
        return None
    padded = [a for a in range(len(shape)) if before[a] or after[a]]
    if mode == "reflect" and any(max(before[a], after[a]) >= shape[a] for a in padded):
        return None  # ONNX leaves this undefined; TVM's own conversion decides
    result = x
    for i, axis in enumerate(padded):
        index = np.pad(np.arange(shape[axis]), (before[axis], after[axis]), mode=mode)
        call = relax.op.take(result, relax.const(index.astype(np.int64)), axis=axis)
        result = call if i == len(padded) - 1 else bb.emit(call)
    return result
