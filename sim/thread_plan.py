"""Which thread runs each instruction of a program, and what it waits for: the tile plan of the
Numba engine's threads.

A program for several tiles is mostly independent work: each tile's instructions touch its own
OCM, and the tiles meet only where one reads DDR bytes another wrote (a layer's input, written
by the tiles of the layer before), or where a multicast writes into another tile's OCM. So the
engine's threads can each run the instructions of some of the tiles, in program order, and
wait only where an instruction touches bytes that an earlier instruction of another thread
touched (a write and a read or two writes, in either order). That runs every instruction kind
in parallel, the small ones too, and meets once or twice a layer instead of at each shared
instruction (`sharing`).

Every result is the one of program order: a thread runs its own instructions in order, and an
instruction starts only once every earlier conflicting instruction of the other threads is
done (`need`); nothing else can change the bytes it reads or read the bytes it writes. The plan
follows the bytes the instructions touch (`operands`), not the program's tokens, so it holds
for any valid program, hazards or not. The bytes are followed in units of UNIT bytes, each
access by its hull: a coarser view only adds waits.

The weight caches' slots are followed too: convs of one slot on two tiles read one packing,
and a run that packs it (the first, or any, for weights that are not a fixed slice of the
constant pool) writes it, so those convs are ordered like two writes to one place.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mrvl.sim.cycles import instruction_cost
from mrvl.sim.operands import OCM, TABLE, operands
from mrvl.sim.validate import ValidProgram
from mrvl.sim.weight_cache import CONSTANT, PerProgram

UNIT = 64
"""The bytes the plan follows as one (a cache line): an access covers the units of its hull."""

SLOT_SPACES = ("fp16 slot", "int8 slot")
"""The pseudo-spaces of the two weight caches' slots, one unit a slot."""


class ThreadPlan(NamedTuple):
    """`owner[r]`: the thread that runs row r; `need[r, u]`: how many of thread u's rows must
    be done before row r starts (0: none; a row's own thread's column is 0). The `end` row
    needs every row of every thread. `announce[r]`: 1 if another thread's row needs row r
    done, so that its thread must count its rows done once it is (the others need not)."""

    owner: np.ndarray
    need: np.ndarray
    announce: np.ndarray

    @staticmethod
    def none() -> ThreadPlan:
        """No plan: the threads share instructions instead (`sharing`)."""
        return ThreadPlan(np.zeros(0, np.int64), np.zeros((0, 1), np.int64), np.zeros(0, np.uint8))


class _Shadow:
    """Per memory (a space of one tile, DDR, or a cache's slots) and per thread, the position
    + 1 of the thread's last row that wrote each unit, and of its last row that read it."""

    def __init__(self, threads: int):
        self.threads = threads
        self.write = np.zeros((threads, 0), np.int32)
        self.read = np.zeros((threads, 0), np.int32)

    def _fit(self, stop: int) -> None:
        if stop > self.write.shape[1]:
            size = max(stop, 2 * self.write.shape[1])
            grow = ((0, 0), (0, size - self.write.shape[1]))
            self.write = np.pad(self.write, grow)
            self.read = np.pad(self.read, grow)

    def conflicts(self, lo: int, hi: int, writes: bool, need: np.ndarray) -> None:
        """Raise `need[u]` to the rows of thread u an access of units [lo, hi) must wait for."""
        self._fit(hi)
        latest = self.write[:, lo:hi].max(axis=1)
        if writes:
            latest = np.maximum(latest, self.read[:, lo:hi].max(axis=1))
        np.maximum(need, latest, out=need)

    def record(self, lo: int, hi: int, writes: bool, thread: int, done: int) -> None:
        (self.write if writes else self.read)[thread, lo:hi] = done


def _accesses(ins, slots: tuple[int, int], slot_writes: tuple[bool, bool]):
    """(memory key, first unit, stop unit, writes) of each access of an instruction."""
    reads, writes = operands(ins)
    for access, is_write in [(a, False) for a in reads] + [(a, True) for a in writes]:
        lo, hi = access.hull
        key = access.space
        if access.space in (OCM, TABLE):
            key = (access.space, ins.tile if access.tile is None else access.tile)
        yield key, lo // UNIT, -(-hi // UNIT), is_write
    for space, slot, write in zip(SLOT_SPACES, slots, slot_writes):
        if slot >= 0:
            yield space, slot, slot + 1, write


