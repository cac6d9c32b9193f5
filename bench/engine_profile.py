#!/usr/bin/env python3
"""Where a warm run of the Numba engine spends its time, per opcode and outside the loop.

    .venv/bin/python bench/engine_profile.py zoo:mobilenet_v2 zoo:mobilenet_v3_small
    .venv/bin/python bench/engine_profile.py resnet50 --repeat 50 --top 15
    .venv/bin/python bench/engine_profile.py resnet50 --int8 --threads 1 2

Each model (as `bench/simulator.py` names them; with `--int8`, its QDQ form as that script's
`--int8` makes it) is compiled for 8 tiles and run once in the Relax VM, which records each
region's validated program and inputs. Then, on one thread:
- the phases of `mrvl.sim.run` (checks, `Memory.load`, `execute`, outputs, warnings), the
  best of `--repeat` runs each;
- per opcode, the instructions, their multiply-adds and their summed time, each instruction's
  the least of `--repeat` runs (on a loaded machine a typical run takes longer: its median
  is given too), taken by the CPU's cycle counter around each instruction in a copy of
  `dispatch.run_program`'s loop, converted to seconds against `time.perf_counter`;
- the `--top` costliest kinds of instruction (opcode and shapes), one a line.

`--threads 1 2` times the instructions again with each of these thread counts (the engine's
helper threads join thread 0 as in a run; thread 0's time is counted), and gives per opcode
each count's time, and how many of its instructions the other threads run (by tile plan: the
rows of their tiles; thread 0's waits for them are given apart) or share (a program on one
tile): an opcode whose time does not fall with more threads runs on thread 0 alone.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def cycle_counter(typingctx):
    """The CPU's cycle counter (llvm.readcyclecounter: RDTSC on x86)."""
    sig = types.int64()

    def codegen(context, builder, signature, args):
        function = builder.module.declare_intrinsic(
            "llvm.readcyclecounter", fnty=ir.FunctionType(ir.IntType(64), [])
        )
        return builder.call(function, [])

    return sig, codegen


def _timed_loop():
    """`dispatch.run_program`'s loop as thread 0 runs it, with each instruction's counter
    cycles: by tile plan (`owner`, `need` not empty) thread 0's own rows, its waits for the
    other threads' rows counted apart (`waited`); else every row, the instructions shared with
    the other threads (`sharing.shared_work`) as in a run. It releases the GIL, as the
    engine's `jit` does: the helper threads call into Numba through Python, and would not
    start until thread 0's loop ended."""
    from mrvl.sim.engines.numba.dispatch import run_row
    from mrvl.sim.engines.numba.fields import OP_END
    from mrvl.sim.engines.numba.sharing import (
        SYNC_WORKERS,
        count_rows_done,
        progress_at,
        shared_work,
        wait_before,
    )

    @njit(nogil=True)
    def timed(words, floats, machine, counts, weights, skip, sync, plan, cycles, waited):
        owner, need, announce = plan
        slots, workers = weights[0], sync[SYNC_WORKERS]
        planned = owner.shape[0] > 0
        done = told = 0
        for i in range(words.shape[0]):
            op = words[i, 0]
            if planned and op != OP_END and owner[i] != 0:
                continue
            start = cycle_counter()
            if planned:
                for u in range(1, workers):
                    if need[i, u] > 0:
                        wait_before(sync, progress_at(sync, u), need[i, u], i)
            waited[i] = cycle_counter() - start
            if op == OP_END:
                return i
            shared = not planned and workers > 1 and shared_work(op, words[i], slots[i], workers)
            together = workers if shared else 1
            start = cycle_counter()
            status = run_row(i, words, floats, machine, counts, weights, skip, sync, 0, together)
            cycles[i] = cycle_counter() - start
            done += 1
            if planned and announce[i]:
                count_rows_done(sync, 0, done - told)
                told = done
            if status < 0:
                return i
        return words.shape[0]

    return timed


def _counter_hz() -> float:
    """Cycle-counter ticks a second, against perf_counter over 0.2 s."""
    cycle_counter_now = njit(lambda: cycle_counter())
    cycle_counter_now()
    t0, c0 = time.perf_counter(), cycle_counter_now()
    time.sleep(0.2)
    return (cycle_counter_now() - c0) / (time.perf_counter() - t0)


def _capture(name: str, seed: int, int8: bool = False):
    """Compile `name` for 8 tiles, run it once in the VM; its regions' (ValidProgram, inputs)."""
    import tvm
    from simulator import _load
    from tvm import relax

    import mrvl
    import mrvl.sim

    model, feeds = _load(name, seed, int8)
    lib = mrvl.build(mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=8))
    captured, run = [], mrvl.sim.run

    def recording_run(valid, inputs, **kwargs):
        captured.append((valid, [np.array(x) for x in inputs]))
        return run(valid, inputs, **kwargs)

    mrvl.sim.run = recording_run
    try:
        vm = relax.VirtualMachine(lib, tvm.cpu())
        vm["main"](*[tvm.runtime.tensor(x) for x in feeds.values()])
    finally:
        mrvl.sim.run = run
    return captured


