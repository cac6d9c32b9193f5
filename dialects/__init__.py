"""The three dialects of the mrvl compiler: `mrvl` (graph), `sched` (scheduling), `mlip` (ISA)."""

from __future__ import annotations

from types import ModuleType

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


def defined_ops_and_attributes(*modules: ModuleType) -> tuple[list[type], list[type]]:
    """The op and attribute definitions (`irdl_op_definition`, `irdl_attr_definition`) that
    `modules` define themselves, in definition order: a dialect split over several modules
    gathers its members from them, so that a new op is registered where it is written."""
    from xdsl.ir import Attribute
    from xdsl.irdl import IRDLOperation

    ops: list[type] = []
    attributes: list[type] = []
    for module in modules:
        for value in vars(module).values():
            if not isinstance(value, type) or value.__module__ != module.__name__:
                continue
            if "name" not in value.__dict__:  # a base class (TaskBase, FusedActivation...)
                continue
            if issubclass(value, IRDLOperation):
                ops.append(value)
            elif issubclass(value, Attribute):
                attributes.append(value)
    return ops, attributes
