#!/usr/bin/env python3
"""Where a zoo model's int8 miss starts: each quantized layer judged alone on mrvl's inputs.

    .venv/bin/python scripts/int8_local_steps.py yolov5n
    .venv/bin/python scripts/int8_local_steps.py yolov8n --seed 1 --worst 10

A zoo model beyond 3 steps of onnxruntime (docs/zoo.md's int8 table) is either a layer that
mrvl computes wrong, or 1-step roundings that the network carries and amplifies. This runs
`tests/fuzz/int8_triage.local_steps` on the model's QDQ form as `scripts/zoo_int8.py` makes
and judges it (its quantizer, seeded input, cn10ka, 8 tiles): every quantized layer run
alone in onnxruntime (graph optimizations off, as `mrvl.accuracy.reference_session` on a CPU
without VNNI) on mrvl's own int8 inputs. It prints the layers counted by their steps alone
(exact, 1, more: a layer more than 1 step off alone is a compiler bug), the largest steps
any layer's output carries from onnxruntime's whole-model run, and the `--worst` layers by
steps carried; `--json` saves every layer's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))


def triage_zoo_model(name: str, seed: int = 0):
    """`local_steps` of zoo model `name`'s QDQ form (`scripts/zoo_int8.py`'s) on its
    seed-`seed` input."""
    from int8_reference_spread import judged_model
    from int8_triage import local_steps
    from zoo_int8 import MCPU, NUM_TILES

    qdq, _, feeds = judged_model(name, seed)
    return local_steps(qdq, feeds, SimpleNamespace(mcpu=MCPU, num_tiles=NUM_TILES))


def summary(layers) -> str:
    """One line: the layers by steps alone, the largest steps carried, and the first layers
    (in graph order) whose outputs carry more than 1 and more than 3 steps."""
    alone = Counter(min(layer.local, 2) for layer in layers)
    wrong = [f"{layer.node} ({layer.op_type}) {layer.local}" for layer in layers if layer.local > 1]
    first = {
        limit: next((f"{x.node} ({x.carried})" for x in layers if x.carried > limit), "none")
        for limit in (1, 3)
    }
    return (
        f"{len(layers)} layers alone: {alone[0]} exact, {alone[1]} within 1 step, "
        f"{alone[2]} beyond{': ' + ', '.join(wrong) if wrong else ''}; carried up to "
        f"{max((layer.carried for layer in layers), default=0)} steps, first beyond 1: "
        f"{first[1]}, first beyond 3: {first[3]}"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="+", help="zoo models (mrvl.models.zoo.ZOO_MODELS)")
    parser.add_argument("--seed", type=int, default=0, help="weights and input seed")
    parser.add_argument("--worst", type=int, default=5, help="layers listed by steps carried")
    parser.add_argument("--json", type=Path, help="also save every layer's steps here")
    args = parser.parse_args(argv)
    saved = {}
    for name in args.names:
        start = time.perf_counter()
        layers = triage_zoo_model(name, args.seed)
        saved[name] = [asdict(layer) for layer in layers]
        if args.json:
            args.json.write_text(json.dumps(saved, indent=1) + "\n")
        print(f"{name} (seed {args.seed}, {time.perf_counter() - start:.0f} s): {summary(layers)}")
        for layer in sorted(layers, key=lambda layer: -layer.carried)[: args.worst]:
            print(f"  {layer.node} ({layer.op_type}): alone {layer.local}, carried {layer.carried}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
