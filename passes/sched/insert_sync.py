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

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, i32
from xdsl.ir import Operation, SSAValue

from mrvl.dialects import sched
from mrvl.isa import TABLE_ACTIVATIONS, queue_slot
from mrvl.passes.common import MrvlModulePass
from mrvl.passes.isa.convert_sched_to_mlip import opcode_of
from mrvl.passes.sched.liveness import Access, accesses, byte_range


def queue_of(op: sched.TaskBase) -> int:
    """The in-order queue that runs `op`: its tile's queue for the engine of the instruction
    it becomes (`isa.queue_slot`)."""
    return op.tile.value.data * 3 + queue_slot(opcode_of(type(op)))


class _Memory:
    """The tracked accesses of one memory, by buffer (or table) key: its byte span, and its
    entries `(access, write, token, queue, seq)` (`access` None: the activation-table memory),
    and the write entries alone (all that a read must look at), in the same order."""

    __slots__ = ("entries", "spans", "writes")

    def __init__(self) -> None:
        self.spans: dict[object, tuple[int, int]] = {}
        self.entries: dict[object, list[tuple]] = {}
        self.writes: dict[object, list[tuple]] = {}


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
    return act is not None and act.isa in TABLE_ACTIVATIONS and not isinstance(op, sched.LutTaskOp)


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
        # per buffer: None (nothing writes its bytes) or (memory, key, byte range); offsets
        # do not change in this pass
        placed: dict[sched.BufferDefBase, tuple | None] = {}
        for task in program.ops:
            if not isinstance(task, sched.TaskBase):
                continue
            q = queue_of(task)
            vc = queue_clock[q]
            for d in task.deps:
                vc = tuple(map(max, vc, token_clock[d]))
            touched: list[tuple[_Memory, object, int, int, Access | None, bool]] = []
            for a in accesses(task):
                buffer = a.buffer
                where = placed.get(buffer, False)
                if where is False:
                    where = placed[buffer] = _placement(buffer, memories)
                if where is not None:
                    touched.append((*where, a, a.write))
            tile = task.tile.value.data
            if isinstance(task, sched.LutTaskOp):
                memory = memories.setdefault(("table", tile), _Memory())
                touched.append((memory, "table", 0, 1, None, True))
            elif _reads_table(task):
                memory = memories.setdefault(("table", tile), _Memory())
                touched.append((memory, "table", 0, 1, None, False))
            extra: list[SSAValue] = []
            for memory, key, start, stop, a, write in touched:
                # a read conflicts with the writes only
                entries = memory.entries if write else memory.writes
                for other, (s2, e2) in memory.spans.items():
                    if s2 >= stop or start >= e2:
                        continue
                    same = other is key and a is not None
                    for access, _, token, e_queue, e_seq in reversed(entries[other]):
                        if same and not a.overlaps(access):
                            continue
                        if vc[e_queue] > e_seq:
                            continue  # already ordered
                        extra.append(token)
                        vc = tuple(map(max, vc, token_clock[token]))
            if extra:
                add_deps(task, extra)
            post = list(vc)
            post[q] = seq[q] + 1
            post = tuple(post)
            for memory, key, start, stop, a, write in touched:
                spans, entries, writes = memory.spans, memory.entries, memory.writes
                if write:
                    # every earlier access of the bytes it writes now happens before it
                    whole = a is None or a.lo is None
                    for other, (s2, e2) in list(spans.items()):
                        if other is key:
                            if a is None:
                                entries[other], writes[other] = [], []
                            else:
                                entries[other] = [e for e in entries[other] if not a.covers(e[0])]
                                writes[other] = [e for e in writes[other] if not a.covers(e[0])]
                        elif whole and start <= s2 and e2 <= stop:
                            del spans[other], entries[other], writes[other]
                mine = entries.setdefault(key, [])
                mine_writes = writes.setdefault(key, [])
                spans[key] = (start, stop)
                if not write:  # a later read on this queue supersedes an earlier one it covers
                    mine[:] = [
                        e for e in mine if e[1] or e[3] != q or not (a is None or a.covers(e[0]))
                    ]
                entry = (a, write, task.token, q, seq[q])
                mine.append(entry)
                if write:
                    mine_writes.append(entry)
            seq[q] += 1
            queue_clock[q] = post
            token_clock[task.token] = post


def _placement(buffer: sched.BufferDefBase, memories: dict) -> tuple | None:
    """(memory, key, start, stop) of a buffer's bytes; None for bytes nothing writes."""
    if isinstance(buffer, sched.ConstOp) or (isinstance(buffer, sched.IOOp) and buffer.is_input):
        return None  # bytes nothing writes cannot take part in a hazard
    tile = getattr(buffer, "tile", None)
    memory_key = ("ocm", tile.value.data) if tile is not None else ("ddr",)
    memory = memories.setdefault(memory_key, _Memory())
    return (memory, buffer, *byte_range(buffer))
