"""The Relax side of the normalization layers: their patterns, checks and import.

    mrvl.softmax    softmax(x, axis), any axis, rank 2 to 5 (rank 5 on the same bytes seen
                    as [outer, length, inner]); or, as an opset <= 12 export writes it,
                    reshape(softmax(reshape(x, [outer, rest]), -1), x.shape): a softmax
                    over the trailing axes from `axis` on
    mrvl.layernorm  layer_norm(x, gamma, beta) over the trailing axes (LayerNormalization,
                    opset 17); or the decomposed form older exports write,
                    d = x - mean(x); d / sqrt(mean(d ** 2) + eps) [* gamma] [+ beta]

A softmax that nothing reads but the model's output (a classifier's last op) stays on the CPU:
offloading it saves no round trip to the host, and the CPU keeps the probabilities in fp32.
A softmax keeps its input's layout: the reduced axis is mapped into it, so a softmax after a
conv (NHWC) reduces over the axis where the channel lies, with no layout conversion. A row
(the elements of the reduced axes) must fit a tile's OCM with its result (`plan_rows`); a
layernorm row that does not fit with its f32 scale and shift as well runs as `lnstats` and
`lnapply` (`plan_layernorm`), and needs only its f16 input to fit.
"""

from __future__ import annotations

from math import prod

import numpy as np
from tvm.ir.expr import GenericConst
from tvm.relax.dpl import is_const, is_op, wildcard
from tvm.relax.transform import PatternCheckContext

