"""Where each ONNX node runs after partitioning: in which MLIP region, or on the CPU.

Read from the spans `mrvl.from_onnx` puts on every call: a call inside a `Codegen="mrvl"`
function runs on the MLIP, one in any other function on the CPU. A node with no call left
(folded into a constant, or producing a shape) is reported as `folded`.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
import tvm
from tvm import relax

from mrvl.frontend import node_name_of

CPU = "cpu"
FOLDED = "folded"


@dataclass(frozen=True)
class Placement:
    node: str
    op_type: str
    target: str  # a region symbol, "cpu" or "folded"


def _names_in(func: relax.Function) -> list[str]:
    names: list[str] = []

    def visit(expr) -> None:
        if isinstance(expr, relax.Call) and (name := node_name_of(expr)):
            names.append(name)

    relax.analysis.post_order_visit(func, visit)
    return names


def node_targets(mod: tvm.IRModule) -> dict[str, str]:
    """ONNX node name -> region symbol or "cpu", from a partitioned module."""
    targets: dict[str, str] = {}
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function):
            continue
        attrs = func.attrs if func.attrs is not None else {}
        where = gv.name_hint if "Codegen" in attrs and str(attrs["Codegen"]) == "mrvl" else CPU
        for name in _names_in(func):
            # a node with calls on both sides counts as offloaded: its core ran on the MLIP
            if where != CPU or name not in targets:
                targets[name] = where
    return targets


def placement(mod: tvm.IRModule, model: onnx.ModelProto) -> list[Placement]:
    """One row per ONNX node of `model`, in graph order."""
    targets = node_targets(mod)
    return [
        Placement(n.name, n.op_type, targets.get(n.name, FOLDED)) for n in model.graph.node
    ]