def plan_threads(
    rows: ValidProgram,
    threads: int,
    slots: tuple[np.ndarray, np.ndarray],
    slot_writes: tuple[np.ndarray, np.ndarray],
    thread_of_tile=None,
) -> ThreadPlan:
    """The plan of `rows` on `threads` threads: tile t's rows on thread `thread_of_tile[t]`
    (default t % threads). `slots`: per row its fp16 and int8 weight-cache slot (-1: none);
    `slot_writes`: per slot whether a run may pack it (write it) rather than only read it."""
    count = len(rows.code)
    owner = np.zeros(count, np.int64)
    need = np.zeros((count, threads), np.int64)
    done = [0] * threads
    after = np.zeros(count, np.int64)  # per row, its thread's rows done once it is
    shadows: dict = {}
    for r, ins in enumerate(rows.code):
        if ins.opcode == "end":
            need[r] = done
            need[r, 0] = 0
            break
        thread = ins.tile % threads if thread_of_tile is None else int(thread_of_tile[ins.tile])
        owner[r] = thread
        row_slots = (int(slots[0][r]), int(slots[1][r]))
        writes = tuple(
            bool(slot >= 0 and w[slot]) for slot, w in zip(row_slots, slot_writes, strict=True)
        )
        mine = np.zeros(threads, np.int64)
        touched = list(_accesses(ins, row_slots, writes))
        for key, lo, hi, is_write in touched:
            shadow = shadows.get(key)
            if shadow is None:
                shadow = shadows[key] = _Shadow(threads)
            shadow.conflicts(lo, hi, is_write, mine)
        mine[thread] = 0
        need[r] = mine
        done[thread] += 1
        after[r] = done[thread]
        for key, lo, hi, is_write in touched:
            shadows[key].record(lo, hi, is_write, thread, done[thread])
    announce = np.zeros(count, np.uint8)
    for thread in range(threads):
        needed = np.isin(after, need[:, thread][need[:, thread] > 0])
        announce[(owner == thread) & needed] = 1
    return ThreadPlan(owner, need, announce)


_plans = PerProgram()


TILE_PLAN_MACS = 1 << 23
"""The fewest multiply-adds of a program that runs by tile plan (about 0.4 ms of one thread's
convs): starting the helper threads and meeting them costs a smaller one more than they take
off it (TC-ResNet8, 1.5 M multiply-adds in 1 ms: 1.45x slower on two threads by plan than on
one, idle)."""


def use_tile_plan(rows: ValidProgram) -> bool:
    """Whether threads run `rows` by tile plan: its instructions are on two tiles or more, and
    it has TILE_PLAN_MACS multiply-adds (`cycles.instruction_cost`'s count; found once per
    program)."""

    def worth_it() -> bool:
        if len({ins.tile for ins in rows.code}) < 2:
            return False
        return sum(instruction_cost(ins, rows.target)[1] for ins in rows.code) >= TILE_PLAN_MACS

    return _plans.get(rows, "tiles", worth_it)


def thread_plan(rows: ValidProgram, threads: int, caches) -> ThreadPlan:
    """The plan of `rows` on `threads` threads (`plan_threads`), made once per program and
    state of its weight caches. `caches`: per weight cache (fp16, int8) (warm, arrays), its
    `arrays` as a run gets them (slots per row, ..., flags per slot last) and whether a run has
    packed every slot: then a constant slot is only read."""
    warm = tuple(bool(w) for w, _ in caches)
    key = ("thread plan", threads, warm, tuple(len(a[-1]) for _, a in caches))

    def make() -> ThreadPlan:
        slots = tuple(arrays[0] for _, arrays in caches)
        only_read = tuple(hot & ((arrays[-1] & CONSTANT) != 0) for hot, arrays in caches)
        return plan_threads(rows, threads, slots, tuple(~read for read in only_read))

    return _plans.get(rows, key, make)
