"""Liveness of `sched` buffers, and what bytes each task touches: the analysis that
`sched-allocate`, `sched-verify-allocation` and `sched-insert-sync` share (Vela's
`live_range.py` plays this part there).

A buffer is live from its definition to its last use in program order; a `sched.view` is the
same bytes as its source, so its uses extend the source's range. Region inputs, outputs and
constants are live for the whole program.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue
from xdsl.irdl.operations import VariadicDef

from mrvl.dialects import sched

WRITTEN_OPERANDS = frozenset({"dest", "output"})
"""The operands a task writes; every other buffer operand is read."""


@dataclass
class LiveRange:
    """One buffer definition (`sched.io`, `sched.const` or `sched.alloc`) over the program."""

    op: sched.BufferDefBase
    start: int
    end: int
    """Index (in program order) of the definition and of the last use, views included."""

    # Asked tens of thousands of times by the allocator, the pipeliner and the sync pass
    # (a range's buffer keeps its memory and tile while passes hold the range).
    @functools.cached_property
    def space(self) -> str:
        return self.op.buffer_type.space.data

    @functools.cached_property
    def tile(self) -> int | None:
        tile = getattr(self.op, "tile", None)
        return tile.value.data if tile is not None else None

    @functools.cached_property
    def size(self) -> int:
        return self.op.buffer_type.size_bytes


@dataclass
class Span:
    """A buffer's live range before there is IR: what the planner gives the allocator's first
    fit (`allocate.first_fit_offsets`) to lay out the buffers a plan's steps will have."""

    start: int
    end: int
    size: int
    tile: int | None = 0


@functools.cache
def _is_view(cls: type) -> bool:
    return issubclass(cls, sched.ViewOp)


@functools.cache
def _is_def(cls: type) -> bool:
    return issubclass(cls, sched.BufferDefBase)


@functools.cache
def _is_whole(cls: type) -> bool:
    """Region inputs, outputs and constants: live for the whole program."""
    return issubclass(cls, sched.IOOp | sched.ConstOp)


@functools.cache
def _is_buffer(cls: type) -> bool:
    return issubclass(cls, sched.BufferType)


def root(value: SSAValue) -> sched.BufferDefBase:
    """The definition whose bytes `value` names (through views)."""
    op = value.owner
    while _is_view(type(op)):
        op = op.source.owner
    assert _is_def(type(op)), op
    return op


def live_ranges(ops: Sequence[Operation]) -> list[LiveRange]:
    """The live range of every buffer definition in `ops` (a program's body, in order)."""
    last = len(ops) - 1
    ranges: dict[int, LiveRange] = {}  # by id() of the definition (Operation hashes slowly)
    for i, o in enumerate(ops):
        cls = type(o)
        if _is_def(cls):
            whole = _is_whole(cls)
            ranges[id(o)] = LiveRange(o, 0 if whole else i, last if whole else i)
    # id() of each operand seen -> the range of its root, or None for a token: a buffer is
    # used by a few tasks, each asked once
    of_value: dict[int, LiveRange | None] = {}
    for i, o in enumerate(ops):
        if _is_view(type(o)):
            continue
        for operand in o.operands:
            key = id(operand)
            if key in of_value:
                r = of_value[key]
            else:
                r = of_value[key] = (
                    ranges[id(root(operand))] if _is_buffer(type(operand.type)) else None
                )
            if r is not None and i > r.end:
                r.end = i
    return list(ranges.values())


# -------------------------------------------------------------------------- accesses


@dataclass(frozen=True)
class Access:
    """The bytes one task touches in one buffer: the box `[lo, hi)` per dimension of the
    buffer's dense shape (`box is None`: the whole buffer, or a strided walk through it)."""

    buffer: sched.BufferDefBase
    lo: tuple[int, ...] | None
    hi: tuple[int, ...] | None
    write: bool

    def overlaps(self, other: Access) -> bool:
        """Whether the two accesses of the same buffer share a byte (exact for boxes)."""
        if self.lo is None or other.lo is None:
            return True
        return all(a < d and c < b for a, b, c, d in zip(self.lo, self.hi, other.lo, other.hi))

    def covers(self, other: Access) -> bool:
        if self.lo is None:
            return True
        if other.lo is None:
            return False
        return all(a <= c and d <= b for a, b, c, d in zip(self.lo, self.hi, other.lo, other.hi))


