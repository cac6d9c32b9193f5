#!/usr/bin/env python3
"""The long mutation-fuzz campaign over compiled binaries (issue 19); see tests/fuzz/mutate.py.

    MRVL_SIM_THREADS=1 nice -n 10 .venv/bin/python scripts/mutate_binaries.py \
        --mutants 10000 [--seed N] [--models mnist activations ...] [--out mutate-out]

The seeds are the engine corpus (tests/helpers.py: the e2e nets, paths and MNIST), each
compiled for 1 and 8 tiles, taken in turn. Half of the mutants change two fields. Every mutant
that breaks the property is written to `--out` as `<k>.bin` with a line in `problems.jsonl`;
every outcome goes to `mutants.jsonl`; every 100 mutants and at the end it prints the counts:
refused, ran alike, and each kind of problem, with the largest peak-RSS growth on each engine.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
sys.path.insert(0, str(ROOT / "tests"))

import mutate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", nargs="+", default=None, help="engine-corpus model names")
    parser.add_argument("--tiles", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--timeout", type=float, default=mutate.TIMEOUT_S)
    parser.add_argument("--out", type=Path, default=Path("mutate-out"))
    args = parser.parse_args(argv)
    os.environ.setdefault("MRVL_SIM_THREADS", "1")
    import helpers

    names = args.models or list(helpers.ENGINE_CORPUS_MODELS)
    seeds = []
    for name in names:
        for tiles in args.tiles:
            for symbol, data in mutate.compiled_regions(helpers.corpus_model(name), tiles):
                seeds.append((f"{name}-{tiles}:{symbol}", data))
    print(f"{len(seeds)} seed binaries from {len(names)} models", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    problems_file = (args.out / "problems.jsonl").open("w")
    progress = (args.out / "mutants.jsonl").open("w")
    counts: collections.Counter[str] = collections.Counter()
    growth = {e: 0 for e in mutate.ENGINES}
    start = time.time()

    def log(verdict: mutate.Verdict, seed_name: str, mutant: bytes) -> None:
        kinds = {o.kind for o in verdict.outcomes.values()}
        counts["mutants"] += 1
        counts["two-field"] += " " in verdict.description
        if verdict.problem is None:
            counts["refused" if kinds == {"error"} else "ran alike"] += 1
        else:
            counts["problem: " + verdict.problem.split(":")[0]] += 1
            (args.out / f"{counts['mutants']}.bin").write_bytes(mutant)
            record = {"k": counts["mutants"], "seed": seed_name, "mutation": verdict.description,
                      "problem": verdict.problem}  # fmt: skip
            problems_file.write(json.dumps(record) + "\n")
            problems_file.flush()
            print(f"PROBLEM {seed_name} {verdict.description}: {verdict.problem}", flush=True)
        for engine, o in verdict.outcomes.items():
            growth[engine] = max(growth[engine], o.rss_growth)
        progress.write(json.dumps({"seed": seed_name, "mutation": verdict.description,
                                   "kinds": sorted(kinds), "problem": verdict.problem,
                                   "rss": {e: o.rss_growth for e, o in verdict.outcomes.items()},
                                   "seconds": {e: round(o.seconds, 3) for e, o in verdict.outcomes.items()}})
                       + "\n")  # fmt: skip
        progress.flush()
        if counts["mutants"] % 100 == 0:
            summary()

    def summary() -> None:
        line = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        peaks = ", ".join(f"{e} {g / 2**20:.1f} MiB" for e, g in growth.items())
        print(f"[{time.time() - start:.0f} s] {line}; peak RSS growth {peaks}", flush=True)

    mutate.campaign(seeds, args.mutants, random.Random(args.seed), log, args.timeout)
    summary()
    return 1 if any(k.startswith("problem") for k in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
