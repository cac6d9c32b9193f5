"""Relax region function -> `mrvl` module.

A region (a function with `Codegen="mrvl"`, made by `partition_for_mrvl`) calls one composite
function per MLIP layer. Each composite becomes one `mrvl` layer op whose location is the ONNX
node of its main operator (the span `mrvl.from_onnx` attached). Relax speaks NCHW / OIHW / [K, O];
the MLIP speaks NHWC / OHWI / [O, K]: weights are transposed here, and activations get explicit
`mrvl.layout_convert` ops where the layout changes (region inputs and outputs, flatten).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
from tvm import relax
from tvm.ir.expr import GenericConst
from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, UnitAttr, f32
from xdsl.ir import Attribute, Block, Region, SSAValue

from mrvl import strided
from mrvl.activation_forms import ActivationFormError, FusedActivationForm, split_activation
from mrvl.constant_operands import data_operand
from mrvl.conv_transpose import import_conv_transpose
from mrvl.dialects import mrvl
from mrvl.errors import UnsupportedOpError, layer_boundary
from mrvl.frontend import constant_view, node_name_of
from mrvl.high_rank_prelu import from_channel_view, prelu_channel_axis, to_channel_view
from mrvl.locations import name_location
from mrvl.matmul import import_bmm
from mrvl.normalization import import_layernorm, import_softmax
from mrvl.padding import import_pad
from mrvl.pattern_checks import conv_as_2d
from mrvl.qdq_constants import with_constant_quant
from mrvl.qdq_layers import QUANT_LAYERS, with_weight_scales
from mrvl.reductions import import_binary, import_reduce

RELAX_LAYOUT = mrvl.RELAX_LAYOUT


def _shape(expr: relax.Expr) -> tuple[int, ...]:
    return tuple(int(d) for d in expr.ty.shape)


def _dtype(expr: relax.Expr) -> str:
    return str(expr.ty.dtype)


def _ints(values) -> list[int]:
    return [int(v) for v in values]


class _RegionImporter:
    """Walks one region function, emitting `mrvl` ops into a `func.func`."""

    def __init__(self, region: relax.Function, symbol: str, constant_names):
        self.region = region
        self.symbol = symbol
        self.constant_names = constant_names
        self.const_count = 0
        self.made_count = 0
        self.const_names: set[str] = set()
        self.values: dict[relax.Var, SSAValue] = {}
        self.converted: dict[tuple[SSAValue, str], SSAValue] = {}
        self.composites: dict[relax.Var, relax.Function] = {}
        self.block = Block(arg_types=[self._relax_tensor_type(p) for p in region.params])
        self.builder = Builder(InsertPoint.at_end(self.block))
        taken: set[str] = set()
        for param, arg in zip(region.params, self.block.args):
            arg.name_hint = _unique(_ssa_name(param.name), taken)
            self.values[param] = arg

    # -- types and values ---------------------------------------------------------------------

    def _relax_tensor_type(self, expr: relax.Expr, node: str | None = None) -> Attribute:
        shape = _shape(expr)
        if _dtype(expr) != "float32" or len(shape) not in RELAX_LAYOUT:
            raise UnsupportedOpError(
                f"region {self.symbol}: tensor {expr.ty} is not a float32 tensor of rank 2 to 6",
                node,
            )
        return mrvl.tensor(shape, f32, RELAX_LAYOUT[len(shape)])

    def _operand(self, inner: dict, expr: relax.Expr, node: str | None) -> SSAValue:
        """The mrvl value of a composite's operand, which must be a tensor of the region."""
        if expr not in inner:
            raise UnsupportedOpError(
                f"region {self.symbol}: operand {type(expr).__name__} is not a tensor computed "
                "in the region (a constant where a layer input is expected?)",
                node,
            )
        return inner[expr]

    def _in_layout(self, value: SSAValue, layout: str, node: str | None) -> SSAValue:
        """`value` seen in `layout`, converting (once per value) if needed."""
        if mrvl.layout_of(value) == layout:
            return value
        key = (value, layout)
        if key not in self.converted:
            op = self.builder.insert(mrvl.LayoutConvertOp(value, layout))
            op.location = name_location(node)
            self.converted[key] = op.output
        return self.converted[key]

    def _constant(self, const: GenericConst, array: np.ndarray, layout: str) -> SSAValue:
        """A constant derived from a TVM constant, under TVM's name for it; without the names
        (a region compiled outside `relax.ext.mrvl`) the next `<symbol>_mrvl_const_<i>`,
        which is how TVM numbers a region's constants, in order of use.

        One TVM constant used by two layers of the region (a weight shared by two convs, each
        scaled by its own batch norm) gives two constants: the second is `<name>_<k>`."""
        name = None
        if self.constant_names is not None and const in self.constant_names:
            name = str(self.constant_names[const])
        if name is None:
            name = f"{self.symbol}_mrvl_const_{self.const_count}"
        self.const_count += 1
        unique, k = name, 1
        while unique in self.const_names:
            unique, k = f"{name}_{k}", k + 1
        self.const_names.add(unique)
        return self.builder.insert(mrvl.ConstantOp(unique, array, layout)).result

    def _made_constant(self, array: np.ndarray, layout: str, role: str) -> SSAValue:
        """A constant the model does not have (the unit scale of a lone activation), named
        apart from TVM's numbering."""
        self.made_count += 1
        name = f"{self.symbol}_mrvl_{role}_{self.made_count - 1}"
        return self.builder.insert(mrvl.ConstantOp(name, array, layout)).result

    def _value(self, expr: relax.Expr) -> SSAValue:
        if expr not in self.values:
            raise UnsupportedOpError(f"region {self.symbol}: operand {expr} is not a region value")
        return self.values[expr]

    # -- the walk -------------------------------------------------------------------------------

    def run(self) -> ModuleOp:
        body = self.region.body
        for block in body.blocks:
            for binding in block.bindings:
                self._binding(binding)
        outputs = body.body
        results = list(outputs.fields) if isinstance(outputs, relax.Tuple) else [outputs]
        returned = [
            self._in_layout(self._value(r), RELAX_LAYOUT[len(_shape(r))], None) for r in results
        ]
        self.builder.insert(func.ReturnOp(*returned))
        fn = func.FuncOp(
            self.symbol,
            ([a.type for a in self.block.args], [v.type for v in returned]),
            Region(self.block),
        )
        return ModuleOp([fn])

    def _binding(self, binding: relax.Binding) -> None:
        value = binding.value
        if isinstance(value, relax.Function):
            self.composites[binding.var] = value
            return
        if isinstance(value, relax.Call) and value.op in self.composites:
            composite = self.composites[value.op]
            inner = dict(zip(composite.params, (self._value(a) for a in value.args)))
            self.values[binding.var] = self._composite(composite, inner)
            return
        if isinstance(value, relax.Var) and value in self.values:
            self.values[binding.var] = self.values[value]
            return
        node = node_name_of(value) if isinstance(value, relax.Call) else None
        what = (
            value.op.name
            if isinstance(value, relax.Call) and hasattr(value.op, "name")
            else type(value).__name__
        )
        raise UnsupportedOpError(
            f"region {self.symbol}: '{what}' outside a known MLIP layer pattern", node
        )

    def _composite(self, composite: relax.Function, inner: dict) -> SSAValue:
        kind = str(composite.attrs["Composite"])
        calls = [
            b.value
            for blk in composite.body.blocks
            for b in blk.bindings
            if isinstance(b.value, relax.Call)
        ]
        handler = _LAYERS.get(kind)
        node = next((node_name_of(c) for c in calls if node_name_of(c)), None)
        if handler is None:
            raise UnsupportedOpError(f"no MLIP layer for composite '{kind}'", node)
        bound = {b.var: b.value for blk in composite.body.blocks for b in blk.bindings}
        with layer_boundary(f"importing {kind} into region {self.symbol}", node):
            try:
                form, act_input = split_activation(calls[-1], lambda e: bound.get(e, e))
            except ActivationFormError as e:
                raise UnsupportedOpError(f"composite '{kind}': {e.reason}", node) from None
            if form is not None:
                calls = [c for c in calls if not any(c.same_as(a) for a in form.calls)]
            chain = _Chain(calls, form)
            chain.activation_input = act_input
            chain.bound = bound
            result = with_weight_scales(handler(self, chain, inner), composite.attrs)
            return with_constant_quant(result, composite.attrs)

    # -- fused pieces ---------------------------------------------------------------------------

    def _activation(self, chain: _Chain, channels: int | None = None) -> dict[str, Attribute]:
        """The properties of the composite's activation (split off by `split_activation`);
        PRELU's slopes broadcast to `channels`."""
        form = chain.activation
        if form is None:
            return {}
        params = dict(form.params)
        if form.kind == "prelu":
            slopes = params["slopes"]
            params["slopes"] = np.broadcast_to(slopes, (channels,)) if slopes.size == 1 else slopes
        return mrvl.activation(form.kind, **params)

    def _affine_after(self, chain: _Chain, channels: int) -> tuple[np.ndarray, np.ndarray]:
        """The per-channel y -> scale*y + shift that the rest of the chain computes: a bias add,
        a batch norm (inference), and affine steps with a constant on either side.

        x / c folds as x * (1/c) with 1/c in float64: not bit-exact against IEEE division (an
        fp32 ulp at most, before the layer rounds its result to f16, docs/architecture.md)."""
        scale = np.ones(channels)
        shift = np.zeros(channels)
        while (call := chain.take_any(*_AFFINE_CALLS)) is not None:
            name = call.op.name
            if name == "relax.nn.batch_norm":
                gamma, beta, mean, var = (_per_channel(a, channels) for a in call.args[1:5])
                s = gamma / np.sqrt(var + float(call.attrs.epsilon))
                scale, shift = scale * s, shift * s + beta - s * mean
                continue
            const_first = isinstance(call.args[0], GenericConst)
            c = _per_channel(call.args[0] if const_first else call.args[1], channels)
            if name == "relax.add":
                shift = shift + c
            elif name == "relax.multiply":
                scale, shift = scale * c, shift * c
            elif name == "relax.divide":
                scale, shift = scale / c, shift / c
            elif const_first:  # c - y
                scale, shift = -scale, c - shift
            else:  # y - c
                shift = shift - c
        return scale, shift

    def _bias_constant(self, const, shift: np.ndarray, has_bias: bool) -> SSAValue | None:
        if not has_bias:
            return None
        return self._constant(const, shift.astype(np.float32), "O")

    def _located(self, op, node: str | None) -> SSAValue:
        op.location = name_location(node)
        return self.builder.insert(op).results[0]

    # -- layers ---------------------------------------------------------------------------------

    def conv2d(self, chain: _Chain, inner: dict) -> SSAValue:
        """A conv2d, or a conv1d as the conv2d over H = 1 (`conv_as_2d`): its [N, C, L]
        input seen as [N, C, 1, L] (the same bytes), its result viewed back."""
        pad = chain.take("relax.nn.pad")
        call = chain.take_one("relax.nn.conv2d", "relax.nn.conv1d")
        node = node_name_of(call)
        attrs = call.attrs
        one_d = call.op.name == "relax.nn.conv1d"
        if (attrs.data_layout, attrs.kernel_layout) not in (("NCHW", "OIHW"), ("NCW", "OIW")):
            raise UnsupportedOpError("conv2d: only NCHW data and OIHW weights", node)
        pt, pl, pb, pr = conv_as_2d(_ints(attrs.padding), padding=True)
        source = call.args[0]
        if pad is not None:  # a zero Pad in front folds into the conv's own padding
            widths = conv_as_2d(_ints(pad.attrs.pad_width), padding=True)
            if any(widths[:4]) or float(pad.attrs.pad_value) != 0.0:
                raise UnsupportedOpError(
                    "pad: only zero padding of H and W folds into a conv", node
                )
            pt, pb, pl, pr = pt + widths[4], pb + widths[5], pl + widths[6], pr + widths[7]
            source = pad.args[0]
        x = self._operand(inner, source, node)
        if one_d:
            view = mrvl.tensor(conv_as_2d(_shape(source)), f32, "NCHW")
            x = self._located(mrvl.ReshapeOp(self._in_layout(x, "NCW", node), view), node)
        x = self._in_layout(x, "NHWC", node)
        out_n, out_c, out_h, out_w = conv_as_2d(_shape(call))
        has_bias = chain.peek_any(*_AFFINE_CALLS)
        bias_const = chain.first_const_of(*_AFFINE_CALLS)
        scale, shift = self._affine_after(chain, out_c)
        w_const = call.args[1]
        w = constant_view(w_const)
        w = _scaled_rows(w.reshape(conv_as_2d(w.shape)), scale, lambda b: b.transpose(0, 2, 3, 1))
        weight = self._constant(w_const, w, "OHWI")
        op = mrvl.Conv2DOp(
            x,
            weight,
            self._bias_constant(bias_const, shift, has_bias),
            mrvl.tensor((out_n, out_h, out_w, out_c), f32, "NHWC"),
            strides=conv_as_2d(_ints(attrs.strides), fill=1),
            pads=(pt, pl, pb, pr),
            dilations=conv_as_2d(_ints(attrs.dilation), fill=1),
            groups=int(attrs.groups),
            activation=self._activation(chain, out_c),
        )
        result = self._located(op, node)
        if one_d:
            view = mrvl.tensor(_shape(call), f32, "NCW")
            nchw = self._in_layout(result, "NCHW", node)
            result = self._located(mrvl.ReshapeOp(nchw, view), node)
        return result

    def resize(self, chain: _Chain, inner: dict) -> SSAValue:
        """Bilinear (or nearest) resize: NHWC, with the row and column interpolation tables
        of `strided.interpolation_table` as f32 constants."""
        call = chain.take_one("relax.image.resize2d")
        node = node_name_of(call)
        attrs = call.attrs
        method, mode = str(attrs.method), str(attrs.coordinate_transformation_mode)
        if str(attrs.layout) != "NCHW" or mode not in strided.RESIZE_MODES:
            raise UnsupportedOpError(f"resize: layout {attrs.layout}, mode {mode}", node)
        x = self._in_layout(self._operand(inner, call.args[0], node), "NHWC", node)
        _, _, h, w = _shape(call.args[0])
        n, c, oh, ow = _shape(call)
        rounding = str(attrs.rounding_method)
        try:
            ytab = strided.interpolation_table(h, oh, method, mode, rounding)
            xtab = strided.interpolation_table(w, ow, method, mode, rounding)
        except strided.NotACopy as err:
            raise UnsupportedOpError(f"resize: {err.reason}", node) from None
        op = mrvl.ResizeOp(
            x,
            self._made_constant(ytab.reshape(-1), "O", "resize_rows"),
            self._made_constant(xtab.reshape(-1), "O", "resize_cols"),
            mrvl.tensor((n, oh, ow, c), f32, "NHWC"),
            mode,
        )
        return self._located(op, node)

    def pool2d(self, chain: _Chain, inner: dict) -> SSAValue:
        call = chain.take_one("relax.nn.max_pool2d", "relax.nn.avg_pool2d")
        node = node_name_of(call)
        attrs = call.attrs
        if attrs.layout != "NCHW" or any(int(d) != 1 for d in attrs.dilation):
            raise UnsupportedOpError("pooling: only NCHW without dilation", node)
        x = self._in_layout(self._operand(inner, call.args[0], node), "NHWC", node)
        n, c, h, w = _shape(call)
        out_type = mrvl.tensor((n, h, w, c), f32, "NHWC")
        extra: dict[str, Attribute] = {"ceil_mode": UnitAttr()} if bool(attrs.ceil_mode) else {}
        common = dict(
            kernel=_ints(attrs.pool_size), strides=_ints(attrs.strides), pads=_ints(attrs.padding)
        )
        if call.op.name == "relax.nn.max_pool2d":
            op = mrvl.MaxPool2DOp(x, out_type, **common, **extra)
        else:
            if bool(attrs.count_include_pad):
                extra["count_include_pad"] = UnitAttr()
            op = mrvl.AvgPool2DOp(x, out_type, **common, **extra)
        return self._located(op, node)

    def global_pool2d(self, chain: _Chain, inner: dict) -> SSAValue:
        """mean / max over H and W: a pool whose window is the whole plane."""
        call = chain.take_one("relax.mean", "relax.max")
        node = node_name_of(call)
        n, c, h, w = _shape(call.args[0])
        x = self._in_layout(self._operand(inner, call.args[0], node), "NHWC", node)
        out_type = mrvl.tensor((n, 1, 1, c), f32, "NHWC")
        cls = mrvl.AvgPool2DOp if call.op.name == "relax.mean" else mrvl.MaxPool2DOp
        pooled = self._located(cls(x, out_type, kernel=(h, w), strides=(1, 1)), node)
        if len(_shape(call)) == 2:  # keepdims=0: [N, C], the same bytes as [N, 1, 1, C]
            return self._located(mrvl.ReshapeOp(pooled, mrvl.tensor((n, c), f32, "NC")), node)
        return pooled

    def reshape(self, chain: _Chain, inner: dict) -> SSAValue:
        call = chain.take_one("relax.reshape", "relax.squeeze", "relax.flatten")
        node = node_name_of(call)
        src = call.args[0]
        out_shape = _shape(call)
        if len(out_shape) not in RELAX_LAYOUT:
            raise UnsupportedOpError(f"reshape to rank {len(out_shape)}", node)
        # Relax reshapes in its own (NCHW) order, so the data must be in that order first.
        x = self._in_layout(self._operand(inner, src, node), RELAX_LAYOUT[len(_shape(src))], node)
        op = mrvl.ReshapeOp(x, mrvl.tensor(out_shape, f32, RELAX_LAYOUT[len(out_shape)]))
        return self._located(op, node)

    def transpose(self, chain: _Chain, inner: dict) -> SSAValue:
        """NCHW <-> NHWC as a layout change: the same bytes under another layout label,
        with a layout conversion where the data really moves."""
        call = chain.take_one("relax.permute_dims")
        node = node_name_of(call)
        axes = _ints(call.attrs.axes)
        shape = _shape(call.args[0])
        if axes == [0, 2, 3, 1]:  # result bytes = the input in NHWC
            x = self._in_layout(self._operand(inner, call.args[0], node), "NHWC", node)
            op = mrvl.ReshapeOp(x, mrvl.tensor(_shape(call), f32, "NCHW"))
            return self._located(op, node)
        if axes == [0, 3, 1, 2]:  # the input's bytes read as NHWC, converted to NCHW
            x = self._in_layout(self._operand(inner, call.args[0], node), "NCHW", node)
            relabelled = self._located(mrvl.ReshapeOp(x, mrvl.tensor(shape, f32, "NHWC")), node)
            return self._in_layout(relabelled, "NCHW", node)
        raise UnsupportedOpError(f"transpose with axes {axes} is not a layout change", node)

    def fc(self, chain: _Chain, inner: dict) -> SSAValue:
        alpha_call = chain.take("relax.multiply")  # Gemm's alpha, scaling the input
        call = chain.take_one("relax.matmul")
        node = node_name_of(call)
        source = call.args[0]
        if alpha_call is not None:  # multiply(x, alpha) or multiply(alpha, x)
            source = alpha_call.args[1 if isinstance(alpha_call.args[0], GenericConst) else 0]
        in_shape = _shape(source)
        x = self._operand(inner, source, node)
        if len(in_shape) > 2:  # [..., K], a sequence, plane or windows: the leading axes' rows
            x = self._in_layout(x, mrvl.RELAX_LAYOUT[len(in_shape)], node)
            rows = (int(np.prod(in_shape[:-1])), in_shape[-1])
            x = self._located(mrvl.ReshapeOp(x, mrvl.tensor(rows, f32, "NC")), node)
        x = self._in_layout(x, "NC", node)
        w_const = call.args[1]
        if not isinstance(w_const, GenericConst) or len(_shape(w_const)) != 2:
            raise UnsupportedOpError("fc: the right operand must be a constant matrix", node)
        n, o = mrvl.shape_of(x)[0], _shape(call)[-1]
        alpha = 1.0
        if alpha_call is not None:
            alpha = _scalar(next(a for a in alpha_call.args if isinstance(a, GenericConst)))
        has_bias = chain.peek_any(*_AFFINE_CALLS)
        bias_const = chain.first_const_of(*_AFFINE_CALLS)
        scale, shift = self._affine_after(chain, o)
        w = _scaled_rows(constant_view(w_const).T, alpha * scale, lambda block: block)  # [O, K]
        weight = self._constant(w_const, w, "OI")
        op = mrvl.FullyConnectedOp(
            x,
            weight,
            self._bias_constant(bias_const, shift, has_bias),
            mrvl.tensor((n, o), f32, "NC"),
            activation=self._activation(chain, o),
        )
        result = self._located(op, node)
        if len(in_shape) > 2:
            out_type = mrvl.tensor((*in_shape[:-1], o), f32, mrvl.RELAX_LAYOUT[len(in_shape)])
            result = self._located(mrvl.ReshapeOp(result, out_type), node)
        return result

    def _elementwise_in(self, value: SSAValue, node: str | None) -> SSAValue:
        """An elementwise layer's operand in the layout it is computed in: NHWC at rank 4, NC
        at rank 2, and at rank 3 ([N, C, L], NCW) the NHWC view [N, C, L, 1] of the same
        bytes (a free reshape; the layer then has one channel, so only scalar constants); at
        rank 5 ([N, A, B, C, D] in Relax's order, YOLOv5's decode) likewise [N, A·B·C, D, 1]."""
        shape = mrvl.shape_of(value)
        if len(shape) in (3, 5):
            view = mrvl.tensor((shape[0], int(np.prod(shape[1:-1])), shape[-1], 1), f32, "NHWC")
            x = self._in_layout(value, RELAX_LAYOUT[len(shape)], node)
            return self._located(mrvl.ReshapeOp(x, view), node)
        return self._in_layout(value, "NHWC" if len(shape) == 4 else "NC", node)

    def _elementwise_out(self, result: SSAValue, shape: tuple, node: str | None) -> SSAValue:
        """The result of `_elementwise_in`'s layer back at rank 3 or 5 if it was viewed."""
        if len(shape) not in (3, 5):
            return result
        out_type = mrvl.tensor(shape, f32, RELAX_LAYOUT[len(shape)])
        return self._located(mrvl.ReshapeOp(result, out_type), node)

    def add(self, chain: _Chain, inner: dict) -> SSAValue:
        call = chain.take_one("relax.add")
        node = node_name_of(call)
        lhs, rhs = (self._elementwise_in(self._operand(inner, a, node), node) for a in call.args)
        shape = _shape(call)
        channels = 1 if len(shape) == 3 else shape[1]  # rank 3: a 1-channel view (_elementwise_in)
        op = mrvl.AddOp(lhs, rhs, activation=self._activation(chain, channels))
        return self._elementwise_out(self._located(op, node), _shape(call), node)

    def scale_shift(self, chain: _Chain, inner: dict) -> SSAValue:
        """Affine steps (constants on either side) and/or an activation on their own: a
        per-channel affine map. Scale and shift keep the TVM names of the first multiplying
        and the first adding constant (made constants when there is none)."""
        if chain.calls:
            first = chain.calls[0]
            source = next(a for a in first.args if not isinstance(a, GenericConst))
        else:  # a lone activation: its input
            first = chain.activation.calls[-1]
            source = chain.activation_input
        node = node_name_of(first)
        shape = _shape(source)
        if len(shape) not in RELAX_LAYOUT:
            raise UnsupportedOpError(f"scale/shift of a rank-{len(shape)} tensor", node)
        channels = 1 if len(shape) in (3, 5) else shape[1]  # scalars only (_elementwise_in)
        axis = prelu_channel_axis(chain.activation, len(shape))
        if axis is not None:  # rank-5 PRelu slopes: a 4-D view with their axis as channels
            channels = shape[axis]
            x = to_channel_view(self, self._operand(inner, source, node), shape, axis, node)
        else:
            x = self._elementwise_in(self._operand(inner, source, node), node)
        scale_const = chain.first_const_of("relax.multiply", "relax.divide")
        shift_const = chain.first_const_of("relax.add", "relax.subtract")
        scale, shift = self._affine_after(chain, channels)
        if chain.position != len(chain.calls):
            raise UnsupportedOpError(
                f"scale/shift: cannot fold {chain.calls[chain.position].op.name}", node
            )
        if scale_const is not None:
            scale_value = self._constant(scale_const, scale.astype(np.float32), "O")
        else:
            scale_value = self._made_constant(scale.astype(np.float32), "O", "scale")
        if shift_const is not None:
            shift_value = self._constant(shift_const, shift.astype(np.float32), "O")
        else:
            shift_value = self._made_constant(shift.astype(np.float32), "O", "shift")
        op = mrvl.ScaleShiftOp(
            x, scale_value, shift_value, activation=self._activation(chain, channels)
        )
        if axis is not None:
            return from_channel_view(self, self._located(op, node), shape, node)
        return self._elementwise_out(self._located(op, node), shape, node)

    def mul(self, chain: _Chain, inner: dict) -> SSAValue:
        """A product of two tensors: the full one first, a [N, C, 1, 1] gate second."""
        call = chain.take_one("relax.multiply")
        node = node_name_of(call)
        a, b = call.args
        if int(np.prod(_shape(a))) < int(np.prod(_shape(b))):
            a, b = b, a
        lhs, rhs = (self._elementwise_in(self._operand(inner, v, node), node) for v in (a, b))
        op = mrvl.MulOp(lhs, rhs, activation=self._activation(chain))
        return self._elementwise_out(self._located(op, node), _shape(call), node)

    def concat(self, chain: _Chain, inner: dict) -> SSAValue:
        """Concat on any axis: rank 4 in NHWC (Relax's axis mapped to it), rank 2 and 3 in
        Relax's own order; a constant input is made in that layout (`constant_operands`)."""
        call = chain.take_one("relax.concat")
        node = node_name_of(call)
        shape = _shape(call)
        rank = len(shape)
        if rank not in RELAX_LAYOUT:
            raise UnsupportedOpError(f"concat of rank {rank}", node)
        layout = "NHWC" if rank == 4 else RELAX_LAYOUT[rank]
        perm = mrvl.layout_permutation(RELAX_LAYOUT[rank], layout)
        axis = perm.index(int(call.attrs.axis) % rank)
        inputs = [data_operand(self, inner, a, rank, layout, node) for a in call.args[0].fields]
        out_shape = tuple(shape[p] for p in perm)
        channels = layout.index("C") if "C" in layout else None
        op = mrvl.ConcatOp(
            inputs, mrvl.tensor(out_shape, f32, layout), None if axis == channels else axis
        )
        return self._located(op, node)

    def copy(self, chain: _Chain, inner: dict) -> SSAValue:
        """A chain of data-movement ops as one strided copy. The copy is computed on the
        input's current layout where it can be (no conversion before it), and into NHWC for a
        rank-4 result (what the next layer reads): a layout conversion costs a pass over the
        tensor, more than a few more DMA descriptors. Among equals the fewest descriptors win."""
        calls = chain.calls[chain.position :]
        chain.position = len(chain.calls)
        node = node_name_of(calls[-1])
        source = self._operand(inner, calls[0].args[0], node)
        in_shape, out_shape = _shape(calls[0].args[0]), _shape(calls[-1])
        in_relax, out_relax = RELAX_LAYOUT[len(in_shape)], RELAX_LAYOUT[len(out_shape)]
        in_layouts = dict.fromkeys([mrvl.layout_of(source), in_relax])
        out_layouts = ["NHWC", "NCHW"] if len(out_shape) == 4 else [out_relax]
        best = None
        for in_rank, in_layout in enumerate(in_layouts):
            for out_rank, out_layout in enumerate(out_layouts):
                physical = tuple(in_shape[p] for p in mrvl.layout_permutation(in_relax, in_layout))
                positions = np.arange(int(np.prod(in_shape)), dtype=np.int64).reshape(physical)
                logical = positions.transpose(mrvl.layout_permutation(in_layout, in_relax))
                try:
                    result = strided.source_positions(calls, logical)
                except strided.NotACopy as err:
                    raise UnsupportedOpError(err.reason, node) from None
                form = strided.strided_form(
                    result.transpose(mrvl.layout_permutation(out_relax, out_layout))
                )
                if form is None:
                    continue
                walked = sorted(form.box)[: max(0, len(form.box) - 4)]
                cost = (in_rank + out_rank, int(np.prod(walked)))  # conversions, then DMAs
                if best is None or cost < best[0]:
                    best = (cost, in_layout, out_layout, form)
        if best is None:
            return self._copy_pieces(calls, source, node)
        _, in_layout, out_layout, form = best
        x = self._in_layout(source, in_layout, node)
        out_type = mrvl.tensor(
            [out_shape[p] for p in mrvl.layout_permutation(out_relax, out_layout)], f32, out_layout
        )
        if form.is_identity and form.box[0] == int(np.prod(in_shape)):  # the same bytes
            return self._located(mrvl.ReshapeOp(x, out_type), node)
        op = mrvl.StridedCopyOp(x, out_type, offset=form.offset, strides=form.strides, box=form.box)
        return self._located(op, node)

    def _copy_pieces(self, calls: list[relax.Call], source: SSAValue, node) -> SSAValue:
        """A copy with no one strided form (a Gather of indices that are no progression), in
        Relax's layouts: one strided copy per piece of the result along one axis
        (`strided.piecewise_forms`), concatenated along it."""
        in_shape, out_shape = _shape(calls[0].args[0]), _shape(calls[-1])
        x = self._in_layout(source, RELAX_LAYOUT[len(in_shape)], node)
        positions = np.arange(int(np.prod(in_shape)), dtype=np.int64).reshape(in_shape)
        try:
            result = strided.source_positions(calls, positions)
        except strided.NotACopy as err:
            raise UnsupportedOpError(err.reason, node) from None
        cut = strided.piecewise_forms(result)
        if cut is None:
            raise UnsupportedOpError("data movement that is not a strided copy", node)
        axis, pieces = cut
        layout = RELAX_LAYOUT[len(out_shape)]
        parts = []
        for piece in pieces:
            shape = list(out_shape)
            shape[axis] = piece.stop - piece.start
            form = piece.form
            op = mrvl.StridedCopyOp(
                x, mrvl.tensor(shape, f32, layout), offset=form.offset, strides=form.strides,
                box=form.box,
            )  # fmt: skip
            parts.append(self._located(op, node))
        if len(parts) == 1:
            return parts[0]
        channels = layout.index("C")
        op = mrvl.ConcatOp(
            parts, mrvl.tensor(out_shape, f32, layout), None if axis == channels else axis
        )
        return self._located(op, node)


