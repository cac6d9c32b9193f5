"""How the Numba engine's threads share a run: which instructions they share, and how they
share each one's work; and the counters by which they run a program by tile plan.

A program on several tiles runs by tile plan (`mrvl.sim.thread_plan`, `dispatch.run_planned`):
each thread runs its tiles' rows, counts them done (`count_rows_done`) and waits for the other
threads' rows it needs (`wait_before`); the rest of this module is the run of a program on one
tile. Thread 0 runs every instruction; the others join it only in the convs, fcs, bmms, softmaxes,
layernorms, adds and pools, fp16 or int8, large enough to be worth sharing (`shared_work`). Such an instruction is cut into chunks, and each
thread takes the next chunk nobody has taken from a shared atomic counter (`claim`) until none
is left: a thread that another process keeps off its core simply takes fewer chunks, and one
that comes late finds none and goes on, so nobody waits for a thread, only for chunks being
computed. Thread 0 opens an instruction without waiting for the others (`start_shared`), and
waits for its last chunk stored before it goes on (`all_done`). A waiting thread spins briefly,
then spins yielding its core to any task that wants it for a millisecond or two (so a helper is
awake when thread 0 opens the next shared instruction), then sleeps (a futex on Linux) until an
announcement, as OpenMP's and onnxruntime's pools do.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from mrvl.sim.engines.numba.fields import (
    ACT_PRELU,
    ADD_ACT,
    ADD_COUNT,
    BMM_BATCH,
    BMM_K,
    BMM_M,
    BMM_N,
    CONV_GROUPS,
    CONV_IN_SHAPE,
    CONV_KERNEL,
    CONV_OUT_SHAPE,
    FC_K,
    FC_N,
    FC_O,
    LN_LENGTH,
    LN_ROWS,
    OP_ADD,
    OP_BMM,
    OP_CONV,
    OP_END,
    OP_FC,
    OP_LAYERNORM,
    OP_POOL,
    OP_SOFTMAX,
    POOL_KERNEL,
    POOL_OUT_SHAPE,
    SOFTMAX_INNER,
    SOFTMAX_LENGTH,
    SOFTMAX_OUTER,
)
from mrvl.sim.engines.numba.int8 import shared_int8
from mrvl.sim.engines.numba.jit import jit, jit_inline
from mrvl.sim.errors import SimulatorInputError


@intrinsic
def publish(typingctx, sync, index, value):
    """sync[index] = value as a release store: every write before it is visible to a thread
    that reads the value with `observe`."""
    sig = types.void(sync, index, value)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        builder.store_atomic(
            args[2], builder.gep(array.data, [args[1]]), ordering="release", align=8
        )
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def observe(typingctx, sync, index):
    """sync[index] as an acquire load (read anew at each call; see `publish`)."""
    sig = types.int64(sync, index)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = builder.gep(array.data, [args[1]])
        return builder.load_atomic(pointer, ordering="acquire", align=8)

    return sig, codegen


@intrinsic
def fetch_min(typingctx, sync, index, value):
    """sync[index] = min(sync[index], value) as one sequentially consistent atomic step."""
    sig = types.void(sync, index, value)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = builder.gep(array.data, [args[1]])
        builder.atomic_rmw("min", pointer, args[2], "seq_cst")
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def fetch_add(typingctx, sync, index, delta):
    """sync[index] += delta as one sequentially consistent atomic step; returns the old value
    (delta 0: a sequentially consistent load)."""
    sig = types.int64(sync, index, delta)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = builder.gep(array.data, [args[1]])
        return builder.atomic_rmw("add", pointer, args[2], "seq_cst")

    return sig, codegen


FUTEX_SYSCALL = (
    {"x86_64": 202, "aarch64": 98}.get(platform.machine()) if sys.platform == "linux" else None
)
"""The futex system call's number on this machine (Linux only), or None: then a sleeping
thread yields its core and looks again (`sleep`)."""
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
PAUSE = {"x86_64": "llvm.x86.sse2.pause", "aarch64": "llvm.aarch64.hint"}.get(platform.machine())
"""The LLVM intrinsic of the CPU's spin-wait hint (PAUSE, YIELD), or None."""


