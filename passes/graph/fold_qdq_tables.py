"""`mrvl-fold-qdq`'s table activations: `quantize(scale_shift(dequantize(q)))` whose scale
and shift are one value for every channel is a function of one int8 value, so it becomes
`mrvl.int8_table`, its 256 entries what the QDQ model means for each input (docs/isa.md §4b,
"Table activations"): q dequantized in fp32, `act(x * scale + shift)` evaluated in float64
and rounded to fp32, then quantized (`mrvl.int8.int8_table`). onnxruntime evaluates the op in
fp32 (its own Sigmoid, Tanh, ...): the two agree on every entry but where the fp32 value lies
within an ulp or two of a half step of the output (tested on all 256 inputs).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import i8
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from mrvl.act_tables import reference
from mrvl.dialects import mrvl
from mrvl.errors import CompileError
from mrvl.isa import TABLE_ACTIVATIONS, Activation
from mrvl.locations import location_name


def _parameters(op: mrvl.ScaleShiftOp, act: Activation) -> tuple[float, float]:
    """(a, b) of the activation, as the fp16 instructions' act_a / act_b take them."""
    if act == Activation.CLIP:
        return op.act_min.value.data, op.act_max.value.data
    a = op.alpha.value.data if op.alpha is not None else 0.0
    b = op.beta.value.data if op.beta is not None else 0.0
    return a, b


def activation_f64(op: mrvl.ScaleShiftOp):
    """The layer's activation as a float64 function of an array, and its name."""
    if op.activation is None:
        return (lambda x: x), "identity"
    act = op.activation.isa
    name = op.activation.data.value
    a, b = _parameters(op, act)
    if act == Activation.NONE:
        return (lambda x: x), name
    if act == Activation.RELU:
        return (lambda x: np.maximum(x, 0.0)), name
    if act == Activation.CLIP:
        return (lambda x: np.minimum(np.maximum(x, a), b)), name
    if act == Activation.LEAKY_RELU:
        return (lambda x: np.where(x < 0, a * x, x)), name
    if act in TABLE_ACTIVATIONS:
        return (lambda x: reference(act, x, a, b)), name
    slopes = np.array(op.slopes.get_values(), np.float64) if op.slopes is not None else None
    if act == Activation.PRELU and slopes is not None and np.all(slopes == slopes[0]):
        return (lambda x: np.where(x < 0, slopes[0] * x, x)), name  # one slope: a leaky ReLU
    raise CompileError(
        f"{op.name} at {location_name(op.location)}: int8 activation {name} is not a function "
        "of one value (per-channel slopes)"
    )


def _uniform(op: mrvl.ScaleShiftOp, value, what: str) -> float | None:
    owner = value.owner
    if not isinstance(owner, mrvl.ConstantOp):
        return None
    data = owner.numpy().reshape(-1)
    if data.size == 0 or not np.all(data == data[0]):
        return None
    return float(data[0])


def quantized_scale_shift(
    op: mrvl.QuantizeOp,
) -> tuple[mrvl.ScaleShiftOp, mrvl.DequantizeOp] | None:
    """The scale_shift and the dequantize of `quantize(scale_shift(dequantize(q)))` that the
    quantize `op` ends (the scale_shift read by `op` alone), or None: what the per-channel
    affine fold matches (the table fold also looks through a reshape)."""
    layer = op.input.owner
    if not isinstance(layer, mrvl.ScaleShiftOp) or not op.input.has_one_use():
        return None
    dq = layer.input.owner
    if not isinstance(dq, mrvl.DequantizeOp):
        return None
    return layer, dq


def replace_scale_shift(
    op: mrvl.QuantizeOp,
    layer: mrvl.ScaleShiftOp,
    new,
    rewriter: PatternRewriter,
    reshape: mrvl.ReshapeOp | None = None,
) -> None:
    """`new` (at `layer`'s location) in place of the quantize `op` of `layer` (of `reshape`
    of it: then the int8 result is reshaped the same way), and `layer` and its scale and
    shift constants erased once nothing else reads them."""
    new.location = layer.location
    if reshape is None:
        rewriter.replace(op, new)
    else:
        rewriter.insert(new)
        out = reshape.output
        moved = mrvl.ReshapeOp(
            new.results[0], mrvl.tensor(mrvl.shape_of(out), i8, mrvl.layout_of(out))
        )
        moved.location = reshape.location
        rewriter.replace(op, moved)
        rewriter.erase(reshape)
    constants = [layer.scale.owner, layer.shift.owner]
    if not layer.output.uses:
        rewriter.erase(layer)
    for constant in constants:
        if isinstance(constant, mrvl.ConstantOp) and not constant.result.uses:
            rewriter.erase(constant)


class FoldQuantizedTable(RewritePattern):
    """`quantize(scale_shift(dequantize(q)))` with one scale and one shift -> the table. Also
    `quantize(reshape(scale_shift(...)))`: an activation of a tensor of rank 2 or 3 imports
    as a reshape to NHWC, the scale_shift, and a reshape back, and the quantize (elementwise)
    of the result moves before the second reshape."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.QuantizeOp, rewriter: PatternRewriter) -> None:
        from mrvl import int8

        layer, reshape = op.input.owner, None
        if isinstance(layer, mrvl.ReshapeOp):
            reshape, layer = layer, layer.input.owner
        if not isinstance(layer, mrvl.ScaleShiftOp) or not op.input.has_one_use():
            return
        if reshape is not None and not layer.output.has_one_use():
            return
        dq = layer.input.owner
        if not isinstance(dq, mrvl.DequantizeOp):
            return
        scale = _uniform(layer, layer.scale, "scale")
        shift = _uniform(layer, layer.shift, "shift")
        if scale is None or shift is None:
            raise CompileError(
                f"{layer.name} at {location_name(layer.location)}: an int8 scale_shift has one "
                "scale and one shift (a table is one function of one value)"
            )
        fn, name = activation_f64(layer)
        if (scale, shift) != (1.0, 0.0):
            name = f"{name}(x * {scale!r} + {shift!r})"
        s_in, z_in = dq.quant.values
        s_out, z_out = op.quant.values
        s32, b32 = np.float32(scale), np.float32(shift)
        table = int8.int8_table(
            lambda x: fn(np.array([np.float64(x) * s32 + b32]))[0], s_in, z_in, s_out, z_out
        )
        new = mrvl.Int8TableOp(dq.input, name, table, dq.quant, op.quant)
        replace_scale_shift(op, layer, new, rewriter, reshape)
