"""mrvlc: the compiler driver, ONNX file to hybrid TVM library, with every stage inspectable.

mrvlc model.onnx -o out/                 # JSONs, binaries, model.so, placement table
mrvlc model.onnx -o out/ --run           # ... and run it hybrid against onnxruntime
mrvlc model.onnx --emit sched            # print one stage of every region and stop
mrvlc model.onnx -o out/ --dump-dir ir/  # the IR after every pass, one file per pass
mrvlc model.onnx --report                # where each ONNX node runs, and why, then stop
mrvlc model.onnx --profile p.json --trace t.json   # run once: modelled cycles per ONNX node

Every failure a user can cause ends with one `mrvlc: error:` line and a non-zero exit status
(2 for a bad command line, 1 for a model or compile error), never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from mrvl.tools.target_options import add_target_options

STAGES = ("mrvl", "sched", "mlip", "asm", "json")


class UsageError(Exception):
    """A bad command line: reported as one line, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    from mrvl.printing import DEFAULT_ELIDE_LARGER_THAN

    p = argparse.ArgumentParser(
        prog="mrvlc", description="Compile an ONNX model for the Marvell MLIP (hybrid with TVM)."
    )
    p.add_argument("model", help="ONNX model file")
    p.add_argument("-o", "--output", help="output directory (JSONs, binaries, model.so)")
    add_target_options(p)
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=D0,D1,...",
        help="shape of a model input, for models with symbolic dimensions",
    )
    p.add_argument(
        "--deny-nodes",
        action="append",
        default=[],
        metavar="NODE[,NODE...]",
        help="keep these ONNX nodes (by name) on the CPU",
    )
    p.add_argument(
        "--deny-ops",
        action="append",
        default=[],
        metavar="OP[,OP...]",
        help="keep every node of these ONNX op types (e.g. MaxPool) on the CPU",
    )
    p.add_argument(
        "--require-mac-layer",
        action="store_true",
        help="send a region without a conv or fc layer back to the CPU",
    )
    p.add_argument(
        "--quantize",
        choices=("int8",),
        help="quantize the float model first (post-training, onnxruntime's calibrators): "
        "a QDQ model, written to OUTDIR/<model>.qdq.onnx with -o (needs --calibration)",
    )
    p.add_argument(
        "--calibration",
        metavar="DATA",
        help="calibration samples for --quantize: a .npy/.npz file with a leading batch axis "
        "or a folder of them",
    )
    p.add_argument(
        "--calibration-method",
        choices=("minmax", "entropy", "percentile"),
        default="minmax",
        help="how --quantize chooses the activations' ranges (default: minmax)",
    )
    p.add_argument(
        "--keep-fp16",
        action="append",
        default=[],
        metavar="NODE[,NODE...]",
        help="with --quantize, leave these ONNX nodes (by name) in float",
    )
    p.add_argument(
        "--accuracy-target",
        type=float,
        metavar="ERROR",
        help="with --quantize, keep the fewest further layers in float (the most sensitive "
        "first) that bring the outputs within this relative error of the float model's on the "
        "calibration data, e.g. 0.02",
    )
    p.add_argument("--emit", choices=STAGES, help="print this stage of every region and stop")
    p.add_argument("--dump-dir", help="write the IR after every pass here")
    p.add_argument(
        "--full-constants",
        action="store_true",
        help=f"print every constant in full in --emit and --dump-dir (default: constants of "
        f"more than {DEFAULT_ELIDE_LARGER_THAN} elements print as dense_resource<__elided__>, "
        "which does not parse back)",
    )
    p.add_argument(
        "--run",
        action="store_true",
        help="run the compiled model on a seeded random input and compare with onnxruntime",
    )
    p.add_argument("--seed", type=_seed, default=0, help="seed of the --run input (>= 0)")
    p.add_argument(
        "--engine",
        choices=("numba", "interp"),
        help="simulator engine of --run (default: $MRVL_SIM_ENGINE, else numba)",
    )
    p.add_argument(
        "--profile",
        metavar="FILE.json",
        help="run the model once and write the cycle model's profile (cycles, MACs, roofline, "
        "OCM, DDR and saturation per ONNX node) as JSON; prints a summary",
    )
    p.add_argument(
        "--trace",
        metavar="FILE.json",
        help="run the model once and write the modelled timeline as a Chrome trace "
        "(Perfetto, chrome://tracing)",
    )
    p.add_argument(
        "--plot",
        metavar="FILE.svg|png",
        help="draw cycles per layer against the roofline (needs the extra mrvl[plot])",
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="print where each ONNX node runs (MLIP region or CPU), why, and its MACs; "
        "without -o, stop there",
    )
    return p


