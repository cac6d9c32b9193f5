"""mrvl-fold-qdq: a QDQ region's layers become int8 layers.

A region imported from a QDQ model computes in float between `mrvl.dequantize` and
`mrvl.quantize` ops, as the model is written: `quantize(conv(dequantize(x), W), s_y, z_y)`,
where W dequantizes int8 weights (the conv's `weight_scales`). That is what an int8 conv
means (ONNX's QDQ convention), so the pass folds each such sandwich into the layer on `i8`
tensors with its quantization as properties, its weights int8 again and its bias int32 at
s_x·s_w. Both are recovered from the floats exactly (`_exact_integers`), or the pass stops with
a CompileError: a quantized layer is never left to run in fp16.

Layout conversions, reshapes and strided copies (slices, transposes) move across a dequantize
or quantize (they move the same values), so the int8 layers meet each other directly; a
dequantize feeding a quantize of the same scale and zero point is no op, of another one a
`mrvl.requantize`. A table activation of a dequantized input is `mrvl.int8_table`
(`fold_qdq_tables.py`); a per-channel affine (a BatchNormalization no conv absorbs) a
depthwise 1x1 int8 conv (`fold_qdq_affine.py`); a product of a tensor and a table of it
(SiLU) one table (`fold_qdq_gated_tables.py`); a product of two dequantized activations
`mrvl.qbmm` (`fold_qdq_bmm.py`); an add of a constant that dequantizes int8 values the int8
add of them (`fold_qdq_constant_add.py`). A concat of dequantized inputs is the concat of the int8 inputs, each
requantized to the result's scale where its own differs. What stays is a quantize where float data enters int8
code and a dequantize where it leaves (region inputs and outputs, fp16 layers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, ModuleOp, TensorType, f32, i8
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import Rewriter

from mrvl.dialects import mrvl
from mrvl.errors import CompileError
from mrvl.locations import location_name
from mrvl.passes.common import InheritLocation, MrvlModulePass
from mrvl.passes.graph.fold_qdq_affine import FoldQuantizedAffine
from mrvl.passes.graph.fold_qdq_bmm import FoldQuantizedBatchMatMul
from mrvl.passes.graph.fold_qdq_constant_add import FoldQuantizedConstantAdd
from mrvl.passes.graph.fold_qdq_gated_tables import FoldGatedTable
from mrvl.passes.graph.fold_qdq_sub import FoldQuantizedSub
from mrvl.passes.graph.fold_qdq_tables import FoldQuantizedTable

INT8_ACTIVATIONS = (None, "relu", "clip")
"""Activations an int8 layer runs as saturation bounds (tables are not folded yet)."""


def _as_i8(t: TensorType) -> TensorType:
    return mrvl.tensor(t.get_shape(), i8, mrvl.layout_of(t))


def _what(op: Operation) -> str:
    return f"{op.name} at {location_name(op.location)}"


class MoveIntoInt8(RewritePattern):
    """`layout_convert`, `reshape` or `strided_copy` (a slice, transpose, channel shuffle:
    the same values moved) of a dequantize -> the dequantize of the int8 tensor's move; of a
    quantize's result -> the quantize of the float tensor's move."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self,
        op: mrvl.LayoutConvertOp | mrvl.ReshapeOp | mrvl.StridedCopyOp,
        rewriter: PatternRewriter,
    ) -> None:
        edge = op.input.owner
        if not isinstance(edge, mrvl.DequantizeOp | mrvl.QuantizeOp):
            return
        inner = edge.input
        if isinstance(op, mrvl.LayoutConvertOp):
            moved = mrvl.LayoutConvertOp(inner, mrvl.layout_of(op.output))
        elif isinstance(op, mrvl.StridedCopyOp):
            moved = mrvl.StridedCopyOp(
                inner,
                _with_element(op.output.type, mrvl.element_type_of(inner)),
                offset=op.offset.value.data,
                strides=op.strides.get_values(),
                box=op.box.get_values(),
            )
        else:
            moved = mrvl.ReshapeOp(
                inner,
                mrvl.tensor(
                    mrvl.shape_of(op.output),
                    mrvl.element_type_of(inner),
                    mrvl.layout_of(op.output),
                ),
            )
        moved.location = op.location
        rewriter.insert(moved)
        scale, zero = edge.quant.values
        new_edge = type(edge)(moved.results[0], scale, zero, op.output.type)
        new_edge.location = edge.location
        rewriter.replace(op, new_edge)


