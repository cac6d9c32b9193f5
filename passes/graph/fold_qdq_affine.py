"""`mrvl-fold-qdq`'s per-channel affines: `quantize(scale_shift(dequantize(q)))` whose scale or
shift differs between channels (a BatchNormalization no conv absorbs, DenseNet's after each
concat; a Mul or an Add by per-channel constants) becomes a depthwise 1x1 int8 conv, `qconv`
on the MLIP, with its ReLU or Clip as the saturation bounds. A rank-2 [N, C] affine (the
BatchNormalization after MobileFaceNet's embedding) is the conv of its [N, 1, 1, C] view.

The QDQ model means y = a[c] * x + b[c] on x = s_x * (q - z_x), then QuantizeLinear at s_y.
Each channel's weight is the int8 of largest magnitude, w[c] = sign(a[c]) * 127 at the scale
s_w[c] = |a[c]| / 127 (f32), so that w[c] * s_w[c] is a[c] to an f32 rounding; the shift is
the int32 bias round(b[c] / (s_x * s_w[c])) (half to even, `int8.quantize_bias`), and the
requantization (s_x * s_w[c] / s_y, docs/isa.md §4b) rounds once. Against onnxruntime's fp32
arithmetic the result differs by the bias rounding (at most s_x * |a[c]| / 254, 1/254 of the
input step carried through the affine) and the fp32 and Q31 roundings: a result differs from
onnxruntime's only where its exact value lies that close to a half step, and then by one step.
A channel with a[c] = 0 has weight 0 and s_w[c] = s_y / s_x (the bias is b[c] in output steps).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, f32, i8
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from mrvl import int8
from mrvl.dialects import mrvl
from mrvl.errors import CompileError
from mrvl.locations import location_name
from mrvl.passes.graph.fold_qdq_tables import quantized_scale_shift, replace_scale_shift

AFFINE_ACTIVATIONS = (None, "relu", "clip")
"""Activations of an affine that the int8 conv runs as its saturation bounds."""

_ACTIVATION_PROPERTIES = ("activation", "act_min", "act_max", "alpha", "beta", "slopes")


def _values(value) -> np.ndarray | None:
    owner = value.owner
    return owner.numpy().reshape(-1) if isinstance(owner, mrvl.ConstantOp) else None


def is_per_channel(op: mrvl.ScaleShiftOp) -> bool:
    """Whether the scale or the shift of `op` differs between channels (constants only)."""
    scale, shift = _values(op.scale), _values(op.shift)
    if scale is None or shift is None:
        return False
    return bool(np.any(scale != scale[0]) or np.any(shift != shift[0]))


def affine_weights(a, b, s_x: float, s_y: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(int8 weights [C], f32 weight scales [C], int32 bias [C]) of y = a * x + b per channel
    as a depthwise int8 conv of an input at scale `s_x` into a result at scale `s_y`."""
    a = np.asarray(a, np.float64)
    weights = (np.sign(a) * 127).astype(np.int8)
    scales = np.where(a != 0, np.abs(a) / 127, float(s_y) / float(s_x)).astype(np.float32)
    bias = int8.quantize_bias(np.asarray(b, np.float64), s_x, scales.astype(np.float64))
    return weights, scales, bias


class FoldQuantizedAffine(RewritePattern):
    """`quantize(scale_shift(dequantize(q)))` with per-channel steps -> a depthwise 1x1 int8
    conv (`affine_weights`)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.QuantizeOp, rewriter: PatternRewriter) -> None:
        matched = quantized_scale_shift(op)
        if matched is None or not is_per_channel(matched[0]):
            return
        layer, dq = matched
        where = f"{layer.name} at {location_name(layer.location)}"
        act = None if layer.activation is None else layer.activation.data.value
        if act not in AFFINE_ACTIVATIONS:
            raise CompileError(f"{where}: an int8 per-channel affine with activation {act}")
        rank_2 = mrvl.layout_of(layer.input) == "NC"
        if mrvl.layout_of(layer.input) != "NHWC" and not rank_2:
            raise CompileError(
                f"{where}: an int8 per-channel affine of a {mrvl.layout_of(layer.input)} tensor"
            )
        s_x, s_y = dq.quant.values[0], op.quant.values[0]
        try:
            weights, scales, bias = affine_weights(
                _values(layer.scale), _values(layer.shift), s_x, s_y
            )
        except int8.Int8RangeError as err:
            raise CompileError(f"{where}: {err}") from None
        channels = weights.size
        base = location_name(layer.location) or "affine"
        constants = []
        for name, data, layout in (
            ("weights", weights.reshape(channels, 1, 1, 1), "OHWI"),
            ("bias", bias, "O"),
        ):
            constant = mrvl.ConstantOp(f"mrvl_affine_{base}_{name}", data, layout)
            constant.location = layer.location
            rewriter.insert(constant)
            constants.append(constant.result)
        activation = {k: v for k in _ACTIVATION_PROPERTIES if (v := layer.properties.get(k))}
        x, out_type = dq.input, op.output.type
        if rank_2:  # [N, C] is [N, 1, 1, C] in NHWC, the same bytes
            batch = mrvl.shape_of(x)[0]
            out_type = mrvl.tensor((batch, 1, 1, channels), i8, "NHWC")
            view = mrvl.ReshapeOp(x, out_type)
            view.location = layer.location
            rewriter.insert(view)
            x = view.output
        conv = mrvl.Conv2DOp(
            x, constants[0], constants[1], out_type, groups=channels, activation=activation
        )
        conv.properties["in_quant"] = ArrayAttr([dq.quant])
        conv.properties["out_quant"] = op.quant
        conv.properties["weight_scales"] = DenseArrayBase.from_list(f32, scales.tolist())
        if rank_2:
            conv.location = layer.location
            rewriter.insert(conv)
            conv = mrvl.ReshapeOp(conv.results[0], op.output.type)
        replace_scale_shift(op, layer, conv, rewriter)
