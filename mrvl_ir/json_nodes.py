"""The Nodes-JSON node of each `mrvl` layer op, in the schema of TVM's Relay-era Marvell
backend (`json_emitter.py`'s docstring describes the documents): `NODE_BUILDERS`, by op class.

The builders are methods of `LayerNodes`, which `json_emitter._Emitter` extends: the emitter
walks the region, writes the input nodes, the constants and the heads, and gives every
builder `_layer_node` (one node with its inputs, shapes and attributes), `_constant` and
`_const_ref`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from xdsl.ir import Operation, SSAValue

from mrvl.dialects import mrvl


def _float_str(value: float) -> str:
    """A float as upstream printed it (`std::ostream` with precision 17)."""
    return format(float(value), ".17g")


def _strs(values: Iterable[int]) -> list[str]:
    return [str(int(v)) for v in values]


def _values(attr) -> list[int]:
    return [int(v) for v in attr.get_values()]


def quant_attrs(op: Operation) -> dict[str, Any]:
    """An int8 layer's quantization: each input's scale and zero point, its result's, and
    its weights' scales (none for a float layer)."""
    in_quant, out_quant = getattr(op, "in_quant", None), getattr(op, "out_quant", None)
    if in_quant is None or out_quant is None:
        return {}
    ins = [q.values for q in in_quant.data]
    attrs: dict[str, Any] = {
        "input_scale": [_float_str(s) for s, _ in ins],
        "input_zero_point": [str(z) for _, z in ins],
        "output_scale": [_float_str(out_quant.values[0])],
        "output_zero_point": [str(out_quant.values[1])],
    }
    if getattr(op, "weight_scales", None) is not None:
        attrs["weight_scales"] = [_float_str(s) for s in op.weight_scales.get_values()]
    return attrs


