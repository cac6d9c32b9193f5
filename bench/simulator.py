#!/usr/bin/env python3
"""Simulator latency per engine next to onnxruntime, on the same model and input, in one run.

    .venv/bin/python bench/simulator.py                       # the default models below
    .venv/bin/python bench/simulator.py resnet50 --repeat 3
    .venv/bin/python bench/simulator.py --no-interp vgg19 zoo:mobilenet_v2
    .venv/bin/python bench/simulator.py --no-interp --zoo            # every zoo model
    .venv/bin/python bench/simulator.py --no-interp --contention resnet50
    .venv/bin/python bench/simulator.py --no-interp --int8 resnet50
    taskset -c 0,1 .venv/bin/python bench/simulator.py --no-interp --threads resnet50

Each model (a light model from `mrvl.models.light`, `zoo:<name>` from `mrvl.models.zoo`, both
with seeded random weights, or `mnist`, the bundled network) is compiled by mrvl for 8 tiles in a fresh child process, then run as a hybrid
in the Relax VM. Per model the table gives:
- `numba 1st`: the first VM run in the process on the numba engine (loading the compiled
  kernels from Numba's on-disk cache, or compiling them if the cache is cold), and `numba`:
  the best of `--repeat` warm runs; `(cpu)`: the least CPU time of the calling thread in a
  warm run (the engine runs on that thread; on a machine shared with other work, CPU time
  varies far less than wall time, which counts the time the process waited for a core);
- `interp`: one run on the reference interpreter;
- `ORT`: onnxruntime's time for the same model and input (fp32, CPU provider, default threads,
  best of `--repeat` runs after one warm-up). Its runs and the warm numba runs alternate in
  BLOCKS blocks each, so that both see the same stretches of the machine's load (on a shared
  host it moves by a third within minutes); each numba block starts ORT_PAUSE seconds after
  onnxruntime's, as onnxruntime's threads spin for a while after a run and the engine would
  count them as load;
- the time the simulator itself took inside the warm numba run (`mrvl.sim.simulator_wall_time`);
- the ratios numba/ORT (of the bests, and `(med)`, of the medians) and interp/numba, whether
  numba (its first run and every warm one) and interp gave the same bits, and the child's
  peak resident memory (compile and runs included);
- `threads`: how many warm simulator runs ran on how many threads by the engine's default
  (`threads:runs`; `sharing.threads`, which counts the CPUs other runnable tasks leave free
  at each run's start, so a burst of other work makes some runs one-threaded).

`--contention` also starts, in each child, a process that loops on one core, and times warm
runs with the default thread count (`busy`), with one thread (`busy 1t`) and with one thread a
CPU (`busy all`) while it runs, in turn: the best of `--repeat` each, their ratios to one
thread, and the median of each run's ratio to the one-thread run next to it (on a machine
shared with other work, best-of wall times are luck; the median ratio says more), and the
spread (least and greatest) of the all/1t ratios. On a shared machine the default should be
within 1.2x of one thread.

`--int8` also times, after each model, its QDQ form (`mrvl.quantize`, min-max per channel,
calibrated on 16 seeded inputs as `scripts/zoo_int8.py` makes it; row `<model> int8`), built
and run the same way, against onnxruntime on the same QDQ model: issue 20's simulator goal is
light ResNet-50 in int8 within 2x of onnxruntime's QDQ run and faster than its own fp16 row,
which a line under each int8 row gives (`_goal`): the int8 row's warm time over onnxruntime's
on the QDQ model, and its CPU time over the fp16 row's, both from this run.

`--threads` times the same three in turn without the looping process (`idle`, `idle 1t`,
`idle all`): what the threads gain on an idle machine (there, `idle all` should be well
under one thread).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter

import numpy as np

DEFAULT_MODELS = ("resnet50", "squeezenet", "zoo:resnet18", "zoo:mobilenet_v2", "mnist")


BLOCKS = 4
"""Blocks of onnxruntime runs and warm numba runs that alternate (`--repeat` of each in all)."""
ORT_PAUSE = 0.2
"""Seconds between onnxruntime's block and the numba one after it: onnxruntime's pool threads
spin for a while after a run (on this 2-core host, /proc/loadavg still counted one of them
runnable 50 ms after a run, none after 100 ms)."""

CALIBRATION = 16
"""Seeded calibration inputs of an `--int8` model (as `scripts/zoo_int8.py` quantizes)."""


def _load(name: str, seed: int, int8: bool = False):
    """The model and its seeded input; with `int8`, its QDQ form by `mrvl.quantize` (min-max,
    per channel) calibrated on CALIBRATION seeded inputs, as `scripts/zoo_int8.py` makes it."""
    from mrvl.models.light import random_inputs

    model, feeds = _load_float(name, seed)
    if int8:
        import mrvl

        calibration = [random_inputs(model, seed=seed + 1000 + i) for i in range(CALIBRATION)]
        model = mrvl.quantize(model, calibration)
    return model, feeds


def _load_float(name: str, seed: int):
    from mrvl.models.light import load_light_model, random_inputs

    if name == "mnist":
        from mrvl.models.mnist import make_mnist_model

        model = make_mnist_model(seed=seed)
    elif name.startswith("zoo:"):
        from mrvl.models.zoo import load_zoo_model

        model = load_zoo_model(name.removeprefix("zoo:"), seed=seed)
    else:
        model = load_light_model(name, seed=seed)
    return model, random_inputs(model, seed=seed)


def _warm_run(vm_run, threads: str | None) -> float:
    """One warm run's seconds with $MRVL_SIM_THREADS set to `threads` (None: unset)."""
    saved = os.environ.pop("MRVL_SIM_THREADS", None)
    if threads is not None:
        os.environ["MRVL_SIM_THREADS"] = threads
    try:
        return vm_run()[0]
    finally:
        os.environ.pop("MRVL_SIM_THREADS", None)
        if saved is not None:
            os.environ["MRVL_SIM_THREADS"] = saved


