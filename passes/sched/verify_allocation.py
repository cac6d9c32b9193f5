"""sched-verify-allocation: check what `sched-allocate` decided, independently of how.

Every buffer has an offset; it lies inside its memory (DDR up to the program's `ddr_size`, a
tile's OCM up to the target's capacity); the constants lie in the pool `[const_base,
const_end)`; no two buffers of one memory that are live at the same time share a byte; and
the buffers a multicast DMA writes on several tiles share one offset.
An error names the layer (the ONNX node) of each buffer involved.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from mrvl.dialects import sched
from mrvl.errors import CompileError
from mrvl.locations import location_name
from mrvl.passes.common import MrvlModulePass
from mrvl.passes.sched.liveness import LiveRange, byte_range, live_ranges


def _what(r: LiveRange) -> str:
    where = "DDR" if r.tile is None else f"OCM of tile {r.tile}"
    layer = location_name(r.op.location) or "?"
    return f"the {r.size}-byte buffer of layer {layer} in {where}"


@dataclass(frozen=True)
class VerifyAllocationPass(MrvlModulePass):
    name = "sched-verify-allocation"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        program = sched.program_of(op)
        ddr_size, const_base, const_end = program.layout()
        capacity = program.target.ocm_bytes_per_tile
        memories: dict[int | None, list[tuple[int, int, LiveRange]]] = {}
        for r in live_ranges(list(program.ops)):
            if r.op.offset is None:
                raise CompileError(f"{_what(r)} has no offset: run sched-allocate")
            start, stop = byte_range(r.op)
            limit = ddr_size if r.tile is None else capacity
            if start < 0 or stop > limit:
                raise CompileError(f"{_what(r)} at [{start}, {stop}) is outside [0, {limit})")
            in_pool = const_base <= start and stop <= const_end
            if isinstance(r.op, sched.ConstOp) != in_pool and r.tile is None:
                raise CompileError(
                    f"{_what(r)} at [{start}, {stop}) is "
                    f"{'outside' if not in_pool else 'inside'} the constant pool "
                    f"[{const_base}, {const_end})"
                )
            memories.setdefault(r.tile, []).append((start, stop, r))
        for task in program.ops:
            if isinstance(task, sched.MulticastDmaOp):
                offset = task.dest.owner.offset.value.data
                for mirror in task.mirrors:
                    if mirror.owner.offset.value.data != offset:
                        raise CompileError(
                            f"a multicast DMA of layer {location_name(task.location) or '?'} "
                            f"writes offset {offset} of tile {task.tile.value.data} and offset "
                            f"{mirror.owner.offset.value.data} of tile "
                            f"{mirror.owner.tile.value.data}: one address for all its tiles"
                        )
        for entries in memories.values():
            # sweep in program order, each buffer against the ones still live
            active: list[tuple[int, int, LiveRange]] = []
            for start, stop, r in sorted(entries, key=lambda e: e[2].start):
                active = [e for e in active if e[2].end >= r.start]
                for start2, stop2, r2 in active:
                    if start < stop2 and start2 < stop:
                        raise CompileError(
                            f"{_what(r2)} and {_what(r)} overlap at byte {max(start, start2)} "
                            "while both are live"
                        )
                active.append((start, stop, r))
