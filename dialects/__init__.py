"""The three dialects of the mrvl compiler: `mrvl` (graph), `sched` (scheduling), `mlip` (ISA)."""

from __future__ import annotations

from xdsl.context import Context


def mrvl_context() -> Context:
    """A context with the builtin, func and mrvl dialects loaded."""
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from mrvl.dialects.mlip import Mlip
    from mrvl.dialects.mrvl import Mrvl
    from mrvl.dialects.sched import Sched

    ctx = Context()
    for dialect in (Builtin, Func, Mrvl, Sched, Mlip):
        ctx.load_dialect(dialect)
    return ctx
