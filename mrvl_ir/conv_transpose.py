"""The transposed conv from Relax: its partition check and its import.

    mrvl.conv_transpose   conv2d_transpose | conv1d_transpose [steps] [activation]

A transposed conv is zero insertion (`mrvl.dilate`, DMA only) and an ordinary conv over the
result. A rank-3 one (ConvTranspose1d, `[N, C, L]`) is the 2-D one over H = 1, as a conv1d
is a conv2d (`pattern_checks.conv_as_2d`): its input seen as `[N, C, 1, L]` (the same bytes)
and its result viewed back.
"""

from __future__ import annotations

import numpy as np
from tvm.relax.transform import PatternCheckContext
from xdsl.dialects.builtin import f32
from xdsl.ir import SSAValue

from mrvl.dialects import mrvl
from mrvl.errors import UnsupportedOpError
from mrvl.frontend import node_name_of
from mrvl.pattern_checks import (
    _activation,
    _check_tail,
    _conv_weight,
    _int_list,
    _no_leaks,
    _Reject,
    conv_as_2d,
)

_LAYOUTS = {
    "relax.nn.conv2d_transpose": ("NCHW", "IOHW"),
    "relax.nn.conv1d_transpose": ("NCW", "IOW"),
}


def check_conv_transpose(ctx: PatternCheckContext) -> None:
    """A transposed conv the importer lowers to zero insertion plus an ordinary conv: its
    pads become the conv's padding `dilation * (k - 1) - pad`, which must not be negative."""
    ann = ctx.annotated_expr
    conv = ann["conv"]
    _no_leaks(ctx)
    attrs = conv.attrs
    data_layout, kernel_layout = _LAYOUTS[conv.op.name]
    rank = len(data_layout)
    _activation(ann["data"], (rank,), conv, any_batch=True)
    weight, channels = _conv_weight(conv, ann["weight"], (data_layout, kernel_layout, data_layout))
    groups = int(attrs.groups)
    if weight.shape[0] != channels or channels % groups:
        raise _Reject(f"attribute group={groups}", conv)
    kernel = weight.shape[2:]
    dilation, pads = _int_list(attrs.dilation), _int_list(attrs.padding)
    for axis, (k, d) in enumerate(zip(kernel, dilation)):
        extent = d * (k - 1)
        if pads[axis] > extent or pads[axis + len(kernel)] > extent:
            raise _Reject(f"pads {pads} beyond the kernel's extent {extent}", conv)
    _check_tail(ctx, [conv], weight.shape[1] * groups, rank, prelu=True)


def _ints(values) -> list[int]:
    return [int(v) for v in values]


def import_conv_transpose(importer, chain, inner: dict) -> SSAValue:
    """Zero insertion and an ordinary conv over the result, with the kernel flipped, input
    and output channels swapped per group, and padding `dilation * (k - 1) - pad` (plus
    `output_padding` at the bottom/right)."""
    from mrvl.relax_import import _AFFINE_CALLS

    call = chain.take_one(*_LAYOUTS)
    node = node_name_of(call)
    attrs = call.attrs
    one_d = call.op.name == "relax.nn.conv1d_transpose"
    if (attrs.data_layout, attrs.kernel_layout) != _LAYOUTS[call.op.name]:
        raise UnsupportedOpError("conv_transpose: only NCHW data and IOHW weights", node)
    x = importer._operand(inner, call.args[0], node)
    if one_d:
        view = mrvl.tensor(conv_as_2d([int(d) for d in call.args[0].ty.shape]), f32, "NCHW")
        x = importer._located(mrvl.ReshapeOp(importer._in_layout(x, "NCW", node), view), node)
    x = importer._in_layout(x, "NHWC", node)
    w_const = call.args[1]
    w = w_const.value.numpy().astype(np.float64)  # [C_in, C_out / g, KH, KW] (or [.., K])
    w = w.reshape(conv_as_2d(w.shape))
    groups = int(attrs.groups)
    c_in, og, kh, kw = w.shape
    ig = c_in // groups
    # [g, ig, og, kh, kw] -> [g, og, ig, kh, kw], flipped -> OIHW [g * og, ig, kh, kw]
    w = w.reshape(groups, ig, og, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
    w = w.reshape(groups * og, ig, kh, kw)
    sh, sw = conv_as_2d(_ints(attrs.strides), fill=1)
    dh, dw = conv_as_2d(_ints(attrs.dilation), fill=1)
    pt, pl, pb, pr = conv_as_2d(_ints(attrs.padding), padding=True)
    oph, opw = conv_as_2d(_ints(attrs.output_padding), fill=0)
    pads = (
        dh * (kh - 1) - pt,
        dw * (kw - 1) - pl,
        dh * (kh - 1) - pb + oph,
        dw * (kw - 1) - pr + opw,
    )
    if min(pads) < 0:
        raise UnsupportedOpError(f"conv_transpose: pads {[pt, pl, pb, pr]} too large", node)
    if (sh, sw) != (1, 1):
        x = importer._located(mrvl.DilateOp(x, (sh, sw)), node)
    shape = [int(d) for d in call.ty.shape]
    out_n, out_c, out_h, out_w = conv_as_2d(shape)
    has_bias = chain.peek_any(*_AFFINE_CALLS)
    bias_const = chain.first_const_of(*_AFFINE_CALLS)
    scale, shift = importer._affine_after(chain, out_c)
    w = w * scale[:, None, None, None]
    weight = importer._constant(
        w_const, np.ascontiguousarray(w.astype(np.float32).transpose(0, 2, 3, 1)), "OHWI"
    )
    op = mrvl.Conv2DOp(
        x,
        weight,
        importer._bias_constant(bias_const, shift, has_bias),
        mrvl.tensor((out_n, out_h, out_w, out_c), f32, "NHWC"),
        pads=pads,
        dilations=(dh, dw),
        groups=groups,
        activation=importer._activation(chain, out_c),
    )
    result = importer._located(op, node)
    if one_d:
        nchw = importer._in_layout(result, "NCHW", node)
        result = importer._located(mrvl.ReshapeOp(nchw, mrvl.tensor(shape, f32, "NCW")), node)
    return result
