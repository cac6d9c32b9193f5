"""mrvl-verify-int8: every layer the partition called int8 computes in int8 after mrvl-fold-qdq.

The partition reports a quantized layer as int8 when its QDQ form passes
`qdq_match.check_match`, and lists it in the region's `mrvl.int8_nodes`; `mrvl-fold-qdq` must
then fold it onto int8 tensors. Where the two disagree, the layer silently runs in fp16 while
the report says int8: two such bugs were a rank-3 Sigmoid whose reshape hid it from the table
fold, and rank-5 layers whose quantize ran on the CPU. This pass checks that they agree: no op
located at an int8 node has a float result, but the edges of int8 code (a quantize reads
float, a dequantize makes it) and constants. A violation is a bug in mrvl, reported as an
internal error naming the layer, its ONNX node and the region.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation

from mrvl.dialects import mrvl
from mrvl.errors import InternalCompilerError
from mrvl.locations import location_name
from mrvl.passes.common import MrvlModulePass

INT8_NODES_ATTR = "mrvl.int8_nodes"
"""Attribute of a region (its Relax function, and its `builtin.module` once imported): the
ONNX nodes in it that the partition reported as int8."""

EDGE_OPS = (mrvl.QuantizeOp, mrvl.DequantizeOp, mrvl.ConstantOp)
"""Ops at an int8 node that may hold floats: the edges of int8 code, and (unused after the
fold, or read by an int8 layer as its integers) constants."""


def int8_nodes_attribute(names: Iterable[str]) -> ArrayAttr:
    """The module attribute naming a region's int8 nodes."""
    return ArrayAttr([StringAttr(n) for n in sorted(names)])


MOVE_OPS = (mrvl.LayoutConvertOp, mrvl.ReshapeOp, mrvl.StridedCopyOp)


def _computes_in_float(op: Operation) -> bool:
    return any(
        isinstance(r.type, TensorType) and not mrvl.is_int8(r) and not mrvl.is_int32(r)
        for r in op.results
    )


def _moves_at_edge(op: Operation) -> bool:
    """A float move whose moves lead only to quantizes, or back to a dequantize: the layer's
    own view of a region input or output, moved across the edge (exact in any precision)."""
    if not isinstance(op, MOVE_OPS):
        return False
    source = op.operands[0].owner
    while isinstance(source, MOVE_OPS):
        source = source.operands[0].owner
    return isinstance(source, mrvl.DequantizeOp) or _feeds_only_quantizes(op)


def _feeds_only_quantizes(op: Operation) -> bool:
    return all(
        isinstance(use.operation, mrvl.QuantizeOp)
        or (isinstance(use.operation, MOVE_OPS) and _feeds_only_quantizes(use.operation))
        for use in op.results[0].uses
    )


def int8_violations(module: ModuleOp) -> list[tuple[str, Operation]]:
    """(region, op) for each op of an int8 node that computes in float, in program order."""
    names = module.attributes.get(INT8_NODES_ATTR)
    if not isinstance(names, ArrayAttr) or not names.data:
        return []
    int8 = {n.data for n in names.data if isinstance(n, StringAttr)}
    found = []
    for fn in module.ops:
        if not isinstance(fn, func.FuncOp):
            continue
        for op in fn.walk():
            if (
                location_name(op.location) in int8
                and not isinstance(op, EDGE_OPS)
                and _computes_in_float(op)
                and not _moves_at_edge(op)
            ):
                found.append((fn.sym_name.data, op))
    return found


def check_int8_nodes(module: ModuleOp) -> None:
    """Raise `InternalCompilerError` for the first op of an int8 node that computes in float."""
    found = int8_violations(module)
    if not found:
        return
    region, op = found[0]
    node = location_name(op.location)
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    raise InternalCompilerError(
        f"region {region}: {op.name} at {node} was reported int8 by the partition but "
        f"computes in float ({op.results[0].type}) after mrvl-fold-qdq{more}",
        node,
    )


@dataclass(frozen=True)
class VerifyInt8Pass(MrvlModulePass):
    name = "mrvl-verify-int8"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_int8_nodes(op)
