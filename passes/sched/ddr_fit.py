"""The first check of scheduling: every tensor of the graph fits the target's DDR.

A tensor larger than DDR can never be scheduled, and the tiling planner, asked to cut it,
searches plans for it at length (a conv over `tensor<1x65536x65536x64xf32>` grew the planner's
memory by 45 MB/s, issue 19). `sched-plan-tiling` calls this before it plans anything, so such
a graph gets one error naming the layer instead.
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import ModuleOp, TensorType

from mrvl.errors import CompileError
from mrvl.locations import location_name
from mrvl.target import Target


def element_bytes(element_type) -> int:
    """Bytes of one element: its bit width rounded up to bytes (8 for a type without one)."""
    width = getattr(element_type, "width", None) or getattr(element_type, "bitwidth", None)
    width = getattr(width, "data", width)
    return (int(width) + 7) // 8 if isinstance(width, int) else 8


def refuse_tensors_beyond_ddr(module: ModuleOp, target: Target) -> None:
    """A CompileError naming the first op whose operand or result is larger than DDR."""
    for op in module.walk():
        for value in (*op.operands, *op.results):
            t = value.type
            if not isinstance(t, TensorType):
                continue
            nbytes = math.prod(t.get_shape()) * element_bytes(t.element_type)
            if nbytes > target.ddr_bytes:
                where = location_name(op.location) or "no ONNX node"
                raise CompileError(
                    f"{op.name} ({where}): a tensor {t} of {nbytes} bytes is larger than "
                    f"{target.name}'s DDR ({target.ddr_bytes} bytes)"
                )