THREAD_SETTINGS = {"": None, "_1t": "1", "_all": str(len(os.sched_getaffinity(0)))}
"""The thread counts timed in turn (`threads_in_turn`): the default, one, and one a CPU."""


def threads_in_turn(vm_run, repeat: int, prefix: str) -> dict:
    """Warm runs with the default threads, with one and with one a CPU, taken in turn (so a
    change of the machine's load meets all three alike): the best of `repeat` each (keys
    `prefix`, `prefix`_1t, `prefix`_all), the median of each run's ratio to the one-thread
    run next to it, and those ratios' spread (min, max)."""
    times: dict[str, list[float]] = {suffix: [] for suffix in THREAD_SETTINGS}
    for _ in range(repeat):
        for suffix, threads in THREAD_SETTINGS.items():
            times[suffix].append(_warm_run(vm_run, threads))
    row = {prefix + suffix: min(seconds) for suffix, seconds in times.items()}
    for suffix in ("", "_all"):
        ratios = np.divide(times[suffix], times["_1t"])
        row[f"{prefix}{suffix}_ratio_median"] = float(np.median(ratios))
        row[f"{prefix}{suffix}_ratio_spread"] = (float(ratios.min()), float(ratios.max()))
    return row


def contention(vm_run, repeat: int) -> dict:
    """`threads_in_turn` while another process started here loops on a core (keys busy...)."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)  # let it take its core
        return threads_in_turn(vm_run, repeat, "busy")
    finally:
        busy.kill()
        busy.wait()


@contextlib.contextmanager
def chosen_threads():
    """The thread counts the engine's default chose (`sharing.threads`: at each run's start,
    the CPUs that other runnable tasks leave free) for the simulator runs inside, in order."""
    from mrvl.sim.engines.numba import dispatch

    chosen, choose = [], dispatch.threads
    dispatch.threads = lambda alone=False: chosen.append(choose(alone)) or chosen[-1]
    try:
        yield chosen
    finally:
        dispatch.threads = choose


def bench_model(
    name: str,
    seed: int,
    repeat: int,
    interp: bool,
    busy: bool = False,
    idle: bool = False,
    int8: bool = False,
) -> dict:
    import onnxruntime as ort
    import tvm
    from tvm import relax

    import mrvl
    from mrvl.sim import simulator_wall_time, use_engine

    row: dict = {"model": f"{name} int8" if int8 else name}
    model, feeds = _load(name, seed, int8)

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )

    def ort_run() -> float:
        start = time.perf_counter()
        session.run(None, feeds)
        return time.perf_counter() - start

    ort_run()  # warm-up

    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=8)
    start = time.perf_counter()
    lib = mrvl.build(mod)
    row["compile"] = time.perf_counter() - start
    row["instructions"] = sum(len(r.program.code) for r in lib.mrvl_regions)
    vm = relax.VirtualMachine(lib, tvm.cpu())
    args = [tvm.runtime.tensor(x) for x in feeds.values()]

    def vm_run() -> tuple[float, float, np.ndarray, float]:
        with simulator_wall_time() as spent:
            start, cpu = time.perf_counter(), time.thread_time()
            result = vm["main"](*args)
            seconds, cpu = time.perf_counter() - start, time.thread_time() - cpu
        out = result.numpy() if isinstance(result, tvm.runtime.Tensor) else result[0].numpy()
        return seconds, spent.seconds, out, cpu

    ort_times, warm = [], []
    with use_engine("numba"):
        row["numba_first"], _, numba_out, _ = vm_run()
        with chosen_threads() as chosen:
            for block in range(BLOCKS):  # the two alternate, so both meet the same load
                runs = repeat * (block + 1) // BLOCKS - repeat * block // BLOCKS
                ort_times += [ort_run() for _ in range(runs)]
                time.sleep(ORT_PAUSE)
                warm += [vm_run() for _ in range(runs)]
    row["threads"] = dict(sorted(Counter(chosen).items()))
    row["ort"] = min(ort_times)
    row["numba"] = min(w[0] for w in warm)
    row["ratio_median"] = float(np.median([w[0] for w in warm]) / np.median(ort_times))
    row["numba_sim"] = min(w[1] for w in warm)
    row["numba_cpu"] = min(w[3] for w in warm)
    if idle:
        with use_engine("numba"):
            row.update(threads_in_turn(vm_run, repeat, "idle"))
    if busy:
        with use_engine("numba"):
            row.update(contention(vm_run, repeat))
    if interp:
        with use_engine("interp"):
            row["interp"], _, interp_out, _ = vm_run()
        row["same_bits"] = all(  # the first numba run and every warm one
            out.dtype == interp_out.dtype and out.tobytes() == interp_out.tobytes()
            for out in [numba_out, *(w[2] for w in warm)]
        )
    row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def _child(args) -> int:
    row = bench_model(
        args.child,
        args.seed,
        args.repeat,
        not args.no_interp,
        args.contention,
        args.threads,
        args.int8,
    )
    print(json.dumps(row))
    return 0


def _format(row: dict) -> str:
    interp = row.get("interp")
    cells = [
        f"{row['model']:18s}",
        f"{row['instructions']:7d}",
        f"{row['numba_first']:10.3f}",
        f"{row['numba']:8.3f}",
        f"{row['numba_sim']:8.3f}",
        f"{row['numba_cpu']:8.3f}",
        f"{interp:8.2f}" if interp is not None else f"{'-':>8s}",
        f"{row['ort']:7.3f}",
        f"{row['numba'] / row['ort']:9.2f}",
        f"{row['ratio_median']:6.2f}",
        f"{interp / row['numba']:12.0f}" if interp is not None else f"{'-':>12s}",
        f"{'yes' if row.get('same_bits') else ('-' if interp is None else 'NO'):>5s}",
        f"{row['peak_mb']:8.0f}",
        f"{' '.join(f'{t}:{n}' for t, n in row['threads'].items()):>8s}",
    ]
    for prefix in ("idle", "busy"):
        if prefix in row:
            low, high = row[f"{prefix}_all_ratio_spread"]
            cells += [
                f"{row[prefix]:8.3f}",
                f"{row[prefix + '_1t']:8.3f}",
                f"{row[prefix + '_all']:8.3f}",
                f"{row[prefix] / row[prefix + '_1t']:8.2f}",
                f"{row[prefix + '_ratio_median']:8.2f}",
                f"{row[prefix + '_all'] / row[prefix + '_1t']:7.2f}",
                f"{row[prefix + '_all_ratio_median']:7.2f}",
                f"{f'{low:.2f}-{high:.2f}':>9s}",
            ]
    return " ".join(cells)


def _goal(int8_row: dict, fp16_row: dict | None) -> str:
    """Issue 20's simulator goal for an int8 row: its warm time over onnxruntime's on the same
    QDQ model (goal: at most 2), and its CPU time over its model's fp16 row (goal: under 1)."""
    cells = [f"{'':18s}  goal: int8/ORT-QDQ {int8_row['numba'] / int8_row['ort']:.2f} (<= 2)"]
    if fp16_row is not None:
        ratio = int8_row["numba_cpu"] / fp16_row["numba_cpu"]
        cells.append(f"int8/fp16 CPU {ratio:.2f} (< 1)")
    return ", ".join(cells)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", default=list(DEFAULT_MODELS))
    parser.add_argument("--repeat", type=int, default=3, help="timed warm runs (best is kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-interp", action="store_true", help="skip the interpreter runs")
    parser.add_argument("--zoo", action="store_true", help="every zoo model, after MODELS")
    parser.add_argument(
        "--contention",
        action="store_true",
        help="also time warm runs while a process started here loops on one core",
    )
    parser.add_argument(
        "--threads",
        action="store_true",
        help="also time warm runs with the default threads, one and one a CPU, in turn",
    )
    parser.add_argument(
        "--int8",
        action="store_true",
        help="also time each model's QDQ form (mrvl.quantize, seeded calibration) against "
        "onnxruntime on the same QDQ model",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)
    if args.zoo:
        from mrvl.models.zoo import ZOO_MODELS

        named = args.models if args.models != list(DEFAULT_MODELS) else []
        args.models = named + [f"zoo:{name}" for name in ZOO_MODELS]

    header = (
        f"{'model':18s} {'instrs':>7s} {'numba 1st':>10s} {'numba':>8s} {'(sim)':>8s} {'(cpu)':>8s} "
        f"{'interp':>8s} {'ORT':>7s} {'numba/ORT':>9s} {'(med)':>6s} {'interp/numba':>12s} "
        f"{'same':>5s} {'peak MB':>8s} {'threads':>8s}"
    )
    for prefix, wanted in (("idle", args.threads), ("busy", args.contention)):
        if wanted:
            header += f" {prefix:>8s} {prefix + ' 1t':>8s} {prefix + ' all':>8s}"
            header += f" {prefix + '/1t':>8s} {'(median)':>8s} {'all/1t':>7s} {'(median)':>7s}"
            header += f" {'(spread)':>9s}"
    print("seconds per inference (VM run, regions on the simulator)")
    print(header)
    print("-" * len(header), flush=True)
    fp16_rows: dict[str, dict] = {}  # each model's fp16 row, for its int8 row's goal line
    for name, int8 in [(name, int8) for name in args.models for int8 in (False, True)]:
        if int8 and not args.int8:
            continue
        command = [sys.executable, __file__, "--child", name, "--seed", str(args.seed)]
        command += ["--repeat", str(args.repeat)] + (["--no-interp"] if args.no_interp else [])
        command += ["--contention"] if args.contention else []
        command += ["--threads"] if args.threads else []
        command += ["--int8"] if int8 else []
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["?"])[-1]
            print(f"{name:18s} error: {last[:150]}", flush=True)
            continue
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(_format(row), flush=True)
        if int8:
            print(_goal(row, fp16_rows.get(name)), flush=True)
        else:
            fp16_rows[name] = row
    return 0


if __name__ == "__main__":
    sys.exit(main())
