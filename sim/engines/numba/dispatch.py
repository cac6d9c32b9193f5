"""The Numba engine's instruction loop: one kernel per opcode in a table (`implements`, as the
reference engine's), the compiled loop over a program's rows (`run_program`), and `execute`,
which runs it on the engine's threads.

Every kernel has one signature, `kernel(i, row, frow, machine, tally, weights, skip, sync,
worker, workers) -> status`: instruction i's integer and float words, the machine's
memories `machine` = (ddr, ocm, tables, lut, lut_bits, the qconvs' weight slots of
`int8_weights.py`), its (saturated, NaN) counts, the weight
cache's arrays and DMA skips, and the threads' shared state (`sharing.py`). The status is 0
(done), STOP (the program ends here for this thread), or FAULT - fault.
"""

from __future__ import annotations

import warnings

import numpy as np
from numba import literal_unroll
from numba.core.errors import NumbaExperimentalFeatureWarning

from mrvl.isa import OPCODE_BY_NAME, OpcodeTable
from mrvl.sim.engines.numba.dma import cvt, dma, load_table
from mrvl.sim.engines.numba.fields import OP_END
from mrvl.sim.engines.numba.int8_bmm import qbmm_kernel
from mrvl.sim.engines.numba.int8_conv import qconv_kernel
from mrvl.sim.engines.numba.int8_resize import qresize_kernel
from mrvl.sim.engines.numba.int8_spans import INT8_KERNELS
from mrvl.sim.engines.numba.int8_weights import QWeightCache, qweight_cache
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.long_rows import lnapply, lnstats
from mrvl.sim.engines.numba.mac import conv
from mrvl.sim.engines.numba.mac_tiles import NARROW, packed_size
from mrvl.sim.engines.numba.matmul import bmm, fc
from mrvl.sim.engines.numba.normalization import layernorm, softmax
from mrvl.sim.engines.numba.numerics import F16_TO_F32, F16_TO_F32_BITS
from mrvl.sim.engines.numba.reduce import binary, reduce
from mrvl.sim.engines.numba.sharing import (
    SYNC_FAULT,
    SYNC_WORKERS,
    _helper_pool,
    abandon,
    count_rows_done,
    new_sync,
    note_fault,
    observe,
    progress_at,
    shared_work,
    shares_any,
    threads,
    wait_before,
)
from mrvl.sim.engines.numba.vector import TABLE_NOT_INTEGER, add, mul, pool, resize, scale
from mrvl.sim.errors import SimulatorError
from mrvl.sim.memory import Memory
from mrvl.sim.stats import RunStats
from mrvl.sim.thread_plan import ThreadPlan, thread_plan, use_tile_plan
from mrvl.sim.validate import ValidProgram, describe
from mrvl.sim.weight_cache import Packing, PerProgram, WeightCache, weight_cache

STOP = -1
"""A kernel's status: the program ends here for this thread (`end`, or the run abandoned)."""
FAULT = -1
"""A kernel's status FAULT - fault (fault >= 1): the instruction faulted."""

PACKING = Packing(lambda outputs, steps: int(packed_size(outputs, steps)), NARROW)
"""How the MAC kernels pack a weight-cache slot (`mac_tiles.pack_weights`)."""

KERNELS = OpcodeTable("a Numba kernel")
implements = KERNELS.register


@jit
def cache_slot(weights, i):
    """Instruction i's slot of the weight cache (WeightCache.arrays) as (raw, packed, filled),
    or three empty arrays if it has none."""
    slots, raw_at, packed_at, raw, packed, filled = weights
    slot = slots[i]
    if slot < 0:
        return raw[:0], packed[:0], filled[:0]
    return (
        raw[raw_at[slot] : raw_at[slot + 1]],
        packed[packed_at[slot] : packed_at[slot + 1]],
        filled[slot : slot + 1],
    )


# ------------------------------------------------------------------------------ the kernels