class LayerNodes:
    """The per-layer builders of the Nodes-JSON (a mixin of `json_emitter._Emitter`)."""

    def _activation_attrs(
        self,
        op: mrvl.Conv2DOp | mrvl.FullyConnectedOp | mrvl.AddOp | mrvl.MulOp | mrvl.ScaleShiftOp,
    ) -> dict[str, Any]:
        act = op.activation.data.value if op.activation is not None else "none"
        attrs: dict[str, Any] = {"activation_type": [act]}
        if act == "clip":
            attrs["activation_min"] = [_float_str(op.act_min.value.data)]
            attrs["activation_max"] = [_float_str(op.act_max.value.data)]
        if op.alpha is not None:
            attrs["activation_alpha"] = [_float_str(op.alpha.value.data)]
        if op.beta is not None:
            attrs["activation_beta"] = [_float_str(op.beta.value.data)]
        if op.slopes is not None:
            attrs["activation_slopes"] = [_float_str(v) for v in op.slopes.get_values()]
        return attrs

    def _same_layout_node(
        self, op: Operation, layer_name: str, activations, data: SSAValue, layout: str, **kwargs
    ) -> None:
        """A node whose data and result are in one `layout`, of the shape of `data` (its
        first data input, constant or not); `kwargs` as `_layer_node`'s."""
        shape = mrvl.shape_of(data)
        self._layer_node(
            op,
            layer_name,
            activations,
            data_layout=layout,
            data_shape=shape,
            out_layout=layout,
            **kwargs,
        )

    def _movement_node(self, op: Operation, layer_name: str, **kwargs) -> None:
        """A node that moves its one input into its result's layout and shape (reshape,
        strided copy, layout transform); `kwargs` as `_layer_node`'s."""
        self._layer_node(
            op,
            layer_name,
            [op.input],
            data_layout=mrvl.layout_of(op.input),
            data_shape=mrvl.shape_of(op.input),
            out_layout=mrvl.layout_of(op.output),
            **kwargs,
        )

    def _weight_attrs(self, op, bias_layout: str) -> tuple[dict[str, Any], int]:
        weight = self._constant(op, op.weight)
        attrs: dict[str, Any] = {
            "kernel_const_name": [weight.const_name.data],
            "kernel_const": self._const_ref(weight),
        }
        count = 1
        if op.bias is not None:
            bias = self._constant(op, op.bias)
            attrs["bias_const_name"] = [bias.const_name.data]
            attrs["bias_layout"] = [bias_layout]
            attrs["bias_const"] = self._const_ref(bias)
            count += 1
        return attrs, count

    def _conv_node(self, op: mrvl.Conv2DOp) -> None:
        o, kh, kw, _ = mrvl.shape_of(op.weight)
        attrs = {
            "strides": _strs(_values(op.strides)),
            "padding": _strs(_values(op.pads)),
            "dilation": _strs(_values(op.dilations)),
            "groups": [str(op.group_count)],
            "channels": [str(o)],
            "kernel_size": _strs((kh, kw)),
            "kernel_layout": ["OHWI"],
            "out_dtype": [""],
        }
        weights, count = self._weight_attrs(op, "---O")
        attrs |= weights | self._activation_attrs(op)
        self._same_layout_node(
            op,
            "Conv2D",
            [op.input],
            op.input,
            "NHWC",
            num_constants=count,
            composite="mrvl.conv2d_nhwc2nhwc",
            attrs=attrs,
        )

    def _fc_node(self, op: mrvl.FullyConnectedOp) -> None:
        o, _ = mrvl.shape_of(op.weight)
        attrs: dict[str, Any] = {"units": [str(o)], "out_dtype": [""]}
        weights, count = self._weight_attrs(op, "-O")
        attrs |= weights | self._activation_attrs(op)
        source = self.fc_folds.get(op)
        if source is not None:
            attrs["weights_need_transform"] = ["yes"]
            data_layout, data_shape, activation = "NHWC", mrvl.shape_of(source), op.input
        else:
            data_layout, data_shape, activation = "NC", mrvl.shape_of(op.input), op.input
        self._layer_node(
            op,
            "FC",
            [activation],
            num_constants=count,
            data_layout=data_layout,
            data_shape=data_shape,
            out_layout="NC",
            kernel_layout="OI",
            composite="mrvl.fc_ni2no",
            attrs=attrs,
        )

    def _bmm_node(self, op: mrvl.BatchMatMulOp | mrvl.QuantizedBatchMatMulOp) -> None:
        self._same_layout_node(
            op,
            "BatchMatMul",
            [op.lhs, op.rhs],
            op.lhs,
            "NCW",
            composite="mrvl.bmm",
            attrs={
                "transpose_a": ["1" if op.trans_a is not None else "0"],
                "transpose_b": ["1" if op.trans_b is not None else "0"],
            },
        )

    def _pool_node(self, op: mrvl.MaxPool2DOp | mrvl.AvgPool2DOp) -> None:
        kernel = _values(op.kernel)
        _, h, w, _ = mrvl.shape_of(op.input)
        if tuple(kernel) == (h, w) and not any(_values(op.pads)):
            self._global_pool_node(op)
            return
        attrs: dict[str, Any] = {
            "pool_size": _strs(kernel),
            "strides": _strs(_values(op.strides)),
            "dilation": ["1", "1"],
            "padding": _strs(_values(op.pads)),
            "layout": ["NHWC"],
            "ceil_mode": ["1" if op.ceil_mode is not None else "0"],
            "kernel_layout_shape": _strs(kernel),
        }
        if isinstance(op, mrvl.AvgPool2DOp):
            attrs["count_include_pad"] = ["1" if op.count_include_pad is not None else "0"]
            layer, composite = "Avgpool2D", "mrvl.avgpool2d_nhwc2nhwc"
        else:
            layer, composite = "Maxpool2D", "mrvl.maxpool2d_nhwc2nhwc"
        self._same_layout_node(
            op,
            layer,
            [op.input],
            op.input,
            "NHWC",
            kernel_layout="HW",
            composite=composite,
            attrs=attrs,
        )

    def _global_pool_node(self, op: mrvl.MaxPool2DOp | mrvl.AvgPool2DOp) -> None:
        """A pool over the whole plane is upstream's GlobalAvgpool2D / GlobalMaxpool2D."""
        is_avg = isinstance(op, mrvl.AvgPool2DOp)
        self._same_layout_node(
            op,
            "GlobalAvgpool2D" if is_avg else "GlobalMaxpool2D",
            [op.input],
            op.input,
            "NHWC",
            composite="mrvl.global_avgpool2d" if is_avg else "mrvl.global_maxpool2d",
            attrs={"layout": ["NHWC"]},
        )

    def _sum_node(self, op: mrvl.AddOp) -> None:
        """A sum of two tensors; an int8 add of a constant (a transformer's bias) has it in
        `input_consts`, as `mrvl.binary`'s."""
        layout = mrvl.layout_of(op.output)
        activations, consts = self._data_inputs(op, [op.lhs, op.rhs])
        self._same_layout_node(
            op,
            "Sum2D",
            activations,
            op.lhs,
            layout,
            num_constants=len(consts),
            composite="mrvl.sum2d",
            attrs={**self._activation_attrs(op), **({"input_consts": consts} if consts else {})},
        )

    def _mul_node(self, op: mrvl.MulOp) -> None:
        """Elementwise product of two activations (the second may be [N, 1, 1, C])."""
        layout = mrvl.layout_of(op.output)
        self._same_layout_node(
            op,
            "Mul2D",
            [op.lhs, op.rhs],
            op.lhs,
            layout,
            composite="mrvl.mul",
            attrs=self._activation_attrs(op),
        )

    def _scale_shift_node(self, op: mrvl.ScaleShiftOp) -> None:
        """A standalone per-channel affine map (batch norm no conv absorbed, or an
        activation): our `ScaleShift` layer, its scale and shift in gamma/beta."""
        layout = mrvl.layout_of(op.output)
        scale, shift = self._constant(op, op.scale), self._constant(op, op.shift)
        attrs = {
            "gamma_const": self._const_ref(scale),
            "beta_const": self._const_ref(shift),
            **self._activation_attrs(op),
        }
        self._same_layout_node(
            op,
            "ScaleShift",
            [op.input],
            op.input,
            layout,
            num_constants=2,
            composite="mrvl.scale_shift",
            attrs=attrs,
        )

    def _concat_node(self, op: mrvl.ConcatOp) -> None:
        layout = mrvl.layout_of(op.output)
        activations, consts = self._data_inputs(op, list(op.inputs))
        self._same_layout_node(
            op,
            "Concat",
            activations,
            op.inputs[0],
            layout,
            num_constants=len(consts),
            composite="mrvl.concat",
            attrs={"axis": [str(op.channel_axis)], **({"input_consts": consts} if consts else {})},
        )

    def _reshape_node(self, op: mrvl.ReshapeOp) -> None:
        self._movement_node(
            op,
            "reshape",
            composite="mrvl.reshape",
            attrs={"newshape": _strs(mrvl.shape_of(op.output)), "allowzero": ["0"]},
        )

    def _strided_copy_node(self, op: mrvl.StridedCopyOp) -> None:
        self._movement_node(
            op,
            "StridedCopy",
            composite="mrvl.copy",
            attrs={
                "src_offset": [str(op.offset.value.data)],
                "src_strides": _strs(op.strides.get_values()),
                "box": _strs(op.box.get_values()),
            },
        )

    def _resize_node(self, op: mrvl.ResizeOp) -> None:
        self._same_layout_node(
            op,
            "Resize",
            [op.input],
            op.input,
            "NHWC",
            composite="mrvl.resize",
            attrs={"coordinate_transformation_mode": [op.mode.data]},
        )

    def _softmax_node(self, op: mrvl.SoftmaxOp) -> None:
        """Softmax over a run of consecutive axes of its input, in the input's layout."""
        layout = mrvl.layout_of(op.input)
        self._same_layout_node(
            op,
            "Softmax",
            [op.input],
            op.input,
            layout,
            composite="mrvl.softmax",
            attrs={"axes": _strs(op.axis_list)},
        )

    def _layernorm_node(self, op: mrvl.LayerNormOp) -> None:
        """Layer normalization over the trailing axes, its f32 scale and shift in gamma/beta."""
        layout = mrvl.layout_of(op.input)
        scale, shift = self._constant(op, op.scale), self._constant(op, op.shift)
        self._same_layout_node(
            op,
            "LayerNorm",
            [op.input],
            op.input,
            layout,
            num_constants=2,
            composite="mrvl.layernorm",
            attrs={
                "gamma_const": self._const_ref(scale),
                "beta_const": self._const_ref(shift),
                "axes": _strs(op.axis_list),
                "epsilon": [_float_str(op.epsilon.value.data)],
            },
        )

    def _reduce_node(self, op: mrvl.ReduceOp) -> None:
        """A reduction over a run of consecutive axes of its input, in the input's layout."""
        layout = mrvl.layout_of(op.input)
        self._same_layout_node(
            op,
            "Reduce",
            [op.input],
            op.input,
            layout,
            composite="mrvl.reduce",
            attrs={"axes": _strs(op.axis_list), "mode": [op.kind.data]},
        )

    def _pad_node(self, op: mrvl.PadOp) -> None:
        """A constant pad in its input's layout: widths before, then after, each dimension."""
        layout = mrvl.layout_of(op.input)
        self._same_layout_node(
            op,
            "Pad",
            [op.input],
            op.input,
            layout,
            composite="mrvl.pad",
            attrs={
                "pad_width": _strs(op.pads.get_values()),
                "pad_value": [_float_str(op.value.value.data)],
            },
        )

    def _binary_node(self, op: mrvl.BinaryOp) -> None:
        """An elementwise op of two tensors that broadcast, in their layout; a constant
        operand is in `input_consts` (by its position) instead of `inputs`."""
        layout = mrvl.layout_of(op.output)
        activations, consts = self._data_inputs(op, [op.lhs, op.rhs])
        self._same_layout_node(
            op,
            "Binary",
            activations,
            op.lhs,
            layout,
            num_constants=len(consts),
            composite="mrvl.binary",
            attrs={"mode": [op.kind.data], **({"input_consts": consts} if consts else {})},
        )

    def _data_inputs(self, op, values) -> tuple[list[SSAValue], dict[str, Any]]:
        """The computed ones of a layer's data inputs, and its constant ones (`mrvl.
        is_data_constant`) as references by their position among `values`."""
        activations, consts = [], {}
        for position, value in enumerate(values):
            if mrvl.is_data_constant(value):
                consts[str(position)] = self._const_ref(value.owner)
            else:
                activations.append(value)
        return activations, consts

    def _dilate_node(self, op: mrvl.DilateOp) -> None:
        self._same_layout_node(
            op,
            "Dilate",
            [op.input],
            op.input,
            "NHWC",
            composite="mrvl.conv_transpose",
            attrs={"strides": _strs(op.strides.get_values())},
        )

    def _quantize_node(self, op: mrvl.QuantizeOp | mrvl.DequantizeOp) -> None:
        """Where float data enters int8 code (Quantize) or leaves it (Dequantize)."""
        layout = mrvl.layout_of(op.output)
        scale, zero = op.quant.values
        self._same_layout_node(
            op,
            "Quantize" if isinstance(op, mrvl.QuantizeOp) else "Dequantize",
            [op.input],
            op.input,
            layout,
            attrs={"output_scale": [_float_str(scale)], "output_zero_point": [str(zero)]},
        )

    def _requantize_node(self, op: mrvl.RequantizeOp) -> None:
        """An int8 tensor rescaled to another scale and zero point (its `quant_attrs`)."""
        layout = mrvl.layout_of(op.output)
        self._same_layout_node(op, "Requantize", [op.input], op.input, layout)

    def _int8_table_node(self, op: mrvl.Int8TableOp) -> None:
        """A table activation of an int8 tensor: its function, its 256 entries and (its
        `quant_attrs`) the quantizations they were computed for."""
        layout = mrvl.layout_of(op.output)
        self._layer_node(
            op,
            "Int8Table",
            [op.input],
            data_layout=layout,
            data_shape=mrvl.shape_of(op.input),
            out_layout=layout,
            attrs={"table_function": [op.function.data], "table": _strs(op.entries())},
        )

    def _cast(self, op: mrvl.CastOp) -> None:
        """A cast is no node: the MLIP's layers convert at their boundaries."""
        self._alias(op, op.input, op.output)

    def _layout_convert(self, op: mrvl.LayoutConvertOp) -> None:
        """A conversion of a region input is folded into the input node; others are nodes."""
        if self._reaches_input(op.input):
            self._alias(op, op.input, op.output)
        else:
            self._layout_transform_node(op)

    def _layout_transform_node(self, op: mrvl.LayoutConvertOp) -> None:
        src, dst = mrvl.layout_of(op.input), mrvl.layout_of(op.output)
        self._movement_node(
            op,
            "layout_transform",
            attrs={"src_layout": [src], "dst_layout": [dst]},
        )


