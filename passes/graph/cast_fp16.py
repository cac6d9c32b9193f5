"""mrvl-cast-fp16: run the region in fp16, as the MLIP computes.

Weights become f16 constants (biases stay f32: the MAC array adds them to its fp32
accumulator), every layer's result type becomes f16 (argmax's indices stay exact f32), and
`mrvl.cast` ops convert at the region boundary, where TVM hands over and takes back f32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import Float32Type, ModuleOp, TensorType, f16
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
            if not isinstance(mrvl.element_type_of(arg), Float32Type):
                continue
            first_user = next(iter(arg.uses), None)
            cast = mrvl.CastOp(arg, f16)
            if first_user is not None:
                cast.location = first_user.operation.location
            Rewriter.insert_op(cast, InsertPoint.at_start(block))
            arg.replace_uses_with_if(cast.output, lambda use: use.operation is not cast)
        for op in list(block.ops):
            if isinstance(op, mrvl.ConstantOp):
                if mrvl.layout_of(op.result) in WEIGHT_LAYOUTS and op.numpy().dtype == np.float32:
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
                    if isinstance(result.type, TensorType) and isinstance(
                        result.type.element_type, Float32Type
                    ):
                        Rewriter.replace_value_with_new_type(result, _as_f16(result.type))
