#!/usr/bin/env python3
"""ONNX backend node tests through the whole mrvl flow; writes docs/conformance.md.

    .venv/bin/python scripts/conformance.py                 # all ops, writes docs/conformance.md
    .venv/bin/python scripts/conformance.py --ops Conv,Gemm -o /tmp/c.md -v

The `onnx` wheel does not ship the node test data (`onnx/backend/test/data/node/`), so the
cases are generated from their source, `onnx.backend.test.case.node`: importing one of its
modules (conv.py, gemm.py, ...) runs every `export*` function, and each calls `expect(node,
inputs, outputs, name)`, which records a single-node model with its inputs and expected
outputs. The `*_expanded` variants (the op rewritten into its ONNX function body) test
other ops and are left out.

Each case runs as a user's model would: `mrvl.from_onnx` → `mrvl.partition_for_mrvl` →
`mrvl.build` → `relax.VirtualMachine` on the case's inputs, and the outputs are compared
with the case's expected outputs. A case is then

- **offloaded**: its node ran (at least partly) in an MLIP region; every output must meet
  the fp16 acceptance rule (DESIGN §9: elements below max|ref|/100 ignored, the rest within
  3 % relative);
- **fell back**: nothing was offloaded, TVM compiled it for the CPU; every output must be
  exact within float32 tolerance (rtol 1e-5, atol 1e-6; integers bit-exact);
- **not importable**: TVM's ONNX frontend rejects the model (`mrvl.from_onnx` raised);
- **failed**: any other error, or outputs that miss their rule.

The node tests feed every operand as a graph input, weights included. The MLIP compiles
weights into its binary, so a weight that arrives at run time cannot be offloaded. Each case
of an op with parameter operands (Conv W/B, Gemm B/C, MatMul B, BatchNormalization
scale/bias/mean/var, Clip min/max, Pad pads/value/axes, Reshape shape, Squeeze axes) is
therefore run twice: as shipped, and as `<case>+const` with every input after the first
turned into an initializer, the form these operands take in a deployed model.

The test suite (`tests/conformance/test_node_conformance.py`) imports this file.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import io
import platform
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REPORT = ROOT / "docs" / "conformance.md"

OPS = (
    "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Gemm", "MatMul",
    "Add", "Sum", "Concat", "Relu", "Clip", "LeakyRelu", "BatchNormalization", "Pad",
    "Flatten", "Reshape", "Squeeze", "Transpose", "Mul", "Sub", "Div", "Sigmoid", "Tanh",
    "HardSigmoid", "HardSwish", "PRelu", "Mish", "ConvTranspose", "Resize", "Upsample",
    "Split", "Slice", "Unsqueeze", "Erf", "Exp", "Log", "Sqrt", "Neg", "Reciprocal", "Abs",
    "Pow", "Gelu", "Max", "Min", "Einsum",
)  # fmt: skip

# The module of onnx.backend.test.case.node that holds each op's cases.
_CASE_MODULES = {"BatchNormalization": "batch_normalization", "ConvTranspose": "convtranspose"}

# Ops whose operands after the first are parameters (weights, shapes, bounds), not activations.
PARAMETER_OPS = frozenset(
    {
        "Conv", "Gemm", "MatMul", "BatchNormalization", "Clip", "Pad", "Reshape", "Squeeze",
        "PRelu", "ConvTranspose", "Resize", "Upsample", "Split", "Slice", "Unsqueeze",
        "Pow", "Max", "Min",
    }
)  # fmt: skip
CONST_SUFFIX = "+const"

OFFLOADED = "offloaded"
FELL_BACK = "fell back"
NOT_IMPORTABLE = "not importable"
FAILED = "failed"
STATUSES = (OFFLOADED, FELL_BACK, NOT_IMPORTABLE, FAILED)

EXACT_RTOL = 1e-5
EXACT_ATOL = 1e-6


# ---------------------------------------------------------------------------------------------
# Cases


@dataclass(frozen=True)
class NodeCase:
    """One node test: a model, its inputs (in graph-input order) and expected outputs."""

    id: str  # the ONNX test name, plus CONST_SUFFIX for the parameters-as-initializers form
    op_type: str
    model: onnx.ModelProto = field(repr=False, compare=False)
    inputs: tuple[np.ndarray, ...] = field(repr=False, compare=False)
    outputs: tuple[np.ndarray, ...] = field(repr=False, compare=False)

    @property
    def onnx_name(self) -> str:
        return self.id.removesuffix(CONST_SUFFIX)

    @property
    def variant(self) -> str:
        return "const" if self.id.endswith(CONST_SUFFIX) else "shipped"


def node_cases(ops: Iterable[str] = OPS) -> list[NodeCase]:
    """Every single-node test case of `ops`, in ONNX's order, with the `+const` variants."""
    ops = tuple(ops)
    unknown = set(ops) - set(OPS)
    if unknown:
        raise ValueError(f"no node tests collected for {sorted(unknown)}; known: {OPS}")
    cases = []
    for test in _onnx_test_cases(ops):
        nodes = test.model.graph.node
        if len(nodes) != 1 or nodes[0].op_type not in ops:
            continue  # an *_expanded function body, or another op of a shared module
        inputs, outputs = test.data_sets[0]
        case = NodeCase(test.name, nodes[0].op_type, test.model, tuple(inputs), tuple(outputs))
        cases.append(case)
        if case.op_type in PARAMETER_OPS and len(case.inputs) > 1:
            cases.append(_parameters_as_initializers(case))
    return cases