from mrvl.dialects import mrvl
from mrvl.errors import UnsupportedOpError
from mrvl.frontend import node_name_of
from mrvl.passes.sched.lowering.normalization import plan_layernorm, plan_rows
from mrvl.pattern_checks import (
    _activation,
    _check_fits,
    _constant,
    _int_list,
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


def layernorm_pattern():
    """mrvl.layernorm: relax.nn.layer_norm with constant scale and shift."""
    data = wildcard()
    ann = {"data": data}
    root = ann["norm"] = is_op("relax.nn.layer_norm")(data, is_const(), is_const())
    return ("mrvl.layernorm", root, ann, checked(check_layernorm))


def decomposed_layernorm_pattern():
    """mrvl.layernorm, decomposed: ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div, and
    an optional Mul by the scale and Add of the shift (the longest alternative first)."""
    data = wildcard()
    ann = {"data": data}
    ann["mean"] = mean = is_op("relax.mean")(data)
    ann["centered"] = centered = is_op("relax.subtract")(data, mean)
    ann["square"] = square = is_op("relax.power")(centered, is_const())
    ann["var"] = var = is_op("relax.mean")(square)
    ann["eps"] = eps = is_op("relax.add")(var, is_const())
    ann["std"] = std = is_op("relax.sqrt")(eps)
    ann["normed"] = normed = is_op("relax.divide")(centered, std)
    scaled = is_op("relax.multiply")(normed, is_const())
    shifted = is_op("relax.add")(scaled, is_const())
    root = shifted | scaled | is_op("relax.add")(normed, is_const()) | normed
    return ("mrvl.layernorm", root, ann, checked(check_layernorm))


# --------------------------------------------------------------------------------- checks

FINAL_SOFTMAX = "final softmax kept on the CPU in fp32 (nothing on the MLIP reads it)"
"""The reason a softmax that only the model's output reads stays on the CPU."""


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
    """A softmax over one axis (or the trailing axes) of a rank 2 to 5 tensor, any batch, whose
    row fits a tile's OCM, and whose result some other op reads (at rank 5, computed on the
    same bytes seen as [outer, length, inner])."""
    ann = ctx.annotated_expr
    softmax = ann["softmax"]
    _no_leaks(ctx)
    _whole_onnx_ops(ctx, frozenset({"Softmax"}))
    shape = _activation(ann["data"], (2, 3, 4, 5), softmax, any_batch=True)
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
        raise _Reject(FINAL_SOFTMAX, softmax)
    length = prod(shape[a] for a in axes)
    _check_fits(
        lambda target, tiles: plan_rows(
            1, length, 1, target.ocm_bytes_per_tile, tiles, target.ocm_alignment, "layer"
        ),
        softmax,
    )


_AFFINE = ("relax.multiply", "relax.add")
_DECOMPOSED_ONNX_OPS = frozenset({"ReduceMean", "Sub", "Pow", "Add", "Sqrt", "Div", "Mul"})


def _trailing(axes, rank: int, at) -> list[int]:
    normal = sorted({int(a) % rank for a in axes}) if axes is not None else []
    if not normal or normal != list(range(normal[0], rank)):
        raise _Reject(f"axes {axes} are not the trailing axes", at)
    return normal


def _row_constant(expr, shape, axes, what: str, at) -> np.ndarray:
    """A scale or shift constant as one f32 value per element of a row (broadcast)."""
    array = _constant(expr, what, at)
    row = tuple(shape[a] for a in axes)
    try:
        full = np.broadcast_to(array, (1,) * (len(shape) - array.ndim) + tuple(shape))
    except ValueError:
        raise _Reject(f"{what} shape {array.shape}", at) from None
    values = full.reshape(-1, prod(row))
    if not (values == values[:1]).all():
        raise _Reject(f"{what} shape {array.shape} varies outside a row", at)
    return values[0].astype(np.float32)


def layernorm_parts(ann: dict, calls) -> tuple[tuple[int, ...], list[int], float, tuple]:
    """(input shape, trailing axes, epsilon, (scale, shift) as (constant expr or None, f32
    values)) of a layernorm match, either form; `calls` its calls, in order."""
    if "norm" in ann:
        norm = ann["norm"]
        shape = _tensor_shape(ann["data"], norm)
        axes = _trailing(_int_list(norm.attrs.axes), len(shape), norm)
        if not (bool(norm.attrs.center) and bool(norm.attrs.scale)):
            raise _Reject("layer_norm without its scale or shift", norm)
        parts = tuple(
            (c, _row_constant(c, shape, axes, what, norm))
            for c, what in zip(norm.args[1:3], ("scale", "shift"))
        )
        return shape, axes, float(norm.attrs.epsilon), parts
    mean, var = ann["mean"], ann["var"]
    shape = _tensor_shape(ann["data"], mean)
    axes = _trailing(_int_list(mean.attrs.axis), len(shape), mean)
    if _trailing(_int_list(var.attrs.axis), len(shape), var) != axes:
        raise _Reject("the two means reduce over different axes", var)
    if not (bool(mean.attrs.keepdims) and bool(var.attrs.keepdims)):
        raise _Reject("a mean without keepdims", mean)
    exponent = _constant(ann["square"].args[1], "exponent", ann["square"])
    if exponent.size != 1 or float(exponent.reshape(-1)[0]) != 2.0:
        raise _Reject(f"Pow by {exponent.reshape(-1)[:1]} is not a square", ann["square"])
    eps = _constant(ann["eps"].args[1], "epsilon", ann["eps"])
    if eps.size != 1 or not float(eps.reshape(-1)[0]) >= 0.0:
        raise _Reject("epsilon is not one non-negative value", ann["eps"])
    scale = shift = None
    core = [ann[k] for k in ("mean", "centered", "square", "var", "eps", "std", "normed")]
    for call in calls:  # what follows the division: the pattern makes it mul, then add
        if any(call.same_as(c) for c in core) or _op_name(call) not in _AFFINE:
            continue
        const = next((a for a in call.args if isinstance(a, GenericConst)), None)
        if const is None:
            raise _Reject(f"{_op_name(call)} of two tensors", call)
        values = _row_constant(const, shape, axes, "scale or shift", call)
        if _op_name(call) == "relax.multiply":
            scale = (const, values)
        else:
            shift = (const, values)
    length = prod(shape[a] for a in axes)
    ones, zeros = np.ones(length, np.float32), np.zeros(length, np.float32)
    parts = (scale or (None, ones), shift or (None, zeros))
    return shape, axes, float(eps.reshape(-1)[0]), parts


def check_layernorm(ctx: PatternCheckContext) -> None:
    """Layer normalization over the trailing axes of a rank 2 to 4 tensor, any batch, either
    form, with constant scale and shift of one value per element of a row; a row with its
    result must fit a tile's OCM (with its f32 scale and shift, one `layernorm`; else
    `lnstats` and `lnapply` over runs of it)."""
    ann = ctx.annotated_expr
    at = ann.get("norm", ann.get("mean"))
    _no_leaks(ctx)
    _whole_onnx_ops(
        ctx, frozenset({"LayerNormalization"}) if "norm" in ann else _DECOMPOSED_ONNX_OPS
    )
    _activation(ann["data"], (2, 3, 4), at, any_batch=True)
    calls = [c for c in ctx.matched_bindings.values() if hasattr(c, "op")]
    shape, axes, _, _ = layernorm_parts(ann, calls)
    length = prod(shape[a] for a in axes)
    _check_fits(
        lambda target, tiles: plan_layernorm(
            1, length, target.ocm_bytes_per_tile, tiles, target.ocm_alignment, "layer"
        ),
        at,
    )


# --------------------------------------------------------------------------------- import

RELAX_LAYOUT = mrvl.RELAX_LAYOUT


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
    if len(shape) == 5:  # the same bytes seen as [outer, length, inner] (NCW), then back
        x = importer._in_layout(x, RELAX_LAYOUT[5], node)
        et = mrvl.element_type_of(x)
        rows = (prod(shape[: axes[0]]), prod(shape[a] for a in axes), prod(shape[axes[-1] + 1 :]))
        x = importer._located(mrvl.ReshapeOp(x, mrvl.tensor(rows, et, "NCW")), node)
        y = importer._located(mrvl.SoftmaxOp(x, [1]), node)
        return importer._located(mrvl.ReshapeOp(y, mrvl.tensor(shape, et, "NCDHW")), node)
    relax_layout = RELAX_LAYOUT[len(shape)]
    layout = mrvl.layout_of(x) if len(axes) == 1 else relax_layout
    x = importer._in_layout(x, layout, node)
    perm = mrvl.layout_permutation(relax_layout, layout)
    physical = sorted(perm.index(a) for a in axes)
    return importer._located(mrvl.SoftmaxOp(x, physical), node)



def import_layernorm(importer, chain, inner: dict):
    """Either form as one mrvl.layernorm on the input in Relax's layout (its trailing axes
    are the innermost there), scale and shift as f32 row constants under TVM's names."""
    calls = chain.calls[chain.position :]
    chain.position = len(chain.calls)
    first = calls[0]
    if _op_name(first) == "relax.nn.layer_norm":
        ann = {"data": first.args[0], "norm": first}
    else:
        names = ["mean", "centered", "square", "var", "eps", "std", "normed"]
        if [_op_name(c) for c in calls[:7]] != [
            "relax.mean", "relax.subtract", "relax.power", "relax.mean", "relax.add",
            "relax.sqrt", "relax.divide",
        ]:  # fmt: skip
            raise UnsupportedOpError("layernorm: not the decomposed form", node_name_of(first))
        ann = {"data": first.args[0], **dict(zip(names, calls))}
    node = node_name_of(ann.get("normed", first)) or node_name_of(first)
    try:
        shape, axes, eps, parts = layernorm_parts(ann, calls)
    except _Reject as rejection:
        raise UnsupportedOpError(f"layernorm: {rejection.reason}", node) from None
    x = importer._operand(inner, ann["data"], node)
    x = importer._in_layout(x, RELAX_LAYOUT[len(shape)], node)
    values = []
    for (const, array), role in zip(parts, ("scale", "shift")):
        if const is not None:
            values.append(importer._constant(const, array, "O"))
        else:
            values.append(importer._made_constant(array, "O", role))
    return importer._located(mrvl.LayerNormOp(x, *values, axes, eps), node)