def _with_element(t: TensorType, element) -> TensorType:
    return mrvl.tensor(t.get_shape(), element, mrvl.layout_of(t))


class CancelQdqPair(RewritePattern):
    """`quantize(dequantize(q))` of one scale and zero point is q; of two, it is q
    requantized (`mrvl.requantize`, the `requant` instruction: within one step of the pair,
    exact but at ties and in the fp32 rounding of the factor, docs/isa.md §4b)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.QuantizeOp, rewriter: PatternRewriter) -> None:
        source = op.input.owner
        if not isinstance(source, mrvl.DequantizeOp) or source.input.type != op.output.type:
            return
        if source.quant == op.quant:
            rewriter.replace(op, [], [source.input])
        else:
            rewriter.replace(op, mrvl.RequantizeOp(source.input, source.quant, op.quant))


class FoldQuantizedConcat(RewritePattern):
    """`quantize(concat(dequantize(x_i)...))` -> the concat of the int8 x_i, each requantized
    to the result's scale and zero point where its own differ (isa.md `requant`); a concat of
    inputs that share the result's quantization is a byte copy."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.QuantizeOp, rewriter: PatternRewriter) -> None:
        concat = op.input.owner
        if not isinstance(concat, mrvl.ConcatOp) or not op.input.has_one_use():
            return
        dequantizes = _dequantized_inputs(list(concat.inputs))
        if dequantizes is None:
            return
        parts = []
        for dq in dequantizes:
            part = dq.input
            if dq.quant != op.quant:
                requant = mrvl.RequantizeOp(part, dq.quant, op.quant)
                requant.location = concat.location
                rewriter.insert(requant)
                part = requant.output
            parts.append(part)
        new = mrvl.ConcatOp(parts, _as_i8(concat.output.type), _axis_of(concat))
        new.location = concat.location
        rewriter.replace(op, new)
        if not concat.output.uses:
            rewriter.erase(concat)


def _axis_of(concat: mrvl.ConcatOp) -> int | None:
    return None if concat.axis is None else concat.axis.value.data


def _dequantized_inputs(values: list[SSAValue]) -> list[mrvl.DequantizeOp] | None:
    owners = [v.owner for v in values]
    if all(isinstance(o, mrvl.DequantizeOp) for o in owners):
        return owners  # type: ignore[return-value]
    return None


def _exact_integers(
    floats: np.ndarray, scale: np.ndarray, dtype: type, what: str, op: Operation
) -> np.ndarray:
    """The integers `floats` dequantize at `scale` (broadcast on axis 0), exactly."""
    shape = (-1,) + (1,) * (floats.ndim - 1)
    s = scale.astype(np.float32).reshape(shape)
    q = np.rint(floats.astype(np.float64) / s.astype(np.float64))
    info = np.iinfo(dtype)
    if (
        not np.all(np.isfinite(q))
        or q.min(initial=0) < info.min
        or q.max(initial=0) > info.max
        or not np.array_equal(q.astype(np.float32) * s, floats)
    ):
        raise CompileError(f"{_what(op)}: its {what} are not {np.dtype(dtype).name} at its scales")
    return q.astype(dtype)


