"""mrvl-cast-fp16: run the region in fp16, as the MLIP computes.

Weights, and constants that layers read as data (in an activation layout:
`mrvl.DATA_LAYOUTS`), become f16 constants (biases stay f32: the MAC array adds them to its fp32
accumulator), every layer's result type becomes f16 (argmax's indices stay exact f32), and
`mrvl.cast` ops convert at the region boundary, where TVM hands over and takes back f32.

int8 code is left as it is (its types are i8 and i32), and so is the f32 of its edges that
ONNX computes in f32: what only quantizes read (a region input, through layout changes) and
what a dequantize makes for the region's result. Rounding either to f16 would change the
int8 values or the outputs that QuantizeLinear / DequantizeLinear define.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Float32Type, ModuleOp, TensorType, f16
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from mrvl.dialects import mrvl
from mrvl.passes.common import MrvlModulePass

WEIGHT_LAYOUTS = ("OHWI", "OI")


def _as_f16(t: TensorType) -> TensorType:
    return TensorType(f16, t.get_shape(), t.encoding)


@dataclass(frozen=True)
class CastFp16Pass(MrvlModulePass):
    name = "mrvl-cast-fp16"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for fn in op.walk():
            if isinstance(fn, func.FuncOp) and fn.body.blocks:
                self._cast_function(fn)

    def _cast_function(self, fn: func.FuncOp) -> None:
        block = fn.body.block
        for arg in block.args:
            if not isinstance(mrvl.element_type_of(arg), Float32Type) or _only_quantized(arg):
                continue
            first_user = next(iter(arg.uses), None)
            cast = mrvl.CastOp(arg, f16)
            if first_user is not None:
                cast.location = first_user.operation.location
            Rewriter.insert_op(cast, InsertPoint.at_start(block))
            arg.replace_uses_with_if(cast.output, lambda use: use.operation is not cast)
        for op in list(block.ops):
            if isinstance(op, mrvl.ConstantOp):
                weight = mrvl.layout_of(op.result) in WEIGHT_LAYOUTS
                as_f16 = weight or mrvl.is_data_constant(op.result)
                if as_f16 and op.numpy().dtype == np.float32:
                    new = mrvl.ConstantOp(
                        op.const_name.data,
                        op.numpy().astype(np.float16),
                        mrvl.layout_of(op.result),
                    )
                    new.location = op.location
                    Rewriter.replace_op(op, new)
            elif isinstance(op, func.ReturnOp):
                declared = fn.function_type.outputs.data
                for i, (value, want) in enumerate(zip(op.arguments, declared)):
                    if value.type == want:
                        continue
                    cast = mrvl.CastOp(value, mrvl.element_type_of(want))
                    cast.location = value.owner.location
                    Rewriter.insert_op(cast, InsertPoint.before(op))
                    op.operands[i] = cast.output
            elif any(mrvl.holds_indices(r) for r in op.results):
                continue  # argmax's indices and their moves: exact f32 values, not f16
            elif op.name.startswith("mrvl.") and not isinstance(op, mrvl.CastOp):
                for result in op.results:
                    if (
                        isinstance(result.type, TensorType)
                        and isinstance(result.type.element_type, Float32Type)
                        and not _f32_move_into_quantize(op)
                        and not (isinstance(op, mrvl.DequantizeOp) and _only_returned(result))
                    ):
                        Rewriter.replace_value_with_new_type(result, _as_f16(result.type))


_MOVES = (mrvl.LayoutConvertOp, mrvl.ReshapeOp)


def _only_quantized(value: SSAValue) -> bool:
    """Whether only quantizes read `value`, directly or through layout changes."""
    uses = list(value.uses)
    return bool(uses) and all(
        isinstance(u.operation, mrvl.QuantizeOp)
        or (isinstance(u.operation, _MOVES) and _only_quantized(u.operation.results[0]))
        for u in uses
    )


def _f32_move_into_quantize(op) -> bool:
    """A layout change of f32 data (a region input) that only quantizes read."""
    return (
        isinstance(op, _MOVES)
        and isinstance(mrvl.element_type_of(op.input), Float32Type)
        and _only_quantized(op.results[0])
    )


def _only_returned(value: SSAValue) -> bool:
    uses = list(value.uses)
    return bool(uses) and all(isinstance(u.operation, func.ReturnOp) for u in uses)