def _onnx_test_cases(ops: Sequence[str]):
    """onnx's TestCase objects for `ops`: imports only those ops' generator modules.

    `collect_testcases()` imports all ~200 modules (about 5 s); each module records its cases
    in the package's `_NodeTestCases` list when first imported, so importing just ours is
    enough. Falls back to the public call if that layout ever changes.
    """
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        import onnx.backend.test.case.node as node_pkg

        try:
            for op in ops:
                module = _CASE_MODULES.get(op, op.lower())
                importlib.import_module(f"{node_pkg.__name__}.{module}")
            recorded = list(node_pkg._NodeTestCases)
        except (ImportError, AttributeError):
            recorded = list(node_pkg.collect_testcases())
    seen, unique = set(), []
    for test in recorded:
        if test.name not in seen:
            seen.add(test.name)
            unique.append(test)
    return unique


def _parameters_as_initializers(case: NodeCase) -> NodeCase:
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    graph = model.graph
    keep = graph.input[0]
    for value, array in zip(list(graph.input)[1:], case.inputs[1:]):
        graph.initializer.append(numpy_helper.from_array(np.asarray(array), value.name))
    kept = onnx.ValueInfoProto()
    kept.CopyFrom(keep)
    del graph.input[:]
    graph.input.append(kept)
    return NodeCase(case.id + CONST_SUFFIX, case.op_type, model, case.inputs[:1], case.outputs)


# ---------------------------------------------------------------------------------------------
# Running a case


@dataclass
class CaseResult:
    id: str
    op_type: str
    status: str
    reason: str = ""  # why it failed (short), or what was checked
    seconds: float = 0.0
    regions: int = 0
    offloaded: bool = False  # some call of the node ran in an MLIP region
    error: str = ""  # the stage and error that stopped the flow, if any
    actual: list[np.ndarray] | None = field(default=None, repr=False)  # the VM's outputs
    lib: object = field(default=None, repr=False)  # the `mrvl.build` result, once built

    @property
    def passed(self) -> bool:
        return self.status in (OFFLOADED, FELL_BACK)