NODE_BUILDERS: dict[type[Operation], Callable[[LayerNodes, Operation], None]] = {
    mrvl.CastOp: LayerNodes._cast,
    mrvl.LayoutConvertOp: LayerNodes._layout_convert,
    mrvl.Conv2DOp: LayerNodes._conv_node,
    mrvl.FullyConnectedOp: LayerNodes._fc_node,
    mrvl.BatchMatMulOp: LayerNodes._bmm_node,
    mrvl.MaxPool2DOp: LayerNodes._pool_node,
    mrvl.AvgPool2DOp: LayerNodes._pool_node,
    mrvl.AddOp: LayerNodes._sum_node,
    mrvl.MulOp: LayerNodes._mul_node,
    mrvl.ConcatOp: LayerNodes._concat_node,
    mrvl.ScaleShiftOp: LayerNodes._scale_shift_node,
    mrvl.ReshapeOp: LayerNodes._reshape_node,
    mrvl.StridedCopyOp: LayerNodes._strided_copy_node,
    mrvl.DilateOp: LayerNodes._dilate_node,
    mrvl.ResizeOp: LayerNodes._resize_node,
    mrvl.SoftmaxOp: LayerNodes._softmax_node,
    mrvl.LayerNormOp: LayerNodes._layernorm_node,
    mrvl.QuantizeOp: LayerNodes._quantize_node,
    mrvl.DequantizeOp: LayerNodes._quantize_node,
    mrvl.RequantizeOp: LayerNodes._requantize_node,
    mrvl.Int8TableOp: LayerNodes._int8_table_node,
    mrvl.PadOp: LayerNodes._pad_node,
    mrvl.ReduceOp: LayerNodes._reduce_node,
    mrvl.BinaryOp: LayerNodes._binary_node,
    mrvl.QuantizedBatchMatMulOp: LayerNodes._bmm_node,  # its quant_attrs say int8
}
"""The Nodes-JSON form of each `mrvl` layer op, by op class (constants are entries of the
Constants-JSON, not nodes: `_constant_entry`). The completeness test checks that every layer
op of the dialect has one."""
