"""The Relax side of the reductions and of the broadcasting elementwise ops: their patterns,
checks and import.

    mrvl.reduce   sum / mean / max / min / l2 over one or several consecutive axes, keepdims
                  either way (ONNX ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceL2,
                  which TVM writes as `sqrt(sum(x * x))`; a global pool
                  the window pool cannot take: a plane larger than a tile, a batch over 8),
                  and argmax over one axis (ONNX ArgMax: its int64 result is a region
                  output of exact f32 indices, which TVM's side converts, `runtime.py`)
    mrvl.binary   add / subtract / multiply / divide / maximum / minimum of two runtime
                  tensors whose shapes broadcast (ONNX Add, Sub, Mul, Div, Max, Min). Add and
                  Mul of one shape, and Mul by an [N, C, 1, 1] gate, stay `mrvl.add` /
                  `mrvl.mul`; a product that is an activation stays with its layer.

A reduction keeps its input's layout where the reduced axes are consecutive in it (after a
conv, NHWC: a ReduceMean over channels moves no data), as a softmax does.
"""

from __future__ import annotations

from math import prod

from tvm.relax.dpl import is_op, wildcard
from tvm.relax.transform import PatternCheckContext

from mrvl.activation_forms import ActivationFormError, split_activation
from mrvl.constant_operands import data_operand, is_constant
from mrvl.dialects import mrvl
from mrvl.errors import UnsupportedOpError
from mrvl.frontend import node_name_of
from mrvl.passes.sched.lowering.reduce import binary_dims, plan_reduce
from mrvl.pattern_checks import (
    _activation,
    _bound,
    _check_fits,
    _enclosing_activation,
    _int_list,
    _no_leaks,
    _op_name,
    _Reject,
    _tensor_shape,
    _whole_onnx_ops,
    checked,
)

REDUCE_OPS = {
    "relax.sum": "sum",
    "relax.mean": "mean",
    "relax.max": "max",
    "relax.min": "min",
    "relax.argmax": "argmax",
}
"""Relax reductions and the `mrvl.reduce` kind of each."""
BINARY_OPS = {
    "relax.add": "add",
    "relax.subtract": "sub",
    "relax.multiply": "mul",
    "relax.divide": "div",
    "relax.maximum": "max",
    "relax.minimum": "min",
}
"""Relax elementwise ops of two tensors and the `mrvl.binary` kind of each."""

_REDUCE_ONNX_OPS = frozenset(
    {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ArgMax", "GlobalAveragePool",
     "GlobalMaxPool", "Einsum"}
)  # fmt: skip
_BINARY_ONNX_OPS = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Einsum"})
"""The ONNX ops a reduction or a binary op may come from (an Einsum's sum over a letter of one
operand, its elementwise product: `einsum.py`)."""

# ------------------------------------------------------------------------------- patterns


def _one_of(ops, *args):
    root = None
    for op in ops:
        alternative = is_op(op)(*args)
        root = alternative if root is None else root | alternative
    return root


def reduce_pattern():
    """mrvl.reduce: one Relax reduction of a runtime tensor."""
    data = wildcard()
    root = _one_of(REDUCE_OPS, data)
    return ("mrvl.reduce", root, {"data": data, "root": root}, checked(check_reduce))


def reduce_l2_pattern():
    """mrvl.reduce "l2": ONNX ReduceL2 as TVM writes it, `sqrt(sum(x * x))`, one layer."""
    data = wildcard()
    total = is_op("relax.sum")(is_op("relax.multiply")(data, data))
    root = is_op("relax.sqrt")(total)
    ann = {"data": data, "sum": total, "root": root}
    return ("mrvl.reduce", root, ann, checked(check_reduce_l2))


def binary_pattern():
    """mrvl.binary: one Relax elementwise op of two tensors (checked to be no constants)."""
    root = _one_of(BINARY_OPS, wildcard(), wildcard())
    return ("mrvl.binary", root, {"root": root}, checked(check_binary))


# --------------------------------------------------------------------------------- checks


def reduce_axes(call, shape: tuple[int, ...]) -> list[int]:
    """The Relax axes a reduction reduces over, sorted; they must be consecutive."""
    axis = call.attrs.axis
    axes = [int(axis)] if isinstance(axis, int) or hasattr(axis, "value") else _int_list(axis)
    rank = len(shape)
    if axes is None:
        return list(range(rank))
    normal = sorted({a % rank for a in axes if -rank <= a < rank})
    if len(normal) != len(axes) or not normal:
        raise _Reject(f"attribute axes={axes}", call)
    if normal != list(range(normal[0], normal[-1] + 1)):
        raise _Reject(f"axes {axes} are not consecutive", call)
    return normal


