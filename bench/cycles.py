#!/usr/bin/env python3
"""The scheduler against the roofline, by the cycle model (issue 9's goals), in one run:

    .venv/bin/python bench/cycles.py
    .venv/bin/python bench/cycles.py --models resnet50 zoo:mobilenet_v2 --tiles 1 2 4 8

For each model (light models with seeded random weights, `mrvl.models.light`; `zoo:NAME` from
`mrvl.models.zoo`), fp16 on cn10ka, at each tile count: every MLIP region is compiled
(`mrvl.compile_region`) and replayed on the cycle model (`mrvl.sim.profile`; cycles do not
depend on data, so nothing is run). Printed per (model, tiles):

- modelled cycles, the sum of the per-layer roofline bounds, and their ratio (goal: <= 1.25);
- DDR bytes read and written (what the port moved, in bursts), and the compulsory bytes the
  rooflines count;
- the cycle model's own wall time;

and per model the speed-up from the fewest to the most tiles next to the roofline's own
speed-up, and their ratio (goal: >= 0.75). Each (model, tiles) is compiled without and with
`wb_pin_ocm` and without and with cascading (`sched-cascade`), so the DDR bytes that weight
pinning and cascading each save are side by side (`--pin off|on|both`,
`--cascade off|on|both`). `--layers N` also prints, per (model, tiles, options), the N
layers furthest above their roofline: cycles, roofline, DDR bytes read and the compulsory
bytes. `--dtypes fp16 int8` also runs each model quantized by `mrvl.quantize` (8 seeded
calibration samples), whose layers run in int8, next to its fp16 form.
"""

from __future__ import annotations

import argparse
import time

from tabulate import tabulate

MODELS = ("resnet50", "zoo:mobilenet_v2")
TILES = (1, 8)
MCPU = "cn10ka"


def load(name: str):
    if name.startswith("zoo:"):
        from mrvl.models.zoo import load_zoo_model

        return load_zoo_model(name[4:], calibrate=False)
    from mrvl.models.light import load_light_model

    return load_light_model(name, calibrate=False)


def quantized(model):
    """`model` as `mrvl.quantize` writes it, calibrated on 8 seeded normal samples."""
    import numpy as np

    import mrvl

    dims = model.graph.input[0].type.tensor_type.shape.dim
    shape = [d.dim_value for d in dims]
    calibration = np.random.default_rng(0).standard_normal((8, *shape[1:])).astype(np.float32)
    return mrvl.quantize(model, calibration)


def regions(model, num_tiles: int, wb_pin_ocm: bool, cascade: bool):
    """(symbol, ValidProgram) of every MLIP region, compiled for `num_tiles`."""
    from tvm import relax

    import mrvl
    from mrvl.compiler import compile_region
    from mrvl.sim import prepare

    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), mcpu=MCPU, num_tiles=num_tiles)
    for gv, func in mod.functions.items():
        attrs = func.attrs if isinstance(func, relax.Function) and func.attrs else {}
        if "Codegen" in attrs and str(attrs["Codegen"]) == "mrvl":
            func = func.with_attr("global_symbol", gv.name_hint)
            region = compile_region(
                func, mcpu=MCPU, num_tiles=num_tiles, wb_pin_ocm=wb_pin_ocm, cascade=cascade
            )
            yield region.symbol, prepare(region.binary)


def worst_layers(profile, count: int) -> str:
    """The `count` layers with the most cycles above their roofline, as a table."""
    layers = sorted(profile.layers, key=lambda layer: layer.roofline_cycles - layer.cycles)
    return tabulate(
        [
            (
                layer.onnx_node,
                layer.cycles,
                layer.roofline_cycles,
                layer.cycles - layer.roofline_cycles,
                f"{layer.cycles / max(1, layer.roofline_cycles):.2f}",
                f"{layer.ddr_read_bytes / 1e6:.2f}",
                f"{layer.compulsory_ddr_bytes / 1e6:.2f}",
                layer.tiles,
            )
            for layer in layers[:count]
        ],
        headers=[
            "layer", "cycles", "roofline", "excess", "x roofline", "DDR read MB",
            "compulsory MB", "tiles",
        ],
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--tiles", nargs="+", type=int, default=list(TILES))
    parser.add_argument("--pin", choices=("off", "on", "both"), default="both")
    parser.add_argument("--cascade", choices=("off", "on", "both"), default="both")
    parser.add_argument("--layers", type=int, default=0, help="print the N worst layers")
    parser.add_argument("--dtypes", nargs="+", choices=("fp16", "int8"), default=["fp16"])
    args = parser.parse_args()

    from mrvl.sim.profile import profile_regions

    rows, speedups = [], []
    for name, dtype in ((n, d) for n in args.models for d in args.dtypes):
        model = load(name) if dtype == "fp16" else quantized(load(name))
        results = {}
        choice = {"off": (False,), "on": (True,), "both": (False, True)}
        pins, cascades = choice[args.pin], choice[args.cascade]
        options = [(p, c) for p in pins for c in cascades]
        for tiles, (pin, cascade) in ((t, o) for t in args.tiles for o in options):
            programs = [
                (symbol, valid, None) for symbol, valid in regions(model, tiles, pin, cascade)
            ]
            start = time.perf_counter()
            profile = profile_regions(programs)
            seconds = time.perf_counter() - start
            results[tiles, pin, cascade] = profile
            if args.layers:
                print(f"{name}, {tiles} tiles, wb_pin_ocm {pin}, cascade {cascade}:")
                print(worst_layers(profile, args.layers), end="\n\n")
            instructions = sum(len(valid.code) for _, valid, _ in programs)
            rows.append(
                (
                    name,
                    dtype,
                    tiles,
                    "on" if pin else "off",
                    "on" if cascade else "off",
                    instructions,
                    profile.total_cycles,
                    profile.roofline_cycles,
                    f"{profile.total_cycles / profile.roofline_cycles:.2f}",
                    f"{profile.ddr_read_bytes / 1e6:.1f}",
                    f"{profile.ddr_write_bytes / 1e6:.1f}",
                    f"{profile.compulsory_ddr_bytes / 1e6:.1f}",
                    f"{seconds:.1f}",
                )
            )
        low, high = min(args.tiles), max(args.tiles)
        for pin, cascade in options if low != high else ():
            few, many = results[low, pin, cascade], results[high, pin, cascade]
            modelled = few.total_cycles / many.total_cycles
            bound = few.roofline_cycles / many.roofline_cycles
            speedups.append(
                (
                    name,
                    dtype,
                    "on" if pin else "off",
                    "on" if cascade else "off",
                    f"{low}->{high}",
                    f"{modelled:.2f}",
                    f"{bound:.2f}",
                    f"{modelled / bound:.2f}",
                )
            )
    print(f"{MCPU}: modelled cycles against the sum of per-layer roofline bounds")
    print(
        tabulate(
            rows,
            headers=[
                "model",
                "dtype",
                "tiles",
                "wb_pin_ocm",
                "cascade",
                "instructions",
                "cycles",
                "roofline",
                "x roofline",
                "DDR read MB",
                "DDR write MB",
                "compulsory MB",
                "model s",
            ],
        )
    )
    if speedups:
        print()
        print(
            tabulate(
                speedups,
                headers=[
                    "model",
                    "dtype",
                    "wb_pin_ocm",
                    "cascade",
                    "tiles",
                    "speed-up",
                    "roofline speed-up",
                    "ratio",
                ],
            )
        )


if __name__ == "__main__":
    main()
