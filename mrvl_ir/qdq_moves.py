"""QDQ pairs inside a chain of data-movement ops, dropped where that is exact.

A quantizer writes a QuantizeLinear / DequantizeLinear pair after every op, the moves of a
channel shuffle too (ShuffleNet's reshape -> transpose -> reshape through rank 5). A move
only copies values, so the values after `dequantize(q, s, z) -> moves` lie on the grid of
(s, z), and a `quantize -> dequantize` of the same (s, z) after them gives back the same
floats, exactly (an integer below 256 times an f32 scale, divided by it, rounds to the
integer). `drop_move_qdq_pairs` binds such a pair's dequantize to the moved tensor itself where it is
on a tensor of rank 5 or 6 that only moves read, so the moves meet as one chain that the `mrvl.copy` pattern reads (and the int8 region copies
as one strided copy); what the model computes is unchanged.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from mrvl.qdq import _op, _view

MOVE_OPS = frozenset(
    {
        "relax.reshape", "relax.permute_dims", "relax.strided_slice", "relax.squeeze",
        "relax.expand_dims", "relax.flatten",
        "relax.split", "relax.take",
    }
)  # fmt: skip
"""Ops that only move values (each element of the result is one of the input); a split's
parts are the items of its tuple (ViT's q, k and v out of one rank-5 tensor), a take's are
the elements its indices pick (an ONNX Gather: Swin-T's and PP-OCRv3's q, k and v)."""


MAX_TENSOR_RANK = 4
"""A pair on a tensor of at most this rank stays: the MLIP holds that tensor, and it is where
one move chain ends and the next (a split's slices) begins."""


def _params(call: relax.Call):
    """(int dtype, scale, zero point) of a per-tensor quantize or dequantize, else None."""
    scale, zero = call.args[1], call.args[2]
    if not isinstance(scale, GenericConst) or not isinstance(zero, GenericConst):
        return None
    s, z = _view(scale), _view(zero)
    if s.size != 1 or z.size != 1:
        return None
    dtype = call.attrs.out_dtype if _op(call) == "relax.quantize" else call.args[0].ty.dtype
    return str(dtype), float(np.float32(s.reshape(()))), int(z.reshape(()))


def _redundant(bound: dict, users: dict, var: relax.Var) -> relax.Var | None:
    """The moved float tensor a dequantize `var` equals, when its pair sits inside a chain of
    moves: on a tensor of rank 5 or 6 (a channel shuffle's groups), after moves of a tensor
    dequantized at the same parameters, and read only by moves; else None."""
    dq = bound.get(var)
    if _op(dq) != "relax.dequantize" or str(dq.attrs.out_dtype) != "float32":
        return None
    readers = users.get(var, [])
    rank = getattr(dq.ty, "ndim", -1)
    if rank <= MAX_TENSOR_RANK or not readers:
        return None
    if any(_op(r) not in MOVE_OPS for r in readers):
        return None
    q = bound.get(dq.args[0])
    if _op(q) != "relax.quantize" or (params := _params(q)) is None or _params(dq) != params:
        return None
    moved = source = q.args[0]
    steps = 0
    while True:
        value = bound.get(source)
        if isinstance(value, relax.TupleGetItem):  # a part of a split
            value = bound.get(value.tuple_value)
            if _op(value) != "relax.split":
                break
        elif _op(value) not in MOVE_OPS:
            break
        source = value.args[0]
        steps += 1
    origin = bound.get(source)
    if steps == 0 or _op(origin) != "relax.dequantize" or _params(origin) != params:
        return None
    return moved


@relax.expr_functor.mutator
class _RebindPairs(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, replace: dict):
        super().__init__(mod)
        self.replace = replace

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        target = self.replace.get(binding.var)
        if target is None:
            super().visit_var_binding_(binding)
            return
        self.set_var_remap(binding.var, self.visit_expr(target))


def drop_move_qdq_pairs(mod: tvm.IRModule) -> tvm.IRModule:
    """`mod` with each quantize -> dequantize pair of one quantization that sits on moves of
    a tensor dequantized at that quantization replaced by the moved tensor."""
    changed = False
    for gv, func in list(mod.functions.items()):
        if not isinstance(func, relax.Function):
            continue
        bound = {
            b.var: b.value
            for block in func.body.blocks
            for b in block.bindings
            if isinstance(b, relax.VarBinding)
        }
        users: dict = {}
        for value in bound.values():
            for arg in getattr(value, "args", []):
                if isinstance(arg, relax.Var):
                    users.setdefault(arg, []).append(value)
        replace = {v: m for v in bound if (m := _redundant(bound, users, v)) is not None}
        if not replace:
            continue
        mutator = _RebindPairs(mod, replace)
        mod[gv] = mutator.visit_expr(func)
        changed = True
    if not changed:
        return mod
    return relax.transform.DeadCodeElimination()(mod)
