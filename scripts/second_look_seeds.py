#!/usr/bin/env python3
"""Is a zoo model's miss of the distribution look (DESIGN §9) systematic or fp16 noise?

    .venv/bin/python scripts/second_look_seeds.py unet_pixelshuffle --inputs 20

The model (weights of `--seed`, as `scripts/zoo_report.py` draws them) is built once for
`--tiles` tiles and run on `--inputs` seeded inputs (`random_inputs(model, seed=k)`). For each
input it prints, per output, the count of elements beyond 3 % and the 99th percentile of the
relative error of mrvl and of the fp16-storage emulation against onnxruntime
(`fp16_emulation.Distribution`), then the mean and the standard deviation of each over the
inputs, and on how many inputs mrvl's count is above the emulation's. A compiler that is
systematically worse than the emulation is worse on most inputs and on the mean by more
than the spread; fp16 noise is above on about half of them.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np


def main(argv: list[str] | None = None) -> int:
    import onnxruntime as ort
    import tvm
    from tvm import relax

    import mrvl
    from mrvl.fp16_emulation import Distribution, fp16_emulation_outputs
    from mrvl.models.light import random_inputs
    from mrvl.models.zoo import load_zoo_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--inputs", type=int, default=20)
    parser.add_argument("--first", type=int, default=0, help="seed of the first input")
    parser.add_argument("--seed", type=int, default=0, help="the weights' seed")
    parser.add_argument("--tiles", type=int, default=8)
    args = parser.parse_args(argv)

    model = load_zoo_model(args.model, seed=args.seed)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=args.tiles)
    vm = relax.VirtualMachine(mrvl.build(mod, num_tiles=args.tiles), tvm.cpu())
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    rows: list[list[Distribution]] = []
    for k in range(args.first, args.first + args.inputs):
        feeds = random_inputs(model, seed=k)
        got = vm["main"](*[tvm.runtime.tensor(x) for x in feeds.values()])
        got = [got] if isinstance(got, tvm.runtime.Tensor) else list(got)
        got = [np.asarray(r.numpy()) for r in got]
        want = session.run(None, feeds)
        emulated = fp16_emulation_outputs(model, feeds)
        row = [Distribution.of(g, e, w) for g, e, w in zip(got, emulated, want, strict=True)]
        rows.append(row)
        cells = "; ".join(
            f"out {i}: {d.beyond} / {d.emulation_beyond} beyond 3 %, p99 "
            f"{100 * d.p99:.3f} / {100 * d.emulation_p99:.3f} %"
            for i, d in enumerate(row)
        )
        print(f"input {k:3d}: {cells}  (mrvl / emulation)", flush=True)
    for i in range(len(rows[0])):
        column = [row[i] for row in rows]
        print(f"output {i}, {column[0].checked} elements judged, over {len(rows)} inputs:")
        for what, ours, theirs in (
            ("beyond 3 %", [d.beyond for d in column], [d.emulation_beyond for d in column]),
            ("p99 (%)", [100 * d.p99 for d in column], [100 * d.emulation_p99 for d in column]),
        ):
            above = sum(a > b for a, b in zip(ours, theirs, strict=True))
            print(
                f"  {what:10s} mrvl {statistics.mean(ours):.3f} ± {statistics.pstdev(ours):.3f}"
                f", emulation {statistics.mean(theirs):.3f} ± {statistics.pstdev(theirs):.3f}"
                f"; mrvl/emulation of the means {statistics.mean(ours) / statistics.mean(theirs):.3f}"
                f"; mrvl above on {above} of {len(ours)}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