def check_reduce(ctx: PatternCheckContext) -> None:
    """A reduction over consecutive axes of a rank 2 to 4 tensor, any batch, whose result is
    of rank 2 to 4 (a rank-1 or scalar result stays on the CPU); a row longer than a tile is
    cut into bands with fp32 partials (`plan_reduce`)."""
    _whole_onnx_ops(ctx, _REDUCE_ONNX_OPS)
    _check_reduction(ctx, ctx.annotated_expr["root"])


def check_reduce_l2(ctx: PatternCheckContext) -> None:
    """ReduceL2 whole (its product, sum and square root, no part used elsewhere), over what
    `check_reduce` takes."""
    _no_leaks(ctx)
    _whole_onnx_ops(ctx, frozenset({"ReduceL2"}))
    _check_reduction(ctx, ctx.annotated_expr["sum"])


def _check_reduction(ctx: PatternCheckContext, call) -> None:
    shape = _activation(ctx.annotated_expr["data"], (2, 3, 4), call, any_batch=True)
    axes = reduce_axes(call, shape)
    argmax = _op_name(call) == "relax.argmax"
    result = _index_shape(call) if argmax else _tensor_shape(call, call)
    if len(result) not in (2, 3, 4):
        raise _Reject(f"a rank-{len(result)} result", call)
    outer, length = prod(shape[: axes[0]]), prod(shape[a] for a in axes)
    inner = prod(shape[axes[-1] + 1 :])
    _check_fits(
        lambda target, tiles: plan_reduce(
            outer, length, inner, target.ocm_bytes_per_tile, tiles, target.ocm_alignment, "layer",
            bands=not argmax,
        ),
        call,
    )  # fmt: skip


def _index_shape(call) -> tuple[int, ...]:
    """The static shape of argmax's int64 indices (which no other layer of a region reads:
    every check takes float32 only, so they are always a region output)."""
    ty = call.ty
    if str(getattr(ty, "dtype", "")) != "int64" or getattr(ty.shape, "values", None) is None:
        raise _Reject(f"argmax giving {ty}", call)
    try:
        return tuple(int(d) for d in ty.shape.values)
    except TypeError:
        raise _Reject("dynamic shape", call) from None


def broadcast_ranks(lhs: tuple[int, ...], rhs: tuple[int, ...]) -> tuple[tuple, tuple, tuple]:
    """Both shapes at the larger rank (leading 1s, numpy's rule) and the result's, or None
    for the result if they do not broadcast."""
    rank = max(len(lhs), len(rhs))
    a = (1,) * (rank - len(lhs)) + tuple(lhs)
    b = (1,) * (rank - len(rhs)) + tuple(rhs)
    return a, b, mrvl.broadcast_shape(a, b)


BINARY_RANKS = (2, 3, 4, 5)
"""Ranks of a binary op's result and computed operands; at rank 5 (Swin's shifted-window
mask Add) only next to copies and other binary ops."""


def binary_fits(call, ranks=BINARY_RANKS) -> bool:
    """Whether a Relax elementwise op of two tensors (not two constants) of static f32 shapes
    broadcasts to a result of one of `ranks` in at most 4 merged dimensions (`binary_dims`)."""
    try:
        shapes = [_tensor_shape(arg, call) for arg in call.args]
    except _Reject:
        return False
    if len(shapes) != 2 or all(is_constant(arg) for arg in call.args):
        return False
    a, b, out = broadcast_ranks(*shapes)
    if out is None or len(out) not in ranks:
        return False
    try:
        binary_dims((out, a, b))
    except ValueError:
        return False
    return True


