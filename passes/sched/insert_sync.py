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

from bisect import bisect_left, bisect_right, insort
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
    and the write entries alone (all that a read must look at), in the same order.

    The keys are also kept sorted by where their bytes start, so that the spans a task's
    bytes meet are found without a walk over every buffer the memory has held
    (`overlapping`, `within`); both give the keys in the order they were tracked in, the
    order of `spans`, in which the walk used to visit them."""

    __slots__ = (
        "entries", "spans", "writes", "_by_start", "_keys", "_order", "_stops", "_next", "_widest"
    )  # fmt: skip

    def __init__(self) -> None:
        self.spans: dict[object, tuple[int, int]] = {}
        self.entries: dict[object, list[tuple]] = {}
        self.writes: dict[object, list[tuple]] = {}
        self._by_start: list[tuple[int, int]] = []  # (start, order), sorted
        self._keys: dict[int, object] = {}  # order -> key
        self._order: dict[object, int] = {}  # key -> order
        self._stops: dict[int, int] = {}  # order -> where the key's bytes stop
        self._next = 0
        self._widest = 0

    def track(self, key, start: int, stop: int) -> None:
        """Give `key` its span (a key tracked before keeps its place in the order)."""
        if key not in self._order:
            order = self._next
            self._next += 1
            self._order[key], self._keys[order], self._stops[order] = order, key, stop
            insort(self._by_start, (start, order))
            self._widest = max(self._widest, stop - start)
        self.spans[key] = (start, stop)

    def forget(self, key) -> None:
        start, _ = self.spans.pop(key)
        del self.entries[key], self.writes[key]
        order = self._order.pop(key)
        del self._keys[order], self._stops[order]
        del self._by_start[bisect_left(self._by_start, (start, order))]

    def overlapping(self, start: int, stop: int) -> list:
        """The keys whose span shares a byte with [start, stop), in tracking order."""
        stops, keys = self._stops, self._keys
        lo = bisect_right(self._by_start, (start - self._widest, self._next))
        hi = bisect_left(self._by_start, (stop, -1))
        found = [order for _, order in self._by_start[lo:hi] if stops[order] > start]
        return [keys[order] for order in sorted(found)]

    def within(self, start: int, stop: int) -> list:
        """The keys whose span lies in [start, stop], in tracking order."""
        stops, keys = self._stops, self._keys
        lo = bisect_left(self._by_start, (start, -1))
        hi = bisect_right(self._by_start, (stop, self._next))
        found = [order for _, order in self._by_start[lo:hi] if stops[order] <= stop]
        return [keys[order] for order in sorted(found)]


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
                for other in memory.overlapping(start, stop):
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
                entries, writes = memory.entries, memory.writes
                if write:
                    # every earlier access of the bytes it writes now happens before it
                    if key in memory.spans:
                        if a is None:
                            entries[key], writes[key] = [], []
                        else:
                            entries[key] = [e for e in entries[key] if not a.covers(e[0])]
                            writes[key] = [e for e in writes[key] if not a.covers(e[0])]
                    if a is None or a.lo is None:  # the whole buffer: others inside it go
                        for other in memory.within(start, stop):
                            if other is not key:
                                memory.forget(other)
                mine = entries.setdefault(key, [])
                mine_writes = writes.setdefault(key, [])
                memory.track(key, start, stop)
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
