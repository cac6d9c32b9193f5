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
(+ `activation_alpha`, `activation_beta`), `sigmoid`, `tanh`, `hard_swish`, `silu`, `mish` or
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

Validation: `check_nodes` / `check_consts` / `check_pair` return a list of messages (empty when
the document is valid), each prefixed with a JSON path (`$.nodes[1].attrs.padding: ...`);
`validate_nodes` / `validate_consts` / `validate` raise `CompileError` with those messages.
The schemas are `schemas/nodes.schema.json` and `schemas/consts.schema.json` (draft 2020-12).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from jsonschema import Draft202012Validator
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
from mrvl.errors import CompileError
from mrvl.locations import location_name

SCHEMA_DIR = Path(__file__).parent / "schemas"
NODES_SCHEMA = SCHEMA_DIR / "nodes.schema.json"
CONSTS_SCHEMA = SCHEMA_DIR / "consts.schema.json"

NODE_NAME_PREFIX = "tvmgen_mrvl_main"
"""Upstream named every layer node `tvmgen_mrvl_main_<k>` (k from 0), whatever the region."""

CONST_MAPS = ("kernel_const", "bias_const", "beta_const", "gamma_const", "var_const", "mean_const")

_MAX_MESSAGES = 25


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

    def run(self) -> tuple[dict, dict]:
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
            if isinstance(op, mrvl.CastOp):
                self._alias(op, op.input, op.output)
            elif isinstance(op, mrvl.LayoutConvertOp):
                if self._reaches_input(op.input):
                    self._alias(op, op.input, op.output)
                else:
                    self._layout_transform_node(op)
            elif isinstance(op, mrvl.Conv2DOp):
                self._conv_node(op)
            elif isinstance(op, mrvl.FullyConnectedOp):
                self._fc_node(op)
            elif isinstance(op, mrvl.MaxPool2DOp | mrvl.AvgPool2DOp):
                self._pool_node(op)
            elif isinstance(op, mrvl.AddOp):
                self._sum_node(op)
            elif isinstance(op, mrvl.MulOp):
                self._mul_node(op)
            elif isinstance(op, mrvl.ConcatOp):
                self._concat_node(op)
            elif isinstance(op, mrvl.ScaleShiftOp):
                self._scale_shift_node(op)
            elif isinstance(op, mrvl.ReshapeOp):
                self._reshape_node(op)
            elif isinstance(op, mrvl.StridedCopyOp):
                self._strided_copy_node(op)
            elif isinstance(op, mrvl.DilateOp):
                self._dilate_node(op)
            elif isinstance(op, mrvl.ResizeOp):
                self._resize_node(op)
            else:
                raise self._fail(op, "has no Nodes-JSON form (not a layer this emitter knows)")

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
        return doc, self.consts

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
        if array.size:
            as_float = array.astype(np.float64)
            lo, hi = float(np.min(as_float)), float(np.max(as_float))
        else:
            lo, hi = math.inf, -math.inf
        little = array.astype(array.dtype.newbyteorder("<"), copy=False)
        self.consts[name] = {
            "shape": _const_shape(array.shape),
            "dtype": array.dtype.name,
            "min": _float_str(lo),
            "max": _float_str(hi),
            "data_base64": base64.b64encode(little.tobytes()).decode("ascii"),
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


def emit_json(module: ModuleOp, symbol: str) -> tuple[dict, dict]:
    """The (Nodes-JSON, Constants-JSON) documents of the region function `symbol`.

    `module` holds `mrvl` dialect functions; the function named `symbol` is emitted (if there
    is no such function but exactly one, that one is, under the name `symbol`). Raises
    `CompileError` for an op that has no Nodes-JSON form.
    """
    return _Emitter(_find_function(module, symbol), symbol).run()


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _validator(path: Path) -> Draft202012Validator:
    schema = json.loads(path.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def nodes_schema() -> dict:
    return _validator(NODES_SCHEMA).schema


def consts_schema() -> dict:
    return _validator(CONSTS_SCHEMA).schema


def _json_path(parts: Iterable[Any]) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _node_context(doc: Any, parts: list[Any]) -> str:
    """`(Conv2D 'tvmgen_mrvl_main_0')` for a path inside a node, to find it in a big file."""
    if len(parts) < 2 or parts[0] != "nodes" or not isinstance(parts[1], int):
        return ""
    try:
        node = doc["nodes"][parts[1]]
        layer = node["attrs"]["layer_name"][0]
        return f" ({layer} '{node['name']}')"
    except (KeyError, IndexError, TypeError):
        return ""


def _schema_messages(validator: Draft202012Validator, doc: Any) -> list[str]:
    messages = []
    errors = sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors:
        parts = list(error.absolute_path)
        messages.append(f"{_json_path(parts)}{_node_context(doc, parts)}: {error.message}")
    return messages


def _structure_messages(doc: dict) -> list[str]:
    """What the schema cannot say: indices in range, counts agree, nodes in order."""
    messages = []
    nodes = doc["nodes"]
    inputs = [i for i, n in enumerate(nodes) if n["op"] == "input"]
    if inputs != list(range(len(inputs))):
        messages.append("$.nodes: input nodes must come first")
    if doc["arg_nodes"] != inputs:
        messages.append(f"$.arg_nodes: {doc['arg_nodes']} are not the input nodes {inputs}")
    if doc["num_subgraph_inputs"] != str(len(doc["arg_nodes"])):
        messages.append("$.num_subgraph_inputs: does not match the number of arg_nodes")
    if doc["num_subgraph_outputs"] != str(len(doc["heads"])):
        messages.append("$.num_subgraph_outputs: does not match the number of heads")
    for i, n in enumerate(nodes):
        if n["op"] == "input":
            if n["input_id"] != [str(i)]:
                messages.append(f"$.nodes[{i}].input_id: must be ['{i}']")
            continue
        for j, (src, _, _) in enumerate(n["inputs"]):
            if src >= i:
                messages.append(
                    f"$.nodes[{i}].inputs[{j}]{_node_context(doc, ['nodes', i])}: node {src} "
                    "is not an earlier node"
                )
        k = i - len(inputs) + 1
        if n["attrs"]["mrvl_nodes_idx"] != [k]:
            messages.append(f"$.nodes[{i}].attrs.mrvl_nodes_idx: must be [{k}]")
        if n["name"] != f"{NODE_NAME_PREFIX}_{k - 1}":
            messages.append(f"$.nodes[{i}].name: must be '{NODE_NAME_PREFIX}_{k - 1}'")
        attrs = n["attrs"]
        if attrs["shape"][0] != [int(d) for d in attrs["out_layout_shape"]]:
            messages.append(f"$.nodes[{i}].attrs.out_layout_shape: does not match shape")
        for key in ("kernel", "bias"):
            ref, name = attrs.get(f"{key}_const"), attrs.get(f"{key}_const_name")
            if name is not None and (not ref or ref.get("name") != name[0]):
                messages.append(
                    f"$.nodes[{i}].attrs.{key}_const{_node_context(doc, ['nodes', i])}: "
                    f"name does not match {key}_const_name {name}"
                )
    for j, (src, _, _) in enumerate(doc["heads"]):
        if src >= len(nodes):
            messages.append(f"$.heads[{j}]: node {src} does not exist ({len(nodes)} nodes)")
    shapes, dtypes = doc["attrs"]["shape"][1], doc["attrs"]["dltype"][1]
    if shapes != [n["attrs"]["shape"][0] for n in nodes]:
        messages.append("$.attrs.shape: does not list the nodes' shapes in order")
    if dtypes != [n["attrs"]["dtype"][0] for n in nodes]:
        messages.append("$.attrs.dltype: does not list the nodes' dtypes in order")
    return messages


_ITEMSIZE = {"float32": 4, "float16": 2, "int8": 1}


def check_nodes(doc: Any) -> list[str]:
    """Everything wrong with a Nodes-JSON document (empty list: valid)."""
    messages = _schema_messages(_validator(NODES_SCHEMA), doc)
    return messages or _structure_messages(doc)


def check_consts(doc: Any) -> list[str]:
    """Everything wrong with a Constants-JSON document (empty list: valid)."""
    messages = _schema_messages(_validator(CONSTS_SCHEMA), doc)
    if messages:
        return messages
    for name, entry in doc.items():
        where = f"$[{json.dumps(name)}]"
        try:
            data = base64.b64decode(entry["data_base64"], validate=True)
        except (binascii.Error, ValueError) as err:
            messages.append(f"{where}.data_base64: not base64: {err}")
            continue
        expected = math.prod(entry["shape"]) * _ITEMSIZE[entry["dtype"]]
        if len(data) != expected:
            messages.append(
                f"{where}.data_base64: {len(data)} bytes, but shape {entry['shape']} of "
                f"{entry['dtype']} needs {expected}"
            )
        lo, hi = float(entry["min"]), float(entry["max"])
        if lo > hi:
            messages.append(f"{where}: min {entry['min']} is greater than max {entry['max']}")
    return messages


def check_pair(nodes: Any, consts: Any) -> list[str]:
    """Both documents, and every constant a node names is in the Constants-JSON as described."""
    messages = check_nodes(nodes) + check_consts(consts)
    if messages:
        return messages
    for i, node in enumerate(nodes["nodes"]):
        for key in CONST_MAPS:
            ref = node.get("attrs", {}).get(key)
            if not ref:
                continue
            where = f"$.nodes[{i}].attrs.{key}{_node_context(nodes, ['nodes', i])}"
            entry = consts.get(ref["name"])
            if entry is None:
                messages.append(f"{where}: constant '{ref['name']}' is not in the Constants-JSON")
                continue
            for field in ("shape", "dtype", "min", "max"):
                if field in ref and ref[field] != entry[field]:
                    messages.append(
                        f"{where}.{field}: {ref[field]!r} but the Constants-JSON has "
                        f"{entry[field]!r}"
                    )
    return messages


def _raise(what: str, messages: list[str]) -> None:
    if messages:
        shown = messages[:_MAX_MESSAGES]
        more = len(messages) - len(shown)
        tail = f"\n  ... and {more} more" if more > 0 else ""
        raise CompileError(f"invalid {what}:\n  " + "\n  ".join(shown) + tail)


def validate_nodes(doc: Any) -> None:
    """Raise `CompileError` listing every problem of a Nodes-JSON document."""
    _raise("Nodes-JSON", check_nodes(doc))


def validate_consts(doc: Any) -> None:
    """Raise `CompileError` listing every problem of a Constants-JSON document."""
    _raise("Constants-JSON", check_consts(doc))


def validate(nodes: Any, consts: Any) -> None:
    """Raise `CompileError` unless both documents are valid and agree on the constants."""
    _raise("Nodes-JSON / Constants-JSON pair", check_pair(nodes, consts))


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def write_json(
    outdir: str | Path, symbol: str, nodes: dict, consts: dict, *, check: bool = True
) -> tuple[Path, Path]:
    """Write `<symbol>-nodes.json` and `<symbol>-consts.json` (upstream's names) into `outdir`.

    With `check` (the default) both documents are validated first and nothing is written if
    they are not valid.
    """
    if not symbol or "/" in symbol or "\\" in symbol:
        raise CompileError(f"write_json: '{symbol}' cannot be used in a file name")
    if check:
        validate(nodes, consts)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    path_nodes = out / f"{symbol}-nodes.json"
    path_consts = out / f"{symbol}-consts.json"
    with path_nodes.open("w") as f:
        json.dump(nodes, f, indent=2)
        f.write("\n")
    with path_consts.open("w") as f:
        json.dump(consts, f, indent=2)
        f.write("\n")
    return path_nodes, path_consts