def check_binary(ctx: PatternCheckContext) -> None:
    """Two tensors of rank 2 to 4, or 5 next to copies only (one of them may be a constant of
    any shape that broadcasts, which no affine step took), any batch, that broadcast in at
    most 4 merged dimensions; not what `mrvl.add` / `mrvl.mul` take (one shape, an SE gate) and not part
    of an activation."""
    call = ctx.annotated_expr["root"]
    _no_leaks(ctx)
    _whole_onnx_ops(ctx, _BINARY_ONNX_OPS)
    if all(is_constant(arg) for arg in call.args):
        raise _Reject("both operands are constants", call)
    lhs, rhs = (
        _tensor_shape(arg, call)
        if is_constant(arg)
        else _activation(arg, BINARY_RANKS, call, any_batch=True)
        for arg in call.args
    )
    a, b, out = broadcast_ranks(lhs, rhs)
    if out is None:
        raise _Reject(f"shapes {list(lhs)} and {list(rhs)} do not broadcast", call)
    if len(out) not in BINARY_RANKS:
        raise _Reject(f"a rank-{len(out)} result", call)
    if len(out) == 5:  # only copies and binary ops read rank-5 tensors (`move_checks`)
        from .move_checks import high_rank_neighbour

        other = high_rank_neighbour(ctx, [*call.args, call])
        if other is not None:
            raise _Reject(f"rank 5 (next to {other.removeprefix('relax.')})", call)
    kind = BINARY_OPS[_op_name(call)]
    computed = not any(is_constant(arg) for arg in call.args)
    if computed and kind in ("add", "mul") and lhs == rhs:
        raise _Reject(f"{kind} of one shape is mrvl.{kind}'s", call)
    gate = len(a) == 4 and sorted((a, b), key=prod)[0] == (out[0], out[1], 1, 1)
    if computed and kind == "mul" and gate:
        raise _Reject("a squeeze-excitation gate is mrvl.mul's", call)
    try:
        form, _ = split_activation(call, lambda e: _bound(ctx, e))
    except ActivationFormError:
        form = None
    outer = _enclosing_activation(ctx, call)
    if form is not None or outer is not None:
        raise _Reject(f"part of the activation {(form or outer).kind}", call)
    try:
        binary_dims((out, a, b))
    except ValueError as err:
        raise _Reject(str(err), call) from None


# --------------------------------------------------------------------------------- import

RELAX_LAYOUT = mrvl.RELAX_LAYOUT


def _shape(expr) -> tuple[int, ...]:
    return tuple(int(d) for d in expr.ty.shape)


def import_reduce(importer, chain, inner: dict):
    """One mrvl.reduce in the input's layout where the reduced axes are consecutive there
    (else in Relax's), then a reshape for a reduction without keepdims. ReduceL2's
    `sqrt(sum(x * x))` is one, of kind "l2"."""
    square = chain.take("relax.multiply")
    l2 = square is not None
    call = chain.take_one(*REDUCE_OPS)
    node = node_name_of(call)
    # the square root is what the importer splits off as a table activation: L2's own step
    if l2 and chain.take("relax.sqrt") is None and getattr(chain.activation, "kind", "") != "sqrt":
        raise UnsupportedOpError("reduce: ReduceL2 without its square root", node)
    data = square.args[0] if l2 else call.args[0]
    shape = _shape(data)
    try:
        axes = reduce_axes(call, shape)
    except _Reject as rejection:
        raise UnsupportedOpError(f"reduce: {rejection.reason}", node) from None
    relax_layout = RELAX_LAYOUT[len(shape)]
    x = importer._operand(inner, data, node)
    perm = mrvl.layout_permutation(relax_layout, mrvl.layout_of(x))
    physical = sorted(perm.index(a) for a in axes)
    if physical != list(range(physical[0], physical[0] + len(physical))):
        x, physical = importer._in_layout(x, relax_layout, node), axes
    kind = "l2" if l2 else REDUCE_OPS[_op_name(call)]
    result = importer._located(mrvl.ReduceOp(x, physical, kind), node)
    out_shape = _shape(call)
    if len(out_shape) == len(shape):  # keepdims: the result in its layout already
        return result
    result = importer._in_layout(result, relax_layout, node)
    out_type = mrvl.tensor(out_shape, mrvl.element_type_of(result), RELAX_LAYOUT[len(out_shape)])
    return importer._located(mrvl.ReshapeOp(result, out_type), node)


def import_binary(importer, chain, inner: dict):
    """Both operands at the result's rank (a lower-rank one relabelled with leading 1s) in
    the layout of a computed one that has the result's shape (Relax's if neither), one
    mrvl.binary; a constant operand is made in that layout (`constant_operands`)."""
    call = chain.take_one(*BINARY_OPS)
    node = node_name_of(call)
    out_shape = _shape(call)
    rank = len(out_shape)
    layout = RELAX_LAYOUT[rank]
    for arg in call.args:
        if not is_constant(arg) and (1,) * (rank - len(_shape(arg))) + _shape(arg) == out_shape:
            if len(_shape(arg)) == rank:  # (a lower-rank one is relabelled in Relax's)
                layout = mrvl.layout_of(importer._operand(inner, arg, node))
            break
    lhs, rhs = (data_operand(importer, inner, arg, rank, layout, node) for arg in call.args)
    return importer._located(mrvl.BinaryOp(lhs, rhs, BINARY_OPS[_op_name(call)]), node)
