"""Rank-5 tensors of a QDQ model computed at rank 4: a unit leading axis dropped, or two axes merged.

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

With a leading batch of more than one there is no unit axis to drop. Such a group (tensors
joined by ops other than Reshapes, which read and write any view) is computed on views with
two neighbouring axes merged into one instead (`_MergePair`: again the same elements in the
same order): the first pair, in order, that every op of the group keeps together. A
Transpose carries the pair to its operand's axes, which must be neighbours in the same
order; a Split, Concat, Take or slice must be along another axis; each operand of a binary
op must have the pair's extents or 1 along both (a rank-5 constant is merged the same way).
YOLOv5's decode at batch 2 merges H and W (`[2, 3, H·W, 85]`, its grids `[1, 3, H·W, 2]`),
Swin's mask Add the two token axes.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    return _rank5(expr, unit=True)


def _rank5(expr, unit: bool = False) -> bool:
    """Whether `expr` is a static tensor of rank 5 (with leading extent 1 if `unit`), or a
    tuple of them."""
    ty = getattr(expr, "ty", None)
    types = ty.fields if isinstance(ty, relax.TupleType) else [ty]
    return len(types) > 0 and all(_rank5_type(t, unit) for t in types)


def _rank5_type(ty, unit: bool) -> bool:
    shape = getattr(getattr(ty, "shape", None), "values", None)
    return (
        shape is not None
        and len(shape) == RANK
        and all(isinstance(d, tvm.tirx.IntImm) for d in shape)
        and (not unit or int(shape[0]) == 1)
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


def _acceptable(group: set, bound: dict, users: dict, rewritable=None) -> bool:
    """Whether `group` is rewritten: it holds an op other than a move, each of its ops is
    `rewritable` (default: `_rewritable`, a unit leading axis dropped), it is no result of
    the function, and only reshapes read it from outside."""
    rewritable = rewritable or _rewritable
    if not any(_op(bound[v]) in QDQ_OPS | UNARY_OPS | BINARY_OPS for v in group):
        return False  # moves alone: `mrvl.copy` reads them at rank 5 already
    if not all(rewritable(bound[v], group) for v in group):
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


def _shape5(var) -> list[int]:
    ty = var.ty.fields[0] if isinstance(var.ty, relax.TupleType) else var.ty
    return _static(ty.shape)


def _operand_first(value, first: int) -> int | None:
    """The merged pair of `value`'s rank-5 operands when its result's is `first` (None: no
    such pair; a transpose must keep the two axes next to each other and in order)."""
    if _op(value) == "relax.permute_dims":
        axes = [int(a) for a in value.attrs.axes]
        return axes[first] if axes[first + 1] == axes[first] + 1 else None
    return first


def _result_first(value, first: int) -> int | None:
    """The merged pair of `value`'s result when its rank-5 operands' is `first`."""
    if _op(value) == "relax.permute_dims":
        axes = [int(a) for a in value.attrs.axes]
        at = axes.index(first)
        return at if at + 1 < RANK and axes[at + 1] == first + 1 else None
    return first


def _merge_checks(var, value, first: int, pairs: dict, quantized: dict) -> bool:
    """Whether `value` (bound to `var`, its result merged at `first`) has a rank-4 form on
    the merged views."""
    name = _op(value)
    pair = (first, first + 1)
    if isinstance(value, relax.TupleGetItem) or name == "relax.reshape":
        return True
    if name == "relax.concat":
        fields = value.args[0].fields if isinstance(value.args[0], relax.Tuple) else []
        return (
            bool(fields) and all(f in pairs for f in fields) and _axis(value.attrs.axis) not in pair
        )
    if name not in BINARY_OPS and (name is None or value.args[0] not in pairs):
        return False  # an operand of another rank, or no op this rewrite knows
    if name == "relax.permute_dims":
        return _operand_first(value, first) is not None
    if name in QDQ_OPS:
        return all(isinstance(a, GenericConst) and _view(a).size == 1 for a in value.args[1:3])
    if name in UNARY_OPS:
        return True
    if name in ("relax.split", "relax.take"):
        return value.attrs.axis is not None and _axis(value.attrs.axis) not in pair
    if name == "relax.strided_slice":
        return all(_axis(a) not in pair for a in value.args[1])
    if name in BINARY_OPS:
        extents = [_shape5(var)[a] for a in pair]
        for arg in value.args:
            if isinstance(arg, GenericConst):
                shape = [1] * (RANK - len(arg.ty.shape)) + _static(arg.ty.shape)
                origin = quantized.get(arg)
                axis = None if origin is None else origin.axis
                if axis is not None and axis + RANK - len(arg.ty.shape) in pair:
                    return False  # a per-channel constant along the pair
            elif arg in pairs:
                shape = _shape5(arg)
            else:
                return False
            if len(shape) != RANK or [shape[a] for a in pair] not in (extents, [1, 1]):
                return False  # the pair would not broadcast as one axis
        return True
    return False


def _merged_views(bound: dict, users: dict, quantized: dict, exclude: set) -> dict:
    """`_MergePair` views of a QDQ model's static rank-5 tensors that `_DropLeading` does not
    take (a leading batch of more than one), by connected group (ops other than reshapes
    between them: a reshape reads and writes any view): each group with the first pair of
    axes, in order, that every op of it keeps together (a transpose moves the pair and must
    keep its two axes next to each other, a split, concat, take or slice is along another
    axis, a binary op's operands are whole or of extent 1 along both), each tensor's pair
    found from one seed through the ops."""
    candidates = {v for v in bound if _rank5(v) and v not in exclude}

    def linked(var):
        if _op(bound[var]) != "relax.reshape":
            yield from (o for o in _operands(bound[var]) if o in candidates)
        for user in users.get(var, []):
            if user in candidates and _op(bound[user]) != "relax.reshape":
                yield user

    views, seen = {}, set()
    for start in [v for v in bound if v in candidates]:  # in binding order
        if start in seen:
            continue
        group, todo = set(), [start]
        while todo:
            var = todo.pop()
            if var not in group:
                group.add(var)
                todo.extend(linked(var))
        seen |= group
        if not _acceptable(group, bound, users, rewritable=lambda value, group: True):
            continue
        for first in range(RANK - 1):
            pairs = _propagated(start, first, group, bound, users)
            if pairs is not None and all(
                _merge_checks(v, bound[v], pairs[v], pairs, quantized) for v in group
            ):
                views.update({v: _MergePair(f) for v, f in pairs.items()})
                break
    return views


def _propagated(start, first: int, group: set, bound: dict, users: dict) -> dict | None:
    """Each variable of `group` (connected by ops other than reshapes) with its merged pair,
    from `start`'s `first` through those ops; None if two of them disagree."""
    pairs, todo = {start: first}, [start]
    while todo:
        var = todo.pop()
        value, f = bound[var], pairs[var]
        linked = []
        if _op(value) != "relax.reshape":
            below = _operand_first(value, f)
            linked += [(o, below) for o in _operands(value) if o in group]
        for user in users.get(var, []):
            if user in group and _op(bound[user]) != "relax.reshape":
                linked.append((user, _result_first(bound[user], f)))
        for other, want in linked:
            if want is None or pairs.get(other, want) != want:
                return None
            if other not in pairs:
                pairs[other] = want
                todo.append(other)
    return pairs


class _DropLeading:
    """The rank-4 view of a rank-5 tensor whose leading axis is of extent 1: that axis dropped."""

    def shape(self, shape: list[int]) -> list[int]:
        return shape[1:]

    def axis(self, axis: int) -> int:
        return _axis(axis) - 1

    def perm(self, axes) -> list[int]:
        return [int(a) - 1 for a in axes[1:]]

    def constant(self, data: np.ndarray) -> np.ndarray | None:
        """A binary op's constant operand on this view (None: as it is)."""
        return data.reshape(data.shape[1:]) if data.ndim == RANK else None

    def origin_axis(self, axis: int | None, rank: int) -> int | None:
        return None if axis is None or axis == 0 else axis - 1


@dataclass(frozen=True)
class _MergePair:
    """The rank-4 view of a rank-5 tensor with its axes `first` and `first + 1` merged into
    one (row-major: the same elements in the same order)."""

    first: int

    def shape(self, shape: list[int]) -> list[int]:
        a = self.first
        return [*shape[:a], shape[a] * shape[a + 1], *shape[a + 2 :]]

    def axis(self, axis: int) -> int:
        axis = _axis(axis)
        assert axis not in (self.first, self.first + 1), axis  # `_merge_checks`
        return axis if axis < self.first else axis - 1

    def perm(self, axes) -> list[int]:
        """The rank-4 permutation of a transpose whose result has this view, its operand the
        view `_operand_first` gives."""
        axes = [int(a) for a in axes]
        source = _MergePair(axes[self.first])
        return [
            source.axis(a) if i != self.first else axes[self.first]
            for i, a in enumerate(axes)
            if i != self.first + 1
        ]

    def constant(self, data: np.ndarray) -> np.ndarray | None:
        if data.ndim == 0:
            return None
        return data.reshape(self.shape([1] * (RANK - data.ndim) + list(data.shape)))

    def origin_axis(self, axis: int | None, rank: int) -> int | None:
        return None if axis is None else self.axis(axis + RANK - rank)


@relax.expr_functor.mutator
class _DropUnitAxis(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule, views: dict, quantized: dict):
        super().__init__(mod)
        self.views = views
        """The rank-4 view of each variable rewritten (`_DropLeading`, `_MergePair`)."""
        self.quantized = quantized
        self.origins: dict = {}
        """The int8 origin of each constant this rewrite reshaped."""

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        if binding.var not in self.views or isinstance(binding.value, relax.TupleGetItem):
            super().visit_var_binding_(binding)
            return
        value = self._rank4(binding.value, self.views[binding.var])
        new_var = self.builder_.emit(value, binding.var.name)  # a DataflowVar (`_acceptable`)
        self.set_var_remap(binding.var, new_var)

    def _constant(self, arg, view):
        if not isinstance(arg, GenericConst):
            return self.visit_expr(arg)
        data = _view(arg)
        viewed = view.constant(data)
        if viewed is None:
            return self.visit_expr(arg)
        const = relax.const(np.ascontiguousarray(viewed), str(data.dtype))
        origin = self.quantized.get(arg)
        if origin is not None:
            axis = view.origin_axis(origin.axis, data.ndim)
            values = origin.values.reshape(viewed.shape)
            self.origins[const] = QuantizedConstant(
                values, origin.scale, origin.zero_point, axis, origin.dtype
            )
        return const

    def _rank4(self, call: relax.Call, view) -> relax.Call:
        """`call` on the rank-4 views of its operands (its result's `view`), with its span."""
        name = _op(call)
        x = self.visit_expr(call.args[0]) if name != "relax.concat" else None
        if name == "relax.reshape":
            new = relax.op.reshape(x, view.shape(_static(call.ty.shape)))
        elif name == "relax.permute_dims":
            new = relax.op.permute_dims(x, view.perm(call.attrs.axes))
        elif name in QDQ_OPS:
            build = relax.op.quantize if name == "relax.quantize" else relax.op.dequantize
            new = build(x, call.args[1], call.args[2], -1, str(call.attrs.out_dtype))
        elif name in UNARY_OPS:
            new = relax.Call(call.op, [x, *call.args[1:]], call.attrs, call.ty_args)
        elif name in BINARY_OPS:
            new = relax.Call(call.op, [self._constant(a, view) for a in call.args], call.attrs)
        elif name == "relax.concat":
            fields = [self.visit_expr(f) for f in call.args[0].fields]
            new = relax.op.concat(fields, axis=view.axis(call.attrs.axis))
        elif name == "relax.split":
            sections = call.attrs.indices_or_sections
            sections = [int(s) for s in sections] if hasattr(sections, "__len__") else int(sections)
            new = relax.op.split(x, sections, axis=view.axis(call.attrs.axis))
        elif name == "relax.take":
            new = relax.op.take(x, call.args[1], axis=view.axis(call.attrs.axis))
        else:  # strided_slice
            axes = [view.axis(a) for a in call.args[1]]
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
        users = _users(bound)
        unit = set().union(*_groups(bound, users))
        views = dict.fromkeys(unit, _DropLeading())
        views.update(_merged_views(bound, users, quantized, exclude=unit))
        if not views:
            continue
        mutator = _DropUnitAxis(mod, views, quantized)
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
