"""Where each ONNX node runs after partitioning: in which MLIP region, or on the CPU.

Read from the spans `mrvl.from_onnx` puts on every call: a call inside a `Codegen="mrvl"`
function runs on the MLIP, one in any other function on the CPU. A node with no call left
(folded into a constant, or an identity) is reported as `folded`. `mrvl.partition_report`
builds on this and adds why, and how many MACs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import onnx
import tvm
from tvm import relax

from .frontend import node_name_of, onnx_node_name

CPU = "cpu"
FOLDED = "folded"


@dataclass(frozen=True)
class Placement:
    node: str
    op_type: str
    target: str  # a region symbol, "cpu" or "folded"


def is_region(func) -> bool:
    """A region function of the MLIP codegen."""
    return (
        isinstance(func, relax.Function)
        and func.attrs is not None
        and "Codegen" in func.attrs
        and str(func.attrs["Codegen"]) == "mrvl"
    )


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def calls_by_function(mod: tvm.IRModule):
    """(target, calls) for each Relax function: target is its symbol for a region, else "cpu".

    Regions come first, in numeric order of their names. Composite functions at module level
    (a module fused but not merged) belong to no target and are skipped.
    """
    funcs = []
    for gv, func in mod.functions_items():
        if not isinstance(func, relax.Function):
            continue
        if func.attrs is not None and "Composite" in func.attrs:
            continue
        funcs.append((gv.name_hint if is_region(func) else CPU, func))
    funcs.sort(key=lambda item: (item[0] == CPU, _natural(item[0])))
    for target, func in funcs:
        calls: list[relax.Call] = []

        def visit(expr, calls=calls) -> None:
            if isinstance(expr, relax.Call):
                calls.append(expr)

        relax.analysis.post_order_visit(func, visit)
        yield target, calls


def node_targets(mod: tvm.IRModule) -> dict[str, str]:
    """ONNX node name -> region symbol or "cpu", from a partitioned module.

    A node with calls on both sides counts as offloaded (its core ran on the MLIP); a node in
    several regions is reported in the first.
    """
    targets: dict[str, str] = {}
    for target, calls in calls_by_function(mod):
        for call in calls:
            name = node_name_of(call)
            if name is not None:
                targets.setdefault(name, target)
    return targets


def placement(mod: tvm.IRModule, model: onnx.ModelProto) -> list[Placement]:
    """One row per ONNX node of `model`, in graph order."""
    targets = node_targets(mod)
    return [
        Placement(onnx_node_name(n), n.op_type, targets.get(onnx_node_name(n), FOLDED))
        for n in model.graph.node
    ]
