"""Constant tensors read as data: the operand of `mrvl.binary` or an input of `mrvl.concat`
that is a model constant of any shape (ViT's position embedding and class token, YOLOv8's
anchor grids, Swin's relative-position biases), not a per-channel or scalar step.

Such a constant becomes an `mrvl.constant` in an activation layout, in DDR with the region's
other constants; `mrvl-cast-fp16` stores it in f16, as the layers read activations, and the
layer loads it as it loads a computed operand. The importer permutes its data into the
layout of the tensor it meets, so no conversion runs on the MLIP.
"""

from __future__ import annotations

import numpy as np
from tvm.ir.expr import GenericConst

from mrvl.dialects import mrvl
from mrvl.frontend import constant_view


def is_constant(expr) -> bool:
    return isinstance(expr, GenericConst)


def data_operand(importer, inner: dict, expr, rank: int, layout: str, node: str | None):
    """The value of `expr` at rank `rank` (leading 1s added, numpy's broadcasting rule) in
    `layout`: a computed tensor converted if needed, or a constant made in that layout."""
    if not is_constant(expr):
        x = importer._operand(inner, expr, node)
        shape = mrvl.shape_of(x)
        if len(shape) < rank:
            x = importer._in_layout(x, mrvl.RELAX_LAYOUT[len(shape)], node)
            padded = mrvl.tensor(
                (1,) * (rank - len(shape)) + tuple(int(d) for d in expr.ty.shape),
                mrvl.element_type_of(x),
                mrvl.RELAX_LAYOUT[rank],
            )
            x = importer._located(mrvl.ReshapeOp(x, padded), node)
        return importer._in_layout(x, layout, node)
    array = np.asarray(constant_view(expr), dtype=np.float32)
    array = array.reshape((1,) * (rank - array.ndim) + array.shape)
    perm = mrvl.layout_permutation(mrvl.RELAX_LAYOUT[rank], layout)
    return importer._constant(expr, np.ascontiguousarray(array.transpose(perm)), layout)
