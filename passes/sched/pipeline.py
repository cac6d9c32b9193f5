"""sched-pipeline: double buffering; each tile loads its next piece while it computes this one.

The lowering emits every piece as load → compute → store, so a tile's DMA engine waits for
its MAC array and the other way round. This pass moves each load (a DMA from DDR into a fresh
OCM buffer, with that buffer's `sched.alloc`) up to just before the previous compute task on
its tile, so the load of piece i+1 runs during the compute of piece i. Loads of constants
(weights, biases) move across layers too: the next layer's first weights arrive during this
layer's last piece.

A load moves only when the move cannot change what it reads or what fits:
- every operand and token it uses is defined before the new place;
- nothing in between writes the DDR buffer it reads (program order is the reference
  interpreter's order, so the bytes it copies are the same);
- the tile's OCM still holds everything live there with the moved buffers added, counting the
  bytes of the buffers live at each point (aligned), with `OCM_SLACK` of the capacity kept
  free for the first-fit allocator's fragmentation.

It runs before `sched-allocate`, whose live ranges then keep the two pieces' buffers apart;
`sched-insert-sync` adds the waits that reuse of older pieces' bytes needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from mrvl.dialects import sched
from mrvl.passes.common import MrvlModulePass
from mrvl.passes.sched.allocate import overflowing_layers
from mrvl.passes.sched.liveness import live_ranges, root

OCM_SLACK = 0.0
"""The share of a tile's OCM the pass leaves unclaimed, for fragmentation."""


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def _is_load(op: Operation) -> bool:
    return (
        isinstance(op, sched.DmaOp)
        and sched.buffer_type(op.source).space.data == "ddr"
        and isinstance(op.dest.owner, sched.AllocOp)
        and op.dest.owner.tile is not None
    )


def _is_compute(op: Operation) -> bool:
    return isinstance(op, sched.TaskBase) and not isinstance(
        op, sched.DmaBase | sched.DDR_CONVERSIONS | sched.LutTaskOp
    )


def _writes_ddr(op: Operation):
    if isinstance(op, sched.DmaOp | sched.DDR_CONVERSIONS):
        dest = op.dest
        if sched.buffer_type(dest).space.data == "ddr":
            return root(dest)
    return None


@dataclass(frozen=True)
class PipelinePass(MrvlModulePass):
    name = "sched-pipeline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        program = sched.program_of(op)
        target = program.target
        alignment = target.ocm_alignment
        budget = int(target.ocm_bytes_per_tile * (1 - OCM_SLACK))
        ops = list(program.ops)
        # OCM bytes live per tile after each op, in the original order
        live_after: dict[int, list[int]] = {}
        deltas: dict[int, list[int]] = {}
        n = len(ops)
        for r in live_ranges(ops):
            if r.tile is None:
                continue
            d = deltas.setdefault(r.tile, [0] * (n + 1))
            size = _align(r.size, alignment)
            d[r.start] += size
            d[r.end + 1] -= size
        for tile, d in deltas.items():
            live_after[tile] = list(accumulate(d[:n]))
        position = {id(o): i for i, o in enumerate(ops)}  # by id(): Operation hashes slowly
        last_compute: dict[int, int] = {}  # tile -> index of its last compute task so far
        ddr_writes_since: dict[int, set] = {}  # tile -> id() of DDR roots written since then
        moves: dict[int, list[Operation]] = {}  # compute index -> the ops to put before it
        extra: dict[int, int] = {}  # compute index -> OCM bytes moved before it
        moved: set[int] = set()  # id() of the ops moved
        for i, o in enumerate(ops):
            written = _writes_ddr(o)
            if written is not None:
                for roots in ddr_writes_since.values():
                    roots.add(id(written))
            if _is_compute(o):
                tile = o.tile.value.data
                last_compute[tile] = i
                ddr_writes_since[tile] = set()
                continue
            if not _is_load(o):
                continue
            tile = o.tile.value.data
            at = last_compute.get(tile)
            if at is None:
                continue
            alloc = o.dest.owner
            if position[id(alloc)] < at or id(root(o.source)) in ddr_writes_since[tile]:
                continue
            if any(
                position[id(v.owner)] >= at
                for v in (o.source, *o.deps)
                if isinstance(v.owner, Operation)
            ):
                continue
            if id(alloc) in moved:  # a second DMA into a buffer already moved: it follows
                if all(m is not alloc for m in moves.get(at, ())):
                    continue
                moves[at].append(o)
            else:
                size = _align(alloc.buffer_type.size_bytes, alignment)
                peak = max(live_after[tile][at - 1 : i + 1], default=0)
                if peak + extra.get(at, 0) + size > budget:
                    continue
                extra[at] = extra.get(at, 0) + size
                moves.setdefault(at, []).extend((alloc, o))
            moved.update((id(alloc), id(o)))
        while moves:
            failing = overflowing_layers(live_ranges(self.reordered(ops, moves, moved)), target)
            if not failing:
                break
            # give up double buffering in the layers whose buffers did not fit, and try again:
            # the loads moved before their computes, else their loads moved before another
            # layer's compute (the next layer's first weights), and all moves only when the
            # failing buffers are in no move (all of them went as soon as the first rule
            # found none, which cost an int8 ResNet-18 at 1 tile all its double buffering)
            dropped = (
                [at for at in moves if ops[at].location in failing]
                or [at for at, ms in moves.items() if any(m.location in failing for m in ms)]
                or list(moves)
            )
            for at in dropped:
                for m in moves.pop(at):
                    moved.discard(id(m))
        if not moves:
            return
        block = program.body.block
        for o in ops:
            o.detach()
        for o in self.reordered(ops, moves, moved):
            block.add_op(o)

    @staticmethod
    def reordered(ops, moves, moved) -> list[Operation]:
        order = []
        for i, o in enumerate(ops):
            order.extend(moves.get(i, ()))
            if id(o) not in moved:
                order.append(o)
        return order
