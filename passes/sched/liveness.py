"""Liveness of `sched` buffers, and what bytes each task touches: the analysis that
`sched-allocate`, `sched-verify-allocation` and `sched-insert-sync` share (Vela's
`live_range.py` plays this part there).

A buffer is live from its definition to its last use in program order; a `sched.view` is the
same bytes as its source, so its uses extend the source's range. Region inputs, outputs and
constants are live for the whole program.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

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

    @property
    def space(self) -> str:
        return self.op.buffer_type.space.data

    @property
    def tile(self) -> int | None:
        tile = getattr(self.op, "tile", None)
        return tile.value.data if tile is not None else None

    @property
    def size(self) -> int:
        return self.op.buffer_type.size_bytes


def root(value: SSAValue) -> sched.BufferDefBase:
    """The definition whose bytes `value` names (through views)."""
    op = value.owner
    while isinstance(op, sched.ViewOp):
        op = op.source.owner
    assert isinstance(op, sched.BufferDefBase), op
    return op


def live_ranges(ops: Sequence[Operation]) -> list[LiveRange]:
    """The live range of every buffer definition in `ops` (a program's body, in order)."""
    position = {o: i for i, o in enumerate(ops)}
    last = len(ops) - 1
    ranges: dict[sched.BufferDefBase, LiveRange] = {}
    for i, o in enumerate(ops):
        if isinstance(o, sched.BufferDefBase):
            whole = isinstance(o, sched.IOOp | sched.ConstOp)
            ranges[o] = LiveRange(o, 0 if whole else i, last if whole else i)
    for o in ops:
        if isinstance(o, sched.ViewOp):
            continue
        for operand in o.operands:
            if isinstance(operand.type, sched.BufferType):
                r = ranges[root(operand)]
                r.end = max(r.end, position[o])
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
        return all(
            a < d and c < b for a, b, c, d in zip(self.lo, self.hi, other.lo, other.hi)
        )

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


def accesses(op: Operation) -> list[Access]:
    """What a task reads and writes (reads first), by buffer."""
    if isinstance(op, sched.DmaOp):
        box = op.box.get_values()
        return [
            _box(op.source, op.src_offsets.get_values(), box, op.src_strides is not None, False),
            _box(op.dest, op.dst_offsets.get_values(), box, op.dst_strides is not None, True),
        ]
    names = [name for name, _ in type(op).get_irdl_definition().operands]
    reads: list[Access] = []
    writes: list[Access] = []
    for name in names:
        if name == "deps":
            continue
        values = getattr(op, name)
        for value in values if isinstance(values, Iterable) and not isinstance(values, SSAValue) else [values]:
            if value is None or not isinstance(value.type, sched.BufferType):
                continue
            access = Access(root(value), None, None, name in WRITTEN_OPERANDS)
            (writes if access.write else reads).append(access)
    return reads + writes


def byte_range(buffer: sched.BufferDefBase) -> tuple[int, int]:
    """[start, stop) of an allocated buffer in its memory."""
    assert buffer.offset is not None
    start = buffer.offset.value.data
    return start, start + buffer.buffer_type.size_bytes