def _seed(text: str) -> int:
    value = int(text)  # argparse turns the ValueError into "invalid _seed value"
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _shape_dict(specs: Sequence[str]) -> dict[str, list[int]] | None:
    shapes = {}
    for spec in specs:
        name, _, dims = spec.partition("=")
        try:
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise UsageError(f"bad --input-shape '{spec}' (want NAME=1,3,224,224)") from None
    return shapes or None


def _names(values: Sequence[str]) -> list[str]:
    """Comma-separated option values, each option given any number of times."""
    return [name for value in values for name in value.split(",") if name]


def _graph_inputs(model) -> list:
    """The model's real inputs (ONNX lists initializers among the inputs in old models)."""
    initializers = {i.name for i in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializers]


def _dims(value) -> list:
    """The declared dimensions (ONNX `TensorShapeProto.Dimension`) of a graph input."""
    return list(value.type.tensor_type.shape.dim)


def _dynamic_dims(value) -> list[tuple[int, str]]:
    """(axis, name) of each dimension of an input without a fixed size."""
    return [
        (axis, d.dim_param or "?")
        for axis, d in enumerate(_dims(value))
        if not d.HasField("dim_value")
    ]


def _check_input_shapes(model, shapes: dict[str, list[int]] | None) -> list[str]:
    """Reject --input-shape names that are no input; return a hint per input left dynamic."""
    inputs = _graph_inputs(model)
    names = [v.name for v in inputs]
    unknown = [name for name in shapes or {} if name not in names]
    if unknown:
        raise UsageError(
            f"--input-shape: the model has no input {', '.join(map(repr, unknown))}; "
            f"its inputs are {', '.join(map(repr, names))}"
        )
    for value in inputs:
        given = (shapes or {}).get(value.name)
        if given is None:
            continue
        declared = [d.dim_value if d.HasField("dim_value") else None for d in _dims(value)]
        spec = f"--input-shape {value.name}={','.join(map(str, given))}"
        if len(given) != len(declared):
            raise UsageError(f"{spec}: input '{value.name}' has rank {len(declared)}")
        for axis, (want, got) in enumerate(zip(declared, given)):
            if got < 1 or (want is not None and want != got):
                fixed = f"is fixed at {want} in the model" if want is not None else "must be >= 1"
                raise UsageError(f"{spec}: dimension {axis} of '{value.name}' {fixed}")
    hints = []
    for value in inputs:
        dynamic = _dynamic_dims(value)
        if dynamic and value.name not in (shapes or {}):
            dims = [d.dim_value or 1 for d in _dims(value)]
            which = ", ".join(f"{axis} ('{name}')" for axis, name in dynamic)
            hints.append(
                f"input '{value.name}' has a dynamic dimension {which}: layers of dynamic "
                f"shape stay on the CPU; give a size with --input-shape "
                f"{value.name}={','.join(map(str, dims))}"
            )
    return hints


def _regions(mod):
    from tvm import relax

    for gv, func in mod.functions.items():
        attrs = func.attrs if isinstance(func, relax.Function) and func.attrs else {}
        if "Codegen" in attrs and str(attrs["Codegen"]) == "mrvl":
            yield gv.name_hint, func.with_attr("global_symbol", gv.name_hint)


def _progress(items, desc: str):
    """A progress bar on a terminal (stderr), nothing otherwise; silent for a single item."""
    from tqdm import tqdm

    return tqdm(
        items, desc=desc, unit="region", leave=False, disable=None if len(items) > 1 else True
    )


def _elided_json(value, limit: int):
    """A JSON document with the constants' long `data_base64` strings elided."""
    if isinstance(value, dict):
        return {
            k: f"<elided: {len(v)} characters; --full-constants prints them>"
            if k == "data_base64" and isinstance(v, str) and len(v) > limit
            else _elided_json(v, limit)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_elided_json(v, limit) for v in value]
    return value