def run_case(case: NodeCase, *, mcpu: str = "cn10ka", num_tiles: int = 8) -> CaseResult:
    """Run one case through the whole flow and classify it (see the module docstring). The
    result keeps the build (`lib`) for a caller that runs it again: the suite runs it on both
    engines (tests/conformance)."""
    import tvm
    from tvm import relax

    import mrvl
    from mrvl.placement import CPU, node_targets

    start = time.perf_counter()
    offloaded, regions, actual, why_cpu, lib = False, 0, None, "", None

    def result(status: str, reason: str, error: str = "") -> CaseResult:
        return CaseResult(
            case.id, case.op_type, status, reason, time.perf_counter() - start, regions,
            offloaded, error, actual, lib,
        )  # fmt: skip

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = mrvl.from_onnx(case.model)
    except mrvl.ModelImportError as err:  # TVM's frontend (or the checker) rejects the model
        reason = f"TVM import: {_short(err)}"
        return result(NOT_IMPORTABLE, reason, reason)
    except Exception as err:  # noqa: BLE001 - anything else in from_onnx is mrvl's
        reason = f"mrvl.from_onnx: {_short(err)}"
        return result(FAILED, reason, reason)
    try:
        stage = "partition"
        mod = mrvl.partition_for_mrvl(mod, mcpu=mcpu, num_tiles=num_tiles)
        offloaded = any(target != CPU for target in node_targets(mod).values())
        why_cpu = "" if offloaded else _why_on_cpu(mod, case.model)
        stage = "build"
        lib = mrvl.build(mod)
        regions = len(lib.mrvl_regions)
        stage = "run"
        vm = relax.VirtualMachine(lib, tvm.cpu())
        raw = vm["main"](*[tvm.runtime.tensor(np.asarray(x)) for x in case.inputs])
        actual = _flatten_outputs(raw)
    except Exception as err:  # noqa: BLE001 - recorded, not raised
        where = f"{stage} ({'offloaded' if offloaded else 'CPU only'})"
        reason = f"{where}: {_short(err)}"
        return result(FAILED, reason, reason)

    expected = [np.asarray(x) for x in case.outputs]
    if len(actual) != len(expected):
        return result(FAILED, f"{len(actual)} outputs, expected {len(expected)}")
    problems, notes = [], []
    for index, (got, want) in enumerate(zip(actual, expected)):
        problem, note = _compare(got, want, offloaded)
        if problem:
            problems.append(f"output {index}: {problem}")
        notes.append(note)
    status = OFFLOADED if offloaded else FELL_BACK
    if why_cpu:
        notes.append(f"on the CPU: {why_cpu}")
    if problems:
        what = "offloaded, fp16 acceptance" if offloaded else "CPU only, exactness"
        shown = problems + ([f"on the CPU: {why_cpu}"] if why_cpu else [])
        return result(FAILED, f"{what}: " + "; ".join(shown))
    return result(status, "; ".join(n for n in notes if n))


def _why_on_cpu(mod, model: onnx.ModelProto) -> str:
    """The partition report's reason for keeping the node on the CPU, if mrvl has the report."""
    try:
        from mrvl.report import partition_report

        reasons = {row.reason for row in partition_report(mod, model).rows if row.reason}
    except Exception:  # noqa: BLE001 - the report is informative only
        return ""
    return "; ".join(sorted(reasons))


def _flatten_outputs(value) -> list[np.ndarray]:
    import tvm

    if isinstance(value, tvm.runtime.Tensor):
        return [value.numpy()]
    if isinstance(value, (list, tuple)) or hasattr(value, "__len__"):
        out = []
        for item in value:
            out.extend(_flatten_outputs(item))
        return out
    return [np.asarray(value)]


def _compare(got: np.ndarray, want: np.ndarray, offloaded: bool) -> tuple[str, str]:
    """(problem or "", note) for one output under its rule."""
    from mrvl.accuracy import fp16_agreement

    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}", ""
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}", ""
    if want.dtype.kind != "f":
        if not np.array_equal(got, want):
            return f"{int((got != want).sum())} of {want.size} elements differ", ""
        return "", "bit-exact"
    if offloaded:
        agreement = fp16_agreement(got, want)
        note = f"max rel err {agreement.max_relative_error:.1e}"
        return ("" if agreement.passed else f"{note} > 3 %"), note
    err = np.abs(got.astype(np.float64) - want)
    worst = float(np.nanmax(err)) if err.size else 0.0
    if not np.allclose(got, want, rtol=EXACT_RTOL, atol=EXACT_ATOL, equal_nan=True):
        return f"max abs err {worst:.3g} (rtol {EXACT_RTOL:g}, atol {EXACT_ATOL:g})", ""
    return "", ("bit-exact" if worst == 0 else f"max abs err {worst:.1e}")


