"""The checks of the data-movement patterns: `mrvl.copy` (a chain of moves whose composition
is a strided copy, `strided.py`), `mrvl.reshape` and `mrvl.transpose`. The checks of the
compute layers, and the helpers these share, are in `pattern_checks.py`.
"""

from __future__ import annotations

from tvm import relax
from tvm.ir.expr import GenericConst
from tvm.relax.transform import PatternCheckContext

from . import strided
from .frontend import constant_view
from .pattern_checks import (
    _COLLECTOR,
    _activation,
    _bound,
    _int_list,
    _no_leaks,
    _op_name,
    _Reject,
    _tensor_shape,
    _whole_onnx_ops,
)

_MOVE_ONNX_OPS = frozenset(
    {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Split", "Resize",
     "Upsample", "Identity", "DepthToSpace", "SpaceToDepth", "Gather",
     "Expand", "Tile", "Pad", "Einsum"}
)  # fmt: skip
"""ONNX ops a strided copy can be made of (an Einsum's transpose: einsum.py)."""

COPY_RANKS = (2, 3, 4, 5, 6)
"""Ranks of a strided copy's input and result: at 5 and 6 (attention's `[B, T, 3, heads, d]`,
a window partition) the tensor stays in Relax's order and only copies read it."""


def high_rank_binary(call: relax.Call) -> bool:
    """Whether `call` is an elementwise op of two tensors at rank 5 that `mrvl.binary` can
    take (Swin's shifted-window mask Add, `[B, windows, heads, T, T]` plus a constant
    `[1, windows, 1, T, T]`): it reads and makes rank-5 tensors as copies do."""
    from .reductions import BINARY_OPS, binary_fits

    return _op_name(call) in BINARY_OPS and binary_fits(call, ranks=(5,))


_HIGH_RANK_ELEMENTWISE = frozenset(
    {"relax.multiply", "relax.add", "relax.subtract", "relax.divide", "relax.nn.relu",
     "relax.clip", "relax.nn.leakyrelu", "relax.power", "relax.sigmoid", "relax.tanh",
     "relax.negative", "relax.maximum", "relax.minimum", "relax.erf", "relax.exp", "relax.log",
     "relax.sqrt", "relax.abs", "relax.nn.softmax", "relax.nn.prelu"}
)  # fmt: skip
"""Relax ops that, with scalar constants, are a scale_shift computed on a flat view of a
rank-5 tensor (`pattern_checks._elementwise_channels`): YOLOv5's decode head; and a softmax
(on the view [outer, length, inner]) and a PRelu (per-channel slopes on a 4-D view whose
channel axis is theirs), which read and make rank-5 tensors too."""


def high_rank_elementwise(call: relax.Call) -> bool:
    """Whether `call` is an elementwise op of one rank-5 tensor and scalar constants (a
    Sigmoid, a Pow by a constant, a Mul by a stride) or a rank-5 concat, which read and
    make rank-5 tensors in Relax's order as copies do."""
    if _op_name(call) == "relax.concat":
        return len(getattr(call.struct_info, "shape", None) or ()) == 5
    if _op_name(call) not in _HIGH_RANK_ELEMENTWISE:
        return False
    constants = [a for a in call.args if isinstance(a, GenericConst)]
    tensors = [a for a in call.args if isinstance(a, relax.Var | relax.Call)]
    if _op_name(call) == "relax.nn.prelu":  # per-channel slopes: a 4-D view (relax_import)
        return len(tensors) == 1
    return len(tensors) == 1 and all(constant_view(c).size == 1 for c in constants)


def high_rank_neighbour(ctx: PatternCheckContext, exprs: list[relax.Expr]) -> str | None:
    """The first op other than data movement (or a binary op `high_rank_binary` takes, or a
    scalar elementwise op or concat `high_rank_elementwise` takes) that
    makes or reads a tensor of rank 5 or 6 connected to `exprs` through data movement at
    those ranks; None if there is none (the tensors are the model's inputs and outputs or
    pass only between moves)."""
    collector = _COLLECTOR.get()
    high = lambda v: len(getattr(getattr(v, "ty", None), "shape", None) or ()) > 4  # noqa: E731
    if collector is None or not any(high(e) for e in exprs):
        return None
    var_of = {value: var for var, value in collector.bound.items()}
    todo = [ctx.value_to_bound_var.get(e, var_of.get(_bound(ctx, e), e)) for e in exprs]
    seen: set = set()
    while todo:
        var = todo.pop()
        if not isinstance(var, relax.Var) or var in seen or not high(var):
            continue
        seen.add(var)
        calls = [collector.bound.get(var), *collector.users.get(var, [])]
        for call in calls:
            if not isinstance(call, relax.Call):
                continue  # a model input
            moves = _op_name(call) in strided.MOVE_OPS or _op_name(call) == "relax.nn.pad"
            if not moves and not high_rank_binary(call) and not high_rank_elementwise(call):
                return _op_name(call)  # (a standalone pad moves data by DMA too)
            todo += [a for a in call.args if isinstance(a, relax.Var)]
            todo.append(var_of.get(call))
    return None


def check_copy(ctx: PatternCheckContext) -> None:
    """A chain of data-movement ops whose composition is a strided copy (`strided.py`).

    Only copies read and write tensors of rank 5 and 6: a copy connected through moves at
    those ranks to another op making or reading one (YOLOv5's detect head, a Sigmoid at rank
    5) stays on the CPU, or the moves around that op would be regions of copies alone."""
    ann = ctx.annotated_expr
    calls = [ann[key] for key in ("op0", "op1", "op2") if key in ann]
    _no_leaks(ctx)
    _whole_onnx_ops(ctx, _MOVE_ONNX_OPS)
    in_shape = _activation(ann["data"], COPY_RANKS, calls[0], any_batch=True)
    for call in calls:
        _tensor_shape(call, call)
    out_rank = len(_tensor_shape(calls[-1], calls[-1]))
    if out_rank not in COPY_RANKS:
        raise _Reject(f"result rank {out_rank}", calls[-1])
    other = high_rank_neighbour(ctx, [ann["data"], ctx.matched_expr])
    if other is not None:
        raise _Reject(f"a tensor of rank 5 or 6 that {other} makes or reads", calls[-1])
    try:
        strided.chain_form(calls, in_shape)
    except strided.NotACopy as err:
        raise _Reject(err.reason, err.call if err.call is not None else calls[-1]) from None


def check_reshape(ctx: PatternCheckContext) -> None:
    reshape = ctx.annotated_expr["root"]
    in_shape = _activation(ctx.annotated_expr["data"], (2, 4), reshape, any_batch=True)
    out_shape = _tensor_shape(reshape, reshape)
    if len(out_shape) not in (2, 4):
        raise _Reject(f"rank {len(out_shape)}", reshape)
    if len(out_shape) == len(in_shape):
        raise _Reject(f"reshape rank {len(in_shape)} to rank {len(out_shape)}", reshape)
    if out_shape[0] != in_shape[0]:
        raise _Reject("reshape changes the batch", reshape)


def check_transpose(ctx: PatternCheckContext) -> None:
    transpose = ctx.annotated_expr["root"]
    _activation(ctx.annotated_expr["data"], (4,), transpose, any_batch=True)
    axes = _int_list(transpose.attrs.axes)
    if axes not in ([0, 2, 3, 1], [0, 3, 1, 2]):
        raise _Reject(f"attribute perm={axes if axes is not None else 'reversed'}", transpose)
