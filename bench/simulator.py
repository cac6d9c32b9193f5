#!/usr/bin/env python3
"""Simulator time per model next to onnxruntime on the same model and input, in one run.

    .venv/bin/python bench/simulator.py                    # every light model
    .venv/bin/python bench/simulator.py squeezenet resnet50 --repeat 3

Each model (`mrvl.models.light`, seeded random weights) is compiled by mrvl for 8 tiles
(not timed here: see bench/compile_time.py), then run once as a hybrid in the Relax VM. The
table gives the VM's wall time, the part of it spent in `mrvl.sim.run` (the reference
interpreter: numpy, one instruction at a time), the instructions simulated, onnxruntime's
time for the same model and input (CPU provider, best of `--repeat` after one warm-up run),
and whether the output meets the fp16 acceptance rule against onnxruntime. A model that
fails to compile or run is listed with its error.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

import numpy as np

from mrvl.sim.timing import simulator_clock


def bench_model(name: str, seed: int, repeat: int) -> dict:
    import onnxruntime as ort
    import tvm
    from tvm import relax

    import mrvl
    from mrvl.accuracy import fp16_agreement
    from mrvl.models.light import load_light_model, model_macs, random_inputs

    row: dict = {"model": name}
    model = load_light_model(name, seed=seed)
    row["gmac"] = model_macs(model) / 1e9
    feeds = random_inputs(model, seed=seed)

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    reference = session.run(None, feeds)[0]  # warm-up
    ort_times = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, feeds)
        ort_times.append(time.perf_counter() - start)
    row["onnxruntime"] = min(ort_times)

    try:
        mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=8)
        start = time.perf_counter()
        lib = mrvl.build(mod)
        row["compile"] = time.perf_counter() - start
        row["regions"] = len(lib.mrvl_regions)
        row["instructions"] = sum(len(r.program.code) for r in lib.mrvl_regions)
        vm = relax.VirtualMachine(lib, tvm.cpu())
        args = [tvm.runtime.tensor(x) for x in feeds.values()]
        vm_times, sim_times = [], []
        for _ in range(repeat):
            with simulator_clock() as spent:
                start = time.perf_counter()
                result = vm["main"](*args)
                vm_times.append(time.perf_counter() - start)
            sim_times.append(spent["seconds"])
        row["vm"] = min(vm_times)
        row["simulator"] = min(sim_times)
        actual = result.numpy() if isinstance(result, tvm.runtime.Tensor) else result[0].numpy()
        agreement = fp16_agreement(actual, np.asarray(reference))
        verdict = "PASS" if agreement.passed else "FAIL"
        row["fp16"] = f"{verdict} ({agreement.max_relative_error:.1e})"
    except Exception as err:  # noqa: BLE001 - reported in the table
        row["error"] = f"{type(err).__name__}: {str(err).strip().splitlines()[-1][:150]}"
        traceback.print_exc(file=sys.stderr)
    return row


def main(argv=None) -> int:
    from mrvl.models.light import LIGHT_MODELS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", default=list(LIGHT_MODELS))
    parser.add_argument("--repeat", type=int, default=1, help="timed runs (best is kept)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    header = (
        f"{'model':14s} {'GMAC':>6s} {'regions':>7s} {'instrs':>7s} {'VM run s':>9s} "
        f"{'sim s':>8s} {'ORT s':>7s} {'sim/ORT':>8s} {'compile s':>9s}  fp16 vs ORT"
    )
    print(header)
    print("-" * len(header), flush=True)
    for name in args.models:
        row = bench_model(name, args.seed, args.repeat)
        if "error" in row:
            print(f"{name:14s} {row['gmac']:6.2f}  error: {row['error']}", flush=True)
            continue
        print(
            f"{name:14s} {row['gmac']:6.2f} {row['regions']:7d} {row['instructions']:7d} "
            f"{row['vm']:9.2f} {row['simulator']:8.2f} {row['onnxruntime']:7.3f} "
            f"{row['simulator'] / row['onnxruntime']:8.0f} {row['compile']:9.1f}  {row['fp16']}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