def _emit(mod, stage: str, args, elide: int | None) -> None:
    from mrvl.assembler import disassemble
    from mrvl.binary import decode
    from mrvl.compiler import compile_region, print_ir

    for symbol, func in _progress(list(_regions(mod)), "mrvlc: compiling regions"):
        region = compile_region(
            func,
            mcpu=args.mcpu,
            num_tiles=args.num_tiles,
            wb_pin_ocm=args.wb_pin_ocm,
            cascade=args.cascade,
            keep_stages=True,
            dump_dir=args.dump_dir,
            elide_constants_larger_than=elide,
            constants_json=stage == "json",
        )
        print(f"// ----- region {symbol}")
        if stage == "json":
            document = {"nodes": region.nodes_json, "consts": region.consts_json}
            if elide is not None:
                document = _elided_json(document, 80)
            print(json.dumps(document, indent=1))
        elif stage == "asm":
            print(print_ir(disassemble(decode(region.binary)), elide_larger_than=elide), end="")
        else:
            print(region.stages[stage], end="")


def _print_placement(mod) -> None:
    from tabulate import tabulate

    from mrvl.frontend import onnx_nodes_of
    from mrvl.placement import CPU, FOLDED, Placement, node_targets

    targets = node_targets(mod)
    rows = [
        Placement(node, op_type, targets.get(node, FOLDED))
        for node, op_type in (onnx_nodes_of(mod) or {}).items()
    ]
    table = [(r.node, r.op_type, r.target) for r in rows]
    print(tabulate(table, headers=["ONNX node", "op", "runs on"]))
    on_mlip = sum(r.target not in (CPU, FOLDED) for r in rows)
    on_cpu = sum(r.target == CPU for r in rows)
    print(f"{on_mlip} of {len(rows)} ONNX nodes on the MLIP, {on_cpu} on the CPU")


def _write_outputs(lib, outdir: Path) -> list[Path]:
    """Write each region's binary next to the library (`build` wrote its JSONs as it compiled
    it, the weights streamed: `json_dir`); list every file, in order."""
    written = []
    for region in lib.mrvl_regions:
        written += [outdir / f"{region.symbol}-nodes.json", outdir / f"{region.symbol}-consts.json"]
        binary = outdir / f"{region.symbol}.bin"
        binary.write_bytes(region.binary)
        written.append(binary)
    written.append(Path(lib.library_path))
    print(f"wrote {len(written)} files ({len(lib.mrvl_regions)} region(s)) to {outdir}:")
    for path in written:
        print(f"  {path}")
    return written


def _random_feeds(model, shapes, seed: int) -> dict:
    from mrvl.profiling import ProfileInputError, random_feeds

    try:
        return random_feeds(model, shapes, seed)
    except ProfileInputError as err:
        raise UsageError(f"running the model: {err} with --input-shape") from None


def _first_line(err: BaseException) -> str:
    return next((ln.strip() for ln in str(err).splitlines() if ln.strip()), type(err).__name__)


def run_against_onnxruntime(lib, model, shapes, seed: int, engine: str | None = None):
    """Run the hybrid library and onnxruntime on the same seeded input; returns agreements."""
    import onnxruntime as ort
    import tvm
    from tvm import relax

    from mrvl.accuracy import fp16_agreement, reference_session
    from mrvl.errors import MrvlError
    from mrvl.sim import one_line_warnings, use_engine

    feeds = _random_feeds(model, shapes, seed)
    try:
        session = reference_session(model)
    except Exception as err:  # noqa: BLE001 - onnxruntime raises its own unrelated types
        raise MrvlError(
            f"onnxruntime {ort.__version__} cannot load the model to compare with: "
            f"{_first_line(err)}"
        ) from err
    try:
        references = session.run(None, feeds)
    except Exception as err:  # noqa: BLE001 - as above
        raise MrvlError(f"onnxruntime failed on the --run input: {_first_line(err)}") from err
    vm = relax.VirtualMachine(lib, tvm.cpu())
    with use_engine(engine) if engine else contextlib.nullcontext(), one_line_warnings("mrvlc"):
        result = vm["main"](*[tvm.runtime.tensor(v) for v in feeds.values()])
    outputs = [result] if isinstance(result, tvm.runtime.Tensor) else list(result)
    return [fp16_agreement(o.numpy(), r) for o, r in zip(outputs, references)]