class FoldQuantizedLayer(RewritePattern):
    """`quantize(layer(dequantize(x)...))` -> the layer on int8 tensors (a resize with
    `qresize`'s fixed-point tables). Also the quantize of the layer's result seen through
    reshapes and layout conversions: the quantize moves before them (quantizing is
    elementwise) to fold into the layer. A MatMul of a rank-3 or rank-4 tensor by a constant
    imports as reshape, fc, reshape; a Conv1d as a conv2d, layout_convert, reshape; a rank-3
    Add as reshape, add, reshape, and the layer after it may view its result at rank 4 again
    (YOLOv8n's box decoding: two reshapes); a global average pool as a pool and a flatten."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.QuantizeOp, rewriter: PatternRewriter) -> None:
        layer = op.input.owner
        views: list[mrvl.ReshapeOp | mrvl.LayoutConvertOp] = []  # from the quantize back
        while isinstance(layer, mrvl.ReshapeOp | mrvl.LayoutConvertOp) and (
            layer.output.has_one_use()
        ):
            views.append(layer)
            layer = layer.input.owner
        if not isinstance(
            layer,
            mrvl.Conv2DOp
            | mrvl.FullyConnectedOp
            | mrvl.AddOp
            | mrvl.MulOp
            | mrvl.Pool2DBase
            | mrvl.ResizeOp,
        ):
            return
        if not layer.output.has_one_use() or mrvl.is_int8(layer.output):
            return
        if isinstance(layer, mrvl.Conv2DOp | mrvl.FullyConnectedOp) and layer.weight_scales is None:
            return  # float weights: kept in fp16 on purpose (mixed precision)
        binary = isinstance(layer, mrvl.AddOp | mrvl.MulOp)
        inputs = [layer.lhs, layer.rhs] if binary else [layer.input]
        dequantizes = _dequantized_inputs(inputs)
        if dequantizes is None:
            return
        activation = getattr(layer, "activation", None)
        act = None if activation is None else activation.data.value
        if act not in INT8_ACTIVATIONS:
            if not isinstance(layer, mrvl.Conv2DOp | mrvl.FullyConnectedOp):
                return  # no int8 weights: the layer and its activation stay in fp16
            raise CompileError(f"{_what(layer)}: int8 with activation {act} is not supported yet")
        if isinstance(layer, mrvl.AvgPool2DOp) and _one_divisor(layer):
            new = self._average_as_conv(layer, dequantizes[0], op, rewriter)
            _replace_through_views(op, layer, new.results[0], views, rewriter)
            return
        new = layer.clone()
        for index, dq in enumerate(dequantizes):
            new.operands[index] = dq.input
        new.properties["in_quant"] = ArrayAttr([dq.quant for dq in dequantizes])
        new.properties["out_quant"] = op.quant
        if isinstance(layer, mrvl.Conv2DOp | mrvl.FullyConnectedOp):
            self._integer_constants(layer, new, dequantizes[0], rewriter)
        if isinstance(layer, mrvl.ResizeOp):
            self._fixed_point_tables(layer, new, rewriter)
        Rewriter.replace_value_with_new_type(new.results[0], _as_i8(layer.output.type))
        new.location = layer.location
        rewriter.insert(new)
        _replace_through_views(op, layer, new.results[0], views, rewriter)

    @staticmethod
    def _average_as_conv(
        layer: mrvl.AvgPool2DOp, dq: mrvl.DequantizeOp, q: mrvl.QuantizeOp, rewriter
    ) -> mrvl.Conv2DOp:
        """An average of a fixed number of taps as a depthwise int8 conv with weights 1 and
        the divisor in its weight scale: one rounding, from the exact int32 sum to the
        output's scale, as onnxruntime's float mean then QuantizeLinear round once (`qpool`
        rounds the average at the input's scale first, then rescales: up to half an input
        step, several output steps when the output's scale is finer)."""
        kh, kw = layer.kernel.get_values()
        channels = mrvl.shape_of(layer.input)[-1]
        ones = mrvl.ConstantOp(
            f"mrvl_average_{location_name(layer.location) or 'pool'}_ones",
            np.ones((channels, kh, kw, 1), np.int8),
            "OHWI",
        )
        ones.location = layer.location
        rewriter.insert(ones)
        conv = mrvl.Conv2DOp(
            dq.input,
            ones.result,
            None,
            _as_i8(layer.output.type),
            strides=layer.strides.get_values(),
            pads=layer.pads.get_values(),
            groups=channels,
        )
        conv.properties["in_quant"] = ArrayAttr([dq.quant])
        conv.properties["out_quant"] = q.quant
        conv.properties["weight_scales"] = DenseArrayBase.from_list(
            f32, [float(np.float32(1.0 / (kh * kw)))] * channels
        )
        conv.location = layer.location
        rewriter.insert(conv)
        return conv

    @staticmethod
    def _integer_constants(layer, new, dq: mrvl.DequantizeOp, rewriter: PatternRewriter) -> None:
        weight = layer.weight.owner
        if not isinstance(weight, mrvl.ConstantOp):
            raise CompileError(f"{_what(layer)}: its weights are not a constant")
        s_w = np.array(layer.weight_scales.get_values(), np.float32)
        q = _exact_integers(weight.numpy(), s_w, np.int8, "weights", layer)
        new.operands[1] = _constant(weight, q, rewriter)
        if layer.bias is not None:
            bias = layer.bias.owner
            s_x = np.float32(dq.quant.values[0])
            b = _exact_integers(bias.numpy(), s_x * s_w, np.int32, "bias", layer)
            new.operands[2] = _constant(bias, b, rewriter)

    @staticmethod
    def _fixed_point_tables(layer: mrvl.ResizeOp, new, rewriter: PatternRewriter) -> None:
        """A resize's f32 tables as `qresize`'s int32 ones (i0, i1, w1 in 2^-11 units)."""
        from mrvl.isa_int8_resize import fixed_point_table

        for index, table in ((1, layer.ytab), (2, layer.xtab)):
            const = table.owner
            if not isinstance(const, mrvl.ConstantOp):
                raise CompileError(f"{_what(layer)}: its interpolation tables are not constants")
            new.operands[index] = _constant(
                const, fixed_point_table(const.numpy()).reshape(-1), rewriter
            )


def _replace_through_views(
    quantize: mrvl.QuantizeOp,
    layer: Operation,
    result: SSAValue,
    views: list[mrvl.ReshapeOp | mrvl.LayoutConvertOp],
    rewriter: PatternRewriter,
) -> None:
    """Replace `quantize` by the int8 `result` seen through the same `views` (reshapes and
    layout conversions, from the quantize back to the layer), and erase what is left unused."""
    for view in reversed(views):
        if isinstance(view, mrvl.LayoutConvertOp):
            moved = mrvl.LayoutConvertOp(result, mrvl.layout_of(view.output))
        else:
            moved = mrvl.ReshapeOp(result, _as_i8(view.output.type))
        moved.location = view.location
        rewriter.insert(moved)
        result = moved.output
    rewriter.replace(quantize, [], [result])
    for view in views:
        if not view.output.uses:
            rewriter.erase(view)
    if not layer.output.uses:
        rewriter.erase(layer)


def _constant(old: mrvl.ConstantOp, data: np.ndarray, rewriter: PatternRewriter) -> SSAValue:
    new = mrvl.ConstantOp(old.const_name.data, data, mrvl.layout_of(old.result))
    new.location = old.location
    rewriter.insert(new)
    return new.result


def _one_divisor(op: mrvl.AvgPool2DOp) -> bool:
    """Whether every output of an average pool divides by the whole window (no partial
    windows: no padding, or padding counted, and no ceil-mode overhang)."""
    if op.ceil_mode is not None:
        return False
    return op.count_include_pad is not None or not any(op.pads.get_values())


def check_folded(module: ModuleOp) -> None:
    """Every layer with int8 weights was folded: none is left to run in fp16."""
    for op in module.walk():
        if isinstance(op, mrvl.Conv2DOp | mrvl.FullyConnectedOp) and op.weight_scales is not None:
            if not mrvl.is_int8(op.output):
                raise CompileError(
                    f"{_what(op)}: its weights are int8 but it is not between a dequantize and "
                    "a quantize (it would run in fp16)"
                )


@dataclass(frozen=True)
class FoldQdqPass(MrvlModulePass):
    name = "mrvl-fold-qdq"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = [
            MoveIntoInt8(),
            CancelQdqPair(),
            FoldQuantizedLayer(),
            FoldQuantizedConcat(),
            FoldQuantizedAffine(),
            FoldQuantizedTable(),
            FoldGatedTable(),
            FoldQuantizedSub(),
            FoldQuantizedBatchMatMul(),
            FoldQuantizedConstantAdd(),
        ]
        PatternRewriteWalker(
            GreedyRewritePatternApplier([InheritLocation(p) for p in patterns])
        ).rewrite_module(op)
        check_folded(op)
