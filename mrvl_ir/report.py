"""The partition report: every ONNX node, where it runs, why not on the MLIP, and its MACs.

    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(model)))
    print(report)                       # a table, then a summary line
    report.rows[0].target               # "mrvl_region_0", "cpu" or "folded"
    report.offloaded_mac_fraction       # MACs in regions / all MACs

Targets and MACs are read from the spans `mrvl.from_onnx` puts on every call; the reasons
come from the checks that rejected a node while `partition_for_mrvl` ran (the module
attribute `mrvl.partition_reasons`). A node the checks never looked at is an unsupported op.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import onnx
import tvm
from tvm import relax

from .frontend import node_name_of, onnx_node_name, onnx_nodes_of
from .partition import FORCED_REASONS, LAYER_OPS, int8_nodes, partition_reasons
from .placement import CPU, FOLDED, calls_by_function

__all__ = ["CPU", "FOLDED", "PartitionReport", "ReportRow", "call_macs", "partition_report"]

FOLDED_REASON = "no runtime op (folded away by TVM)"

# ONNX ops that become another Relax op at another rank: the reason is the rank.
_RANK_OF_OP = {
    "Conv": {"relax.nn.conv3d": 5},
    "MaxPool": {"relax.nn.max_pool1d": 3, "relax.nn.max_pool3d": 5},
    "AveragePool": {"relax.nn.avg_pool1d": 3, "relax.nn.avg_pool3d": 5},
}

# ONNX ops the MLIP runs only as part of another layer.
_FUSED_ONLY = {
    "Pad": "a conv",
}
"""Ops the MLIP runs only as part of a layer (Relu, Clip, LeakyRelu and BatchNormalization
also run alone, as a scale_shift layer)."""


@dataclass(frozen=True)
class ReportRow:
    node: str
    op_type: str
    target: str  # a region symbol, "cpu", or "folded" (no runtime op left)
    reason: str | None  # why the node is not on the MLIP; None when it is
    macs: int  # multiply-accumulates: conv N·OH·OW·O·KH·KW·C/groups, matmul N·K·O, else 0
    dtype: str | None = None  # "int8" or "float16" on the MLIP, None on the CPU or folded

    @property
    def offloaded(self) -> bool:
        return self.target not in (CPU, FOLDED)


@dataclass(frozen=True)
class PartitionReport:
    rows: list[ReportRow]

    @property
    def total_macs(self) -> int:
        return sum(row.macs for row in self.rows)

    @property
    def offloaded_macs(self) -> int:
        return sum(row.macs for row in self.rows if row.offloaded)

    @property
    def offloaded_mac_fraction(self) -> float:
        """The fraction of the model's MACs that run on the MLIP (0.0 for a model with none)."""
        total = self.total_macs
        return self.offloaded_macs / total if total else 0.0

    @property
    def int8_macs(self) -> int:
        """MACs of the layers that run in int8 on the MLIP."""
        return sum(row.macs for row in self.rows if row.dtype == "int8")

    @property
    def int8_mac_fraction(self) -> float:
        """The fraction of the model's MACs that run in int8 on the MLIP."""
        total = self.total_macs
        return self.int8_macs / total if total else 0.0

    @property
    def regions(self) -> list[str]:
        return list(dict.fromkeys(row.target for row in self.rows if row.offloaded))

    def on_cpu(self) -> list[ReportRow]:
        return [row for row in self.rows if row.target == CPU]

    def summary(self) -> str:
        offloaded = sum(row.offloaded for row in self.rows)
        int8 = f", {100 * self.int8_mac_fraction:.1f} % in int8" if self.int8_macs else ""
        return (
            f"{offloaded} of {len(self.rows)} ONNX nodes on the MLIP in "
            f"{len(self.regions)} region(s), {len(self.on_cpu())} on the CPU; "
            f"{self.offloaded_macs:,} of {self.total_macs:,} MACs "
            f"({100 * self.offloaded_mac_fraction:.1f} %) on the MLIP{int8}"
        )

    def __str__(self) -> str:
        from tabulate import tabulate

        table = [
            (r.node, r.op_type, r.target, r.dtype or "", f"{r.macs:,}" if r.macs else "")
            + (r.reason or "",)
            for r in self.rows
        ]
        headers = ["ONNX node", "op", "runs on", "dtype", "MACs", "why not on the MLIP"]
        return tabulate(table, headers=headers, disable_numparse=True) + "\n" + self.summary()