def _short(err: BaseException, limit: int = 160) -> str:
    """The first meaningful line of an error, without TVM's traceback decoration."""
    text = str(err).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # TVM errors end with the message; tracebacks come first.
    line = next(
        (ln for ln in reversed(lines) if not ln.startswith(("File ", "at ", "^", "0:", "1:"))),
        lines[0] if lines else "",
    )
    message = f"{type(err).__name__}: {line}" if line else type(err).__name__
    return message if len(message) <= limit else message[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------------
# Report


def summarize(results: Sequence[CaseResult]) -> dict[str, Counter]:
    """op → Counter of statuses, in OPS order."""
    table: dict[str, Counter] = {}
    for op in OPS:
        counts = Counter(r.status for r in results if r.op_type == op)
        if counts:
            table[op] = counts
    return table


def render_report(results: Sequence[CaseResult], elapsed: float) -> str:
    from importlib.metadata import version

    import tvm

    import mrvl  # noqa: F401 - version source

    table = summarize(results)
    totals = Counter(r.status for r in results)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# ONNX node conformance",
        "",
        f"Generated by `scripts/conformance.py` on {now} in {elapsed:.0f} s "
        f"({len(results)} cases). Do not edit by hand: rerun the script.",
        "",
        f"Versions: mrvl {version('mrvl')}, apache-tvm {tvm.__version__}, "
        f"onnx {onnx.__version__}, numpy {np.__version__}, "
        f"Python {platform.python_version()}.",
        "",
        "Each case of ONNX's backend node tests (generated from `onnx.backend.test.case.node`;",
        "the wheel ships no node test data) runs through `mrvl.from_onnx` →",
        "`partition_for_mrvl(num_tiles=8)` → `mrvl.build` → the Relax VM, and is compared with",
        "the case's expected outputs:",
        "",
        "- **offloaded**: the node ran in an MLIP region (simulator); fp16 acceptance",
        "  (DESIGN §9: elements below max|ref|/100 ignored, the rest within 3 % relative);",
        "- **fell back**: nothing offloaded, TVM's CPU build; exact within float32",
        f"  tolerance (rtol {EXACT_RTOL:g}, atol {EXACT_ATOL:g}; integers bit-exact);",
        "- **not importable**: TVM's ONNX frontend rejects the model;",
        "- **failed**: any other error, or outputs that miss their rule.",
        "",
        "The node tests feed weights as graph inputs, which no accelerator can compile in.",
        "Cases of ops with parameter operands (Conv, Gemm, MatMul, BatchNormalization, Clip,",
        f"Pad, Reshape, Squeeze) also run as `<case>{CONST_SUFFIX}`, with every input after",
        "the first made an initializer, as in a deployed model. `*_expanded` variants (the op",
        "rewritten as its ONNX function body) exercise other ops and are not included.",
        "",
        "## Per op",
        "",
        "| op | cases | offloaded | fell back | not importable | failed |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for op, counts in table.items():
        cells = " | ".join(str(counts.get(s, 0)) for s in STATUSES)
        lines.append(f"| {op} | {sum(counts.values())} | {cells} |")
    cells = " | ".join(f"**{totals.get(s, 0)}**" for s in STATUSES)
    lines.append(f"| **total** | **{len(results)}** | {cells} |")
    lines += ["", "## Per case", ""]
    for op in table:
        lines += [f"### {op}", "", "| case | result | detail |", "| --- | --- | --- |"]
        for r in results:
            if r.op_type == op:
                detail = r.reason.replace("|", "\\|").replace("\n", " ")
                lines.append(f"| `{r.id}` | {r.status} | {detail} |")
        lines.append("")
    return "\n".join(lines)


def run_all(
    cases: Sequence[NodeCase], *, verbose: bool = False, stream=sys.stderr
) -> list[CaseResult]:
    """Run every case: a progress bar when `stream` is a terminal, one line per case with
    `verbose`."""
    from tqdm import tqdm

    results = []
    progress = tqdm(cases, desc="conformance", unit="case", file=stream, disable=None)
    for index, case in enumerate(progress, 1):
        progress.set_postfix_str(case.id, refresh=False)
        result = run_case(case)
        result.lib = None  # the report needs no build, and 200 builds kept add up
        results.append(result)
        if verbose:
            progress.write(
                f"[{index:3d}/{len(cases)}] {result.status:14s} {result.seconds:6.2f}s "
                f"{case.id}  {result.reason}",
                file=stream,
            )
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated op types (default: all)")
    parser.add_argument("-o", "--output", default=str(DEFAULT_REPORT), help="report path")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each case")
    args = parser.parse_args(argv)
    ops = tuple(args.ops.split(",")) if args.ops else OPS
    start = time.perf_counter()
    cases = node_cases(ops)
    results = run_all(cases, verbose=args.verbose)
    elapsed = time.perf_counter() - start
    report = render_report(results, elapsed)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(report + "\n")
    totals = Counter(r.status for r in results)
    print(
        f"{len(results)} cases in {elapsed:.0f} s: "
        + ", ".join(f"{totals.get(s, 0)} {s}" for s in STATUSES)
        + f"; wrote {args.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
