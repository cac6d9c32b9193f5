#!/usr/bin/env python3
"""Evaluation and sweeps on Ray (issue 22's goals), side by side in one run:

    .venv/bin/python bench/distributed.py
    .venv/bin/python bench/distributed.py --model zoo:mobilenet_v2 --samples 256 --skip-sweep

- Evaluation: a zoo model (seeded random weights) over `--samples` seeded random inputs with 1
  and then 2 Ray workers (one simulator thread each, MRVL_SIM_THREADS=1): samples per second
  once the workers are up, their ratio (goal >= 1.7 on 2 cores), whether every row agrees
  (same ids, same output sha256), and the workers' CPU time per sample (between the first and
  the last batch) with the driver's CPU time: on a machine that other jobs load, the ratio
  of rates shows the cores' share, and equal CPU per sample shows that a second worker adds
  no work of its own.
- Sweep: tiles x OCM per tile x DDR bytes/cycle over three models (24 points), first with an
  empty cache, then again (goal: the re-run, served from the cache, < 10 % of the first).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MRVL_SIM_THREADS", "1")

SWEEP_MODELS = ("zoo:squeezenet1_1", "zoo:mobilenet_v3_small", "zoo:resnet18")
GRID = {
    "max_tiles": [2, 8],
    "ocm_bytes_per_tile": [131072, 262144],
    "ddr_bytes_per_cycle": [32, 64],
}


def evaluation(model_name: str, samples: int, work: Path) -> list[tuple]:
    import numpy as np
    import onnx

    from mrvl.distributed.evaluate import loopback_ray

    loopback_ray()
    import ray

    from mrvl.distributed.data import input_specs
    from mrvl.distributed.evaluate import evaluate
    from mrvl.models.zoo import load_zoo_model

    model = (
        load_zoo_model(model_name[4:]) if model_name.startswith("zoo:") else onnx.load(model_name)
    )
    path = work / "model.onnx"
    onnx.save(model, path)
    [spec] = input_specs(model)
    data = work / "data.npy"
    rng = np.random.default_rng(0)
    np.save(data, rng.standard_normal((samples, *spec.shape[1:])).astype(np.float32))
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    rows, results = [], {}
    try:
        for workers in (1, 2):
            out = work / f"rows-{workers}.jsonl"
            start = time.perf_counter()
            marks = []  # (samples done, the workers' CPU seconds) after the first and last batch
            driver = time.process_time()

            counted = [0]

            def cpu(batch, pool, marks=marks, counted=counted):
                counted[0] += len(batch)
                done = counted[0]
                if not marks or done == samples:
                    marks.append(
                        (done, sum(ray.get([a.cpu_seconds.remote() for a in pool.actors])))
                    )

            summary = evaluate(
                path, data, output=out, workers=workers, batch_size=4, progress=False, on_batch=cpu
            )
            driver = time.process_time() - driver
            per_sample = (marks[-1][1] - marks[0][1]) / max(1, marks[-1][0] - marks[0][0])
            total = time.perf_counter() - start
            lines = [json.loads(line) for line in out.read_text().splitlines()]
            results[workers] = {r["id"]: r["output_sha256"] for r in lines}
            rows.append(
                (
                    f"eval {model_name}, {workers} worker(s)",
                    summary.samples,
                    f"{summary.new_samples / summary.seconds:.1f} samples/s",
                    f"{summary.seconds:.1f} s running, {total:.1f} s with compile and start",
                    (
                        f"{summary.passed}/{summary.samples} pass fp16 rule; workers "
                        f"{per_sample * 1000:.0f} ms CPU a sample; driver {driver:.1f} s CPU"
                    ),
                )
            )
    finally:
        ray.shutdown()
    rate = [float(r[2].split()[0]) for r in rows]
    same = results[1] == results[2] and len(results[1]) == samples
    rows.append(
        (
            "eval speed-up 2 vs 1 workers",
            "",
            f"{rate[1] / rate[0]:.2f}x",
            "goal >= 1.7x",
            "rows identical" if same else "ROWS DIFFER",
        )
    )
    return rows


def sweep_twice(work: Path) -> list[tuple]:
    from mrvl.distributed.sweep import plot_pareto, sweep, write_csv

    spec = {"models": list(SWEEP_MODELS), "grid": GRID}
    cache = work / "cache"
    rows, times = [], []
    for attempt in ("first", "cached"):
        start = time.perf_counter()
        result = sweep(spec, workers=2, cache_dir=cache, progress=False)
        times.append(time.perf_counter() - start)
        errors = sum(r["error"] is not None for r in result.rows)
        rows.append(
            (
                f"sweep, {attempt} run",
                len(result.rows),
                f"{times[-1]:.1f} s",
                f"{result.cached} from the cache",
                f"{errors} points failed to compile",
            )
        )
    write_csv(result, work / "sweep.csv")
    plot_pareto(result, work / "pareto.svg")
    rows.append(
        (
            "sweep, cached / first",
            "",
            f"{times[1] / times[0]:.1%}",
            "goal < 10 %",
            f"CSV and plot in {work}",
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="zoo:mobilenet_v2")
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--skip-eval", action="store_true")
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--keep", help="keep the data, rows, CSV and plot in this folder")
    args = parser.parse_args()
    from tabulate import tabulate

    work = Path(args.keep or tempfile.mkdtemp(prefix="mrvl-bench-distributed-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    if not args.skip_eval:
        rows += evaluation(args.model, args.samples, work)
    if not args.skip_sweep:
        rows += sweep_twice(work)
    print(f"{os.cpu_count()} CPUs, MRVL_SIM_THREADS={os.environ['MRVL_SIM_THREADS']}")
    print(tabulate(rows, headers=["what", "items", "figure", "detail", "check"]))


if __name__ == "__main__":
    main()