def partition_report(mod: tvm.IRModule, model: onnx.ModelProto | None = None) -> PartitionReport:
    """The report of a module made by `partition_for_mrvl`.

    `model` is the ONNX model the module came from; without it, the nodes `mrvl.from_onnx`
    recorded on the module (`mrvl.onnx_nodes`) are used.
    """
    if model is not None:
        nodes = [(onnx_node_name(n), n.op_type) for n in model.graph.node]
    else:
        recorded = onnx_nodes_of(mod)
        if recorded is None:
            raise ValueError(
                "the module does not record its ONNX nodes (it was not made by "
                "mrvl.from_onnx): pass the ONNX model"
            )
        nodes = list(recorded.items())

    targets: dict[str, str] = {}
    macs: dict[str, int] = defaultdict(int)
    cpu_ops: dict[str, list[str]] = defaultdict(list)
    for target, calls in calls_by_function(mod):
        for call in calls:
            name = node_name_of(call)
            if name is None:
                continue
            targets.setdefault(name, target)
            macs[name] += call_macs(call)
            if target == CPU and isinstance(call.op, tvm.ir.Op):
                cpu_ops[name].append(call.op.name)

    reasons = partition_reasons(mod)
    int8 = int8_nodes(mod)
    rows = []
    for name, op_type in nodes:
        target = targets.get(name, FOLDED)
        if target == CPU:
            reason = _cpu_reason(op_type, reasons.get(name), cpu_ops[name])
        elif target == FOLDED:
            reason = reasons.get(name, FOLDED_REASON)
        else:
            reason = None
        dtype = None if reason is not None or target in (CPU, FOLDED) else "float16"
        if dtype is not None and name in int8:
            dtype = "int8"
        rows.append(ReportRow(name, op_type, target, reason, macs.get(name, 0), dtype))
    return PartitionReport(rows)


def _cpu_reason(op_type: str, recorded: str | None, relax_ops: list[str]) -> str:
    """Why a node stays on the CPU.

    A user's deny comes first. Then a Relax op no layer contains: the node cannot be offloaded
    whatever the checks said about its helper ops (an opset-11 Softmax is reshape, softmax,
    reshape; the reshape's check is beside the point). Then what a check recorded. A node no
    check looked at is an unsupported op, or one the MLIP runs only fused into a layer.
    """
    if recorded in FORCED_REASONS:
        return recorded
    ranks = _RANK_OF_OP.get(op_type, {})
    for op in relax_ops:
        if op in ranks:
            return f"rank {ranks[op]}"
    if recorded is not None and all(op in LAYER_OPS for op in relax_ops):
        return recorded
    if op_type in _FUSED_ONLY and all(op in LAYER_OPS for op in relax_ops):
        return f"unsupported op {op_type} (runs on the MLIP only fused into {_FUSED_ONLY[op_type]})"
    return f"unsupported op {op_type}"


def _shape(expr) -> tuple[int, ...] | None:
    ty = getattr(expr, "ty", None)
    dims = getattr(getattr(ty, "shape", None), "values", None)
    if dims is None or not all(isinstance(d, tvm.tirx.IntImm) for d in dims):
        return None
    return tuple(int(d) for d in dims)


def call_macs(call: relax.Call) -> int:
    """Multiply-accumulates of one call: convolutions and matmuls; 0 for anything else.

    A convolution does, for each output element, one MAC per weight of one output channel:
    prod(out) · prod(W) / O (= N·OH·OW·O · KH·KW·C/groups). A transposed convolution does, for
    each input element, one per weight of one input channel. A matmul does prod(out) · K.
    Unknown (dynamic) shapes count 0.
    """
    op = getattr(call.op, "name", None)
    if op in ("relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv3d"):
        out, weight = _shape(call), _shape(call.args[1])
        if out is None or weight is None:
            return 0
        o_axis = str(call.attrs.kernel_layout).index("O")
        return math.prod(out) * math.prod(weight) // max(weight[o_axis], 1)
    if op in ("relax.nn.conv1d_transpose", "relax.nn.conv2d_transpose"):
        data, weight = _shape(call.args[0]), _shape(call.args[1])
        if data is None or weight is None:
            return 0
        i_axis = str(call.attrs.kernel_layout).index("I")
        return math.prod(data) * math.prod(weight) // max(weight[i_axis], 1)
    if op == "relax.matmul":
        out, lhs = _shape(call), _shape(call.args[0])
        if out is None or not lhs:
            return 0
        return math.prod(out) * lhs[-1]
    return 0