def _best(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def _phases(valid, inputs, repeat: int) -> dict[str, float]:
    from mrvl.sim import simulator
    from mrvl.sim.engines.numba import execute
    from mrvl.sim.stats import RunStats

    memory, stats = simulator.new_memory(valid), RunStats()

    def load():
        simulator.load_memory(valid, memory, inputs)

    load()
    stats.reset(len(valid.code))
    execute(valid, memory, stats, workers=1)
    return {
        "run": _best(lambda: simulator.run(valid, inputs, memory=memory, stats=stats), repeat),
        "check_inputs": _best(lambda: simulator.check_inputs(valid.program, inputs), repeat),
        "memory.load": _best(load, repeat),
        "stats.reset": _best(lambda: stats.reset(len(valid.code)), repeat),
        "execute": _best(lambda: execute(valid, memory, stats, workers=1), repeat),
        "outputs": _best(lambda: memory.outputs(valid.program), repeat),
        "stats.warn": _best(lambda: stats.warn(valid.program), repeat),
    }


def _instruction_cycles(valid, inputs, repeat: int, workers: int = 1):
    """Each row's counter cycles on thread 0 in each of `repeat` warm runs on `workers`
    threads ([repeat, rows]), the rows' instructions, and whether the threads share each."""
    from mrvl.sim import simulator
    from mrvl.sim.engines.numba import dispatch, sharing
    from mrvl.sim.engines.numba.int8_weights import qweight_cache
    from mrvl.sim.engines.numba.numerics import F16_TO_F32, F16_TO_F32_BITS
    from mrvl.sim.thread_plan import ThreadPlan, thread_plan, use_tile_plan
    from mrvl.sim.weight_cache import weight_cache

    memory = simulator.new_memory(valid)
    cache = weight_cache(valid, dispatch.PACKING)
    rows = valid if cache.rows is None else cache.rows
    origin = cache.origin if cache.origin is not None else np.arange(len(rows.words))
    timed = _timed_loop()
    qcache = qweight_cache(rows)
    runs, waits = [], []
    for _ in range(repeat + 1):  # the first run packs the weight caches
        simulator.load_memory(valid, memory, inputs)
        machine = (
            memory.ddr,
            memory.ocm,
            memory.tables,
            F16_TO_F32,
            F16_TO_F32_BITS,
            qcache.arrays,
        )
        plan = ThreadPlan.none()
        if workers > 1 and use_tile_plan(rows):
            caches = [(cache.warm, cache.arrays), (qcache.warm, qcache.arrays)]
            plan = thread_plan(rows, workers, caches)
        cycles = np.zeros(len(rows.words), np.int64)
        waited = np.zeros(len(rows.words), np.int64)
        counts = np.zeros((len(rows.words), 2), np.int64)
        sync, skip = dispatch.new_sync(workers, len(rows.words)), cache.skip() | qcache.skip()
        args = (rows.words, rows.floats, machine)
        helpers = [
            sharing._helper_pool(workers - 1).submit(
                dispatch._run_program,
                *(*args, np.zeros_like(counts), cache.arrays, skip, sync, w, *plan),
            )
            for w in range(1, workers)
        ]
        try:
            timed(*args, counts, cache.arrays, skip, sync, tuple(plan), cycles, waited)
        finally:
            if len(plan.owner) == 0:
                sharing.abandon(sync)
            for helper in helpers:
                helper.result()
            sharing.abandon(sync)
        cache.warm = qcache.warm = True
        runs.append(cycles)
        waits.append(waited)
    if len(plan.owner):
        shared = [bool(plan.owner[k] != 0) for k in range(len(rows.words))]
    else:
        shared = [
            workers > 1 and bool(sharing.shared_work(w[0], w, cache.arrays[0][k], workers))
            for k, w in enumerate(rows.words)
        ]
    return np.array(runs[1:]), [valid.code[o] for o in origin], shared, np.array(waits[1:])


def _macs(ins) -> int:
    """A conv's or fc's multiply-adds (0 for other opcodes)."""
    f = ins.fields
    if ins.opcode == "conv":
        out, kernel = f["out_shape"], f["kernel"]
        per_output = kernel[0] * kernel[1] * f["in_shape"][3] // f["groups"]
        return out[0] * out[1] * out[2] * out[3] * per_output
    if ins.opcode == "fc":
        return f["n"] * f["k"] * f["o"]
    return 0


def _describe(ins) -> str:
    f = ins.fields
    if ins.opcode == "conv":
        return (
            f"conv in {tuple(f['in_shape'])} out {tuple(f['out_shape'])} k "
            f"{tuple(f['kernel'])} g {f['groups']}"
        )
    if ins.opcode == "dma":
        return f"dma box {tuple(f['box'])} {f['src_space']}->{f['dst_space']}"
    keys = [k for k in f if "shape" in k or k in ("count", "n", "k", "o")]
    return f"{ins.opcode} " + " ".join(f"{k} {f[k]}" for k in keys)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--int8", action="store_true", help="each model's QDQ form")
    parser.add_argument(
        "--threads", type=int, nargs="+", help="also time thread 0 with these thread counts"
    )
    args = parser.parse_args(argv)
    from mrvl.sim import use_engine

    hz = _counter_hz()
    for name in args.models:
        with use_engine("numba"):
            regions = _capture(name, args.seed, args.int8)
        for index, (valid, inputs) in enumerate(regions):
            print(f"== {name} region {index}: {len(valid.code)} instructions")
            phases = _phases(valid, inputs, args.repeat)
            print("  " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in phases.items()))
            cycles, instructions, _, _ = _instruction_cycles(valid, inputs, args.repeat)
            seconds = cycles.min(axis=0) / hz
            typical = np.median(cycles.sum(axis=1)) / hz
            by_op: dict[str, list] = defaultdict(lambda: [0, 0, 0.0])
            for ins, s in zip(instructions, seconds):
                entry = by_op[ins.opcode]
                entry[0] += 1
                entry[1] += _macs(ins)
                entry[2] += s
            total = seconds.sum()
            print(
                f"  timed loop {total * 1e3:.3f} ms (sum of the instructions' least times; "
                f"a run's median {typical * 1e3:.3f} ms)"
            )
            print(
                f"  {'opcode':10s} {'count':>6s} {'MMACs':>8s} {'ms':>8s} {'%':>5s} {'us each':>8s}"
            )
            for op, (count, macs, s) in sorted(by_op.items(), key=lambda kv: -kv[1][2]):
                print(
                    f"  {op:10s} {count:6d} {macs / 1e6:8.2f} {s * 1e3:8.3f} "
                    f"{100 * s / total:5.1f} {s / count * 1e6:8.2f}"
                )
            kinds: dict[str, list] = defaultdict(lambda: [0, 0.0])
            for ins, s in zip(instructions, seconds):
                entry = kinds[_describe(ins)]
                entry[0] += 1
                entry[1] += s
            print("  costliest kinds:")
            for kind, (count, s) in sorted(kinds.items(), key=lambda kv: -kv[1][1])[: args.top]:
                print(f"    {s * 1e3:7.3f} ms {count:4d}x {s / count * 1e6:8.2f} us  {kind}")
            if args.threads:
                _thread_table(valid, inputs, args.repeat, args.threads, hz, args.top)
    return 0