class _Chain:
    """The calls of one composite, consumed in order as the layer's parts are recognised."""

    def __init__(self, calls: list[relax.Call], activation: FusedActivationForm | None = None):
        self.calls = calls
        self.position = 0
        self.activation = activation
        """The composite's trailing activation, already split off `calls`."""
        self.activation_input: relax.Expr | None = None
        self.bound: dict[relax.Var, relax.Expr] = {}
        """The composite's bindings (var -> value)."""

    def _name(self, call) -> str:
        return call.op.name if hasattr(call.op, "name") else ""

    def next_is(self, op_name: str) -> bool:
        return self.position < len(self.calls) and self._name(self.calls[self.position]) == op_name

    def take(self, op_name: str) -> relax.Call | None:
        """The next call if it is `op_name` (which is then consumed), else None."""
        if self.next_is(op_name):
            self.position += 1
            return self.calls[self.position - 1]
        return None

    def take_any(self, *op_names: str) -> relax.Call | None:
        """The next call if it is one of `op_names` (which is then consumed), else None."""
        for name in op_names:
            if (call := self.take(name)) is not None:
                return call
        return None

    def take_one(self, *op_names: str) -> relax.Call:
        """The next call, which must be one of `op_names` (the composite's core op)."""
        for name in op_names:
            if (call := self.take(name)) is not None:
                return call
        found = (
            self._name(self.calls[self.position]) if self.position < len(self.calls) else "nothing"
        )
        raise UnsupportedOpError(f"expected one of {', '.join(op_names)}, found {found}")

    def peek_any(self, *op_names: str) -> bool:
        return any(self._name(c) in op_names for c in self.calls[self.position :])

    def first_const_of(self, *op_names: str):
        """The first constant operand of the remaining calls named `op_names` (names the
        folded bias after its TVM constant)."""
        for c in self.calls[self.position :]:
            if self._name(c) in op_names:
                for a in c.args[1:] if self._name(c) == "relax.nn.batch_norm" else c.args:
                    if isinstance(a, GenericConst):
                        return a
        return None


