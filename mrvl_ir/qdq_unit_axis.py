"""Rank-5 tensors of a QDQ model with a unit leading axis, computed at rank 4.

A region's int8 tensors are of rank 2 to 4 (`qdq_layers.RANKS`): a QuantizeLinear of a rank-5
tensor stays on the CPU, and so does every quantized layer that makes one. Exporters write
rank 5 where the leading axis is the batch of one: YOLOv5's decode (`[1, 3, 85, H, W]`,
transposed to `[1, 3, H, W, 85]`, Sigmoid, Split, Mul / Add / Pow with the anchor grids
`[1, 3, H, W, 2]`, Concat) and Swin's shifted-window mask Add (`[1, nW, heads, N, N]` plus a
constant `[1, nW, 1, N, N]`), each op with its QDQ pair.

`drop_unit_axis` rewrites such a group of rank-5 tensors, each of leading extent 1, to the
same ops on their rank-4 views (the same elements in the same order, the leading 1 dropped):
a Reshape to rank 5 reshapes to rank 4, a Transpose keeping axis 0 first permutes the other
four, an axis attribute moves down by one, a rank-5 constant loses its unit axis (and its
int8 origin, `qdq.QUANTIZED_ATTR`, follows), and a Reshape that reads the group reads the
view. Every element is computed by the same op from the same operands, so the model's
values are unchanged. Each call keeps its span, so the report names the original ONNX
nodes. A group is rewritten only when it holds an op other than a move (a QDQ pair or an
elementwise op: the rank-5 tensors the MLIP cannot quantize), every op of it is one of the
forms below, and only Reshapes read it from outside; a chain of moves alone is left to
`mrvl.copy` at rank 5 (ViT's q, k, v), and a float model is left as it is.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import GenericConst

from mrvl.pattern_checks import bound_values
from mrvl.qdq import QuantizedConstant, _op, _view, attach, quantized_constants

RANK = 5

UNARY_OPS = frozenset(
    {
        "relax.sigmoid", "relax.tanh", "relax.exp", "relax.nn.relu", "relax.clip",
        "relax.sqrt", "relax.erf", "relax.abs", "relax.negative", "relax.nn.gelu",
        "relax.nn.silu",
    }
)  # fmt: skip
"""Ops of one tensor whose result element depends only on the same element of it."""

BINARY_OPS = frozenset(
    {
        "relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.power",
        "relax.maximum", "relax.minimum",
    }
)  # fmt: skip
"""Elementwise ops of two operands that broadcast (numpy's rules: trailing axes aligned)."""

QDQ_OPS = frozenset({"relax.quantize", "relax.dequantize"})

AXIS_OPS = frozenset({"relax.split", "relax.concat", "relax.take"})
"""Ops with one `axis` attribute."""


def _unit_rank5(expr) -> bool:
    """Whether `expr` is a static tensor of rank 5 with leading extent 1, or a tuple of them."""
    ty = getattr(expr, "ty", None)
    if isinstance(ty, relax.TupleType):
        return len(ty.fields) > 0 and all(_unit_rank5_type(t) for t in ty.fields)
    return _unit_rank5_type(ty)


def _unit_rank5_type(ty) -> bool:
    shape = getattr(getattr(ty, "shape", None), "values", None)
    return (
        shape is not None
        and len(shape) == RANK
        and all(isinstance(d, tvm.tirx.IntImm) for d in shape)
        and int(shape[0]) == 1
    )


def _static(shape) -> list[int]:
    return [int(d) for d in shape]


def _axis(value, rank: int = RANK) -> int:
    return int(value) % rank


def _const_operand(arg) -> bool:
    """Whether a binary op's operand `arg` keeps its meaning against the rank-4 view: a
    constant of rank below 5 (it broadcasts against the trailing axes either way) or of rank 5
    with a unit leading axis."""
    if not isinstance(arg, GenericConst):
        return False
    rank = len(arg.ty.shape)
    return rank < RANK or (rank == RANK and int(arg.ty.shape[0]) == 1)


def _rewritable(call, group: set) -> bool:
    """Whether `call`, whose result is in `group`, has a rank-4 form here."""
    name = _op(call)
    if isinstance(call, relax.TupleGetItem):
        return call.tuple_value in group
    if name == "relax.reshape":
        return True
    if call is None or name is None:
        return False
    source = call.args[0]
    if name == "relax.concat":
        fields = source.fields if isinstance(source, relax.Tuple) else []
        return bool(fields) and all(f in group for f in fields) and _axis(call.attrs.axis) != 0
    if name in BINARY_OPS:  # either operand may be the constant
        return all(a in group or _const_operand(a) for a in call.args)
    if source not in group:
        return False
    if name == "relax.permute_dims":
        axes = call.attrs.axes
        return axes is not None and int(axes[0]) == 0
    if name in QDQ_OPS:
        return all(isinstance(a, GenericConst) and _view(a).size == 1 for a in call.args[1:3])
    if name in UNARY_OPS:
        return True
    if name in ("relax.split", "relax.take"):
        return call.attrs.axis is not None and _axis(call.attrs.axis) != 0
    if name == "relax.strided_slice":
        return all(_axis(a) != 0 for a in call.args[1])
    return False


def _groups(bound: dict, users: dict) -> list[set]:
    """The connected groups of unit rank-5 variables that `drop_unit_axis` rewrites."""
    candidates = {v for v in bound if _unit_rank5(v)}
    groups, seen = [], set()
    for start in candidates:
        if start in seen:
            continue
        group, todo = set(), [start]
        while todo:
            var = todo.pop()
            if var in group:
                continue
            group.add(var)
            value = bound[var]
            neighbours = list(_operands(value)) + list(users.get(var, []))
            todo.extend(n for n in neighbours if n in candidates and n not in group)
        seen |= group
        groups.append(group)
    return [g for g in groups if _acceptable(g, bound, users)]


def _operands(value):
    if isinstance(value, relax.TupleGetItem):
        yield value.tuple_value
        return
    if isinstance(value, relax.Tuple):
        yield from (f for f in value.fields if isinstance(f, relax.Var))
        return
    for arg in getattr(value, "args", []):
        if isinstance(arg, relax.Tuple):
            yield from arg.fields
        elif isinstance(arg, relax.Var):
            yield arg


def _acceptable(group: set, bound: dict, users: dict) -> bool:
    if not any(_op(bound[v]) in QDQ_OPS | UNARY_OPS | BINARY_OPS for v in group):
        return False  # moves alone: `mrvl.copy` reads them at rank 5 already
    if not all(_rewritable(bound[v], group) for v in group):
        return False
    if any(not isinstance(v, relax.DataflowVar) for v in group):
        return False  # a result of the function: its rank is the model's
    for var in group:
        for reader in users.get(var, []):
            if reader not in group and _op(bound[reader]) != "relax.reshape":
                return False  # a reader outside that wants the rank-5 tensor
    return True


def _users(bound: dict) -> dict:
    """Each variable's readers, as the variables they are bound to."""
    out: dict = {}
    for var, value in bound.items():
        for arg in _operands(value):
            out.setdefault(arg, []).append(var)
    return out


@relax.expr_functor.mutator
class _DropUnitAxis(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, group: set, quantized: dict):
        super().__init__(mod)
        self.group = group
        self.quantized = quantized
        self.origins: dict = {}
        """The int8 origin of each constant this rewrite reshaped."""

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        if binding.var not in self.group or isinstance(binding.value, relax.TupleGetItem):
            super().visit_var_binding_(binding)
            return
        value = self._rank4(binding.value)
        new_var = self.builder_.emit(value, binding.var.name)  # a DataflowVar (`_acceptable`)
        self.set_var_remap(binding.var, new_var)

    def _constant(self, arg):
        if not isinstance(arg, GenericConst) or len(arg.ty.shape) != RANK:
            return self.visit_expr(arg)
        data = _view(arg)
        const = relax.const(np.ascontiguousarray(data.reshape(data.shape[1:])), str(data.dtype))
        origin = self.quantized.get(arg)
        if origin is not None:
            axis = None if origin.axis is None or origin.axis == 0 else origin.axis - 1
            values = origin.values.reshape(origin.values.shape[1:])
            self.origins[const] = QuantizedConstant(
                values, origin.scale, origin.zero_point, axis, origin.dtype
            )
        return const

    def _rank4(self, call: relax.Call) -> relax.Call:
        """`call` on the rank-4 views of its operands, with its span."""
        name = _op(call)
        x = self.visit_expr(call.args[0]) if name != "relax.concat" else None
        if name == "relax.reshape":
            new = relax.op.reshape(x, _static(call.ty.shape)[1:])
        elif name == "relax.permute_dims":
            new = relax.op.permute_dims(x, [int(a) - 1 for a in call.attrs.axes[1:]])
        elif name in QDQ_OPS:
            build = relax.op.quantize if name == "relax.quantize" else relax.op.dequantize
            new = build(x, call.args[1], call.args[2], -1, str(call.attrs.out_dtype))
        elif name in UNARY_OPS:
            new = relax.Call(call.op, [x, *call.args[1:]], call.attrs, call.ty_args)
        elif name in BINARY_OPS:
            new = relax.Call(call.op, [self._constant(a) for a in call.args], call.attrs)
        elif name == "relax.concat":
            fields = [self.visit_expr(f) for f in call.args[0].fields]
            new = relax.op.concat(fields, axis=_axis(call.attrs.axis) - 1)
        elif name == "relax.split":
            sections = call.attrs.indices_or_sections
            sections = [int(s) for s in sections] if hasattr(sections, "__len__") else int(sections)
            new = relax.op.split(x, sections, axis=_axis(call.attrs.axis) - 1)
        elif name == "relax.take":
            new = relax.op.take(x, call.args[1], axis=_axis(call.attrs.axis) - 1)
        else:  # strided_slice
            axes = [_axis(a) - 1 for a in call.args[1]]
            new = relax.op.strided_slice(x, axes, *call.args[2:])
        return relax.Call(new.op, new.args, new.attrs, new.ty_args, call.span)


def drop_unit_axis(mod: tvm.IRModule) -> tvm.IRModule:
    """`mod` with each group of a QDQ model's unit rank-5 tensors computed at rank 4 (a new
    module; `mod` is left as it was)."""
    if not any(_op(v) in QDQ_OPS for v in bound_values(mod).values()):
        return mod
    quantized = quantized_constants(mod)
    origins: dict = {}
    rewritten = {}
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function):
            continue
        bound = _bindings(func)
        group = set().union(*_groups(bound, _users(bound)))
        if not group:
            continue
        mutator = _DropUnitAxis(mod, group, quantized)
        rewritten[gv] = mutator.visit_expr(func)
        origins.update(mutator.origins)
    if not rewritten:
        return mod
    functions = {gv: rewritten.get(gv, func) for gv, func in mod.functions.items()}
    out = tvm.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)
    return attach(out, origins) if origins else out


def _bindings(func: relax.Function) -> dict:
    return {
        b.var: b.value
        for block in func.body.blocks
        for b in block.bindings
        if isinstance(b, relax.VarBinding)
    }
