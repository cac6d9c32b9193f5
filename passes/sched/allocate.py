"""sched-allocate: give every buffer its byte offset in DDR or in its tile's OCM.

DDR holds, in order: the region's I/O tensors, the constant pool (contiguous, so the binary
can load it in one piece at the program's `const_base`), then the intermediates, which reuse
each other's bytes by live range (`liveness.py`; first fit in program order), as a tile's
OCM buffers do. A buffer that does not fit is a compile error naming its layer.

Reuse is safe on a parallel machine only with the tokens `sched-insert-sync` adds after this
pass (a buffer's new owner must wait for the old one's last readers).
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64

from mrvl.dialects import sched
from mrvl.errors import CompileError
from mrvl.locations import location_name
from mrvl.passes.common import MrvlModulePass
from mrvl.passes.sched.liveness import LiveRange, Span, live_ranges


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def multicast_groups(ops) -> list[tuple[sched.AllocOp, ...]]:
    """The buffers each multicast DMA writes (its dest and mirrors): one offset for all."""
    return [
        (op.dest.owner, *(m.owner for m in op.mirrors))
        for op in ops
        if isinstance(op, sched.MulticastDmaOp)
    ]


def _lowest_gap(live: list[tuple[int, int, int]], offset: int, size: int) -> int:
    """The lowest offset from `offset` on where `size` bytes miss every entry of `live`."""
    for off, _, sz in live:
        if offset + size <= off:
            break
        offset = max(offset, off + sz)
    return offset


def first_fit_offsets(
    ranges: list[LiveRange | Span], base: int, alignment: int, groups=()
) -> list[tuple[LiveRange, int]]:
    """Each range (in program order) with the lowest aligned offset from `base` not used by a
    range live at the same time in its memory (DDR, or its tile's OCM), except that the
    buffers of a multicast group (`multicast_groups`) take together the lowest offset that is
    free on all their tiles (a `dma` with `dst_tiles` writes one address on each). The
    planner lays out the buffers it plans for (`liveness.Span`s, no group) with it too."""
    by_op = {id(r.op): r for r in ranges} if groups else {}
    group_of: dict[int, list[LiveRange]] = {}  # id(range) -> its multicast group
    for group in groups:
        members = [by_op[id(op)] for op in group]
        for m in members:
            group_of[id(m)] = members
    # per memory (tile; None: DDR), (offset, end, size) by offset (ties: oldest first)
    live: dict[int | None, list[tuple[int, int, int]]] = {}
    # per memory, the earliest end among its entries: the list is filtered only when one of
    # them has ended (most ranges start while everything placed before is still live)
    soonest: dict[int | None, int] = {}
    placed: list[tuple[LiveRange, int]] = []
    done: set[int] = set()
    for r in sorted(ranges, key=lambda r: r.start):
        if id(r) in done:
            continue
        members = group_of.get(id(r), [r])
        size = _align(r.size, alignment)
        for m in members:
            if m.tile not in live:
                live[m.tile], soonest[m.tile] = [], r.start
            elif soonest[m.tile] < r.start:
                kept = [e for e in live[m.tile] if e[1] >= r.start]
                live[m.tile] = kept
                soonest[m.tile] = min((e[1] for e in kept), default=r.start)
        offset, settled = base, False
        while not settled:  # offsets only rise: stops at the lowest one free on every tile
            settled = True
            for m in members:
                lowest = _lowest_gap(live[m.tile], offset, size)
                settled &= lowest == offset
                offset = lowest
        for m in members:
            insort(live[m.tile], (offset, m.end, size), key=lambda e: e[0])
            soonest[m.tile] = min(soonest[m.tile], m.end)
            placed.append((m, offset))
            done.add(id(m))
    return placed


def first_fit(ranges: list[LiveRange], base: int, alignment: int) -> int:
    """Give each range (in program order) the lowest aligned offset from `base` not used by
    a range live at the same time; return the end of the highest one."""
    top = base
    for r, offset in first_fit_offsets(ranges, base, alignment):
        r.op.offset = IntegerAttr(offset, i64)
        top = max(top, offset + _align(r.size, alignment))
    return top


def overflowing_layers(ranges, target, groups=()) -> set:
    """A trial of the OCM allocation: the locations (layers) of the buffers among `ranges`
    that first fit would place beyond a tile's capacity. No offset is set, so passes that
    reorder or merge work can ask before they commit."""
    ocm = [r for r in ranges if r.tile is not None]
    failing = set()
    for r, offset in first_fit_offsets(ocm, 0, target.ocm_alignment, groups):
        if offset + r.size > target.ocm_bytes_per_tile:
            failing.add(r.op.location)
        if r.op.offset is not None:
            r.op.offset = None  # sched-allocate decides
    return failing


@dataclass(frozen=True)
class AllocatePass(MrvlModulePass):
    name = "sched-allocate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        program = sched.program_of(op)
        target = program.target
        ranges = live_ranges(list(program.ops))
        ddr_align = target.ddr_alignment
        cursor = 0
        for group in (sched.IOOp, sched.ConstOp):
            if group is sched.ConstOp:
                cursor = _align(cursor, ddr_align)
                program.const_base = IntegerAttr(cursor, i64)
            for r in ranges:
                if type(r.op) is group:
                    cursor = _align(cursor, ddr_align)
                    r.op.offset = IntegerAttr(cursor, i64)
                    cursor += r.size
            if group is sched.ConstOp:
                program.const_end = IntegerAttr(cursor, i64)
        scratch = [r for r in ranges if isinstance(r.op, sched.AllocOp) and r.space == "ddr"]
        cursor = first_fit(scratch, _align(cursor, ddr_align), ddr_align)
        ddr_size = _align(cursor, ddr_align)
        if ddr_size > target.ddr_bytes:
            raise CompileError(
                f"the region needs {ddr_size} bytes of DDR, {target.name} has {target.ddr_bytes}"
            )
        program.ddr_size = IntegerAttr(ddr_size, i64)
        ocm = [r for r in ranges if r.space == "ocm"]
        alignment, capacity = target.ocm_alignment, target.ocm_bytes_per_tile
        groups = multicast_groups(program.ops)
        top: dict[int, tuple[int, LiveRange]] = {}  # tile -> (end of its highest buffer, it)
        for r, offset in first_fit_offsets(ocm, 0, alignment, groups):
            r.op.offset = IntegerAttr(offset, i64)
            stop = offset + _align(r.size, alignment)
            if stop > top.get(r.tile, (0, None))[0]:
                top[r.tile] = (stop, r)
        for tile, (stop, worst) in sorted(top.items()):
            if stop > capacity:
                raise CompileError(
                    f"layer {location_name(worst.op.location) or '?'}: OCM of tile {tile} "
                    f"overflows ({stop} > {capacity} bytes)"
                )