def _ssa_name(name: str) -> str:
    """A Relax parameter name as an SSA name: xDSL allows [A-Za-z0-9_$.-], no leading digit
    (ONNX inputs are often called `gpu_0/data_0` or `0`)."""
    valid = re.sub(r"[^A-Za-z0-9_$.-]", "_", name)
    return valid if valid and not valid[0].isdigit() else f"v{valid}"


def _unique(name: str, taken: set[str]) -> str:
    """`name`, or `name.<k>` for the first k that is free, added to `taken`: a region's inputs
    are named after its parameters, whose names TVM does not keep apart (a partitioned
    module's `lv9` twice; ONNX inputs `a/b` and `a:b` are both `a_b` as SSA names), and
    the program's I/O names must be (`mlip.io`). (xDSL drops a `_<k>` suffix from a name.)"""
    unique, k = name, 0
    while unique in taken:
        k += 1
        unique = f"{name}.{k}"
    taken.add(unique)
    return unique


def _scalar(expr) -> float:
    if isinstance(expr, GenericConst):
        return float(expr.value.numpy().reshape(-1)[0])
    value = getattr(expr, "value", expr)
    return float(getattr(value, "value", value))


def _scaled_rows(
    weights: np.ndarray, scale: np.ndarray, layout: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """f32(layout(weights) * scale[o]) per output row o (axis 0), computed in float64 a block
    of rows at a time: a 400 MB FC matrix never has a float64 copy. Exact as one product."""
    rows = weights.shape[0]
    out = np.empty((rows, *layout(weights[:1]).shape[1:]), np.float32)
    step = max(1, (1 << 22) // max(1, weights[:1].size))
    unit = bool(np.all(scale == 1.0))
    for start in range(0, rows, step):
        block = layout(weights[start : start + step])
        if unit:
            out[start : start + step] = block
        else:
            shape = (-1,) + (1,) * (block.ndim - 1)
            factor = scale[start : start + step].reshape(shape)
            out[start : start + step] = block.astype(np.float64) * factor
    return out


def _per_channel(expr, channels: int) -> np.ndarray:
    """A constant that broadcasts along the channel axis ((1,C,1,1), (1,C), (C,) or a scalar)."""
    array = expr.value.numpy().astype(np.float64)
    if array.size == 1:
        return np.full(channels, array.reshape(-1)[0])
    return array.reshape(channels)


_AFFINE_CALLS = (
    "relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.nn.batch_norm"
)  # fmt: skip
"""The calls `_affine_after` folds into a layer's scale and shift."""

_LAYERS: dict[str, Callable[[_RegionImporter, _Chain, dict], SSAValue]] = {
    "mrvl.conv2d": _RegionImporter.conv2d,
    "mrvl.conv_transpose": import_conv_transpose,
    "mrvl.maxpool2d": _RegionImporter.pool2d,
    "mrvl.avgpool2d": _RegionImporter.pool2d,
    "mrvl.global_avgpool2d": _RegionImporter.global_pool2d,
    "mrvl.global_maxpool2d": _RegionImporter.global_pool2d,
    "mrvl.fc": _RegionImporter.fc,
    "mrvl.bmm": import_bmm,
    "mrvl.add": _RegionImporter.add,
    "mrvl.mul": _RegionImporter.mul,
    "mrvl.concat": _RegionImporter.concat,
    "mrvl.scale_shift": _RegionImporter.scale_shift,
    "mrvl.reshape": _RegionImporter.reshape,
    "mrvl.transpose": _RegionImporter.transpose,
    "mrvl.copy": _RegionImporter.copy,
    "mrvl.resize": _RegionImporter.resize,
    "mrvl.softmax": import_softmax,
    "mrvl.layernorm": import_layernorm,
    **QUANT_LAYERS,
    "mrvl.pad": import_pad,
    "mrvl.reduce": import_reduce,
    "mrvl.binary": import_binary,
}


def import_region(region: relax.Function, constant_names=None) -> ModuleOp:
    """Translate one Relax region function into a `mrvl` module holding one `func.func`."""
    symbol = (
        str(region.attrs["global_symbol"])
        if region.attrs and "global_symbol" in region.attrs
        else "mrvl_region"
    )
    return _RegionImporter(region, symbol, constant_names).run()
