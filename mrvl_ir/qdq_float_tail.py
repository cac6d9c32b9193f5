"""A float layer after a QDQ model's last quantize, run in fp16 on the MLIP as in the float
model (issue 20: MobileFaceNet's L2 normalization, x / ReduceL2(x) of its dequantized
embedding, split its QDQ form's region).

A quantizer leaves a model's tail in float when it quantizes no output after it: such a layer
reads dequantized int8 values and hands floats on, to a graph output and never to a
quantize. It is no quantized layer (there is no quantized result to be exact against), so the
partition takes it as the float model's layer: in the region after the region's own
`dequant`, in fp16 by DESIGN §9's fp16 rule, reported fp16. A layer whose float result
reaches a quantize is part of a quantized layer and is checked as one (`qdq_match`).
"""

from __future__ import annotations

from collections.abc import Mapping

from tvm import relax

from mrvl.qdq import _op

_READERS: list = [None, {}]
"""The bindings `_readers` last indexed, and each variable's readers there."""


def _referenced(value) -> list[relax.Var]:
    """The variables a bound value reads (a tuple's fields, a tuple item's tuple too)."""
    if isinstance(value, relax.TupleGetItem):
        value = value.tuple_value
    items = list(value.fields) if isinstance(value, relax.Tuple) else [value]
    out = []
    for item in items:
        args = item.args if isinstance(item, relax.Call) else [item]
        for arg in args:
            fields = arg.fields if isinstance(arg, relax.Tuple) else [arg]
            out += [f for f in fields if isinstance(f, relax.Var)]
    return out


def _readers(bound: Mapping[relax.Var, relax.Expr]) -> dict[relax.Var, list[relax.Var]]:
    if _READERS[0] is not bound:
        readers: dict[relax.Var, list[relax.Var]] = {}
        for var, value in bound.items():
            for ref in _referenced(value):
                readers.setdefault(ref, []).append(var)
        _READERS[:] = [bound, readers]
    return _READERS[1]


def reaches_no_quantize(result: relax.Var | None, bound: Mapping[relax.Var, relax.Expr]) -> bool:
    """Whether nothing computed from `result` (a layer's float result) is quantized: every
    path from it ends at a graph output."""
    if result is None:
        return False
    readers = _readers(bound)
    todo, seen = [result], {result}
    while todo:
        for var in readers.get(todo.pop(), []):
            if _op(bound.get(var)) == "relax.quantize":
                return False
            if var not in seen:
                seen.add(var)
                todo.append(var)
    return True
