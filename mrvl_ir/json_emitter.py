"""Nodes-JSON and Constants-JSON of one region, in the schema of TVM's Relay-era Marvell backend.

Upstream (apache/tvm v0.19.0) wrote two files per region and handed them to the vendor compiler
`mrvl-tmlc -mn <symbol> -f1 <symbol>-nodes.json -f2 <symbol>-consts.json`: the JSON graph of
`src/relay/backend/contrib/mrvl/codegen.cc` (`MrvlJSONSerializer`), post-processed by
`python/tvm/contrib/mrvl.py` (`get_nodes_json_string`, `modify_const_names`). This module writes
the same two documents from the `mrvl` graph dialect (as imported: f32, NHWC; or after
`mrvl-cast-fp16`).

Nodes-JSON (the upstream *final* form, i.e. after `get_nodes_json_string`)::

    {"symbol": <symbol>,
     "nodes": [ <input nodes, one per region argument, in order>, <layer nodes, in IR order> ],
     "arg_nodes": [0, 1, ...],                       # the input nodes
     "heads": [[node_index, 0, 0], ...],             # the region outputs
     "attrs": {"shape": ["list_shape", [<shape of node i>, ...]],
               "dltype": ["list_str", [<dtype of node i>, ...]]},
     "batch_size": "1", "num_subgraph_inputs": "1", "num_subgraph_outputs": "1"}

An input node is ``{"op": "input", "name": "<symbol>_i<k>", "inputs": [], "input_id": ["<k>"],
"attrs": {"layer_name": ["input"], "dtype": ["float32"], "shape": [[1, 1, 28, 28]],
"data_layout": ["NCHW"]}}``: it keeps the shape TVM hands over (NCHW).

A layer node is ``{"op": "tvm_op", "name": "tvmgen_mrvl_main_<k-1>", "inputs": [[i, 0, 0], ...],
"attrs": {...}}``. As upstream, constants are not nodes (only activations are `inputs`), and every
attribute value except `num_inputs`, `num_outputs`, `mrvl_nodes_idx` and the `*_const` maps is a
list of strings (`"padding": ["1", "0", "1", "2"]`, `"layer_name": ["Conv2D"]`). Attributes:

- all layers: `layer_name` (`Conv2D`, `FC`, `Maxpool2D`, `Avgpool2D`, `GlobalAvgpool2D`,
  `GlobalMaxpool2D`, `Sum2D`, `Concat`, `ScaleShift`, `reshape`, `layout_transform`), `shape` ([[output shape]]), `dtype`, `data_layout`, `out_layout`,
  `data_layout_shape`, `out_layout_shape`, `num_inputs` (activations + constants, a string),
  `num_outputs`, `func_node_name` (the symbol), `func_name` (`n<i>_<layer>_<in>[2<out>]`),
  `from_tuple_idx`, `mrvl_nodes_idx` ([k], from 1), `composite_name` (the upstream pattern),
  `kernel_const`, `bias_const`, `gamma_const`, `beta_const`, `mean_const`, `var_const` (each `{}`
  or `{shape, dtype, min, max, name}` as the Constants-JSON has it), and our addition `onnx_node`:
  the ONNX node names this node came from, its own op's first (empty if unknown);
- `Conv2D`: `strides`, `padding` ([top, left, bottom, right]), `dilation`, `groups`, `channels`,
  `kernel_size`, `kernel_layout` (`OHWI`), `out_dtype`, `kernel_const_name`, `bias_const_name`,
  `bias_layout` (`---O`), `activation_type`;
- `FC`: `units`, `out_dtype`, `kernel_layout` (`OI`), `kernel_const_name`, `bias_const_name`,
  `bias_layout` (`-O`), `activation_type`, and `weights_need_transform: ["yes"]` when an NHWC->NCHW
  conversion + flatten in front of it was folded into it (upstream v0.19 did the same; the node
  then reads the NHWC tensor: `data_layout` `NHWC`);
- `Maxpool2D` / `Avgpool2D`: `pool_size`, `strides`, `padding`, `dilation`, `layout`, `ceil_mode`,
  `kernel_layout` (`HW`), `kernel_layout_shape`, and `count_include_pad` for `Avgpool2D`;
- `GlobalAvgpool2D` / `GlobalMaxpool2D` (a pool whose window is the whole plane): `layout`;
- `Sum2D` (two activations): `activation_type` (+ its parameters); `Concat`: `axis` (of the
  NHWC output, so channels are `3`); `ScaleShift` (our addition: a per-channel affine map no
  conv absorbed): `gamma_const` (scales), `beta_const` (shifts), `activation_type`;
- `reshape`: `newshape`, `allowzero`; `layout_transform`: `src_layout`, `dst_layout`.

`activation_type` is `relu`, `clip` (+ `activation_min`, `activation_max`), `leaky_relu`
(+ `activation_alpha`), `prelu` (+ `activation_slopes`, one per channel), `hard_sigmoid`
(+ `activation_alpha`, `activation_beta`), `sigmoid`, `tanh`, `hard_swish`, `silu`, `mish`,
`gelu`, `gelu_tanh`, `erf`, `exp`, `log`, `sqrt`, `reciprocal`, `abs`, `pow` (+
`activation_alpha`, the exponent), `leaky_floor` (+ `activation_alpha`, the slope, and
`activation_beta`, the floor) or
`none` (upstream only ever wrote `relu`, and omitted it otherwise). `Mul2D` is the product of
two activations (the second may be one value per image and channel).

Not layers: `mrvl.cast` (skipped: the node's `dtype` says what it computes in) and
`mrvl.layout_convert` of a region input (skipped: the input node keeps TVM's NCHW shape and
`data_layout`, the layer reads it as NHWC). A layout conversion elsewhere, that is not folded
into an FC, becomes a `layout_transform` node (upstream's op-node path).

Constants-JSON: ``{<const_name>: {"shape": [...], "dtype": "float32", "min": "<float>",
"max": "<float>", "data_base64": "<base64 of the raw little-endian bytes>"}}``, keyed by the
`mrvl.constant` names (`<symbol>_mrvl_const_<i>`, TVM's names; upstream renamed them to
`<node name>_const_<j>` afterwards, we keep TVM's). As upstream, `shape` gets a leading 1 for
1-D and 3-D constants (a bias of 64 is `[1, 64]`), and `min`/`max` are strings with 17
significant digits. An f16 constant (after `mrvl-cast-fp16`) has dtype `float16`.

The schemas and the checks of a document are in `json_schema`, the files in `json_files`
(both re-exported here). `emit_json_parts` leaves the constants' data as arrays, for
`json_files.write_region_json` to stream; the Constants-JSON with its base64 text is built
only by `emit_json`.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    Float16Type,
    Float32Type,
    IntegerType,
    ModuleOp,
    TensorType,
)
from xdsl.ir import Attribute, Operation, SSAValue

from mrvl.dialects import mrvl
from mrvl.errors import CompileError, layer_boundary
from mrvl.json_files import write_json, write_region_json
from mrvl.json_schema import (
    CONST_MAPS,
    CONSTS_SCHEMA,
    NODE_NAME_PREFIX,
    NODES_SCHEMA,
    SCHEMA_DIR,
    check_consts,
    check_nodes,
    check_pair,
    consts_schema,
    nodes_schema,
    validate,
    validate_consts,
    validate_nodes,
)
from mrvl.locations import location_name

__all__ = [
    "CONSTS_SCHEMA",
    "CONST_MAPS",
    "NODES_SCHEMA",
    "NODE_NAME_PREFIX",
    "SCHEMA_DIR",
    "check_consts",
    "check_nodes",
    "check_pair",
    "consts_schema",
    "emit_json",
    "emit_json_parts",
    "nodes_schema",
    "validate",
    "validate_consts",
    "validate_nodes",
    "with_data",
    "write_json",
    "write_region_json",
]


# ---------------------------------------------------------------------------------------------
# Small conversions
# ---------------------------------------------------------------------------------------------


def _dtype_name(element_type: Attribute) -> str:
    if isinstance(element_type, Float32Type):
        return "float32"
    if isinstance(element_type, Float16Type):
        return "float16"
    if isinstance(element_type, IntegerType) and element_type.width.data == 8:
        return "int8"
    raise CompileError(f"Nodes-JSON: no dtype name for element type {element_type}")


def _float_str(value: float) -> str:
    """A float as upstream printed it (`std::ostream` with precision 17)."""
    return format(float(value), ".17g")


def _strs(values: Iterable[int]) -> list[str]:
    return [str(int(v)) for v in values]


def _values(attr) -> list[int]:
    return [int(v) for v in attr.get_values()]


def _const_shape(shape: tuple[int, ...]) -> list[int]:
    """Upstream's Constants-JSON shape: a leading 1 is added to 1-D and 3-D constants."""
    dims = [int(d) for d in shape]
    return [1, *dims] if len(dims) in (1, 3) else dims


