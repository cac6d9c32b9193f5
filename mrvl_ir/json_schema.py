"""The Nodes-JSON and Constants-JSON schemas, and the checks of a document against them.

`check_nodes` / `check_consts` / `check_pair` return a list of messages (empty when the
document is valid), each prefixed with a JSON path (`$.nodes[1].attrs.padding: ...`);
`validate_nodes` / `validate_consts` / `validate` raise `CompileError` with those messages.
The schemas are `schemas/nodes.schema.json` and `schemas/consts.schema.json` (draft 2020-12);
the checks here add what a schema cannot say (indices in range, counts that agree, the data
length of each constant). The documents themselves are described in `json_emitter`.
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

from jsonschema import Draft202012Validator

from mrvl.errors import CompileError

SCHEMA_DIR = Path(__file__).parent / "schemas"
NODES_SCHEMA = SCHEMA_DIR / "nodes.schema.json"
CONSTS_SCHEMA = SCHEMA_DIR / "consts.schema.json"

NODE_NAME_PREFIX = "tvmgen_mrvl_main"
"""Upstream named every layer node `tvmgen_mrvl_main_<k>` (k from 0), whatever the region."""

CONST_MAPS = ("kernel_const", "bias_const", "beta_const", "gamma_const", "var_const", "mean_const")

_MAX_MESSAGES = 25


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


_ITEMSIZE = {"float32": 4, "float16": 2, "int8": 1, "int32": 4}


def check_nodes(doc: Any) -> list[str]:
    """Everything wrong with a Nodes-JSON document (empty list: valid)."""
    messages = _schema_messages(_validator(NODES_SCHEMA), doc)
    return messages or _structure_messages(doc)


def check_consts(doc: Any, *, data: bool = True) -> list[str]:
    """Everything wrong with a Constants-JSON document (empty list: valid).

    With `data=False` the `data_base64` strings are not decoded (a document about to be
    written by `json_files.write_region_json`, which streams them from the arrays)."""
    messages = _schema_messages(_validator(CONSTS_SCHEMA), doc)
    if messages:
        return messages
    for name, entry in doc.items():
        where = f"$[{json.dumps(name)}]"
        lo, hi = float(entry["min"]), float(entry["max"])
        if lo > hi:
            messages.append(f"{where}: min {entry['min']} is greater than max {entry['max']}")
        if not data:
            continue
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
    return messages


def check_pair(nodes: Any, consts: Any, *, data: bool = True) -> list[str]:
    """Both documents, and every constant a node names is in the Constants-JSON as described."""
    messages = check_nodes(nodes) + check_consts(consts, data=data)
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


def validate(nodes: Any, consts: Any, *, data: bool = True) -> None:
    """Raise `CompileError` unless both documents are valid and agree on the constants."""
    _raise("Nodes-JSON / Constants-JSON pair", check_pair(nodes, consts, data=data))