@implements("dma")
@jit
def _dma(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    if skip[i] == 0:  # WeightCache.skip
        dma(row, machine[0], machine[1][row[1]])
    return 0


@implements("cvt")
@jit
def _cvt(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    cvt(row, machine[0], machine[4], tally)
    return 0


@implements("lut")
@jit
def _lut(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    load_table(row, machine[0], machine[2][row[1]])
    return 0


@implements("conv")
@jit
def _conv(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    tile = row[1]
    cache = cache_slot(weights, i)
    ocm, table = machine[1][tile], machine[2][tile]
    return conv(row, frow, ocm, machine[3], table, tally, cache, sync, i, worker, workers)


@implements("fc")
@jit
def _fc(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    tile = row[1]
    ocm, table, cache = machine[1][tile], machine[2][tile], cache_slot(weights, i)
    return fc(row, frow, ocm, machine[3], table, tally, cache, sync, i, worker, workers)


@implements("bmm")
@jit
def _bmm(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    return bmm(row, machine[1][row[1]], machine[3], tally, sync, i, worker, workers)


@implements("pool")
@jit
def _pool(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    return pool(row, machine[1][row[1]], machine[3], tally, sync, i, worker, workers)


@implements("resize")
@jit
def _resize(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    fault = resize(row, machine[1][row[1]], machine[3], tally)
    return FAULT - fault if fault else 0


@implements("add")
@jit
def _add(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    tile = row[1]
    ocm, table = machine[1][tile], machine[2][tile]
    return add(row, frow, ocm, machine[3], table, tally, sync, i, worker, workers)


@implements("scale")
@jit
def _scale(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    tile = row[1]
    scale(row, frow, machine[1][tile], machine[3], machine[2][tile], tally)
    return 0


@implements("mul")
@jit
def _mul(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    tile = row[1]
    mul(row, frow, machine[1][tile], machine[3], machine[2][tile], tally)
    return 0


@implements("softmax")
@jit
def _softmax(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    return softmax(row, machine[1][row[1]], machine[3], tally, sync, i, worker, workers)


@implements("layernorm")
@jit
def _layernorm(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    return layernorm(row, frow, machine[1][row[1]], machine[3], tally, sync, i, worker, workers)


@implements("lnstats")
@jit
def _lnstats(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    lnstats(row, frow, machine[1][row[1]], machine[3])
    return 0


@implements("lnapply")
@jit
def _lnapply(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    lnapply(row, machine[1][row[1]], machine[3], tally)
    return 0


@implements("reduce")
@jit
def _reduce(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    reduce(row, machine[1][row[1]], machine[3], tally)
    return 0


@implements("binary")
@jit
def _binary(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    binary(row, machine[1][row[1]], machine[3], tally)
    return 0


@implements("end")
@jit
def _end(i, row, frow, machine, tally, weights, skip, sync, worker, workers):
    return STOP


for _opcode, _kernel in INT8_KERNELS.items():  # quant, qadd, ... (int8.py, int8_spans.py)
    implements(_opcode)(_kernel)
implements("qconv")(qconv_kernel)  # int8_conv.py
implements("qresize")(qresize_kernel)  # int8_resize.py
implements("qbmm")(qbmm_kernel)  # int8_bmm.py

KERNELS.require_complete()

KERNEL_TABLE = tuple((OPCODE_BY_NAME[name].opcode, kernel) for name, kernel in KERNELS.items())
"""(opcode, kernel) pairs, which `run_program` looks an opcode up in (Numba freezes it)."""


# ------------------------------------------------------------------------------- the loop


@jit
def run_row(i, words, floats, machine, counts, weights, skip, sync, worker, together):
    """Row i's kernel, on `together` threads of which this is `worker`: its status."""
    row, frow, op = words[i], floats[i], words[i, 0]
    status = STOP
    for entry in literal_unroll(KERNEL_TABLE):
        if entry[0] == op:
            status = entry[1](
                i, row, frow, machine, counts[i], weights, skip, sync, worker, together
            )
    return status


@jit
def run_program(words, floats, machine, counts, weights, skip, sync, worker, owner, need, announce):
    """Every instruction in order; the rows end with the program's first `end`. Returns -1, or
    index * 8 + fault of the instruction that faulted (only resize can: its tables are data).
    counts[i] gets instruction i's (saturated, nans), zeros on entry. `weights` is the weight
    cache's arrays (WeightCache.arrays); `skip[i]` = 1 skips DMA i (WeightCache.skip).

    Several threads may run one program together, each calling this with its `worker` index
    and its own `counts`, and one `sync` array (`sharing.new_sync`). With a tile plan
    (`owner`, `need`, `announce`: `thread_plan.ThreadPlan`, not empty) each runs its own rows
    (`run_planned`). Without one, thread 0 runs every instruction, and the others join it in
    the convs, adds and pools it shares (`shared_work`), taking chunks of their work, and skip
    the rest; `abandon(sync)` ends the run for all (thread 0 does on a fault)."""
    if owner.shape[0] > 0:
        return run_planned(
            words, floats, machine, counts, weights, skip, sync, worker, owner, need, announce
        )
    slots = weights[0]
    workers = sync[SYNC_WORKERS]
    for i in range(words.shape[0]):
        op = words[i, 0]
        shared = workers > 1 and shared_work(op, words[i], slots[i], workers)  # a call: refcounts
        if worker > 0 and not shared:
            if op == OP_END:
                return -1
            continue
        together = workers if shared else 1  # the threads computing this instruction
        status = run_row(i, words, floats, machine, counts, weights, skip, sync, worker, together)
        if status >= 0:
            continue
        if status == STOP:
            return -1
        abandon(sync)
        return i * 8 + FAULT - status
    return -1


@jit
def run_planned(words, floats, machine, counts, weights, skip, sync, worker, owner, need, announce):
    """`run_program` by tile plan: this thread runs the rows it owns (`owner[i] == worker`) in
    order, each alone, once the rows of the other threads it needs are done (`need[i, u]` of
    thread u's rows), and counts the rows it has done when it finishes one that another
    thread needs (`announce`, `count_rows_done`). Thread 0 ends at
    `end` once every thread's rows are done. A faulting row stops every thread before any later
    row, and the threads finish the earlier ones (`note_fault`): the first fault in program
    order is the one reported, as on one thread."""
    workers = sync[SYNC_WORKERS]
    done = told = 0  # this thread's rows done, and counted in sync
    for i in range(words.shape[0]):
        if observe(sync, SYNC_FAULT) < i:
            return -1
        op = words[i, 0]
        if op != OP_END and owner[i] != worker:
            continue
        if op != OP_END or worker == 0:
            for u in range(workers):
                if need[i, u] > 0 and not wait_before(sync, progress_at(sync, u), need[i, u], i):
                    return -1
        if op == OP_END:
            return -1
        status = run_row(i, words, floats, machine, counts, weights, skip, sync, 0, 1)
        if status >= 0:
            done += 1
            if announce[i]:
                count_rows_done(sync, worker, done - told)
                told = done
            continue
        if status == STOP:  # no kernel but `end`'s stops a thread that runs it alone
            return -1
        note_fault(sync, i)
        return i * 8 + FAULT - status
    return -1


def _run_program(*args) -> int:
    """run_program, quiet while it compiles: Numba types the kernel table (a tuple of compiled
    functions) as first-class functions, called through their addresses, and flags that
    feature as experimental at each compile."""
    if run_program.overloads:  # compiled (`signatures` would hash each one's types: 12 us)
        return run_program(*args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaExperimentalFeatureWarning)
        return run_program(*args)


_alone = PerProgram()


def runs_alone(rows: ValidProgram, cache: WeightCache) -> bool:
    """Whether a run of `rows` (a weight cache's, `cache`) would use one thread whatever the
    machine: it does not run by tile plan, and two threads would share none of its
    instructions (`shares_any`; more threads share what two do)."""
    return not use_tile_plan(rows) and not shares_any(rows.words, cache.arrays[0], 2)


def execute(
    valid: ValidProgram,
    memory: Memory,
    stats: RunStats | None = None,
    *,
    workers: int | None = None,
) -> None:
    """Run a validated program on `memory`; `stats` (reset by the caller) gets each
    instruction's counts. `workers`: the threads to run it on (default: `threads()`)."""
    cache = weight_cache(valid, PACKING)
    # valid's instructions, a multicast dma as one dma per tile
    rows = valid if cache.rows is None else cache.rows
    if workers is None:  # no thread joins a program run alone: count no free CPU for it
        workers = threads(_alone.get(rows, "alone", lambda: runs_alone(rows, cache)))
    counts = np.zeros((len(rows.words), 2), np.int64)
    owned = cache.lock.acquire(blocking=False)  # another thread's run may be filling it
    arrays = cache.arrays if owned else WeightCache.none(rows)
    skip = cache.skip() if owned else np.zeros(len(rows.words), np.uint8)
    qcache = qweight_cache(rows)  # the qconvs' packed weights (int8_weights.py)
    q_owned = qcache.lock.acquire(blocking=False)
    qweights = qcache.arrays if q_owned else QWeightCache.none(rows)
    if q_owned:
        skip = skip | qcache.skip()  # the DMAs of constant qconv weights, once packed
    plan = ThreadPlan.none()
    if workers > 1 and use_tile_plan(rows):
        caches = ((cache, arrays, owned), (qcache, qweights, q_owned))
        plan = thread_plan(rows, workers, [(c.warm and o, a) for c, a, o in caches])
    elif workers > 1 and not shares_any(rows.words, arrays[0], workers):
        workers = 1  # nothing to share: no helper threads
    sync = new_sync(workers, len(rows.words))
    machine = (memory.ddr, memory.ocm, memory.tables, F16_TO_F32, F16_TO_F32_BITS, qweights)
    args = (rows.words, rows.floats, machine)
    try:
        joined = []
        if workers > 1:
            pool = _helper_pool(workers - 1)
            for worker in range(1, workers):
                mine = np.zeros_like(counts)
                run = (*args, mine, arrays, skip, sync, worker, *plan)
                joined.append((pool.submit(_run_program, *run), mine))
        try:
            status = _run_program(*args, counts, arrays, skip, sync, 0, *plan)
        finally:
            if len(plan.owner) == 0:
                abandon(sync)  # the helpers that wait for thread 0 stop waiting
            for future, mine in joined:
                helper = future.result()  # by tile plan, a helper's row may fault first
                status = helper if status < 0 or 0 <= helper < status else status
                counts += mine
            abandon(sync)
        if status < 0:
            cache.warm = owned or cache.warm  # every conv ran: its slot is packed
            qcache.warm = q_owned or qcache.warm
    finally:
        if owned:
            cache.lock.release()
        if q_owned:
            qcache.lock.release()
    if cache.origin is not None:  # rows back to instructions (each has rows, in order)
        counts = np.add.reduceat(counts, cache.firsts, axis=0)
    if stats is not None:
        stats.saturated[:] = counts[:, 0]
        stats.nans[:] = counts[:, 1]
    if status >= 0:
        index, fault = divmod(int(status), 8)
        if cache.origin is not None:
            index = int(cache.origin[index])
        ins = valid.code[index]
        f = ins.fields
        what = "row table" if fault <= 2 else "column table"
        lo, size = (f["row0"], f["in_shape"][1]) if fault <= 2 else (0, f["in_shape"][2])
        if fault in (TABLE_NOT_INTEGER, TABLE_NOT_INTEGER + 2):
            problem = f"{what} indices are not integers"
        else:
            problem = f"{what} indices fall outside [{lo}, {lo + size})"
        raise SimulatorError(f"{describe(valid.program, index, ins)}: {problem}")