def _libc_call(builder, name, return_type, arguments, var_arg=False):
    """Emit a call of the C (or LLVM intrinsic) function `name`."""
    function_type = ir.FunctionType(return_type, [a.type for a in arguments], var_arg=var_arg)
    if var_arg:
        function_type = ir.FunctionType(return_type, [arguments[0].type], var_arg=True)
    function = cgutils.get_or_insert_function(builder.module, function_type, name)
    return builder.call(function, arguments)


@intrinsic
def sleep(typingctx, sync, index, expected, nanoseconds):
    """Sleep while sync[index]'s low 32 bits equal `expected`, at most `nanoseconds` (a futex
    wait on Linux: `wake` ends it at once); elsewhere yield the core once."""
    sig = types.void(sync, index, expected, nanoseconds)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        if FUTEX_SYSCALL is None:
            _libc_call(builder, "sched_yield", ir.IntType(32), [])
            return context.get_dummy_value()
        array = context.make_array(signature.args[0])(context, builder, args[0])
        word = builder.ptrtoint(builder.gep(array.data, [args[1]]), i64)
        timeout = cgutils.alloca_once(builder, ir.ArrayType(i64, 2))  # struct timespec
        zero, one = ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 1)
        builder.store(ir.Constant(i64, 0), builder.gep(timeout, [zero, zero]))
        builder.store(args[3], builder.gep(timeout, [zero, one]))
        expected32 = builder.sext(builder.trunc(args[2], ir.IntType(32)), i64)
        arguments = [ir.Constant(i64, FUTEX_SYSCALL), word, ir.Constant(i64, FUTEX_WAIT_PRIVATE)]
        arguments += [expected32, builder.ptrtoint(timeout, i64), ir.Constant(i64, 0)]
        _libc_call(builder, "syscall", i64, arguments + [ir.Constant(i64, 0)], var_arg=True)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def yield_core(typingctx):
    """Give the core to another runnable task, if there is one (sched_yield)."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        _libc_call(builder, "sched_yield", ir.IntType(32), [])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def wake_all(typingctx, sync, index):
    """Wake every thread sleeping on sync[index] (`sleep`); nothing where there is no futex."""
    sig = types.void(sync, index)

    def codegen(context, builder, signature, args):
        if FUTEX_SYSCALL is None:
            return context.get_dummy_value()
        i64 = ir.IntType(64)
        array = context.make_array(signature.args[0])(context, builder, args[0])
        word = builder.ptrtoint(builder.gep(array.data, [args[1]]), i64)
        arguments = [ir.Constant(i64, FUTEX_SYSCALL), word, ir.Constant(i64, FUTEX_WAKE_PRIVATE)]
        arguments += [ir.Constant(i64, 0x7FFFFFFF), ir.Constant(i64, 0), ir.Constant(i64, 0)]
        _libc_call(builder, "syscall", i64, arguments + [ir.Constant(i64, 0)], var_arg=True)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def relax(typingctx):
    """The CPU's spin-wait hint (PAUSE)."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        if PAUSE == "llvm.aarch64.hint":
            _libc_call(builder, PAUSE, ir.VoidType(), [ir.Constant(ir.IntType(32), 1)])
        elif PAUSE:
            _libc_call(builder, PAUSE, ir.VoidType(), [])
        return context.get_dummy_value()

    return sig, codegen


# ---------------------------------------------------------------------------- shared work

SYNC_OPENED, SYNC_ABANDONED, SYNC_FUTEX, SYNC_SLEEPERS, SYNC_WORKERS, SYNC_FAULT = range(6)
"""A run's `sync` array: the index + 1 of the last instruction thread 0 opened to the others
(`open_work`), the abandon flag (nonzero: the run is over), the futex word that every
announcement changes, the count of sleeping threads, the number of threads, the first row that
faulted in a run by tile plan (NO_FAULT: none; `run_planned`); then SYNC_COUNTERS counters per
instruction (`counter`); then each thread's rows done in a run by tile plan, PROGRESS_STRIDE
apart (`progress_at`)."""
SYNC_EXTRA = 6
NO_FAULT = 1 << 62
PROGRESS_STRIDE = 8
"""int64s between two threads' progress counters: one cache line each, so that a thread that
counts its rows does not slow the one that watches the other's."""
CLAIMED, COMPUTED, STORED = 0, 1, 2
"""An instruction's counters: its chunks claimed (`claim`), computed and stored."""
SYNC_COUNTERS = 3
SPINS = 1 << 11
"""Spin-wait hints (about 50-100 us) a waiting thread spends before it yields (`wait_until`):
long enough for the other threads' last chunks on an idle machine."""
YIELDS = 1 << 9
"""Rounds of YIELD_SPINS hints and a yield of the core a waiting thread spends after SPINS,
before it sleeps: about 1-2 ms on an idle machine, longer than most stretches between two
shared instructions, so a helper is still awake when thread 0 opens the next one (waking a
sleeper takes tens of microseconds, a virtual machine's idle CPU longer, the time of a chunk
or two); a yield hands the core to any other task that wants it, so a waiting thread does not
hold up one that another process has pushed off its own core."""
YIELD_SPINS = 1 << 6
SLEEP_NS = 1_000_000
"""Longest sleep before a waiting thread looks again (a safety net: announcements wake it)."""
CHUNKS_PER_THREAD = 8
"""How many chunks a shared instruction is cut into per thread (`chunk_size`): enough that a
thread slowed by another process takes fewer of them instead of holding the others up, few
enough that a chunk's fixed cost (a claim, a window's edge rows) stays small."""


