#!/usr/bin/env python3
"""The model zoo in int8 (issue 20's zoo goals): quantize, build, run and judge each model.

    .venv/bin/python scripts/zoo_int8.py                      # every model, a markdown table
    .venv/bin/python scripts/zoo_int8.py resnet18 --inputs 64 -o /tmp/zoo_int8.md
    .venv/bin/python scripts/zoo_int8.py mobilenet_v2 --quantizer static  # another tool's QDQ

Each model of `mrvl.models.zoo` (seeded random weights, seed 0) is quantized by
`mrvl.quantize` (min-max, per channel; or, with `--quantizer`, by onnxruntime's
`quantize_static` with its defaults) on `CALIBRATION` seeded standard-normal inputs, then
goes `mrvl.from_onnx` → `mrvl.partition_for_mrvl` (8 tiles) → `mrvl.build` like its float
form. Measured per model:

- **regions** and **int8 MACs**: MLIP regions, and the share of the model's MACs that run in
  int8 on the MLIP (`PartitionReport.int8_mac_fraction`); **fp16 layers**: the layers with
  MACs that run in fp16 on the MLIP or on the CPU (none asked for here);
- **steps vs onnxruntime-QDQ** (DESIGN §9: at most 3): every element of each output's last
  quantized tensor (the graph output, or the dequantized tensor a float op on the CPU such
  as the final Softmax reads) against onnxruntime running the same QDQ model on the same
  input, in quantization steps of that tensor's scale: the share exact, within 1 and within
  3, and the largest;
- **top-1 vs fp32** (classifiers): the share of `--inputs` seeded inputs on which the int8
  build's top class is the float model's in onnxruntime: what quantization itself costs;
- **cycles int8 / fp16**: modelled cycles of the QDQ build's regions against the float
  build's (`mrvl.sim.profile`, cn10ka, 8 tiles);
- **on the CPU**: the nodes the partition left on the CPU, counted by op type and reason
  (the quantizes and dequantizes that only convert for them left out): what splits regions.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

NUM_TILES = 8
MCPU = "cn10ka"
SEED = 0
CALIBRATION = 16
TOP1_INPUTS = 64
STEP_GOAL = 3
REFERENCE = (
    "onnxruntime running the same QDQ model on the same input "
    "(`mrvl.accuracy.reference_session`: with graph optimizations off, DequantizeLinear → "
    "fp32 op → QuantizeLinear as written, on a CPU whose fused int8 kernels add pairs of "
    "products in int16 with saturation: x86 with AVX2 or AVX-512 BW and no VNNI, "
    "`mrvl.accuracy.int8_pairs_saturate`; with its default optimizations elsewhere)"
)
"""What the steps are judged against, as `_session` makes it."""


@dataclass
class Int8Run:
    """What one quantized model did; stages not reached stay None."""

    name: str
    kind: str
    regions: int | None = None
    int8_mac_fraction: float | None = None
    fp16_layers: list[str] = field(default_factory=list)
    steps: dict[str, float] = field(default_factory=dict)  # exact, within 1, within 3, max
    top1: float | None = None
    top1_inputs: int = 0
    cycles: tuple[int, int] | None = None  # (int8 build, float build)
    on_cpu: dict[str, int] = field(default_factory=dict)  # "op: reason" -> nodes
    failure: str | None = None
    quantizer: str = "mrvl"  # a key of QUANTIZERS
    seconds: float | None = None  # the whole run

    @property
    def within_goal(self) -> bool:
        return self.failure is None and self.steps.get("max", np.inf) <= STEP_GOAL


QUANTIZERS = {
    "mrvl": "`mrvl.quantize` (min-max, per channel)",
    "static": "onnxruntime's `quantize_static` with its defaults (QDQ, min-max, per-tensor "
    "int8 weights and activations), without `mrvl.quantize`",
    "static-uint8": "onnxruntime's `quantize_static` with its defaults but uint8 activations "
    "(older onnxruntime's default), without `mrvl.quantize`",
}
"""How `--quantizer` makes the QDQ model: the other tools' forms check that mrvl takes a QDQ
model it did not write (issue 20: "a QDQ model written by `quantize_static` with its
defaults, built without `mrvl.quantize`")."""


def quantize_static_defaults(model, calibration: list[dict], **options):
    """`model` through onnxruntime's `quantize_static` with its defaults (and `options`),
    calibrated on the feeds `calibration`."""
    import tempfile

    import onnx
    from onnxruntime.quantization import CalibrationDataReader, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter(calibration)

        def get_next(self):
            return next(self.feeds, None)

    with tempfile.TemporaryDirectory() as work:
        source, target = Path(work) / "float.onnx", Path(work) / "qdq.onnx"
        onnx.save(model, source)
        quantize_static(source, target, Reader(), **options)
        return onnx.load(target)


def quantized_zoo_model(name: str, seed: int = SEED, quantizer: str = "mrvl"):
    """The float zoo model and its QDQ form by `quantizer` (`QUANTIZERS`) on seeded inputs."""
    import mrvl
    from mrvl.models.light import random_inputs
    from mrvl.models.zoo import load_zoo_model

    model = load_zoo_model(name, seed=seed)
    calibration = [random_inputs(model, seed=seed + 1000 + i) for i in range(CALIBRATION)]
    if quantizer == "mrvl":
        return model, mrvl.quantize(model, calibration)
    if quantizer == "static":
        return model, quantize_static_defaults(model, calibration)
    if quantizer == "static-uint8":
        from onnxruntime.quantization import QuantType

        return model, quantize_static_defaults(model, calibration, activation_type=QuantType.QUInt8)
    raise ValueError(f"quantizer {quantizer!r}: one of {', '.join(QUANTIZERS)}")


def _session(model):
    from mrvl.accuracy import reference_session

    return reference_session(model)


def _vm_runner(lib):
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(lib, tvm.cpu())

    def run(feeds):
        out = vm["main"](*[tvm.runtime.tensor(x) for x in feeds.values()])
        out = [out] if isinstance(out, tvm.runtime.Tensor) else list(out)
        return [np.asarray(o.numpy()) for o in out]

    return run


def modelled_cycles(model) -> int:
    """Total modelled cycles of `model`'s MLIP regions (cn10ka, `NUM_TILES` tiles)."""
    from tvm import relax

    import mrvl
    from mrvl.compiler import compile_region

    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), mcpu=MCPU, num_tiles=NUM_TILES)
    regions = []
    for gv, func in mod.functions.items():
        attrs = func.attrs if isinstance(func, relax.Function) and func.attrs else {}
        if "Codegen" in attrs and str(attrs["Codegen"]) == "mrvl":
            func = func.with_attr("global_symbol", gv.name_hint)
            regions.append(compile_region(func, mcpu=MCPU, num_tiles=NUM_TILES))
    return regions_cycles(regions)


