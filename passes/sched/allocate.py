"""sched-allocate: give every buffer its byte offset in DDR or in its tile's OCM.

DDR holds, in order: the region's I/O tensors, the constant pool (contiguous, so the binary
can load it in one piece at the program's `const_base`), then the intermediates. OCM buffers are
allocated per tile over their live ranges in program order (first fit), so a tile's memory
is reused from one piece of work to the next; a piece that does not fit is a compile error
naming its layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Operation

from mrvl.dialects import sched
from mrvl.errors import CompileError
from mrvl.locations import location_name
from mrvl.passes.common import MrvlModulePass


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


@dataclass(frozen=True)
class AllocatePass(MrvlModulePass):
    name = "sched-allocate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        program = sched.program_of(op)
        target = program.target
        ops = list(program.ops)
        defs = [o for o in ops if isinstance(o, sched.BufferDefBase)]
        ddr_align = target.ddr_alignment
        cursor = 0
        for group in (sched.IOOp, sched.ConstOp, sched.AllocOp):
            if group is sched.ConstOp:
                cursor = _align(cursor, ddr_align)
                program.const_base = IntegerAttr(cursor, i64)
            for d in defs:
                if type(d) is group and d.buffer_type.space.data == "ddr":
                    cursor = _align(cursor, ddr_align)
                    d.offset = IntegerAttr(cursor, i64)
                    cursor += d.buffer_type.size_bytes
            if group is sched.ConstOp:
                program.const_end = IntegerAttr(cursor, i64)
        ddr_size = _align(cursor, ddr_align)
        if ddr_size > target.ddr_bytes:
            raise CompileError(
                f"the region needs {ddr_size} bytes of DDR, {target.name} has {target.ddr_bytes}"
            )
        program.ddr_size = IntegerAttr(ddr_size, i64)
        self._allocate_ocm(ops, target.ocm_bytes_per_tile, target.ocm_alignment)

    @staticmethod
    def _allocate_ocm(ops: list[Operation], capacity: int, alignment: int) -> None:
        position = {o: i for i, o in enumerate(ops)}
        intervals = []
        for o in ops:
            if isinstance(o, sched.AllocOp) and o.buffer_type.space.data == "ocm":
                last = max((position[u.operation] for u in o.buffer.uses), default=position[o])
                intervals.append((position[o], last, o))
        live: dict[int, list[tuple[int, int, int]]] = {}  # tile -> [(end, offset, size)]
        for start, end, alloc in intervals:
            tile = alloc.tile.value.data
            size = _align(alloc.buffer_type.size_bytes, alignment)
            still_live = [entry for entry in live.get(tile, []) if entry[0] >= start]
            live[tile] = still_live
            busy = sorted((off, sz) for _, off, sz in still_live)
            offset = 0
            for off, sz in busy:
                if offset + size <= off:
                    break
                offset = max(offset, off + sz)
            if offset + size > capacity:
                raise CompileError(
                    f"layer {location_name(alloc.location) or '?'}: OCM of tile {tile} "
                    f"overflows ({offset + size} > {capacity} bytes)"
                )
            alloc.offset = IntegerAttr(offset, i64)
            live.setdefault(tile, []).append((end, offset, size))