def new_sync(workers: int, rows: int):
    """The `sync` array of a run of `rows` instructions on `workers` threads (SYNC_OPENED)."""
    import numpy as np

    sync = np.zeros(SYNC_EXTRA + SYNC_COUNTERS * rows + PROGRESS_STRIDE * workers, np.int64)
    sync[SYNC_WORKERS] = workers
    sync[SYNC_FAULT] = NO_FAULT
    return sync


@jit
def progress_at(sync, worker):
    """The index in `sync` of thread `worker`'s count of rows done (a run by tile plan)."""
    return sync.shape[0] - PROGRESS_STRIDE * (sync[SYNC_WORKERS] - worker)


@jit
def counter(i, which):
    """The index in `sync` of instruction i's counter `which` (CLAIMED, COMPUTED, STORED)."""
    return SYNC_EXTRA + SYNC_COUNTERS * i + which


@jit
def wake(sync):
    """Announce a change (work opened or done, or the run abandoned) to the threads that
    sleep."""
    fetch_add(sync, SYNC_FUTEX, 1)
    if fetch_add(sync, SYNC_SLEEPERS, 0) > 0:
        wake_all(sync, SYNC_FUTEX)


@jit
def abandon(sync):
    """End the run for every thread waiting (`wait_until`; thread 0 does, when it is done)."""
    publish(sync, SYNC_ABANDONED, 1)
    wake(sync)


@jit
def wait_until(sync, index, target):
    """Wait until sync[index] >= target (`wait_before`, for any row)."""
    return wait_before(sync, index, target, NO_FAULT)


@jit
def wait_before(sync, index, target, row):
    """Wait until sync[index] >= target: spin SPINS hints, then YIELDS rounds of hints and a
    yield, then sleep until an announcement (`wake`). False if the run was abandoned
    meanwhile, or a row before `row` faulted (a run by tile plan). A sleeper counts itself
    before it looks once more, and an announcement changes its value before it reads the
    count, so none goes unseen (both are sequentially consistent)."""
    spins = 0
    while observe(sync, index) < target:
        if observe(sync, SYNC_ABANDONED) != 0 or observe(sync, SYNC_FAULT) < row:
            return False
        if spins < SPINS + YIELDS * YIELD_SPINS:
            spins += 1
            relax()
            if spins > SPINS and spins % YIELD_SPINS == 0:
                yield_core()
            continue
        word = fetch_add(sync, SYNC_FUTEX, 0)
        fetch_add(sync, SYNC_SLEEPERS, 1)
        if (
            fetch_add(sync, index, 0) < target
            and observe(sync, SYNC_ABANDONED) == 0
            and observe(sync, SYNC_FAULT) >= row
        ):
            sleep(sync, SYNC_FUTEX, word, SLEEP_NS)
        fetch_add(sync, SYNC_SLEEPERS, -1)
    return True


@jit
def count_rows_done(sync, worker, rows):
    """Count `rows` more rows of thread `worker` done (a run by tile plan), and wake the
    threads that sleep, if any: a sleeper counts itself before it looks at the count, and this
    reads the sleepers after it counts (both sequentially consistent), so one of the two sees
    the other."""
    fetch_add(sync, progress_at(sync, worker), rows)
    if fetch_add(sync, SYNC_SLEEPERS, 0) > 0:
        fetch_add(sync, SYNC_FUTEX, 1)
        wake_all(sync, SYNC_FUTEX)


