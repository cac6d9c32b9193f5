"""How the Numba engine's threads share a run: which instructions they share, each one's part,
and their meeting points (`arrive`).

Thread 0 runs every instruction; the others join it only in the convs, adds and pools large
enough to be worth sharing (`shared_work`), and meet it before and after each (`arrive`).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from numba import types
from numba.extending import intrinsic

from mrvl.sim.engines.numba.fields import (
    ACT_PRELU,
    ADD_ACT,
    ADD_COUNT,
    CONV_GROUPS,
    CONV_IN_SHAPE,
    CONV_KERNEL,
    CONV_OUT_SHAPE,
    OP_ADD,
    OP_CONV,
    OP_POOL,
    POOL_KERNEL,
    POOL_OUT_SHAPE,
)
from mrvl.sim.engines.numba.jit import jit
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


SYNC_EXTRA = 3
"""A run's `sync` array: each thread's step count, then the abandon flag (nonzero: the run is
over), and two words kept for the meeting points."""


def new_sync(workers: int):
    """The `sync` array of a run on `workers` threads (SYNC_EXTRA)."""
    import numpy as np

    return np.zeros(workers + SYNC_EXTRA, np.int64)


@jit
def abandon(sync):
    """End the run for every thread waiting in `arrive` (thread 0 does, when it is done)."""
    publish(sync, sync.size - SYNC_EXTRA, 1)


@jit
def arrive(sync, worker, workers, step):
    """A meeting point of the `workers` threads running one program (`run_program`): this one
    publishes that it reached its `step`-th, then waits for every other to reach it. Returns
    the new step, or -1 if the run was abandoned (sync[workers] != 0) while waiting."""
    step += 1
    publish(sync, worker, step)
    for other in range(workers):
        while observe(sync, other) < step:
            if observe(sync, workers) != 0:
                return -1
    return step


SHARED_MACS = 1 << 19
"""The fewest multiply-adds of a conv whose output positions the engine's threads share
(`conv`); a smaller one costs less on one thread than the threads' meeting points."""


@jit
def conv_macs(row):
    """The multiply-adds of a conv instruction."""
    positions = row[CONV_OUT_SHAPE] * row[CONV_OUT_SHAPE + 1] * row[CONV_OUT_SHAPE + 2]
    group_channels = row[CONV_IN_SHAPE + 3] // row[CONV_GROUPS]
    steps = row[CONV_KERNEL] * row[CONV_KERNEL + 1] * group_channels
    return positions * steps * row[CONV_OUT_SHAPE + 3]


@jit
def shared_conv(row, slot, workers):
    """Whether the threads share this conv's output positions: a cached single run of output
    channels (a weight-cache slot) with at least SHARED_MACS multiply-adds."""
    return workers > 1 and slot >= 0 and conv_macs(row) >= SHARED_MACS


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
def shared_work(op, row, slot, workers):
    """Whether the `workers` threads share this instruction (`slot`: its weight-cache slot)."""
    if op == OP_CONV:
        return shared_conv(row, slot, workers)
    return shared_values(op, row, workers)


@jit
def apart(addr, size, other, other_size):
    """Whether the OCM bytes [addr, addr + size) (none if addr is -1) and [other, other +
    other_size) are disjoint."""
    return addr == -1 or addr + size <= other or other + other_size <= addr


@jit
def share(total, unit, worker, workers):
    """[start, stop) of `worker`'s contiguous part of `total` items, in whole units."""
    units = (total + unit - 1) // unit
    start = min(total, units * worker // workers * unit)
    return start, min(total, units * (worker + 1) // workers * unit)


THREADS_ENV = "MRVL_SIM_THREADS"
"""Environment variable: how many threads a run uses (default: the CPUs this process may use);
read at each run. Any number gives the same bits."""


def threads() -> int:
    """The threads of a run: $MRVL_SIM_THREADS, else the CPUs this process may run on."""
    value = os.environ.get(THREADS_ENV)
    if value is None:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise SimulatorInputError(f"${THREADS_ENV}={value!r} is not a positive number of threads")
    return count


_helpers: ThreadPoolExecutor | None = None
_helpers_lock = threading.Lock()


def _helper_pool(count: int) -> ThreadPoolExecutor:
    """The threads that join thread 0 of a run, kept from run to run."""
    global _helpers
    with _helpers_lock:
        if _helpers is None or _helpers._max_workers < count:
            _helpers = ThreadPoolExecutor(count, thread_name_prefix="mrvl-sim")
        return _helpers
