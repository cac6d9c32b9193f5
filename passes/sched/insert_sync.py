"""sched-insert-sync: add the tokens a parallel MLIP needs, once every buffer has its bytes.

On the machine (docs/isa.md, "Tokens"), each tile's DMA engine, MAC array and vector unit
run their own queues in order and in parallel; only queue order and tokens order two tasks.
After `sched-allocate`, two buffers may share bytes (a buffer reuses a dead one's), so this
pass walks the program in order and, for every pair of tasks that touch a common byte of one
memory (DDR, a tile's OCM, a tile's activation-table memory) where at least one writes (RAW,
WAR, WAW), makes the later one wait for the earlier one's token, unless the earlier one
already happens before it (the same queue, or a chain of tokens; tracked as vector clocks
over the queues). The tokens the lowering gave stay; this pass only adds.

Two accesses of one buffer compare by their boxes exactly; accesses of two buffers that
share bytes are taken to conflict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, i32
from xdsl.ir import Operation, SSAValue

from mrvl.dialects import sched
from mrvl.isa import TABLE_ACTIVATIONS
from mrvl.passes.common import MrvlModulePass
from mrvl.passes.sched.liveness import Access, accesses, byte_range

ENGINE_OF = {sched.DmaOp: 0, sched.ConvertOp: 0, sched.LutTaskOp: 0}
ENGINE_OF.update({sched.Conv2DTaskOp: 1, sched.FullyConnectedTaskOp: 1})
"""Queue slot of each task within its tile (0 DMA, 1 MAC, 2 vector: the rest), as isa.md."""


def queue_of(op: sched.TaskBase) -> int:
    return op.tile.value.data * 3 + ENGINE_OF.get(type(op), 2)


@dataclass
class _Entry:
    access: Access | None
    """None: the tile's activation-table memory (one location)."""
    write: bool
    token: SSAValue
    queue: int
    seq: int


@dataclass
class _Memory:
    """The tracked accesses of one memory, by buffer (or table) key."""

    spans: dict[object, tuple[int, int]] = field(default_factory=dict)
    entries: dict[object, list[_Entry]] = field(default_factory=dict)


def add_deps(op: sched.TaskBase, extra: list[SSAValue]) -> None:
    """Append tokens to `op`'s `after(...)` (the last operand segment)."""
    op.operands = [*op.operands, *extra]
    sizes = op.properties.get("operandSegmentSizes")
    if sizes is not None:
        values = list(sizes.get_values())
        values[-1] += len(extra)
        op.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, values)


def _reads_table(op: Operation) -> bool:
    act = getattr(op, "activation", None)
    return (
        act is not None and act.isa in TABLE_ACTIVATIONS and not isinstance(op, sched.LutTaskOp)
    )


@dataclass(frozen=True)
class InsertSyncPass(MrvlModulePass):
    name = "sched-insert-sync"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        program = sched.program_of(op)
        nq = program.tiles * 3
        queue_clock = [(0,) * nq for _ in range(nq)]
        token_clock: dict[SSAValue, tuple[int, ...]] = {}
        seq = [0] * nq
        memories: dict[object, _Memory] = {}
        for task in program.ops:
            if not isinstance(task, sched.TaskBase):
                continue
            q = queue_of(task)
            vc = queue_clock[q]
            for d in task.deps:
                vc = tuple(map(max, vc, token_clock[d]))
            touched: list[tuple[object, object, tuple[int, int], Access | None, bool]] = []
            for a in accesses(task):
                if isinstance(a.buffer, sched.ConstOp) or (
                    isinstance(a.buffer, sched.IOOp) and a.buffer.is_input
                ):
                    continue  # bytes nothing writes cannot take part in a hazard
                tile = getattr(a.buffer, "tile", None)
                memory = ("ocm", tile.value.data) if tile is not None else ("ddr",)
                touched.append((memory, a.buffer, byte_range(a.buffer), a, a.write))
            tile = task.tile.value.data
            if isinstance(task, sched.LutTaskOp):
                touched.append((("table", tile), "table", (0, 1), None, True))
            elif _reads_table(task):
                touched.append((("table", tile), "table", (0, 1), None, False))
            extra: list[SSAValue] = []
            for memory_key, key, (start, stop), a, write in touched:
                memory = memories.setdefault(memory_key, _Memory())
                for other, (s2, e2) in memory.spans.items():
                    if s2 >= stop or start >= e2:
                        continue
                    same = other is key
                    for e in reversed(memory.entries[other]):
                        if not (write or e.write):
                            continue
                        if same and a is not None and not a.overlaps(e.access):
                            continue
                        if vc[e.queue] > e.seq:
                            continue  # already ordered
                        extra.append(e.token)
                        vc = tuple(map(max, vc, token_clock[e.token]))
            if extra:
                add_deps(task, extra)
            post = list(vc)
            post[q] = seq[q] + 1
            post = tuple(post)
            for memory_key, key, (start, stop), a, write in touched:
                memory = memories[memory_key]
                if write:
                    # every earlier access of the bytes it writes now happens before it
                    whole = a is None or a.lo is None
                    for other in list(memory.spans):
                        s2, e2 = memory.spans[other]
                        if other is key:
                            memory.entries[other] = [
                                e
                                for e in memory.entries[other]
                                if not (a is None or a.covers(e.access))
                            ]
                        elif whole and start <= s2 and e2 <= stop:
                            del memory.spans[other], memory.entries[other]
                entries = memory.entries.setdefault(key, [])
                memory.spans[key] = (start, stop)
                if not write:  # a later read on this queue supersedes an earlier one it covers
                    entries[:] = [
                        e
                        for e in entries
                        if e.write or e.queue != q or not (a is None or a.covers(e.access))
                    ]
                entries.append(_Entry(a, write, task.token, q, seq[q]))
            seq[q] += 1
            queue_clock[q] = post
            token_clock[task.token] = post