def _thread_table(valid, inputs, repeat: int, counts: list[int], hz: float, top: int) -> None:
    """Per opcode (and for the `top` costliest kinds), thread 0's summed least times with each
    of `counts` threads, and how many of its instructions other threads run or share: by tile
    plan (a program on several tiles), the rows of the other threads' tiles, which thread 0
    does not run (`others`), and thread 0's waits for them; else the instructions the threads
    share (`shared`)."""
    per_count = []
    for workers in counts:
        cycles, instructions, shared, waited = _instruction_cycles(valid, inputs, repeat, workers)
        typical = np.median((cycles + waited).sum(axis=1)) / hz
        wait = np.median(waited.sum(axis=1)) / hz
        per_count.append((cycles.min(axis=0) / hz, typical, shared, wait))
    header = " ".join(f"{f'{w}t ms':>9s}" for w in counts)
    print(
        f"  thread 0 with {', '.join(map(str, counts))} threads "
        f"(runs' medians: {', '.join(f'{m * 1e3:.3f}' for _, m, _, _ in per_count)} ms, "
        f"of which waits {', '.join(f'{w * 1e3:.3f}' for *_, w in per_count)})"
    )
    for label, key in (("opcode", lambda ins: ins.opcode), ("kind", _describe)):
        groups: dict[str, list] = defaultdict(lambda: [0, 0, np.zeros(len(counts))])
        for k, ins in enumerate(instructions):
            entry = groups[key(ins)]
            entry[0] += 1
            entry[1] += any(shared[k] for _, _, shared, _ in per_count)
            entry[2] += [seconds[k] for seconds, *_ in per_count]
        ranked = sorted(groups.items(), key=lambda kv: -kv[1][2][-1])
        print(f"  {label:10s} {'count':>6s} {'shared/others':>6s} {header}")
        for name, (count, shared_count, s) in ranked[: top if label == "kind" else None]:
            cells = " ".join(f"{v * 1e3:9.3f}" for v in s)
            print(f"  {name:10s} {count:6d} {shared_count:6d} {cells}")


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    sys.exit(main())
