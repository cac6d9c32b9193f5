"""One partition match (a would-be layer) in its QDQ neighbourhood: is it a quantized layer,
and can the MLIP run it in int8 (`check_match`)?

`FuseOpsByPattern` rebuilds the function after each pattern, so a check sees fresh variables
and calls: what produced a match's input, or what reads its result, can only be asked of the
module as partitioning found it. `ModuleIndex` finds each matched call's original there (by
its ONNX node, op and type) and answers from the original bindings.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import tvm_ffi
from tvm import relax
from tvm.ir.expr import GenericConst

from mrvl import qdq
from mrvl.qdq import (
    MAC_OPS,
    NOT_LOWERED,
    NotInt8,
    QuantizedConstant,
    QuantizedLayer,
    _op,
    bias_quant,
    check_quantized_io,
    quantized_form,
    weight_quant,
)
from mrvl.qdq_binary import constant_binary_in_fp16
from mrvl.qdq_float_activation import activation_before_pool, pool_after_activation
from mrvl.qdq_float_tail import reaches_no_quantize
from mrvl.qdq_layers import RANKS as QDQ_RANKS
from mrvl.qdq_reduce import reduce_in_fp16

QDQ_OPS = ("relax.quantize", "relax.dequantize")

MOVE_KINDS = frozenset({"reshape", "transpose", "copy", "concat"})
"""Layers that only move int8 values: in a chain through rank 5 or 6 their QDQ pairs are
dropped (`qdq_moves.py`), and a float result of theirs is exact."""


class ModuleIndex:
    """The original module's calls by ONNX node and op, and the variable each is bound to."""

    def __init__(self, bound: Mapping[relax.Var, relax.Expr]):
        from mrvl.frontend import node_name_of

        self.bound = bound
        self.var_of: dict[relax.Call, relax.Var] = {}
        self.by_node: dict[tuple[str | None, str | None], list[relax.Call]] = defaultdict(list)
        self.has_qdq = False
        for var, value in bound.items():
            if isinstance(value, relax.Call):
                self.var_of[value] = var
                self.by_node[(node_name_of(value), _op(value))].append(value)
                self.has_qdq = self.has_qdq or _op(value) in QDQ_OPS

    def original(self, call: relax.Call) -> relax.Call | None:
        """The call of the original module that `call` (from a match) is, if one is."""
        from mrvl.frontend import node_name_of

        candidates = [
            c
            for c in self.by_node.get((node_name_of(call), _op(call)), [])
            if tvm_ffi.structural_equal(c.ty, call.ty)
            and tvm_ffi.structural_equal(c.attrs, call.attrs)
        ]
        if len(candidates) > 1:  # a Split's equal parts: one op and type, other bounds
            candidates = [c for c in candidates if _same_fixed_args(c, call)]
        return candidates[0] if len(candidates) == 1 else None


def _same_fixed_args(a: relax.Call, b: relax.Call) -> bool:
    """Whether two calls have the same arguments but their variables (which a rebuilt
    function renames): a strided slice's axes, begins and ends, a constant operand."""
    return len(a.args) == len(b.args) and all(
        isinstance(x, relax.Var) or isinstance(y, relax.Var) or tvm_ffi.structural_equal(x, y)
        for x, y in zip(a.args, b.args)
    )


_INDEX: list = [None, None]
"""The bindings `module_index` last indexed, and their index."""


def module_index(bound: Mapping[relax.Var, relax.Expr]) -> ModuleIndex:
    if _INDEX[0] is not bound:
        _INDEX[:] = [bound, ModuleIndex(bound)]
    return _INDEX[1]


def _varies(arg) -> bool:
    """Whether `arg` is a constant holding more than one value (a per-channel parameter)."""
    if not isinstance(arg, GenericConst):
        return False
    values = qdq._view(arg).reshape(-1)
    return values.size > 1 and bool((values != values[0]).any())


AFFINE_OPS = frozenset(
    {"relax.multiply", "relax.add", "relax.subtract", "relax.nn.relu", "relax.clip"}
)
"""A per-channel affine with a ReLU or Clip: an int8 depthwise 1x1 conv
(`passes/graph/fold_qdq_affine.py`); other activations of per-channel steps are no table."""


def _int8_affine(calls: Sequence[relax.Call], inputs: Sequence[relax.Expr]) -> bool:
    """Whether a scale_shift with per-channel steps is an affine of an NCHW tensor or of an
    [N, C] one (and a ReLU or Clip), which runs in int8 as a depthwise conv."""
    rank = getattr(inputs[0].ty, "ndim", None) if len(inputs) == 1 else None
    return rank in (2, 4) and all(_op(c) in AFFINE_OPS for c in calls)