def _compile(args) -> int:
    import onnx

    import mrvl
    from mrvl.partition import validate_target_options
    from mrvl.printing import DEFAULT_ELIDE_LARGER_THAN
    from mrvl.target import get_target

    try:
        if args.target_file:
            from mrvl.target import load_target_file

            args.mcpu = load_target_file(args.target_file).name
        if args.num_tiles is None:
            args.num_tiles = get_target(args.mcpu).max_tiles
        validate_target_options(args.mcpu, args.num_tiles)
    except ValueError as err:
        raise UsageError(str(err)) from None
    shapes = _shape_dict(args.input_shape)
    try:  # the inputs are checked before TVM imports the model with the given shapes
        model = onnx.load(args.model)
    except Exception:  # noqa: BLE001 - from_onnx reports an unreadable file clearly
        model = None
    hints = _check_input_shapes(model, shapes) if model and model.HasField("graph") else []
    model = None  # its weights need not be in memory while compiling; --run loads it again
    if hints and (args.run or _profiling(args)):
        option = "--run" if args.run else "--profile/--trace/--plot"
        raise UsageError(f"{option} needs a fixed shape for every input: {hints[0]}")
    if args.quantize:
        args.model = _quantized(args)
    mod = mrvl.from_onnx(args.model, shape_dict=shapes)
    for hint in hints:
        print(f"mrvlc: warning: {hint}", file=sys.stderr)
    try:
        mod = mrvl.partition_for_mrvl(
            mod,
            mcpu=args.mcpu,
            num_tiles=args.num_tiles,
            deny_nodes=_names(args.deny_nodes),
            deny_ops=_names(args.deny_ops),
            require_mac_layer=args.require_mac_layer,
        )
    except ValueError as err:  # a deny list naming no node or no ONNX op
        raise UsageError(str(err)) from None
    if args.report:
        from mrvl.report import partition_report

        print(partition_report(mod))  # the nodes from_onnx recorded, in graph order
        if args.emit is None and args.output is None:
            return 0
    elide = None if args.full_constants else DEFAULT_ELIDE_LARGER_THAN
    if args.emit:
        _emit(mod, args.emit, args, elide)
        return 0
    options = {}
    if args.output:
        outdir = Path(args.output)
        outdir.mkdir(parents=True, exist_ok=True)
        options["json_dir"] = outdir
    if args.wb_pin_ocm:
        options["wb_pin_ocm"] = True
    if args.cascade:
        options["cascade"] = True
    if args.dump_dir:
        options["dump_dir"] = args.dump_dir
        if elide is not None:
            options["elide_constants_larger_than"] = elide
    lib = mrvl.build(
        mod, export_dir=args.output, mcpu=args.mcpu, num_tiles=args.num_tiles, **options
    )
    if args.output:
        _write_outputs(lib, Path(args.output))
        if not args.report:  # the report above says it all
            _print_placement(mod)
    status = 0
    if args.run or _profiling(args):
        status = _run_once(lib, args, shapes)
    return status