def _uses(value: SSAValue) -> list[Operation]:
    return [use.operation for use in value.uses]


# ---------------------------------------------------------------------------------------------
# Emission
# ---------------------------------------------------------------------------------------------


def _find_function(module: ModuleOp, symbol: str) -> func.FuncOp:
    funcs = [op for op in module.walk() if isinstance(op, func.FuncOp) and op.body.blocks]
    for fn in funcs:
        if fn.sym_name.data == symbol:
            return fn
    if len(funcs) == 1:
        return funcs[0]
    names = ", ".join(fn.sym_name.data for fn in funcs) or "none"
    raise CompileError(f"Nodes-JSON: no function '{symbol}' in the module (functions: {names})")


class _Emitter:
    def __init__(self, fn: func.FuncOp, symbol: str):
        self.fn = fn
        self.symbol = symbol
        self.nodes: list[dict[str, Any]] = []
        self.consts: dict[str, dict[str, Any]] = {}
        """Constant name -> its Constants-JSON entry without `data_base64`."""
        self.arrays: dict[str, np.ndarray] = {}
        """Constant name -> its data, little-endian (a view of the IR's bytes, not a copy)."""
        self.node_of: dict[SSAValue, int] = {}
        """Activation value -> index of the node producing it (inputs, layers, aliases)."""
        self.trail: dict[SSAValue, list[str]] = {}
        """ONNX names of skipped ops (casts, folded conversions) between a node and a value."""
        self.input_args: set[SSAValue] = set()
        self.folded: set[Operation] = set()
        self.fc_folds: dict[Operation, SSAValue] = {}
        """FC op -> the NHWC value it reads once conversion + flatten are folded into it."""
        self.layer_count = 0

    # -- helpers ---------------------------------------------------------------------------

    def _fail(self, op: Operation, message: str) -> CompileError:
        name = location_name(op.location)
        where = f" (ONNX node '{name}')" if name else ""
        return CompileError(f"Nodes-JSON: {op.name}: {message}{where}")

    def _source(self, op: Operation, value: SSAValue) -> int:
        if value not in self.node_of:
            raise self._fail(op, f"operand {value} is not produced by an input or a layer")
        return self.node_of[value]

    def _alias(self, op: Operation, src: SSAValue, dst: SSAValue) -> None:
        if src in self.node_of:
            self.node_of[dst] = self.node_of[src]
        own = location_name(op.location)
        self.trail[dst] = self.trail.get(src, []) + ([own] if own else [])

    def _constant(self, op: Operation, value: SSAValue) -> mrvl.ConstantOp:
        owner = value.owner
        while isinstance(owner, mrvl.CastOp):
            owner = owner.input.owner
        if not isinstance(owner, mrvl.ConstantOp):
            raise self._fail(op, f"weights and bias must be mrvl.constant values, got {value}")
        return owner

    def _const_ref(self, const: mrvl.ConstantOp) -> dict[str, Any]:
        entry = self.consts[const.const_name.data]
        return {k: entry[k] for k in ("shape", "dtype", "min", "max")} | {
            "name": const.const_name.data
        }

    def _reaches_input(self, value: SSAValue) -> bool:
        while True:
            if value in self.input_args:
                return True
            owner = value.owner
            if isinstance(owner, mrvl.CastOp | mrvl.LayoutConvertOp):
                value = owner.input
                continue
            return False

    # -- passes over the function ----------------------------------------------------------

    def _plan_fc_folds(self, ops: list[Operation]) -> None:
        """FC <- [casts] <- flatten reshape <- [casts] <- NHWC->NCHW conversion: one FC node."""
        for op in ops:
            if not isinstance(op, mrvl.FullyConnectedOp):
                continue
            chain: list[Operation] = []
            value = op.input
            while isinstance(value.owner, mrvl.CastOp) and len(_uses(value)) == 1:
                chain.append(value.owner)
                value = value.owner.input
            reshape = value.owner
            if not isinstance(reshape, mrvl.ReshapeOp) or len(_uses(value)) != 1:
                continue
            chain.append(reshape)
            value = reshape.input
            while isinstance(value.owner, mrvl.CastOp) and len(_uses(value)) == 1:
                chain.append(value.owner)
                value = value.owner.input
            convert = value.owner
            if (
                not isinstance(convert, mrvl.LayoutConvertOp)
                or len(_uses(value)) != 1
                or mrvl.layout_of(convert.input) != "NHWC"
                or mrvl.layout_of(convert.output) != "NCHW"
                or mrvl.shape_of(reshape.output)[0] != mrvl.shape_of(convert.input)[0]
            ):
                continue
            chain.append(convert)
            self.folded.update(chain)
            self.fc_folds[op] = convert.input

    def run(self) -> dict:
        block = self.fn.body.block
        ops = list(block.ops)

        for k, arg in enumerate(block.args):
            self._input_node(k, arg)
        for op in ops:
            if isinstance(op, mrvl.ConstantOp):
                self._constant_entry(op)
        self._plan_fc_folds(ops)

        heads: list[list[int]] = []
        for op in ops:
            if isinstance(op, mrvl.ConstantOp):
                continue
            if isinstance(op, func.ReturnOp):
                for value in op.operands:
                    if isinstance(value.owner, mrvl.ConstantOp):
                        raise self._fail(op, "a region output is a constant")
                    heads.append([self._source(op, value), 0, 0])
                continue
            if op in self.folded:
                if isinstance(op, mrvl.CastOp | mrvl.LayoutConvertOp | mrvl.ReshapeOp):
                    self._alias(op, op.input, op.output)
                continue
            with layer_boundary(f"Nodes-JSON of {op.name}", location_name(op.location)):
                node_builder = NODE_BUILDERS.get(type(op))
                if node_builder is None:
                    raise self._fail(op, "has no Nodes-JSON form (not a layer this emitter knows)")
                node_builder(self, op)

        num_in = len(block.args)
        batch = 1
        for node in self.nodes[:num_in]:
            shape = node["attrs"]["shape"][0]
            if shape:
                batch = shape[0]
        doc = {
            "symbol": self.symbol,
            "nodes": self.nodes,
            "arg_nodes": list(range(num_in)),
            "heads": heads,
            "attrs": {
                "shape": ["list_shape", [n["attrs"]["shape"][0] for n in self.nodes]],
                "dltype": ["list_str", [n["attrs"]["dtype"][0] for n in self.nodes]],
            },
            "batch_size": str(batch),
            "num_subgraph_inputs": str(num_in),
            "num_subgraph_outputs": str(len(heads)),
        }
        return doc

    # -- nodes -----------------------------------------------------------------------------

    def _input_node(self, k: int, arg: SSAValue) -> None:
        shape = list(mrvl.shape_of(arg))
        t = arg.type
        if isinstance(t, TensorType) and isinstance(t.encoding, mrvl.LayoutAttr):
            layout = t.encoding.name_str
        else:
            layout = "NC" if len(shape) == 2 else "NCHW"
        self.nodes.append(
            {
                "op": "input",
                "name": f"{self.symbol}_i{k}",
                "inputs": [],
                "input_id": [str(k)],
                "attrs": {
                    "layer_name": ["input"],
                    "dtype": [_dtype_name(mrvl.element_type_of(arg))],
                    "shape": [shape],
                    "data_layout": [layout],
                },
            }
        )
        self.node_of[arg] = k
        self.input_args.add(arg)

    def _constant_entry(self, op: mrvl.ConstantOp) -> None:
        name = op.const_name.data
        if name in self.consts:
            raise self._fail(op, f"two constants are named '{name}'")
        array = op.numpy()
        if array.size:  # exact in the array's own type: no float64 copy of the weights
            lo, hi = float(np.min(array)), float(np.max(array))
        else:
            lo, hi = math.inf, -math.inf
        self.arrays[name] = array.astype(array.dtype.newbyteorder("<"), copy=False)
        self.consts[name] = {
            "shape": _const_shape(array.shape),
            "dtype": array.dtype.name,
            "min": _float_str(lo),
            "max": _float_str(hi),
        }

    def _layer_node(
        self,
        op: Operation,
        layer_name: str,
        activations: list[SSAValue],
        *,
        num_constants: int = 0,
        data_layout: str,
        data_shape: tuple[int, ...],
        out_layout: str,
        kernel_layout: str | None = None,
        composite: str | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        inputs = [[self._source(op, v), 0, 0] for v in activations]
        trail: list[str] = []
        own = location_name(op.location)
        folded = [n for v in activations for n in self.trail.get(v, [])]
        for name in ([own] if own else []) + folded:
            if name not in trail:
                trail.append(name)
        out = op.results[0]
        self.layer_count += 1
        k = self.layer_count
        func_name = f"n{k - 1}_{layer_name}_{data_layout}"
        if out_layout != data_layout:
            func_name += f"2{out_layout}"
        node_attrs: dict[str, Any] = {
            "layer_name": [layer_name],
            "onnx_node": trail,
            "num_inputs": str(len(activations) + num_constants),
            "num_outputs": "1",
            "shape": [list(mrvl.shape_of(out))],
            "dtype": [_dtype_name(mrvl.element_type_of(out))],
        }
        node_attrs.update(attrs or {})
        node_attrs.update(
            {
                "func_node_name": [self.symbol],
                "data_layout_shape": _strs(data_shape),
                "from_tuple_idx": ["-1"],
                "data_layout": [data_layout],
                "out_layout_shape": _strs(mrvl.shape_of(out)),
                "out_layout": [out_layout],
                "func_name": [func_name],
            }
        )
        if kernel_layout is not None:
            node_attrs["kernel_layout"] = [kernel_layout]
        if composite is not None:
            node_attrs["composite_name"] = [composite]
        node_attrs["mrvl_nodes_idx"] = [k]
        for key in CONST_MAPS:
            node_attrs.setdefault(key, {})
        self.nodes.append(
            {
                "op": "tvm_op",
                "name": f"{NODE_NAME_PREFIX}_{k - 1}",
                "inputs": inputs,
                "attrs": node_attrs,
            }
        )
        self.node_of[out] = len(self.nodes) - 1

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
        self._layer_node(
            op,
            "Conv2D",
            [op.input],
            num_constants=count,
            data_layout="NHWC",
            data_shape=mrvl.shape_of(op.input),
            out_layout="NHWC",
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

    def _bmm_node(self, op: mrvl.BatchMatMulOp) -> None:
        self._layer_node(
            op,
            "BatchMatMul",
            [op.lhs, op.rhs],
            data_layout="NCW",
            data_shape=mrvl.shape_of(op.lhs),
            out_layout="NCW",
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
        self._layer_node(
            op,
            layer,
            [op.input],
            data_layout="NHWC",
            data_shape=mrvl.shape_of(op.input),
            out_layout="NHWC",
            kernel_layout="HW",
            composite=composite,
            attrs=attrs,
        )

    def _global_pool_node(self, op: mrvl.MaxPool2DOp | mrvl.AvgPool2DOp) -> None:
        """A pool over the whole plane is upstream's GlobalAvgpool2D / GlobalMaxpool2D."""
        is_avg = isinstance(op, mrvl.AvgPool2DOp)
        self._layer_node(
            op,
            "GlobalAvgpool2D" if is_avg else "GlobalMaxpool2D",
            [op.input],
            data_layout="NHWC",
            data_shape=mrvl.shape_of(op.input),
            out_layout="NHWC",
            composite="mrvl.global_avgpool2d" if is_avg else "mrvl.global_maxpool2d",
            attrs={"layout": ["NHWC"]},
        )

    def _sum_node(self, op: mrvl.AddOp) -> None:
        layout = mrvl.layout_of(op.output)
        self._layer_node(
            op,
            "Sum2D",
            [op.lhs, op.rhs],
            data_layout=layout,
            data_shape=mrvl.shape_of(op.lhs),
            out_layout=layout,
            composite="mrvl.sum2d",
            attrs=self._activation_attrs(op),
        )

    def _mul_node(self, op: mrvl.MulOp) -> None:
        """Elementwise product of two activations (the second may be [N, 1, 1, C])."""
        layout = mrvl.layout_of(op.output)
        self._layer_node(
            op,
            "Mul2D",
            [op.lhs, op.rhs],
            data_layout=layout,
            data_shape=mrvl.shape_of(op.lhs),
            out_layout=layout,
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
        self._layer_node(
            op,
            "ScaleShift",
            [op.input],
            num_constants=2,
            data_layout=layout,
            data_shape=mrvl.shape_of(op.input),
            out_layout=layout,
            composite="mrvl.scale_shift",
            attrs=attrs,
        )

    def _concat_node(self, op: mrvl.ConcatOp) -> None:
        layout = mrvl.layout_of(op.output)
        self._layer_node(
            op,
            "Concat",
            list(op.inputs),
            data_layout=layout,
            data_shape=mrvl.shape_of(op.inputs[0]),
            out_layout=layout,
            composite="mrvl.concat",
            attrs={"axis": [str(op.channel_axis)]},
        )

    def _reshape_node(self, op: mrvl.ReshapeOp) -> None:
        self._layer_node(
            op,
            "reshape",
            [op.input],
            data_layout=mrvl.layout_of(op.input),
            data_shape=mrvl.shape_of(op.input),
            out_layout=mrvl.layout_of(op.output),
            composite="mrvl.reshape",
            attrs={"newshape": _strs(mrvl.shape_of(op.output)), "allowzero": ["0"]},
        )

    def _strided_copy_node(self, op: mrvl.StridedCopyOp) -> None:
        self._layer_node(
            op,
            "StridedCopy",
            [op.input],
            data_layout=mrvl.layout_of(op.input),
            data_shape=mrvl.shape_of(op.input),
            out_layout=mrvl.layout_of(op.output),
            composite="mrvl.copy",
            attrs={
                "src_offset": [str(op.offset.value.data)],
                "src_strides": _strs(op.strides.get_values()),
                "box": _strs(op.box.get_values()),
            },
        )

    def _resize_node(self, op: mrvl.ResizeOp) -> None:
        self._layer_node(
            op,
            "Resize",
            [op.input],
            data_layout="NHWC",
            data_shape=mrvl.shape_of(op.input),
            out_layout="NHWC",
            composite="mrvl.resize",
            attrs={"coordinate_transformation_mode": [op.mode.data]},
        )

    def _softmax_node(self, op: mrvl.SoftmaxOp) -> None:
        """Softmax over a run of consecutive axes of its input, in the input's layout."""
        layout = mrvl.layout_of(op.input)
        self._layer_node(
            op,
            "Softmax",
            [op.input],
            data_layout=layout,
            data_shape=mrvl.shape_of(op.input),
            out_layout=layout,
            composite="mrvl.softmax",
            attrs={"axes": _strs(op.axis_list)},
        )

    def _layernorm_node(self, op: mrvl.LayerNormOp) -> None:
        """Layer normalization over the trailing axes, its f32 scale and shift in gamma/beta."""
        layout = mrvl.layout_of(op.input)
        scale, shift = self._constant(op, op.scale), self._constant(op, op.shift)
        self._layer_node(
            op,
            "LayerNorm",
            [op.input],
            num_constants=2,
            data_layout=layout,
            data_shape=mrvl.shape_of(op.input),
            out_layout=layout,
            composite="mrvl.layernorm",
            attrs={
                "gamma_const": self._const_ref(scale),
                "beta_const": self._const_ref(shift),
                "axes": _strs(op.axis_list),
                "epsilon": [_float_str(op.epsilon.value.data)],
            },
        )

    def _dilate_node(self, op: mrvl.DilateOp) -> None:
        self._layer_node(
            op,
            "Dilate",
            [op.input],
            data_layout="NHWC",
            data_shape=mrvl.shape_of(op.input),
            out_layout="NHWC",
            composite="mrvl.conv_transpose",
            attrs={"strides": _strs(op.strides.get_values())},
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
        self._layer_node(
            op,
            "layout_transform",
            [op.input],
            data_layout=src,
            data_shape=mrvl.shape_of(op.input),
            out_layout=dst,
            attrs={"src_layout": [src], "dst_layout": [dst]},
        )


NODE_BUILDERS: dict[type[Operation], Callable[[_Emitter, Operation], None]] = {
    mrvl.CastOp: _Emitter._cast,
    mrvl.LayoutConvertOp: _Emitter._layout_convert,
    mrvl.Conv2DOp: _Emitter._conv_node,
    mrvl.FullyConnectedOp: _Emitter._fc_node,
    mrvl.BatchMatMulOp: _Emitter._bmm_node,
    mrvl.MaxPool2DOp: _Emitter._pool_node,
    mrvl.AvgPool2DOp: _Emitter._pool_node,
    mrvl.AddOp: _Emitter._sum_node,
    mrvl.MulOp: _Emitter._mul_node,
    mrvl.ConcatOp: _Emitter._concat_node,
    mrvl.ScaleShiftOp: _Emitter._scale_shift_node,
    mrvl.ReshapeOp: _Emitter._reshape_node,
    mrvl.StridedCopyOp: _Emitter._strided_copy_node,
    mrvl.DilateOp: _Emitter._dilate_node,
    mrvl.ResizeOp: _Emitter._resize_node,
    mrvl.SoftmaxOp: _Emitter._softmax_node,
    mrvl.LayerNormOp: _Emitter._layernorm_node,
}
"""The Nodes-JSON form of each `mrvl` layer op, by op class (constants are entries of the
Constants-JSON, not nodes: `_constant_entry`). The completeness test checks that every layer
op of the dialect has one."""


def emit_json_parts(module: ModuleOp, symbol: str) -> tuple[dict, dict, dict[str, np.ndarray]]:
    """The Nodes-JSON of the region function `symbol`, its Constants-JSON entries without
    `data_base64`, and each constant's data (little-endian views of the IR's bytes).

    `module` holds `mrvl` dialect functions; the function named `symbol` is emitted (if there
    is no such function but exactly one, that one is, under the name `symbol`). Raises
    `CompileError` for an op that has no Nodes-JSON form.
    """
    emitter = _Emitter(_find_function(module, symbol), symbol)
    nodes = emitter.run()
    return nodes, emitter.consts, emitter.arrays


def with_data(consts: dict, arrays: dict[str, np.ndarray]) -> dict:
    """The Constants-JSON document: the entries of `emit_json_parts` with their base64 data."""
    return {
        name: {**entry, "data_base64": base64.b64encode(memoryview(arrays[name])).decode("ascii")}
        for name, entry in consts.items()
    }


def emit_json(module: ModuleOp, symbol: str) -> tuple[dict, dict]:
    """The (Nodes-JSON, Constants-JSON) documents of the region function `symbol`, in memory
    (see `emit_json_parts` for a large region)."""
    nodes, consts, arrays = emit_json_parts(module, symbol)
    return nodes, with_data(consts, arrays)