def _int8_subtract(calls: Sequence[relax.Call], inputs: Sequence[relax.Expr], at) -> bool:
    """Whether a `binary` match is a Sub of two int8 tensors of one shape, which runs as the
    `qadd` of the first and the second negated (`passes/graph/fold_qdq_sub.py`); a Sub that
    broadcasts is refused with its reason, other binary kinds are not int8."""
    if len(calls) != 1 or _op(calls[0]) != "relax.subtract":
        return False
    lhs, rhs = calls[0].args
    if len(inputs) != 2 or not tvm_ffi.structural_equal(lhs.ty, rhs.ty):
        raise NotInt8("int8 sub of two shapes (a broadcast) or of a tensor and itself", at)
    return True


def _constant_add_operand(calls: Sequence[relax.Call]) -> GenericConst | None:
    """The constant of a `binary` match that adds one constant to a tensor, else None."""
    from mrvl.qdq_constants import INT8_CONSTANT_OPS

    if len(calls) != 1 or _op(calls[0]) not in INT8_CONSTANT_OPS:
        return None
    consts = [a for a in calls[0].args if isinstance(a, GenericConst)]
    return consts[0] if len(consts) == 1 else None


def _int8_constant_add(calls: Sequence[relax.Call], quantized) -> bool:
    """Whether a `binary` match is an Add of an int8 tensor and a constant that dequantizes a
    per-tensor int8 one (a transformer's bias after its MatMul), which runs as the `qadd` of
    the tensor and the constant's int8 values (`passes/graph/fold_qdq_constant_add.py`)."""
    from mrvl.qdq_constants import per_tensor_int8

    const = _constant_add_operand(calls)
    return const is not None and per_tensor_int8(quantized.get(const)) is not None


def _moved_from_dequantize(value, bound) -> bool:
    """Whether `value` is a dequantize, or moves (`qdq_moves.MOVE_OPS`) of one."""
    from mrvl.qdq_moves import MOVE_OPS

    for _ in range(64):
        call = bound.get(value)
        if _op(call) == "relax.dequantize":
            return True
        if _op(call) not in MOVE_OPS:
            return False
        value = call.args[0]
    return False


def _moves_between_int8(inputs, result, dequantizes, quantizes, index: ModuleIndex) -> bool:
    """Whether a move layer (a copy, reshape, transpose) is part of a chain of moves from
    dequantized int8 values to further moves or to a quantize, without a QDQ pair of its own:
    its input dequantized and its result read only by moves, or its input moved from a
    dequantize and its result quantized."""
    from mrvl.qdq_moves import MOVE_OPS

    if result is None:
        return False
    users = [u for u in index.bound.values() if isinstance(u, relax.Call) and result in u.args]
    if dequantizes and not quantizes:
        return bool(users) and all(_op(u) in MOVE_OPS for u in users)
    if quantizes and not dequantizes:
        return all(_moved_from_dequantize(x, index.bound) for x in inputs)
    return False