def regions_cycles(regions) -> int:
    """Total modelled cycles of compiled regions (`CompiledRegion`s: a build's
    `mrvl_regions`, which so need no second compile)."""
    from mrvl.sim import prepare
    from mrvl.sim.profile import profile_regions

    programs = [(region.symbol, prepare(region.binary), None) for region in regions]
    return int(profile_regions(programs).total_cycles)


def run_int8(
    name: str,
    inputs: int = TOP1_INPUTS,
    seed: int = SEED,
    cycles: bool = True,
    quantizer: str = "mrvl",
) -> Int8Run:
    """Quantize, partition, build, run and judge one zoo model; exceptions become `failure`."""
    import mrvl
    from mrvl.models.light import random_inputs
    from mrvl.models.zoo import zoo_model_info
    from mrvl.onnx_shell import last_quantized, with_outputs

    run = Int8Run(name, zoo_model_info(name).kind, quantizer=quantizer)
    start = time.perf_counter()
    stage = "quantize"
    try:
        model, qdq = quantized_zoo_model(name, seed, quantizer)
        judged = list(last_quantized(qdq).values()) or dequantized_operands(qdq)
        qdq = with_outputs(qdq, [n for n, _ in judged])
        stage = "partition"
        mod = mrvl.partition_for_mrvl(mrvl.from_onnx(qdq), mcpu=MCPU, num_tiles=NUM_TILES)
        report = mrvl.partition_report(mod, qdq)
        run.regions = len(report.regions)
        run.int8_mac_fraction = report.int8_mac_fraction
        run.fp16_layers = [r.node for r in report.rows if r.macs and r.dtype != "int8"]
        run.on_cpu = cpu_reasons(report)
        stage = "build"
        lib = mrvl.build(mod, mcpu=MCPU, num_tiles=NUM_TILES)
        run_mlip = _vm_runner(lib)
        stage = "run"
        feeds = random_inputs(qdq, seed=seed)
        names = [o.name for o in qdq.graph.output]
        results = dict(zip(names, run_mlip(feeds)))
        expected = dict(zip(names, _session(qdq).run(None, feeds)))
        steps = np.concatenate(
            [np.abs(results[n].astype(np.float64) - expected[n]).ravel() / s for n, s in judged]
        )
        steps = np.rint(steps)
        run.steps = {
            "exact": float(np.mean(steps == 0)),
            "1": float(np.mean(steps <= 1)),
            "3": float(np.mean(steps <= 3)),
            "max": float(steps.max(initial=0)),
        }
        if run.kind == "classifier" and inputs:
            stage = "top-1"
            reference = _session(model)
            agree = 0
            for i in range(inputs):
                x = random_inputs(model, seed=seed + 1 + i)
                mine = run_mlip(x)[0]
                agree += int(np.argmax(mine) == np.argmax(reference.run(None, x)[0]))
            run.top1, run.top1_inputs = agree / inputs, inputs
        if cycles:
            stage = "cycles"
            run.cycles = (regions_cycles(lib.mrvl_regions), modelled_cycles(model))
    except Exception as error:  # noqa: BLE001 - the table records what a user would see
        message = " ".join(str(error).split())
        run.failure = f"{stage}: {type(error).__name__}: {message[:300]}"
        traceback.print_exc()
    run.seconds = time.perf_counter() - start
    return run


