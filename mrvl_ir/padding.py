"""The Relax side of a standalone constant Pad: its pattern, check and import.

    mrvl.pad   relax.nn.pad in constant mode (any value) of a rank 2 to 6 tensor, any batch,
               that no conv absorbed (a conv takes a zero pad before it as its padding, so
               this pattern comes after the convs')

The pad keeps its input's layout (after a conv, NHWC: the pad widths are permuted into it, no
conversion) and runs as two DMA passes, a fill and an interior copy (`lowering/pad.py`).
"""

from __future__ import annotations

from tvm.relax.dpl import is_op, wildcard
from tvm.relax.transform import PatternCheckContext

from mrvl.activation_forms import prim_float
from mrvl.dialects import mrvl
from mrvl.errors import UnsupportedOpError
from mrvl.frontend import node_name_of
from mrvl.move_checks import high_rank_neighbour
from mrvl.pattern_checks import (
    _activation,
    _int_list,
    _Reject,
    _tensor_shape,
    _whole_onnx_ops,
    checked,
)


def pad_pattern():
    """mrvl.pad: one relax.nn.pad of a runtime tensor."""
    data = wildcard()
    root = is_op("relax.nn.pad")(data)
    return ("mrvl.pad", root, {"data": data, "root": root}, checked(check_pad))


def pad_parts(call, rank: int) -> tuple[list[int], list[int], float]:
    """(before, after, value) of a constant pad, in Relax's dimension order."""
    attrs = call.attrs
    if str(attrs.pad_mode) != "constant":
        raise _Reject(f"attribute mode={attrs.pad_mode}", call)
    widths = _int_list(attrs.pad_width)
    if widths is None or len(widths) != 2 * rank:
        raise _Reject(f"pads {widths}", call)
    if any(w < 0 for w in widths):
        raise _Reject("negative pads (a crop)", call)
    value = prim_float(attrs.pad_value)
    if value is None:
        raise _Reject("a pad value that is not a number", call)
    return widths[0::2], widths[1::2], value


def check_pad(ctx: PatternCheckContext) -> None:
    """A constant pad (any value, rounded to f16 as the tensor is) of a rank 2 to 6 tensor."""
    call = ctx.annotated_expr["root"]
    _whole_onnx_ops(ctx, frozenset({"Pad"}))
    shape = _activation(ctx.annotated_expr["data"], (2, 3, 4, 5, 6), call, any_batch=True)
    _tensor_shape(call, call)
    pad_parts(call, len(shape))
    # at rank 5 and 6 only data movement reads and makes tensors (as for a strided copy)
    other = high_rank_neighbour(ctx, [ctx.annotated_expr["data"], ctx.matched_expr])
    if other is not None:
        raise _Reject(f"a tensor of rank 5 or 6 that {other} makes or reads", call)


def import_pad(importer, chain, inner: dict):
    """One mrvl.pad in the input's layout, the widths permuted into it."""
    call = chain.take_one("relax.nn.pad")
    node = node_name_of(call)
    rank = len(call.args[0].ty.shape)
    try:
        before, after, value = pad_parts(call, rank)
    except _Reject as rejection:
        raise UnsupportedOpError(f"pad: {rejection.reason}", node) from None
    x = importer._operand(inner, call.args[0], node)
    perm = mrvl.layout_permutation(mrvl.RELAX_LAYOUT[rank], mrvl.layout_of(x))
    pads = [before[p] for p in perm] + [after[p] for p in perm]
    return importer._located(mrvl.PadOp(x, pads, value), node)