def _box(value: SSAValue, offsets, box, strided: bool, write: bool) -> Access:
    buffer = root(value)
    dims = sched.buffer_type(value).dims
    if strided or value.owner is not buffer or len(dims) != len(box):
        return Access(buffer, None, None, write)
    lo = tuple(offsets)
    hi = tuple(o + n for o, n in zip(offsets, box))
    if lo == (0,) * len(dims) and hi == dims:
        return Access(buffer, None, None, write)
    return Access(buffer, lo, hi, write)


def written(op: sched.TaskBase) -> tuple[SSAValue, ...]:
    """The buffer values a task writes (`WRITTEN_OPERANDS`, and a multicast's mirrors),
    without building its accesses."""
    if isinstance(op, sched.MulticastDmaOp):
        return (op.dest, *op.mirrors)
    value = (
        op.dest if isinstance(op, sched.DmaOp | sched.DDR_CONVERSIONS) else getattr(op, "output", None)
    )
    return (value,) if value is not None else ()


def accesses(op: Operation) -> list[Access]:
    """What a task reads and writes (reads first), by buffer."""
    if isinstance(op, sched.DmaBase):
        box = op.box.get_values()
        dst_offsets, strided = op.dst_offsets.get_values(), op.dst_strides is not None
        dests = (op.dest, *op.mirrors) if isinstance(op, sched.MulticastDmaOp) else (op.dest,)
        return [
            _box(op.source, op.src_offsets.get_values(), box, op.src_strides is not None, False),
            *(_box(dest, dst_offsets, box, strided, True) for dest in dests),
        ]
    reads: list[Access] = []
    writes: list[Access] = []
    for name, values in _operand_segments(op):
        if name == "deps":
            continue
        for value in values:
            if not _is_buffer(type(value.type)):
                continue
            access = Access(root(value), None, None, name in WRITTEN_OPERANDS)
            (writes if access.write else reads).append(access)
    return reads + writes


@functools.cache
def _operand_layout(cls: type) -> tuple[tuple[str, bool], ...]:
    """(name, variadic or optional) of each operand definition of an op class, in order."""
    return tuple((name, isinstance(d, VariadicDef)) for name, d in cls.get_irdl_definition().operands)


def _operand_segments(op: Operation) -> list[tuple[str, Sequence[SSAValue]]]:
    """Each operand definition's name and values, cut from the operand list at once: a task's
    named accessors each decode its segment sizes again (a dense array) to find their part."""
    layout = _operand_layout(type(op))
    operands = op.operands
    sizes_attr = op.properties.get("operandSegmentSizes")
    if sizes_attr is not None:
        sizes = sizes_attr.get_values()
    else:  # at most one variadic definition: it takes what the others leave
        fixed = sum(not variadic for _, variadic in layout)
        if len(layout) - fixed > 1:  # not an op IRDL would accept; ask the accessors
            return [(name, _as_values(getattr(op, name))) for name, _ in layout]
        sizes = [len(operands) - fixed if variadic else 1 for _, variadic in layout]
    segments, at = [], 0
    for (name, _), size in zip(layout, sizes):
        segments.append((name, operands[at : at + size]))
        at += size
    return segments


def _as_values(values) -> tuple[SSAValue, ...]:
    if values is None:
        return ()
    return (values,) if isinstance(values, SSAValue) else tuple(values)


def byte_range(buffer: sched.BufferDefBase) -> tuple[int, int]:
    """[start, stop) of an allocated buffer in its memory."""
    assert buffer.offset is not None
    start = buffer.offset.value.data
    return start, start + buffer.buffer_type.size_bytes
