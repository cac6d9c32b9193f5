"""The Relax side of the normalization layers: their patterns, checks and import.

    mrvl.softmax    softmax(x, axis), any axis, rank 2 to 4; or, as an opset <= 12 export
                    writes it, reshape(softmax(reshape(x, [outer, rest]), -1), x.shape): a
                    softmax over the trailing axes from `axis` on

A softmax that nothing reads but the model's output (a classifier's last op) stays on the CPU:
offloading it saves no round trip to the host, and the CPU keeps the probabilities in fp32.
A softmax keeps its input's layout: the reduced axis is mapped into it, so a softmax after a
conv (NHWC) reduces over the axis where the channel lies, with no layout conversion. A row
(the elements of the reduced axes) must fit a tile's OCM with its result (`plan_rows`).
"""

from __future__ import annotations

from math import prod

from tvm.relax.dpl import is_op, wildcard
from tvm.relax.transform import PatternCheckContext

from mrvl.dialects import mrvl
from mrvl.errors import UnsupportedOpError
from mrvl.frontend import node_name_of
from mrvl.passes.sched.lowering.normalization import plan_rows
from mrvl.pattern_checks import (
    _activation,
    _check_fits,
    _no_leaks,
    _op_name,
    _producer_call,
    _Reject,
    _tensor_shape,
    _whole_onnx_ops,
    checked,
)

# ------------------------------------------------------------------------------- patterns


def softmax_pattern(flattened: bool):
    """mrvl.softmax: softmax(x), or the opset <= 12 form reshape(softmax(reshape(x)))."""
    data = wildcard()
    ann = {"data": data}
    inner = data
    if flattened:
        inner = ann["flatten"] = is_op("relax.reshape")(data, wildcard())
    root = ann["softmax"] = is_op("relax.nn.softmax")(inner)
    if flattened:
        root = ann["restore"] = is_op("relax.reshape")(root, wildcard())
    return ("mrvl.softmax", root, ann, checked(check_softmax))


# --------------------------------------------------------------------------------- checks


def softmax_axes(ann: dict) -> tuple[tuple[int, ...], list[int]]:
    """(the input's shape, the consecutive Relax axes a softmax match reduces over)."""
    softmax = ann["softmax"]
    shape = _tensor_shape(ann["data"], softmax)
    axis = int(softmax.attrs.axis)
    if "flatten" not in ann:
        if not -len(shape) <= axis < len(shape):
            raise _Reject(f"attribute axis={axis}", softmax)
        return shape, [axis % len(shape)]
    flat = _tensor_shape(ann["flatten"], ann["flatten"])
    if len(flat) != 2 or axis % 2 != 1 or _tensor_shape(ann["restore"], softmax) != shape:
        raise _Reject("a reshape around the softmax that is not its flattening", softmax)
    for first in range(len(shape)):
        if flat == (prod(shape[:first]), prod(shape[first:])):
            return shape, list(range(first, len(shape)))
    raise _Reject(f"a reshape to {list(flat)} that is not a flattening of {list(shape)}", softmax)


def check_softmax(ctx: PatternCheckContext) -> None:
    """A softmax over one axis (or the trailing axes) of a rank 2 to 4 tensor, any batch, whose
    row fits a tile's OCM, and whose result some other op reads."""
    ann = ctx.annotated_expr
    softmax = ann["softmax"]
    _no_leaks(ctx)
    _whole_onnx_ops(ctx, frozenset({"Softmax"}))
    shape = _activation(ann["data"], (2, 3, 4), softmax, any_batch=True)
    shape, axes = softmax_axes(ann)
    root = ctx.matched_expr
    var = ctx.value_to_bound_var.get(root)
    users = list(ctx.var_usages.get(var, [])) if var is not None else []
    if "flatten" not in ann:
        around = [_producer_call(ctx, softmax.args[0])] + [_producer_call(ctx, u) for u in users]
        if any(
            c is not None and _op_name(c) == "relax.reshape" and node_name_of(c) is not None
            and node_name_of(c) == node_name_of(softmax)
            for c in around
        ):  # fmt: skip
            raise _Reject("the softmax of a flattening Softmax goes with its reshapes", softmax)
    if not users:
        # offloading it would save no round trip and round the probabilities to f16
        raise _Reject("final softmax kept on the CPU in fp32 (nothing on the MLIP reads it)", softmax)
    length = prod(shape[a] for a in axes)
    _check_fits(
        lambda target, tiles: plan_rows(
            1, length, 1, target.ocm_bytes_per_tile, tiles, target.ocm_alignment, "layer"
        ),
        softmax,
    )


# --------------------------------------------------------------------------------- import

RELAX_LAYOUT = {4: "NCHW", 3: "NCW", 2: "NC"}


def import_softmax(importer, chain, inner: dict):
    """The reduced Relax axes mapped into the input's layout (NHWC after a conv); a run of
    axes (the flattened form) is reduced in Relax's own layout, where it is consecutive."""
    flatten = chain.take("relax.reshape")
    call = chain.take_one("relax.nn.softmax")
    restore = chain.take("relax.reshape")
    node = node_name_of(call)
    data = (flatten if flatten is not None else call).args[0]
    ann = {"data": data, "softmax": call}
    if flatten is not None:
        ann.update(flatten=flatten, restore=restore)
    try:
        shape, axes = softmax_axes(ann)
    except _Reject as rejection:
        raise UnsupportedOpError(f"softmax: {rejection.reason}", node) from None
    x = importer._operand(inner, data, node)
    relax_layout = RELAX_LAYOUT[len(shape)]
    layout = mrvl.layout_of(x) if len(axes) == 1 else relax_layout
    x = importer._in_layout(x, layout, node)
    perm = mrvl.layout_permutation(relax_layout, layout)
    physical = sorted(perm.index(a) for a in axes)
    return importer._located(mrvl.SoftmaxOp(x, physical), node)

