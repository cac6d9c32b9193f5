"""mrvlc: the compiler driver, ONNX file to hybrid TVM library, with every stage inspectable.

mrvlc model.onnx -o out/                 # JSONs, binaries, model.so, placement table
mrvlc model.onnx -o out/ --run           # ... and run it hybrid against onnxruntime
mrvlc model.onnx --emit sched            # print one stage of every region and stop
mrvlc model.onnx -o out/ --dump-dir ir/  # the IR after every pass, one file per pass
mrvlc model.onnx --report                # where each ONNX node runs, and why, then stop
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

STAGES = ("mrvl", "sched", "mlip", "asm", "json")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mrvlc", description="Compile an ONNX model for the Marvell MLIP (hybrid with TVM)."
    )
    p.add_argument("model", help="ONNX model file")
    p.add_argument("-o", "--output", help="output directory (JSONs, binaries, model.so)")
    p.add_argument("--mcpu", default="cn10ka", help="target part (default: cn10ka)")
    p.add_argument("--num-tiles", type=int, default=8, help="MLIP tiles to use (1, 2, 4, 8)")
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=D0,D1,...",
        help="shape of a model input, for models with symbolic dimensions",
    )
    p.add_argument("--emit", choices=STAGES, help="print this stage of every region and stop")
    p.add_argument("--dump-dir", help="write the IR after every pass here")
    p.add_argument(
        "--run",
        action="store_true",
        help="run the compiled model on a seeded random input and compare with onnxruntime",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the --run input")
    p.add_argument(
        "--engine",
        choices=("numba", "interp"),
        help="simulator engine of --run (default: $MRVL_SIM_ENGINE, else numba)",
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="print where each ONNX node runs (MLIP region or CPU), why, and its MACs; "
        "without -o, stop there",
    )
    return p


def _shape_dict(specs: Sequence[str]) -> dict[str, list[int]] | None:
    shapes = {}
    for spec in specs:
        name, _, dims = spec.partition("=")
        try:
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise SystemExit(f"mrvlc: error: bad --input-shape '{spec}' (want NAME=1,3,224,224)")
    return shapes or None


def _regions(mod):
    from tvm import relax

    for gv, func in mod.functions.items():
        attrs = func.attrs if isinstance(func, relax.Function) and func.attrs else {}
        if "Codegen" in attrs and str(attrs["Codegen"]) == "mrvl":
            yield gv.name_hint, func.with_attr("global_symbol", gv.name_hint)


def _emit(mod, stage: str, args) -> None:
    from mrvl.assembler import disassemble
    from mrvl.compiler import compile_region, print_ir
    from mrvl.binary import decode

    for symbol, func in _regions(mod):
        region = compile_region(
            func,
            mcpu=args.mcpu,
            num_tiles=args.num_tiles,
            keep_stages=True,
            dump_dir=args.dump_dir,
        )
        print(f"// ----- region {symbol}")
        if stage == "json":
            print(json.dumps({"nodes": region.nodes_json, "consts": region.consts_json}, indent=1))
        elif stage == "asm":
            print(print_ir(disassemble(decode(region.binary))), end="")
        else:
            print(region.stages[stage], end="")


def _print_placement(mod, model) -> None:
    from tabulate import tabulate

    from mrvl.placement import CPU, FOLDED, placement

    rows = placement(mod, model)
    table = [(r.node, r.op_type, r.target) for r in rows]
    print(tabulate(table, headers=["ONNX node", "op", "runs on"]))
    on_mlip = sum(r.target not in (CPU, FOLDED) for r in rows)
    on_cpu = sum(r.target == CPU for r in rows)
    print(f"{on_mlip} of {len(rows)} ONNX nodes on the MLIP, {on_cpu} on the CPU")


def _write_outputs(lib, outdir: Path) -> None:
    from mrvl.json_emitter import write_json

    for region in lib.mrvl_regions:
        write_json(outdir, region.symbol, region.nodes_json, region.consts_json)
        (outdir / f"{region.symbol}.bin").write_bytes(region.binary)
    print(f"wrote {len(lib.mrvl_regions)} region(s) and {lib.library_path} to {outdir}")


def run_against_onnxruntime(lib, model, shapes, seed: int, engine: str | None = None):
    """Run the hybrid library and onnxruntime on the same seeded input; returns agreements."""
    import numpy as np
    import onnxruntime as ort
    import tvm
    from tvm import relax

    from mrvl.accuracy import fp16_agreement
    from mrvl.sim import use_engine

    rng = np.random.default_rng(seed)
    initializers = {i.name for i in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = (shapes or {}).get(value.name) or [
            d.dim_value for d in value.type.tensor_type.shape.dim
        ]
        feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    references = session.run(None, feeds)
    vm = relax.VirtualMachine(lib, tvm.cpu())
    with use_engine(engine) if engine else contextlib.nullcontext():
        result = vm["main"](*[tvm.runtime.tensor(v) for v in feeds.values()])
    outputs = [result] if isinstance(result, tvm.runtime.Tensor) else list(result)
    return [fp16_agreement(o.numpy(), r) for o, r in zip(outputs, references)]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.emit is None and args.output is None and not args.report:
        print(
            "mrvlc: error: give -o OUTDIR, --emit STAGE to print a stage, or --report",
            file=sys.stderr,
        )
        return 2
    try:
        import onnx

        import mrvl
        from mrvl.errors import MrvlError

        shapes = _shape_dict(args.input_shape)
        mod = mrvl.from_onnx(args.model, shape_dict=shapes)
        model = onnx.load(args.model)  # readable: from_onnx has checked it
        mod = mrvl.partition_for_mrvl(mod, mcpu=args.mcpu, num_tiles=args.num_tiles)
        if args.report:
            from mrvl.report import partition_report

            print(partition_report(mod, model))
            if args.emit is None and args.output is None:
                return 0
        if args.emit:
            _emit(mod, args.emit, args)
            return 0
        outdir = Path(args.output)
        outdir.mkdir(parents=True, exist_ok=True)
        options = {"dump_dir": args.dump_dir} if args.dump_dir else {}
        lib = mrvl.build(
            mod, export_dir=outdir, mcpu=args.mcpu, num_tiles=args.num_tiles, **options
        )
        _write_outputs(lib, outdir)
        if not args.report:  # the report above says it all
            _print_placement(mod, model)
        if args.run:
            agreements = run_against_onnxruntime(lib, model, shapes, args.seed, args.engine)
            for i, agreement in enumerate(agreements):
                print(f"output {i} vs onnxruntime: {agreement}")
            if not all(a.passed for a in agreements):
                return 1
        return 0
    except MrvlError as err:
        print(f"mrvlc: error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"mrvlc: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