@jit
def note_fault(sync, i):
    """Row i faulted (a run by tile plan): the threads stop before any later row, and finish
    the earlier ones, so the first fault in program order is the one reported."""
    fetch_min(sync, SYNC_FAULT, i)
    wake(sync)


@jit
def start_shared(sync, i, worker):
    """Begin shared instruction i: thread 0 (having run everything before it and packed its
    weights) opens it to the others; another thread waits until it is open. False if the run
    was abandoned meanwhile. Thread 0 never waits for the others here: a thread that comes
    late finds the chunks taken and goes on."""
    if worker == 0:
        publish(sync, SYNC_OPENED, i + 1)
        wake(sync)
        return True
    return wait_until(sync, SYNC_OPENED, i + 1)


@jit
def claim(sync, i, workers, chunks, taken):
    """The next chunk of instruction i that no thread has taken (>= chunks: none is left);
    `taken`: how many this thread took before. One thread takes chunk 0, without atomics."""
    if workers <= 1:
        return chunks if taken > 0 else 0
    return fetch_add(sync, counter(i, CLAIMED), 1)


@jit
def count_done(sync, i, which, chunks):
    """Add `chunks` to instruction i's counter `which` (COMPUTED, STORED) and announce it; the
    writes before it are visible to whoever sees the new count."""
    fetch_add(sync, counter(i, which), chunks)
    wake(sync)


@jit
def all_done(sync, i, which, chunks):
    """Wait until all `chunks` of instruction i are `which` (COMPUTED, STORED). False if the
    run was abandoned meanwhile."""
    return wait_until(sync, counter(i, which), chunks)


@jit
def end_shared(sync, i, worker, workers, chunks):
    """A thread's end of shared instruction i: 0, once every chunk is stored for thread 0
    (which goes on to the next instruction); -1 if the run was abandoned first."""
    if worker > 0 or workers <= 1 or all_done(sync, i, STORED, chunks):
        return 0
    return -1


@jit_inline
def chunk_bounds(chunk, size, total):
    """The items [start, stop) of chunk `chunk` (of `size` items) of `total` items."""
    return chunk * size, min(total, (chunk + 1) * size)


@jit_inline
def all_computed(sync, i, taken, chunks):
    """A thread's wait in shared instruction i whose stores are deferred (its output overlaps
    what the instruction reads): count its `taken` chunks computed, then wait until all
    `chunks` are, so that no store reaches a byte another thread still loads. False if the run
    was abandoned meanwhile."""
    count_done(sync, i, COMPUTED, taken)
    return all_done(sync, i, COMPUTED, chunks)


@jit_inline
def all_stored(sync, i, worker, workers, taken, chunks):
    """A thread's end of shared instruction i once it has stored its `taken` chunks: count
    them stored, then `end_shared` (0 at once on one thread). Inlined, as the kernels' one-
    thread path goes through it."""
    if workers <= 1:
        return 0
    count_done(sync, i, STORED, taken)
    return end_shared(sync, i, worker, workers, chunks)