def _quantized(args) -> str:
    """Quantize the model on the calibration data; the path of the QDQ model, which the rest
    of the run compiles and compares against (in OUTDIR with -o, else a temporary file)."""
    import atexit
    import shutil
    import tempfile
    import warnings

    import onnx

    from mrvl.distributed.data import input_specs, read, samples
    from mrvl.mixed_precision import AccuracyTargetWarning, quantization_report
    from mrvl.quantization import quantize

    if not args.calibration:
        raise UsageError("--quantize int8 needs --calibration DATA (a .npy/.npz file or folder)")
    if args.accuracy_target is not None and not args.accuracy_target > 0:
        raise UsageError(f"--accuracy-target must be > 0, got {args.accuracy_target}")
    keep = _names(args.keep_fp16)
    model = onnx.load(args.model)
    nodes = {node.name for node in model.graph.node}
    unknown = [name for name in keep if name not in nodes]
    if unknown:
        raise UsageError(f"--keep-fp16: the model has no node named {', '.join(map(repr, unknown))}")
    specs = input_specs(model)
    feeds = [read(ref, specs) for ref in samples(args.calibration, specs)]
    with warnings.catch_warnings():  # the verdict below says it in one line
        warnings.simplefilter("ignore", AccuracyTargetWarning)
        qdq = quantize(
            model,
            feeds,
            method=args.calibration_method,
            keep_fp16=keep,
            accuracy_target=args.accuracy_target,
        )
    if args.output:
        path = Path(args.output) / f"{Path(args.model).stem}.qdq.onnx"
        path.parent.mkdir(parents=True, exist_ok=True)
    else:
        work = tempfile.mkdtemp(prefix="mrvlc-qdq-")
        atexit.register(shutil.rmtree, work, ignore_errors=True)
        path = Path(work) / f"{Path(args.model).stem}.qdq.onnx"
    onnx.save(qdq, path)
    print(f"quantized on {len(feeds)} calibration samples ({args.calibration_method}): {path}")
    report = quantization_report(qdq)
    for kept in report["kept"]:
        print(f"  kept in float: {kept['node']} ({kept['why']})")
    if "output_error" in report:
        print(
            f"  outputs {report['output_error']:.3g} from the float model's on the calibration "
            f"data (target {report['accuracy_target']}; all int8: "
            f"{report['error_with_asked_layers_only']:.3g})"
        )
        if not report["reached"]:
            print(
                f"mrvlc: warning: the accuracy target {report['accuracy_target']} is not met "
                "even with every ranked layer in float",
                file=sys.stderr,
            )
    return str(path)


def _profiling(args) -> bool:
    return bool(args.profile or args.trace or args.plot)


def _run_once(lib, args, shapes) -> int:
    """Run the built model once: against onnxruntime with --run, and recording what each region
    counted for the profile; then write the profile, trace and plot asked for."""
    import onnx

    from mrvl.profiling import plot_profile, profile_library, profile_runs
    from mrvl.runtime import recording

    model = onnx.load(args.model)  # readable: from_onnx has checked it (--quantize: the QDQ model)
    status = 0
    if args.run:
        with recording() as recorder:
            agreements = run_against_onnxruntime(lib, model, shapes, args.seed, args.engine)
        for i, agreement in enumerate(agreements):
            print(f"output {i} vs onnxruntime: {agreement}")
        if not all(a.passed for a in agreements):
            status = 1
        if not _profiling(args):  # a saturated run has warned already (SaturationWarning)
            return status
        profile = profile_runs(lib.mrvl_regions, recorder.runs)
    else:
        feeds = list(_random_feeds(model, shapes, args.seed).values())
        profile = profile_library(lib, feeds, engine=args.engine)
    if args.profile:
        profile.write(args.profile)
    if args.trace:
        from mrvl.sim.trace import write_trace

        write_trace(profile, args.trace)
    if args.plot:
        plot_profile(profile, args.plot)
    print(profile.summary())
    for what, path in (("profile", args.profile), ("trace", args.trace), ("plot", args.plot)):
        if path:
            print(f"wrote the {what} to {path}")
    return status


def _check_profile_options(args) -> None:
    """Option clashes and a missing matplotlib, before anything is compiled."""
    if not _profiling(args):
        return
    if args.emit:
        raise UsageError("--emit prints a stage and stops: it runs nothing to profile")
    if args.plot:
        from mrvl.profiling import check_plot_path

        try:
            check_plot_path(args.plot)
        except ValueError as err:
            raise UsageError(str(err)) from None
    for option, path in (("--profile", args.profile), ("--trace", args.trace)):
        if path and not Path(path).resolve().parent.is_dir():
            raise UsageError(f"{option} {path}: no directory {Path(path).parent}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.emit is None and args.output is None and not args.report and not _profiling(args):
        print(
            "mrvlc: error: give -o OUTDIR, --emit STAGE to print a stage, --report, "
            "or --profile/--trace/--plot",
            file=sys.stderr,
        )
        return 2
    from mrvl.errors import MrvlError

    try:
        _check_profile_options(args)
        return _compile(args)
    except UsageError as err:
        print(f"mrvlc: error: {err}", file=sys.stderr)
        return 2
    except (MrvlError, OSError) as err:
        print(f"mrvlc: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
