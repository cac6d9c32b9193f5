"""The ISA's legal ranges, compiled and checked: each field's conditions, stated once in the
opcode table (`isa.FieldSpec.legal`), as the validator, the `mlip` verifier and the encoder
ask them (`broken_rule`), and as `docs/isa.md`'s generated column lists them (`legal_rules`).

A condition is a Python expression over the instruction's fields (`pad[d] < kernel[d]` per
element `d`, `in_shape[3] % groups == 0`), the machine's memories (`ocm`, `ddr`, `tiles`) and a
few names (`min`, `max`, `sorted`, `TABLE_ACTIVATIONS`); anything else is refused when the
table is read.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import CodeType

from mrvl.isa import TABLE_ACTIVATIONS, FieldSpec, OpcodeSpec

MACHINE_NAMES = frozenset({"ocm", "ddr", "tiles"})
"""What a legal range may read of the machine: bytes of a tile's OCM, bytes of DDR, tiles."""

_RULE_NAMES = {
    "min": min,
    "max": max,
    "sorted": sorted,
    "TABLE_ACTIVATIONS": frozenset(int(a) for a in TABLE_ACTIVATIONS),
}
_RULE_NODES = (
    ast.Expression, ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Name, ast.Constant,
    ast.Subscript, ast.Call, ast.List, ast.Tuple, ast.Load, ast.operator, ast.unaryop,
    ast.boolop, ast.cmpop,
)  # fmt: skip


@dataclass(frozen=True)
class Rule:
    """One condition of a field's legal range, compiled."""

    field: FieldSpec
    text: str
    reads: frozenset[str]
    """The fields and machine quantities it reads."""
    code: CodeType

    @property
    def per_element(self) -> bool:
        return "d" in self.reads

    @property
    def needs_machine(self) -> bool:
        return bool(self.reads & MACHINE_NAMES)


def _compile_rule(spec: OpcodeSpec, f: FieldSpec, text: str) -> Rule:
    tree = ast.parse(text, mode="eval")
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    known = {g.name for g in spec.fields} | MACHINE_NAMES | set(_RULE_NAMES) | {"d"}
    bad = [type(n).__name__ for n in ast.walk(tree) if not isinstance(n, _RULE_NODES)]
    if bad or not names <= known:
        raise ValueError(f"{spec.name}.{f.name}: bad legal range {text!r}")
    return Rule(f, text, frozenset(names - set(_RULE_NAMES)), compile(tree, text, "eval"))


@cache
def legal_rules(spec: OpcodeSpec) -> tuple[Rule, ...]:
    """The opcode's legal ranges in the order they are checked: each after the rules of every
    field it reads (so `in_shape[3] % groups` runs once `groups >= 1` holds), a field's own
    rules first. Checking them costs time and memory by the number of rules, never by a
    field's value."""
    order = {f.name: i for i, f in enumerate(spec.fields)}
    rules = [_compile_rule(spec, f, text) for f in spec.fields for text in f.legal]

    def key(rule: Rule) -> tuple[int, bool]:
        fields = rule.reads & order.keys()
        return max(order[n] for n in fields), fields != {rule.field.name}

    return tuple(sorted(rules, key=key))


_ELEMENT = re.compile(r"\bd\b")
"""The element index `d` of a per-element rule."""


@cache
def _all_rules(spec: OpcodeSpec, with_machine: bool):
    """The opcode's rules (those that read the machine only `with_machine`) as one compiled
    conjunction, in checking order and with each per-element rule written out for every
    element: `and` stops at the first rule that fails, as the walk in `broken_rule` does, so a
    divisor is still bounded before anything divides by it. It answers only "all hold"."""
    parts = []
    for rule in legal_rules(spec):
        if rule.needs_machine and not with_machine:
            continue
        if rule.per_element:
            parts += [
                "(" + _ELEMENT.sub(str(d), rule.text) + ")" for d in range(rule.field.length)
            ]
        else:
            parts.append(f"({rule.text})")
    return compile(" and ".join(parts) or "True", f"<{spec.name} legal ranges>", "eval")


def broken_rule(
    spec: OpcodeSpec, fields: Mapping[str, object], machine: Mapping[str, int] | None = None
) -> str | None:
    """The first legal range that `fields` break, as a one-line message, or None. Without
    `machine` the rules that read it are skipped (the `mlip` verifier and the encoder do not
    know the target's memories). `fields` must hold the opcode's fields as ints, floats and
    tuples of ints (what `Instruction.fields` holds)."""
    names = {**_RULE_NAMES, **(machine or {}), **fields}
    try:  # almost every instruction holds: one expression of all the rules says so at once
        if eval(_all_rules(spec, machine is not None), {"__builtins__": {}}, names):
            return None
    except (ArithmeticError, TypeError, IndexError):
        pass  # the rule by rule walk below names the rule
    for rule in legal_rules(spec):
        if rule.needs_machine and machine is None:
            continue
        for d in range(rule.field.length) if rule.per_element else (None,):
            names["d"] = d
            try:
                holds = eval(rule.code, {"__builtins__": {}}, names)
            except (ArithmeticError, TypeError, IndexError):
                holds = False
            if not holds:
                name = rule.field.name
                at = "" if d is None else f" (d = {d})"
                return f"{name}={_shown(rule.field, fields[name])} breaks `{rule.text}`{at}"
    return None


def _shown(spec: FieldSpec, value: object) -> str:
    if isinstance(value, (tuple, list)):
        return str(list(value))
    if spec.enum is not None and value in spec.enum._value2member_map_:
        return spec.enum(value).name
    return repr(value)