@jit
def chunk_size(total, unit, workers):
    """The items of a chunk of a shared instruction of `total` items: whole units, about
    CHUNKS_PER_THREAD chunks a thread (all of it on one thread)."""
    if workers <= 1:
        return max(total, 1)
    units = (total + unit - 1) // unit
    per_chunk = max(1, units // (CHUNKS_PER_THREAD * workers))
    return per_chunk * unit


CHUNK_MACS = 1 << 18
"""The multiply-adds a chunk of a shared conv, fc or bmm should hold at least (about 8 us at
mac_tile's 30-40 GMAC/s; `chunk_size_by_work`): a chunk costs about a microsecond of its own
(claiming it, starting its tiles, storing it), which light ResNet-50's 1x1 conv pieces, cut
into 16-17 chunks of one or two mac_tile rows, paid some 15 % of their time for."""
MIN_CHUNKS_PER_THREAD = 2
"""The fewest chunks a thread is offered however little work they hold: a thread that comes
late or is slowed still finds one to take, and the last chunk's wait stays short."""


@jit
def chunk_size_by_work(total, unit, unit_macs, workers):
    """The items of a chunk of a shared MAC instruction of `total` items, whole units of
    `unit_macs` multiply-adds each: at least CHUNK_MACS a chunk, between MIN_CHUNKS_PER_THREAD
    and CHUNKS_PER_THREAD chunks a thread (never more chunks than units; all of it on one
    thread)."""
    if workers <= 1:
        return max(total, 1)
    units = (total + unit - 1) // unit
    chunks = min(units * unit_macs // CHUNK_MACS, CHUNKS_PER_THREAD * workers)
    chunks = max(1, min(units, max(chunks, MIN_CHUNKS_PER_THREAD * workers)))
    return (units + chunks - 1) // chunks * unit


SHARED_MACS = 1 << 19
"""The fewest multiply-adds of a conv whose output positions the engine's threads share
(`conv`); a smaller one costs less on one thread than sharing it does (opening it, claiming
chunks, waiting for the last)."""


@jit
def conv_macs(row):
    """The multiply-adds of a conv instruction."""
    positions = row[CONV_OUT_SHAPE] * row[CONV_OUT_SHAPE + 1] * row[CONV_OUT_SHAPE + 2]
    group_channels = row[CONV_IN_SHAPE + 3] // row[CONV_GROUPS]
    steps = row[CONV_KERNEL] * row[CONV_KERNEL + 1] * group_channels
    return positions * steps * row[CONV_OUT_SHAPE + 3]


SHARED_DEPTHWISE_MACS = 1 << 17
"""The fewest multiply-adds of a depthwise conv whose output rows the threads share: its
kernel does about a seventh of mac_tile's multiply-adds a second, so it pays for the meeting
points sooner (MobileNetV2's 3x3 pieces of 14 rows are 0.45 M)."""


@jit
def shared_conv(row, slot, workers):
    """Whether the threads share this conv's output positions: a cached single run of output
    channels (a weight-cache slot) with at least SHARED_MACS multiply-adds, or a depthwise
    conv (one input channel a group, no slot: `conv_depthwise`) with SHARED_DEPTHWISE_MACS."""
    if workers <= 1:
        return False
    if slot >= 0:
        return conv_macs(row) >= SHARED_MACS
    depthwise = row[CONV_GROUPS] == row[CONV_IN_SHAPE + 3]
    return depthwise and conv_macs(row) >= SHARED_DEPTHWISE_MACS


SHARED_VALUES = 1 << 15
"""The fewest output values of an `add` or `pool` whose outputs the engine's threads share."""


@jit
def shared_values(op, row, workers):
    """Whether the threads share this `add` (without PRELU, whose slope follows the index)
    by output values, at least SHARED_VALUES of them, or this `pool` by output positions,
    its outputs times its taps at least SHARED_VALUES."""
    if workers <= 1:
        return False
    if op == OP_ADD:
        return row[ADD_COUNT] >= SHARED_VALUES and row[ADD_ACT] != ACT_PRELU
    if op == OP_POOL:
        outputs = row[POOL_OUT_SHAPE] * row[POOL_OUT_SHAPE + 1] * row[POOL_OUT_SHAPE + 2]
        taps = row[POOL_KERNEL] * row[POOL_KERNEL + 1]
        return outputs * row[POOL_OUT_SHAPE + 3] * taps >= SHARED_VALUES
    return False


@jit
def shared_product(op, row, slot, workers):
    """Whether the threads share this fc (with a weight-cache slot) or bmm by blocks of rows:
    at least SHARED_MACS multiply-adds (a transformer's fcs and attention products)."""
    if workers <= 1:
        return False
    if op == OP_FC:
        return slot >= 0 and row[FC_N] * row[FC_K] * row[FC_O] >= SHARED_MACS
    if op == OP_BMM:
        return row[BMM_BATCH] * row[BMM_M] * row[BMM_K] * row[BMM_N] >= SHARED_MACS
    return False


SHARED_SOFTMAX_VALUES = 1 << 12
"""The fewest values of a softmax whose outer indices the threads share (a value costs some
7 ns: ViT-Tiny's attention softmaxes, 50 rows of 197 a tile, are 9,850)."""


@jit
def shared_softmax(row, workers):
    """Whether the threads share this softmax: at least SHARED_SOFTMAX_VALUES values and two
    outer indices."""
    if workers <= 1 or row[SOFTMAX_OUTER] < 2:
        return False
    values = row[SOFTMAX_OUTER] * row[SOFTMAX_LENGTH] * row[SOFTMAX_INNER]
    return values >= SHARED_SOFTMAX_VALUES


SHARED_LN_VALUES = 1 << 13
"""The fewest values of a layernorm whose rows the threads share (about 1.2 ns a value: a
ViT-Tiny tile's 50 rows of 192 are 9,600)."""


@jit
def shared_layernorm(row, workers):
    """Whether the threads share this layernorm: at least SHARED_LN_VALUES values, two rows."""
    if workers <= 1 or row[LN_ROWS] < 2:
        return False
    return row[LN_ROWS] * row[LN_LENGTH] >= SHARED_LN_VALUES


@jit
def shared_work(op, row, slot, workers):
    """Whether the `workers` threads share this instruction (`slot`: its weight-cache slot)."""
    if op == OP_CONV:
        return shared_conv(row, slot, workers)
    if op == OP_FC or op == OP_BMM:
        return shared_product(op, row, slot, workers)
    if op == OP_SOFTMAX:
        return shared_softmax(row, workers)
    if op == OP_LAYERNORM:
        return shared_layernorm(row, workers)
    return shared_values(op, row, workers) or shared_int8(op, row, workers)


@jit
def shares_any(words, slots, workers):
    """Whether `workers` threads would share any instruction of these rows (`shared_work`);
    if none, a run needs no helper threads, whose start and meeting points would cost a small
    program more than it runs."""
    for i in range(words.shape[0]):
        if words[i, 0] == OP_END:  # the program ends here (`run_program`)
            return False
        if shared_work(words[i, 0], words[i], slots[i], workers):
            return True
    return False


@jit
def apart(addr, size, other, other_size):
    """Whether the OCM bytes [addr, addr + size) (none if addr is -1) and [other, other +
    other_size) are disjoint."""
    return addr == -1 or addr + size <= other or other + other_size <= addr


THREADS_ENV = "MRVL_SIM_THREADS"
"""Environment variable: how many threads a run uses; read at each run. Any number gives the
same bits."""
WORKERS_ENV = "MRVL_SIM_WORKERS"
"""Environment variable: how many processes (parallel workers, such as a test runner's or a
data-set evaluation's) share this machine's cores, each running the simulator; the default
thread count divides the cores among them."""


def _positive(name: str, value: str, what: str) -> int:
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise SimulatorInputError(f"${name}={value!r} is not a positive number of {what}")
    return count


def threads(alone: bool = False) -> int:
    """The threads of a run: $MRVL_SIM_THREADS, else the CPUs this process may run on divided
    among the $MRVL_SIM_WORKERS processes that share them, and no more than those of them
    that other tasks leave free at the start of the run (`free_cpus`; at least one). `alone`:
    the run's program would use one thread anyway; then the variables are still checked, but
    the free CPUs are not counted (a read of /proc at each run)."""
    value = os.environ.get(THREADS_ENV)
    if value is not None:
        return _positive(THREADS_ENV, value, "threads")
    workers = os.environ.get(WORKERS_ENV)
    sharing = _positive(WORKERS_ENV, workers, "worker processes") if workers else 1
    if alone:
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min((cpus or 1) // sharing, free_cpus(cpus or 1)))


LOADAVG = "/proc/loadavg"
"""Linux's load figures; the fourth field is `running/total`, the tasks runnable right now
(the one reading it included) of all of them."""


def free_cpus(cpus: int, loadavg: str | None = None) -> int:
    """How many of this process's `cpus` no other runnable task wants right now: `cpus` less
    the others runnable this instant, counted evenly over the online CPUs (Linux's count in
    `loadavg`, default LOADAVG; elsewhere, or if unreadable, `cpus`). A helper thread on a core another task
    wants gets a part of it and holds up each shared instruction whose chunk it was computing
    when it lost the core; a one-minute load average (as libgomp's dynamic threads use) would
    answer a minute late."""
    try:
        with open(loadavg or LOADAVG) as figures:
            running = int(figures.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return cpus
    others = max(0, running - 1) * cpus / max(os.cpu_count() or cpus, cpus)
    return max(1, cpus - int(others + 0.5))


_helpers: ThreadPoolExecutor | None = None
_helpers_lock = threading.Lock()


def _helper_pool(count: int) -> ThreadPoolExecutor:
    """The threads that join thread 0 of a run, kept from run to run."""
    global _helpers
    with _helpers_lock:
        if _helpers is None or _helpers._max_workers < count:
            _helpers = ThreadPoolExecutor(count, thread_name_prefix="mrvl-sim")
        return _helpers
