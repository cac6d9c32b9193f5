"""The differential property for one generated graph, and a shrinker for its failures.

`check(spec)` runs ONNX → `mrvl.from_onnx` → `mrvl.partition_for_mrvl` → `mrvl.build` → a
VM run, and onnxruntime on the same model, and classifies the result:

- `discarded`: TVM cannot import the model (`ModelImportError` from `from_onnx`), which is
  not mrvl's to fix;
- `rejected`: `partition_for_mrvl` or `build` raised an `MrvlError` naming an ONNX node of the
  model: a clear refusal, allowed by the property (counted, so a rise is visible);
- `passed`: the VM ran and its output is within the fp16 acceptance rule of onnxruntime's;
- `failed`: anything else. An exception that is not an `MrvlError`, an `MrvlError` naming no
  node, any error while running a model that built, or outputs outside the rule.

`shrink(spec, outcome)` deletes layers and simplifies the target and input while the failure
keeps its `signature`, and returns the smallest spec it found.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, replace

import numpy as np
import onnx
import onnxruntime as ort
from grammar import Spec, build_graph, build_model, input_array, without

DISCARDED = "discarded"
REJECTED = "rejected"
PASSED = "passed"
FAILED = "failed"


@dataclass(frozen=True)
class Outcome:
    status: str
    detail: str = ""
    signature: str = ""
    offloaded: int = 0  # ONNX nodes placed in an MLIP region
    regions: int = 0

    def __str__(self) -> str:
        return f"{self.status}: {self.detail}" if self.detail else self.status


def _where(exc: BaseException) -> str:
    """The innermost frame of mrvl's own code (or of the library that raised) as file:function,
    stable across edits of unrelated lines."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/wt/" in f.filename or "/mrvl" in f.filename]
    frame = (ours or frames or [None])[-1]
    if frame is None:
        return "?"
    return f"{frame.filename.rsplit('/', 1)[-1]}:{frame.name}"


def _kind(exc: BaseException) -> str:
    """What a refusal says, its node names and numbers blanked: one pass's CompileErrors for
    different reasons are different findings (the innermost frame is the pass runner's)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = re.sub(r"\bat [^\s:]+:", "at <node>:", text)
    text = re.sub(r"L\d+_\w+|'[^']*'", "<name>", text)
    return re.sub(r"\d+", "#", text)[:80]


def _failure(stage: str, exc: BaseException, why: str) -> Outcome:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    kind = type(exc).__name__
    signature = f"{stage}:{kind}:{_where(exc)}"
    return Outcome(FAILED, f"{why} at {stage}: {kind}: {message[:300]}", signature)


def _names_a_node(exc: BaseException, model: onnx.ModelProto) -> bool:
    node = getattr(exc, "node", None)
    names = {n.name for n in model.graph.node}
    if node in names:
        return True
    text = str(exc)
    return any(re.search(rf"(?<![\w/]){re.escape(name)}(?![\w])", text) for name in names)


def reference(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    """onnxruntime's result, its graph optimizations off: they are no reference (its Pad
    fusion makes a MaxPool whose pads exceed the kernel, which it then refuses)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": x})


def _rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a, dtype=np.float64)))) if a.size else 0.0


def build_and_run(model: onnx.ModelProto, spec: Spec, x: np.ndarray):
    """`model` imported, partitioned for `spec`'s target, built and run on `x` on the Numba
    engine and, if it has a region, on the reference interpreter too (engine identity, issue
    8): (Numba's results, `run_on(engine, x)` for more runs, offloaded nodes, regions), or the
    Outcome that ends the check (a model TVM cannot import is discarded; an MrvlError naming a
    node is a rejection; anything else, or engines that differ, a failure)."""
    import tvm
    from tvm import relax

    import mrvl
    from mrvl.errors import ModelImportError, MrvlError
    from mrvl.placement import is_region, node_targets
    from mrvl.sim import use_engine

    try:
        mod = mrvl.from_onnx(model)
    except ModelImportError as exc:
        return Outcome(DISCARDED, str(exc).splitlines()[0][:200])
    except Exception as exc:  # noqa: BLE001 - the property is about exactly this
        return _failure("from_onnx", exc, "not an MrvlError")

    stage = "partition_for_mrvl"
    try:
        mod = mrvl.partition_for_mrvl(mod, mcpu=spec.mcpu, num_tiles=spec.num_tiles)
        targets = node_targets(mod)
        offloaded = sum(1 for n in model.graph.node if targets.get(n.name, "cpu") != "cpu"
                        and targets.get(n.name) is not None)  # fmt: skip
        regions = sum(1 for _, f in mod.functions_items() if is_region(f))
        stage = "build"
        executable = mrvl.build(mod)
    except MrvlError as exc:
        if _names_a_node(exc, model):
            message = str(exc).splitlines()[0][:200]
            signature = f"rejected:{stage}:{type(exc).__name__}:{_where(exc)}:{_kind(exc)}"
            return Outcome(REJECTED, f"at {stage}: {type(exc).__name__}: {message}", signature)
        return _failure(stage, exc, "an MrvlError naming no ONNX node")
    except Exception as exc:  # noqa: BLE001
        return _failure(stage, exc, "not an MrvlError")

    def run_on(engine: str, x: np.ndarray = x) -> list[np.ndarray]:
        with use_engine(engine):
            value = vm["main"](tvm.runtime.tensor(x))
        return [value.numpy()] if hasattr(value, "numpy") else [v.numpy() for v in value]

    try:
        vm = relax.VirtualMachine(executable, tvm.cpu())
        results = run_on("numba")
        interpreted = run_on("interp") if regions else results
    except Exception as exc:  # noqa: BLE001 - a model that built must run
        return _failure("run", exc, "a built model failed to run")
    if any(a.tobytes() != b.tobytes() for a, b in zip(results, interpreted, strict=True)):
        return Outcome(
            FAILED,
            "the interpreter and Numba give different bytes",
            "engines:differ",
            offloaded,
            regions,
        )
    return results, run_on, offloaded, regions