def dequantized_operands(qdq) -> list[tuple[str, float]]:
    """The dequantized tensors (and scales) that the float ops writing the graph outputs read,
    for a model whose outputs come from no chain of one-input ops (MobileFaceNet's L2
    normalization, x / ReduceL2(x) on the CPU): what is judged there instead."""
    from onnx import numpy_helper

    producer = {out: node for node in qdq.graph.node for out in node.output}
    constants = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    judged = {}
    for output in qdq.graph.output:
        writer = producer.get(output.name)
        for name in writer.input if writer is not None else ():
            node = producer.get(name)
            if node is not None and node.op_type == "DequantizeLinear":
                scale = constants.get(node.input[1])
                if scale is not None and scale.size == 1:
                    judged[name] = float(scale.reshape(()))
    return list(judged.items())


def cpu_reasons(report) -> dict[str, int]:
    """How many nodes stay on the CPU for each (op type, reason), the quantizes and
    dequantizes that only convert for them left out, most frequent first."""
    from collections import Counter

    counts = Counter(
        f"{r.op_type}: {r.reason}"
        for r in report.rows
        if r.target == "cpu"
        and not (
            r.op_type in ("QuantizeLinear", "DequantizeLinear") and "no layer" in (r.reason or "")
        )
    )
    return dict(counts.most_common())


def _pct(x) -> str:
    return "" if x is None else f"{100 * x:.2f} %"


def _reasons(run: Int8Run) -> str:
    return "; ".join(f"{n} {why}" for why, n in run.on_cpu.items()).replace("|", "/")


def _k(cycles: int) -> str:
    return f"{cycles / 1e6:.2f}M" if cycles >= 1e6 else f"{cycles / 1e3:.0f}k"


def _model_cell(run: Int8Run) -> str:
    return run.name if run.quantizer == "mrvl" else f"{run.name} ({run.quantizer})"


