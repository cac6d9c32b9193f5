"""What every mrvl pass shares: the base class, and the rewrite helper that keeps locations.

xDSL's rewriter gives newly inserted ops an unknown location; `LocationKeepingRewriter`-wrapped
patterns give them the location of the op they replace, so the ONNX node name survives every
pass down to the binary's source map.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from mrvl.errors import CompileError
from mrvl.target import Target, get_target


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


def module_target(module: ModuleOp, override: str | None = None) -> Target:
    """The target a module was compiled for (`mrvl.target` attribute), or the override."""
    name = override
    if name is None:
        attr = module.attributes.get("mrvl.target")
        name = attr.data if isinstance(attr, StringAttr) else "cn10ka"
    return get_target(name)


def module_num_tiles(module: ModuleOp, override: int | None, target: Target) -> int:
    n = override
    if n is None:
        attr = module.attributes.get("mrvl.num_tiles")
        n = attr.value.data if isinstance(attr, IntegerAttr) else target.max_tiles
    if n not in (1, 2, 4, 8) or n > target.max_tiles:
        raise CompileError(
            f"num_tiles={n} is not valid for {target.name} (1, 2, 4 or 8, at most "
            f"{target.max_tiles})"
        )
    return n
