"""What every mrvl pass shares: the base class, and the rewrite helper that keeps locations.

xDSL's rewriter gives newly inserted ops an unknown location; `LocationKeepingRewriter`-wrapped
patterns give them the location of the op they replace, so the ONNX node name survives every
pass down to the binary's source map.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import ClassVar, get_args

from xdsl.dialects.builtin import UnknownLoc
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern


@dataclass(frozen=True)
class MrvlModulePass(ModulePass):
    """Base of the project's passes (a plain `ModulePass`; kept for grouping and docs)."""

    name: ClassVar[str]


class InheritLocation(RewritePattern):
    """Run `pattern`, then give every op it inserted the location of the op it matched."""

    def __init__(self, pattern: RewritePattern):
        self.pattern = pattern

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        inserted: list[Operation] = []
        rewriter.operation_insertion_handler.append(inserted.append)
        try:
            self.pattern.match_and_rewrite(op, rewriter)
        finally:
            rewriter.operation_insertion_handler.remove(inserted.append)
        for new in inserted:
            if isinstance(new.location, UnknownLoc):
                new.location = op.location


def matched_op_types(pattern: type[RewritePattern]) -> tuple[type[Operation], ...]:
    """The op classes a pattern matches, for the completeness test's question "which op has
    no pattern": the `source` a pattern names (`InstructionSelection`), else what its
    `@op_type_rewrite_pattern` method matches (read from the decorator's closure, where xDSL
    keeps the type hint it checks)."""
    source = getattr(pattern, "source", None)
    if source is not None:
        return tuple(get_args(source) or (source,))
    closure = inspect.getclosurevars(pattern.match_and_rewrite).nonlocals
    expected = closure.get("expected_types") or (closure["expected_type"],)
    return tuple(t for e in expected for t in (get_args(e) or (e,)))
