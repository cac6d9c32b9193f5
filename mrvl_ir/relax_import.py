"""Relax region function -> `mrvl` module.

A region (a function with `Codegen="mrvl"`, made by `partition_for_mrvl`) calls one composite
function per MLIP layer. Each composite becomes one `mrvl` layer op whose location is the ONNX
node of its main operator (the span `mrvl.from_onnx` attached). Relax speaks NCHW / OIHW / [K, O];
the MLIP speaks NHWC / OHWI / [O, K]: weights are transposed here, and activations get explicit
`mrvl.layout_convert` ops where the layout changes (region inputs and outputs, flatten).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from tvm import relax
from tvm.ir.expr import GenericConst
from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import func
from xdsl.dialects.builtin import FloatAttr, ModuleOp, StringAttr, UnitAttr, f32
from xdsl.ir import Attribute, Block, Region, SSAValue

from mrvl.locations import name_location
from mrvl.dialects import mrvl
from mrvl.errors import UnsupportedOpError
from mrvl.frontend import node_name_of

RELAX_LAYOUT = {4: "NCHW", 2: "NC"}


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
        self.values: dict[relax.Var, SSAValue] = {}
        self.converted: dict[tuple[SSAValue, str], SSAValue] = {}
        self.composites: dict[relax.Var, relax.Function] = {}
        self.block = Block(
            arg_types=[self._relax_tensor_type(p) for p in region.params]
        )
        self.builder = Builder(InsertPoint.at_end(self.block))
        for param, arg in zip(region.params, self.block.args):
            arg.name_hint = param.name
            self.values[param] = arg

    # -- types and values ---------------------------------------------------------------------

    def _relax_tensor_type(self, expr: relax.Expr, node: str | None = None) -> Attribute:
        shape = _shape(expr)
        if _dtype(expr) != "float32" or len(shape) not in RELAX_LAYOUT:
            raise UnsupportedOpError(
                f"region {self.symbol}: tensor {expr.ty} is not a float32 tensor of rank 2 or 4",
                node,
            )
        return mrvl.tensor(shape, f32, RELAX_LAYOUT[len(shape)])

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
        name = None
        if self.constant_names is not None and const in self.constant_names:
            name = str(self.constant_names[const])
        if name is None:
            name = f"{self.symbol}_mrvl_const_{self.const_count}"
        self.const_count += 1
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
        what = value.op.name if isinstance(value, relax.Call) and hasattr(value.op, "name") else type(value).__name__
        raise UnsupportedOpError(
            f"region {self.symbol}: '{what}' outside a known MLIP layer pattern", node
        )

    def _composite(self, composite: relax.Function, inner: dict) -> SSAValue:
        kind = str(composite.attrs["Composite"])
        calls = [b.value for blk in composite.body.blocks for b in blk.bindings]
        by_op = {c.op.name: c for c in calls if isinstance(c, relax.Call)}
        handler = _LAYERS.get(kind)
        if handler is None:
            node = next((node_name_of(c) for c in calls if node_name_of(c)), None)
            raise UnsupportedOpError(f"no MLIP layer for composite '{kind}'", node)
        return handler(self, by_op, inner)

    # -- layers ---------------------------------------------------------------------------------

    def _activation(self, by_op: dict, node: str | None) -> dict[str, Attribute]:
        if "relax.nn.relu" in by_op:
            return {"activation": StringAttr("relu")}
        if "relax.clip" in by_op:
            lo, hi = (float(v.value) for v in by_op["relax.clip"].args[1:3])
            return {
                "activation": StringAttr("clip"),
                "act_min": FloatAttr(lo, f32),
                "act_max": FloatAttr(hi, f32),
            }
        return {}

    def _bias(self, by_op: dict, channels: int) -> SSAValue | None:
        add = by_op.get("relax.add")
        if add is None:
            return None
        const = add.args[1]
        array = const.value.numpy().astype(np.float32).reshape(channels)
        return self._constant(const, array, "O")

    def conv2d(self, by_op: dict, inner: dict) -> SSAValue:
        call = by_op["relax.nn.conv2d"]
        node = node_name_of(call)
        attrs = call.attrs
        if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW":
            raise UnsupportedOpError("conv2d: only NCHW data and OIHW weights", node)
        x = self._in_layout(inner[call.args[0]], "NHWC", node)
        w_const = call.args[1]
        w = w_const.value.numpy().astype(np.float32).transpose(0, 2, 3, 1)  # OIHW -> OHWI
        weight = self._constant(w_const, np.ascontiguousarray(w), "OHWI")
        out_n, out_c, out_h, out_w = _shape(call)
        bias = self._bias(by_op, out_c)
        pt, pl, pb, pr = _ints(attrs.padding)
        op = mrvl.Conv2DOp(
            x,
            weight,
            bias,
            mrvl.tensor((out_n, out_h, out_w, out_c), f32, "NHWC"),
            strides=_ints(attrs.strides),
            pads=(pt, pl, pb, pr),
            dilations=_ints(attrs.dilation),
            groups=int(attrs.groups),
            activation=self._activation(by_op, node),
        )
        op.location = name_location(node)
        return self.builder.insert(op).output

    def pool2d(self, by_op: dict, inner: dict) -> SSAValue:
        call = by_op.get("relax.nn.max_pool2d", by_op.get("relax.nn.avg_pool2d"))
        node = node_name_of(call)
        attrs = call.attrs
        if attrs.layout != "NCHW" or any(int(d) != 1 for d in attrs.dilation):
            raise UnsupportedOpError("pooling: only NCHW without dilation", node)
        if bool(attrs.ceil_mode):
            raise UnsupportedOpError("pooling: ceil_mode is not supported yet", node)
        x = self._in_layout(inner[call.args[0]], "NHWC", node)
        n, c, h, w = _shape(call)
        out_type = mrvl.tensor((n, h, w, c), f32, "NHWC")
        common = dict(
            kernel=_ints(attrs.pool_size), strides=_ints(attrs.strides), pads=_ints(attrs.padding)
        )
        if call.op.name == "relax.nn.max_pool2d":
            op = mrvl.MaxPool2DOp(x, out_type, **common)
        else:
            extra = {"count_include_pad": UnitAttr()} if bool(attrs.count_include_pad) else {}
            op = mrvl.AvgPool2DOp(x, out_type, **common, **extra)
        op.location = name_location(node)
        return self.builder.insert(op).output

    def reshape(self, by_op: dict, inner: dict) -> SSAValue:
        call = by_op["relax.reshape"]
        node = node_name_of(call)
        src = call.args[0]
        out_shape = _shape(call)
        if len(out_shape) not in RELAX_LAYOUT:
            raise UnsupportedOpError(f"reshape to rank {len(out_shape)}", node)
        # Relax reshapes in NCHW order, so the data must be NCHW first.
        x = self._in_layout(inner[src], RELAX_LAYOUT[len(_shape(src))], node)
        op = mrvl.ReshapeOp(x, mrvl.tensor(out_shape, f32, RELAX_LAYOUT[len(out_shape)]))
        op.location = name_location(node)
        return self.builder.insert(op).output

    def fc(self, by_op: dict, inner: dict) -> SSAValue:
        call = by_op["relax.matmul"]
        node = node_name_of(call)
        x = self._in_layout(inner[call.args[0]], "NC", node)
        w_const = call.args[1]
        if not isinstance(w_const, GenericConst) or len(_shape(w_const)) != 2:
            raise UnsupportedOpError("fc: the right operand must be a constant matrix", node)
        w = np.ascontiguousarray(w_const.value.numpy().astype(np.float32).T)  # [K, O] -> [O, K]
        weight = self._constant(w_const, w, "OI")
        n, o = _shape(call)
        bias = self._bias(by_op, o)
        op = mrvl.FullyConnectedOp(
            x,
            weight,
            bias,
            mrvl.tensor((n, o), f32, "NC"),
            activation=self._activation(by_op, node),
        )
        op.location = name_location(node)
        return self.builder.insert(op).output


_LAYERS: dict[str, Callable[[_RegionImporter, dict, dict], SSAValue]] = {
    "mrvl.conv2d": _RegionImporter.conv2d,
    "mrvl.maxpool2d": _RegionImporter.pool2d,
    "mrvl.avgpool2d": _RegionImporter.pool2d,
    "mrvl.fc": _RegionImporter.fc,
    "mrvl.reshape": _RegionImporter.reshape,
}


def import_region(region: relax.Function, constant_names=None) -> ModuleOp:
    """Translate one Relax region function into a `mrvl` module holding one `func.func`."""
    symbol = str(region.attrs["global_symbol"]) if region.attrs and "global_symbol" in region.attrs else "mrvl_region"
    return _RegionImporter(region, symbol, constant_names).run()