def markdown(runs: list[Int8Run], elapsed: float, note: str = "") -> str:
    """The int8 section of docs/zoo.md: one row per run, what each quantizer is, and `note`
    (how the runs were made, when they come from several)."""
    quantizers = "; ".join(
        f"{'' if q == 'mrvl' else f'({q}) '}{QUANTIZERS[q]}"
        for q in dict.fromkeys(r.quantizer for r in runs)
    )
    inputs = sorted({r.top1_inputs for r in runs if r.top1 is not None})
    lines = [
        INT8_HEADING,
        "",
        (
            f"Generated by `scripts/zoo_int8.py` in {elapsed / 60:.1f} minutes of runs. Each zoo "
            f"model (seed 0) is quantized on {CALIBRATION} seeded inputs by {quantizers}, then "
            f"partitioned and built for {MCPU} at {NUM_TILES} tiles like its float form, run in "
            "the Relax VM (the regions on the simulator's Numba engine) and judged against "
            f"{REFERENCE}." + (f" {note}" if note else "")
        ),
        "",
        "- **regions**: MLIP regions of the QDQ build (goal: as few as the float form's, 1);",
        "- **int8 MACs**: the share of the model's MACs that run in int8 on the MLIP "
        "(`PartitionReport.int8_mac_fraction`; goal: at least 99 %); **fp16 layers**: layers "
        "with MACs that do not (none kept in fp16 on purpose here);",
        "- **steps**: every element of each output's last quantized tensor (the graph output, or "
        "the dequantized tensor a float op after the last quantize reads) against the reference "
        "on one seeded input, in quantization steps of that tensor's scale: the share exact, "
        f"within 1 and within 3, and the largest (goal: at most {STEP_GOAL});",
        "- **top-1 vs fp32** (classifiers): the share of seeded inputs"
        + (f" ({' or '.join(map(str, inputs))})" if inputs else "")
        + " on which the int8 build's top class is the float model's in onnxruntime: what "
        "quantization itself costs. Random weights give flat logits, so it is low where "
        "quantization noise reorders them;",
        "- **cycles int8 / fp16**: modelled cycles (`mrvl.sim.profile`) of the QDQ build's "
        "regions and of the float build's, and their ratio;",
        "- **on the CPU**: the nodes the partition left on the CPU, by op type and reason (the "
        "quantizes and dequantizes that only convert for them left out).",
        "",
        "| model | regions | int8 MACs | fp16 layers | steps: exact / ≤1 / ≤3 / max "
        "| top-1 vs fp32 | cycles int8 / fp16 | on the CPU (nodes: why) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in runs:
        if run.failure:
            lines.append(
                f"| {_model_cell(run)} | {run.regions or ''} | {_pct(run.int8_mac_fraction)} "
                f"| | {run.failure.replace('|', '/')} | | | {_reasons(run)} |"
            )
            continue
        s = run.steps
        steps = f"{_pct(s['exact'])} / {_pct(s['1'])} / {_pct(s['3'])} / {s['max']:.0f}"
        top1 = "" if run.top1 is None else f"{_pct(run.top1)} of {run.top1_inputs}"
        cycles = ""
        if run.cycles:
            mine, float_ = run.cycles
            cycles = f"{_k(mine)} / {_k(float_)} ({mine / float_:.2f})"
        layers = ", ".join(run.fp16_layers) if run.fp16_layers else "none"
        lines.append(
            f"| {_model_cell(run)} | {run.regions} | {_pct(run.int8_mac_fraction)} | {layers} "
            f"| {steps} | {top1} | {cycles} | {_reasons(run) or 'none'} |"
        )
    within = sum(r.within_goal for r in runs)
    lines += [
        "",
        f"{within} of {len(runs)} runs within {STEP_GOAL} steps of onnxruntime-QDQ.",
        "",
    ]
    return "\n".join(lines)


INT8_HEADING = "## int8 (issue 20)"
"""The heading of docs/zoo.md's int8 section, which runs to the end of the file:
`--doc` replaces it, and `scripts/zoo_report.py` keeps it when it rewrites the float part."""


def with_int8_section(document: str, section: str) -> str:
    """`document` with its int8 section (from `INT8_HEADING` to the end) replaced by
    `section`, or `section` appended."""
    head = document.split(INT8_HEADING, 1)[0].rstrip("\n")
    return f"{head}\n\n{section.rstrip()}\n"


def _row_within_goal(row: str) -> bool:
    """Whether a table row's steps cell ("exact / <=1 / <=3 / max") has max <= STEP_GOAL (a
    failure's cell holds its message instead)."""
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    try:
        return float(cells[4].rsplit("/", 1)[1]) <= STEP_GOAL
    except (IndexError, ValueError):
        return False


def with_merged_rows(document: str, runs: list[Int8Run], note: str = "") -> str:
    """`document` with each run's row in its int8 table, replacing the row of the same model
    cell or appended after the last one; every other row and the section's text kept, `note`
    appended to its first paragraph, and the count of runs within the goal recounted."""
    head, section = document.split(INT8_HEADING, 1)
    lines = section.split("\n")
    rows = [i for i, line in enumerate(lines) if line.startswith("| ") and "---" not in line]
    table = rows[1:]  # the first row is the header
    new_rows = [
        line
        for line in markdown(runs, 0.0).split("\n")
        if line.startswith("| ") and "---" not in line
    ][1:]
    for run, row in zip(runs, new_rows):
        cell = f"| {_model_cell(run)} |"
        at = next((i for i in table if lines[i].startswith(cell)), None)
        if at is None:
            at = table[-1] + 1
            lines.insert(at, row)
            table = [i + (i >= at) for i in table] + [at]
        else:
            lines[at] = row
    if note:
        first = next(i for i, line in enumerate(lines) if line.startswith("Generated by"))
        lines[first] = f"{lines[first]} {note}"
    within = sum(_row_within_goal(lines[i]) for i in table)
    for i, line in enumerate(lines):
        if line.endswith(f"runs within {STEP_GOAL} steps of onnxruntime-QDQ."):
            lines[i] = f"{within} of {len(table)} runs within {STEP_GOAL} steps of onnxruntime-QDQ."
    return head + INT8_HEADING + "\n".join(lines)


def load_runs(paths: list[Path]) -> list[Int8Run]:
    """The runs saved by `--json`, in order."""
    import json

    runs = []
    for path in paths:
        for entry in json.loads(path.read_text()):
            entry["cycles"] = tuple(entry["cycles"]) if entry.get("cycles") else None
            runs.append(Int8Run(**entry))
    return runs


def main(argv=None) -> int:
    import json
    from dataclasses import asdict

    from mrvl.models.zoo import ZOO_MODELS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="models (default: all)")
    parser.add_argument("-o", "--output", type=Path, help="write the markdown table here")
    parser.add_argument("--inputs", type=int, default=TOP1_INPUTS, help="top-1 inputs")
    parser.add_argument("--no-cycles", action="store_true")
    parser.add_argument(
        "--quantizer", choices=list(QUANTIZERS), default="mrvl", help="who writes the QDQ model"
    )
    parser.add_argument("--json", type=Path, help="also save the runs here (for --from-json)")
    parser.add_argument(
        "--from-json", type=Path, nargs="+", help="make the table from saved runs, run nothing"
    )
    parser.add_argument(
        "--doc",
        type=Path,
        help="replace this document's int8 section (the triage text after its table too; "
        "--merge keeps it)",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="with --doc: put the runs' rows into its int8 table (replacing a model's row, "
        "appending a new one), keeping every other row and its text",
    )
    parser.add_argument("--note", default="", help="a sentence on how the runs were made")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in ZOO_MODELS]
    if unknown:
        parser.error(f"not zoo models: {', '.join(unknown)} (see mrvl.models.zoo.ZOO_MODELS)")
    if args.from_json:
        missing = [str(p) for p in args.from_json if not p.is_file()]
        if missing:
            parser.error(f"no such file: {', '.join(missing)}")
        runs = load_runs(args.from_json)
        elapsed = sum(r.seconds or 0.0 for r in runs)
    else:
        start = time.perf_counter()
        runs = []
        for name in args.names or list(ZOO_MODELS):
            run = run_int8(name, args.inputs, cycles=not args.no_cycles, quantizer=args.quantizer)
            runs.append(run)
            print(f"{name}: {run}", flush=True)
            if args.json:
                args.json.write_text(json.dumps([asdict(r) for r in runs], indent=1) + "\n")
        elapsed = time.perf_counter() - start
    text = markdown(runs, elapsed, args.note)
    if args.output:
        args.output.write_text(text)
    if args.doc and args.merge:
        args.doc.write_text(with_merged_rows(args.doc.read_text(), runs, args.note))
    elif args.doc:
        args.doc.write_text(with_int8_section(args.doc.read_text(), text))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