def check_match(
    kind: str,
    matched: Sequence[relax.Call],
    root: relax.Expr,
    index: ModuleIndex,
    users: Mapping[relax.Var, list[relax.Call]],
    quantized: Mapping[GenericConst, QuantizedConstant],
) -> QuantizedLayer | None:
    """The match's quantized form, None for a float layer; `NotInt8` for a quantized layer
    the MLIP cannot run in int8 (or that this compiler does not lower yet)."""
    if not index.has_qdq or kind in ("quantize", "dequantize"):
        # a float model; or an edge of int8 code, not a layer between edges: a dequantize
        # read by a quantize (a folded Dropout or Identity between two QDQ pairs) is a pair
        # that `mrvl-fold-qdq` cancels or makes a requantize
        return None
    calls = [index.original(c) for c in matched]
    if any(c is None for c in calls) or index.original(root) is None:
        raise NotInt8("cannot tell this layer's calls in the model apart (QDQ model)", root)
    result = index.var_of.get(index.original(root))
    inner = {index.var_of.get(c) for c in calls}
    args = [  # a concat's inputs are the fields of its tuple
        f for c in calls for a in c.args for f in (a.fields if isinstance(a, relax.Tuple) else [a])
    ]
    inputs = list(dict.fromkeys(a for a in args if isinstance(a, relax.Var) and a not in inner))
    weights = [
        (c, c.args[1]) for c in calls if _op(c) in MAC_OPS and isinstance(c.args[1], GenericConst)
    ]
    has_quantized_const = any(
        isinstance(a, GenericConst) and a in quantized for c in calls for a in c.args
    )
    readers = lambda v: users.get(v, [])  # noqa: E731
    form = quantized_form(inputs, result, index.bound.get, readers)
    if form is None:
        if has_quantized_const:
            raise NotInt8("dequantized int8 weights in a float layer (no quantize around it)", root)
        return None
    dequantizes, quantizes = form
    if not quantizes and not has_quantized_const and reaches_no_quantize(result, index.bound):
        return None  # a float layer after the last quantize: fp16, as in the float model
    if activation_before_pool(kind, inputs, dequantizes, result, index, users) or (
        pool_after_activation(kind, inputs, result, quantizes, index, users)
    ):
        return None  # an activation and a pool left in float: fp16 between the edges
    if kind in MOVE_KINDS and _moves_between_int8(inputs, result, dequantizes, quantizes, index):
        # int8 values moved through a chain of moves split into several layers (ViT's q, k
        # and v sliced out of one rank-5 tensor, whose QDQ pairs `qdq_moves` dropped): exact
        # in float, and `mrvl-fold-qdq` moves them into int8
        return None
    rank = getattr(result.ty, "ndim", None) if result is not None else None
    if kind not in MOVE_KINDS and rank is not None and rank not in QDQ_RANKS:
        # the quantize of its result stays on the CPU (a region's int8 tensors are of rank 1
        # to 4): the layer would compute in fp16 and hand a float result to it
        raise NotInt8(f"its int8 result is of rank {rank}, quantized on the CPU", root)
    if weights and quantized.get(weights[0][1]) is None:
        return None  # float weights between int8 tensors: a layer kept in fp16 on purpose
    at = weights[0][0] if weights else root
    ins, out = check_quantized_io(
        inputs, result, dequantizes, quantizes, index.bound.get, readers, at
    )
    weight_scale: tuple[float, ...] = ()
    bias: tuple[int, ...] = ()
    if weights:
        call, weight = weights[0]
        axis = MAC_OPS[_op(call)]
        channels = int(weight.ty.shape[axis])
        s_w = weight_quant(quantized.get(weight), channels, axis, call)
        weight_scale = tuple(float(s) for s in s_w)
        biases = [
            a for c in calls if _op(c) == "relax.add" for a in c.args if isinstance(a, GenericConst)
        ]
        if biases:
            b = bias_quant(quantized.get(biases[0]), channels, ins[0].scale, s_w, call)
            bias = tuple(int(v) for v in b)
    if kind in qdq.FP16_BETWEEN_EDGES:
        return None  # dequant -> the fp16 layer -> quant, all on the MLIP: not an int8 layer
    if kind == "concat" and any(isinstance(a, GenericConst) for a in args):
        # a concat with a constant part (ViT's class token), which the int8 concat cannot
        # take: fp16 between the edges, exact for the int8 parts (|q|·2^-11 is below half a
        # step) and the constant quantized at the result's scale, as onnxruntime's Q does
        return None
    # an Add of an int8 constant is exact in int8; an op of a tensor and another constant
    # runs in fp16 between the edges where that is within its bound
    int8_binary = kind == "binary" and _int8_constant_add(calls, quantized)
    if kind == "binary" and not int8_binary and constant_binary_in_fp16(calls, ins, out):
        return None  # the same, for an op of a tensor and a constant (`qdq_binary.py`)
    if kind == "reduce" and reduce_in_fp16(calls, ins, out):
        return None  # the same, for a mean, max or min (`qdq_reduce.py`)
    int8_binary = int8_binary or (kind == "binary" and _int8_subtract(calls, inputs, at))
    if kind == "binary" and not int8_binary and _constant_add_operand(calls) is not None:
        raise NotInt8(
            "int8 add of a float constant or of one per channel, beyond fp16's one-step bound", at
        )
    if kind not in qdq.INT8_READY and not int8_binary:
        raise NotInt8(NOT_LOWERED.format(kind=kind), at)
    if (
        kind == "scale_shift"
        and any(_varies(a) for c in calls for a in c.args)
        and not _int8_affine(calls, inputs)
    ):
        raise NotInt8(
            "int8 per-channel scale, shift or slopes: an int8 table is one function of one value",
            at,
        )
    from mrvl.frontend import node_name_of

    edges = tuple(n for c in (*dequantizes, *quantizes) if (n := node_name_of(c)) is not None)
    return QuantizedLayer(tuple(ins), out, weight_scale, bias, edges)
