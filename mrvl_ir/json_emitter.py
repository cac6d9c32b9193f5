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
from mrvl.json_nodes import NODE_BUILDERS, LayerNodes, _float_str, _strs, quant_attrs
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


class _Emitter(LayerNodes):
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
        node_attrs.update(quant_attrs(op))
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
