"""A constant operand of an int8 elementwise layer (issue 20, for issue 21's transformers): the
bias Add that follows a MatMul in a QDQ ViT or BERT, `DequantizeLinear(int8 bias) + x`, which
`mrvl.binary` reads as data in fp16 (`constant_operands.py`).

A QDQ model writes such a constant as the dequantize of an int8 tensor with one scale and
zero point; the frontend folds it to floats (`qdq.fold_constant_call`) and remembers its
origin. A pattern records that origin on the composite (`constant_quant_attrs`, the
attribute `mrvl.constant_quant`), the importer puts it on the `mrvl.constant` it makes
(`with_constant_quant`), and `mrvl-fold-qdq` makes the add int8: the constant's int8 values,
broadcast to the result's shape, are the second operand of a `qadd`
(`passes/graph/fold_qdq_constant_add.py`)."""

from __future__ import annotations

import numpy as np
from tvm.ir.expr import GenericConst
from xdsl.ir import SSAValue

from mrvl import qdq
from mrvl.dialects import mrvl
from mrvl.pattern_checks import current_collector

CONSTANT_QUANT_ATTR = mrvl.CONSTANT_QUANT_ATTR
"""Composite attribute ("scale,zero_point") and attribute of the `mrvl.constant` it reaches
(`mrvl.ConstantOp.quant`): the int8 tensor (one scale and zero point) a constant operand
dequantizes."""

INT8_CONSTANT_OPS = ("relax.add",)
"""Elementwise ops whose int8 form takes a constant operand (the int8 `add`)."""


def per_tensor_int8(origin: qdq.QuantizedConstant | None) -> qdq.TensorQuant | None:
    """The (scale, zero point) of a constant that dequantizes an int8 or uint8 tensor with
    one of each (uint8 as int8, its zero point moved by 128), else None."""
    if origin is None or origin.dtype not in qdq.ACTIVATION_DTYPES:
        return None
    if origin.scale.size != 1 or origin.zero_point.size != 1:
        return None
    shift = 128 if origin.dtype == "uint8" else 0
    scale = float(np.float32(origin.scale.reshape(())))
    return qdq.TensorQuant(scale, int(origin.zero_point.reshape(())) - shift)


def constant_quant_attrs(annotated) -> dict[str, str]:
    """`mrvl.constant_quant` for a `mrvl.binary` add whose constant operand dequantizes a
    per-tensor int8 tensor (`qdq.quantized_constants`), else nothing."""
    collector = current_collector()
    root = annotated.get("root")
    if collector is None or not collector.quantized or qdq._op(root) not in INT8_CONSTANT_OPS:
        return {}
    consts = [a for a in root.args if isinstance(a, GenericConst)]
    if len(consts) != 1:
        return {}
    quant = per_tensor_int8(collector.quantized.get(consts[0]))
    if quant is None:
        return {}
    return {CONSTANT_QUANT_ATTR: f"{quant.scale!r},{quant.zero_point}"}


def with_constant_quant(result: SSAValue, attrs) -> SSAValue:
    """`result` of an imported composite, the `mrvl.constant` operand of its `mrvl.binary`
    told which int8 tensor it dequantizes, when `attrs` say so."""
    if attrs is None or CONSTANT_QUANT_ATTR not in attrs:
        return result
    scale, zero = str(attrs[CONSTANT_QUANT_ATTR]).split(",")
    layer = result.owner
    if not isinstance(layer, mrvl.BinaryOp):
        return result
    for operand in (layer.lhs, layer.rhs):
        if isinstance(operand.owner, mrvl.ConstantOp):
            operand.owner.attributes[CONSTANT_QUANT_ATTR] = mrvl.QuantAttr(
                float(np.float32(scale)), int(zero)
            )
    return result
