"""The product of two activations (attention's Q·Kᵀ and A·V) from Relax: its partition
patterns, their check, and its import as one `mrvl.bmm`.

    mrvl.bmm    matmul(a | permute_dims(a), b | permute_dims(b)), a and b computed at run
                time, of any rank a region's tensors have (2 and up); a permute_dims that
                swaps the last two axes is read as a transposed operand

The leading (batch) axes of the result are those of the operands broadcast together. The MLIP
reads an operand that has them all, or none (one matrix shared by every batch); any other
broadcast would need a copy of the operand, so it stays on the CPU with its reason. The layer
is computed on rank-3 views [batch, rows, columns] of the same bytes (relabelling reshapes).
"""

from __future__ import annotations

from math import prod

from tvm import relax
from tvm.relax.dpl import DFPattern, is_const, is_op, wildcard
from tvm.relax.transform import PatternCheckContext
from xdsl.dialects.builtin import f32
from xdsl.ir import SSAValue

from mrvl.dialects import mrvl
from mrvl.frontend import node_name_of
from mrvl.passes.sched.lowering.bmm import BmmShape, plan_bmm
from mrvl.pattern_checks import (
    _activation,
    _check_fits,
    _f32_result,
    _no_leaks,
    _Reject,
    _tensor_shape,
    checked,
)


def ranks() -> tuple[int, ...]:
    """Ranks of the operands and the result: those a region's tensors may have (every rank
    of `mrvl.RELAX_LAYOUT`)."""
    return tuple(sorted(mrvl.RELAX_LAYOUT))


def _bmm_pattern(trans_a: bool, trans_b: bool):
    ann: dict[str, DFPattern] = {}
    lhs = ann["lhs"] = is_op("relax.permute_dims")(wildcard()) if trans_a else ~is_const()
    rhs = ann["rhs"] = is_op("relax.permute_dims")(wildcard()) if trans_b else ~is_const()
    ann["matmul"] = is_op("relax.matmul")(lhs, rhs)

    def check(ctx: PatternCheckContext) -> None:
        check_bmm(ctx, trans_a, trans_b)

    form = ("t" if trans_a else "n") + ("t" if trans_b else "n")
    check.__name__ = check.__qualname__ = f"check_bmm_{form}"
    return ("mrvl.bmm", ann["matmul"], ann, checked(check))


def bmm_patterns() -> list[tuple]:
    """The patterns, the ones that fold more transposes first (a transpose whose result is
    also used elsewhere is left out by the next)."""
    return [_bmm_pattern(a, b) for a, b in ((True, True), (False, True), (True, False))] + [
        _bmm_pattern(False, False)
    ]


def _permuted(value: relax.Expr) -> relax.Call | None:
    """The permute_dims call `value` is, or None."""
    if isinstance(value, relax.Call) and getattr(value.op, "name", "") == "relax.permute_dims":
        return value
    return None


def _swaps_last_two(call: relax.Call, rank: int) -> bool:
    axes = call.attrs.axes
    if axes is None:  # reverses every axis
        return rank == 2
    return [int(a) for a in axes] == [*range(rank - 2), rank - 1, rank - 2]


def check_bmm(ctx: PatternCheckContext, trans_a: bool, trans_b: bool) -> None:
    """The check of the pattern that folds a transpose of the left (right) operand if
    `trans_a` (`trans_b`). The matcher reports an operand as the value bound to it, so an
    operand that a pattern reads as it is may still be a permute_dims call: only the
    pattern says which transposes are folded."""
    ann = ctx.annotated_expr
    matmul = ann["matmul"]
    _no_leaks(ctx)
    _f32_result(matmul)
    inner = set(ctx.matched_bindings.keys())
    shapes = []
    for side, folded in (("lhs", trans_a), ("rhs", trans_b)):
        value = ann[side]
        perm = _permuted(value) if folded else None
        source = perm.args[0] if perm is not None else value
        if perm is not None and isinstance(source, relax.Var) and source in inner:
            # x^T · (x^T)^T: the right transpose reads the left one, which this match also
            # folds, so its source would not be an input of the layer; the next pattern
            # folds only the one transpose and reads the other as an input.
            raise _Reject("a folded transpose reads the other operand's folded transpose", perm)
        shape = _activation(source, ranks(), matmul, any_batch=True)
        if perm is not None:
            if not _swaps_last_two(perm, len(shape)):
                axes = list(perm.attrs.axes)
                raise _Reject(f"transpose {axes} is not of the last two axes", perm)
            shape = (*shape[:-2], shape[-1], shape[-2])
        shapes.append(shape)
    (a, b), out = shapes, _tensor_shape(matmul, matmul)
    if len(out) not in ranks():
        raise _Reject(f"rank {len(out)} result", matmul)
    lead = out[:-2]
    for side, shape in (("left", a), ("right", b)):
        own = shape[:-2]
        if prod(own) != 1 and (1,) * (len(lead) - len(own)) + own != lead:
            raise _Reject(
                f"the {side} operand's leading axes {list(own)} broadcast to {list(lead)}: "
                "that needs a copy of it",
                matmul,
            )
    shape = BmmShape(prod(lead), out[-2], a[-1], out[-1], prod(a[:-2]), prod(b[:-2]))
    _check_fits(
        lambda target, tiles: plan_bmm(
            shape, target.ocm_bytes_per_tile, tiles, target.ocm_alignment, "bmm"
        ),
        matmul,
    )


def import_bmm(importer, chain, inner: dict) -> SSAValue:
    """The composite as one `mrvl.bmm` on rank-3 views, its result viewed back at the
    matmul's rank. `importer` is relax_import's region importer."""
    call = next(c for c in chain.calls if getattr(c.op, "name", "") == "relax.matmul")
    node = node_name_of(call)
    views, transposed = [], []
    for arg in call.args:
        perm = _permuted(chain.bound.get(arg, arg))
        source = perm.args[0] if perm is not None else arg
        shape = tuple(int(d) for d in source.ty.shape.values)
        x = importer._operand(inner, source, node)
        x = importer._in_layout(x, mrvl.RELAX_LAYOUT[len(shape)], node)
        if len(shape) != 3:
            view = mrvl.tensor((prod(shape[:-2]), *shape[-2:]), f32, "NCW")
            x = importer._located(mrvl.ReshapeOp(x, view), node)
        views.append(x)
        transposed.append(perm is not None)
    out = tuple(int(d) for d in call.ty.shape.values)
    result_type = mrvl.tensor((prod(out[:-2]), *out[-2:]), f32, "NCW")
    op = mrvl.BatchMatMulOp(*views, result_type, trans_a=transposed[0], trans_b=transposed[1])
    result = importer._located(op, node)
    if len(out) != 3:
        result = importer._located(
            mrvl.ReshapeOp(result, mrvl.tensor(out, f32, mrvl.RELAX_LAYOUT[len(out)])), node
        )
    return result