def check(spec: Spec) -> Outcome:
    from mrvl.fp16_emulation import fp16_emulation_outputs, judge_model

    model = build_model(spec)
    onnx.checker.check_model(model)  # a generator bug, not a finding: let it raise
    x = input_array(spec)
    expected = reference(model, x)

    built = build_and_run(model, spec, x)
    if isinstance(built, Outcome):
        return built
    results, run_on, offloaded, regions = built

    shapes = [r.shape for r in results]
    if shapes != [e.shape for e in expected]:
        return Outcome(
            FAILED,
            f"output shapes {shapes} differ from onnxruntime's {[e.shape for e in expected]}",
            "mismatch:shape",
            offloaded,
            regions,
        )

    # The rule of issue 6 (DESIGN §9): within max(3 %, the fp16-storage emulation's own
    # error), with the second look at the error distribution for an output that misses it.
    def run_again(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return run_on("numba", feeds["x"])

    verdict = judge_model(results, run_again, model, {"x": x}, expected)
    for index, (output, result, wanted) in enumerate(
        zip(verdict.outputs, results, expected, strict=True)
    ):
        if output.passed:
            continue
        emulation = fp16_emulation_outputs(model, {"x": x})[index]
        ratio = _rms(result - wanted) / max(_rms(emulation - wanted), 1e-30)
        worst = np.max(np.abs(result - wanted)) / max(np.max(np.abs(emulation - wanted)), 1e-30)
        # For triage only (both are failures): an RMS error like the emulation's is likely
        # fp16 noise on a cancelling element; a much larger one is a wrong result.
        kind = "fp16-noise" if ratio <= 2 else "values"
        detail = (
            f"output {index}: {output.error}; the fp16-storage emulation's error is "
            f"{output.emulation.max_relative_error:.3e}; {output.distribution}; RMS error "
            f"{ratio:.2f}x the emulation's, max absolute error {worst:.2f}x"
        )
        return Outcome(FAILED, detail, f"mismatch:{kind}", offloaded, regions)
    return Outcome(PASSED, "", "", offloaded, regions)


def _simpler_inputs(spec: Spec):
    n, *rest = spec.input_shape
    if n > 1:
        yield replace(spec, input_shape=(1, *rest))
    for axis, size in enumerate(rest, start=1):
        for smaller in sorted({1, 2, 3, max(1, size // 2)}):
            if smaller < size:
                shape = list(spec.input_shape)
                shape[axis] = smaller
                yield replace(spec, input_shape=tuple(shape))


def _candidates(spec: Spec):
    for index in reversed(range(len(spec.layers))):
        yield without(spec, index)
    if spec.extra_output is not None:
        yield replace(spec, extra_output=None)
    if spec.num_tiles != 1:
        yield replace(spec, num_tiles=1)
    if spec.mcpu != "cn10ka":
        yield replace(spec, mcpu="cn10ka")
    yield from _simpler_inputs(spec)


def shrink(
    spec: Spec, outcome: Outcome, budget: int = 60, log=None, check=check
) -> tuple[Spec, Outcome]:
    """Greedy delta debugging: keep any simpler spec whose outcome (a failure, or a rejection
    worth a look) has the same signature under `check` (the float property, or the int8 one
    of `harness_int8`)."""
    attempts = 0
    improved = True
    while improved and attempts < budget:
        improved = False
        for candidate in _candidates(spec):
            if attempts >= budget:
                break
            attempts += 1
            try:
                result = check(candidate)
            except Exception:  # noqa: BLE001 - a candidate the reference rejects
                continue
            if result.status == outcome.status and result.signature == outcome.signature:
                applied = tuple(build_graph(candidate)[1])
                spec, outcome, improved = replace(candidate, layers=applied), result, True
                if log:
                    log(f"    shrunk to {spec.describe()}")
                break
    return spec, outcome
