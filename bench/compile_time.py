#!/usr/bin/env python3
"""Compile time, ONNX file to executable: mrvl's whole flow next to TVM's CPU-only build.

    .venv/bin/python bench/compile_time.py                       # resnet50, densenet121
    .venv/bin/python bench/compile_time.py squeezenet --repeat 2
    .venv/bin/python bench/compile_time.py resnet50 --profile /tmp/mrvl.prof   # + cProfile
    .venv/bin/python bench/compile_time.py resnet50 --dtypes fp16 int8     # + its QDQ form

For each model (`mrvl.models.light`: the light model with seeded random weights; `zoo:NAME`
from `mrvl.models.zoo`, re-weighted by seed; each written to a temporary .onnx file first;
with `--dtypes ... int8`, also its QDQ form from `mrvl.quantize` on 8 seeded normal samples,
the quantization itself not timed), in one process and after a warm-up build of the bundled MNIST
model by both flows (LLVM and the import machinery load once per process):

- **mrvl**: `onnx.load` → `mrvl.from_onnx` → `mrvl.partition_for_mrvl(num_tiles=8)` →
  `mrvl.build` (RunCodegen → `compile_region` per region → gcc stub per region →
  `relax.build(llvm)` → `export_library` → reload): the executable the VM runs;
- **TVM CPU**: `onnx.load` → `tvm.relax.frontend.onnx.from_onnx` → `relax.build(llvm)`
  (an in-memory executable), and the same plus `export_library` to a .so.

On a shared machine the wall times move with the load; the CPU seconds of the process (its
own threads, not gcc's or the linker's) move less. The time the garbage collector takes in
the mrvl flow is given apart: cProfile charges it to whatever function allocates when a
collection starts.

The breakdown of mrvl's time comes from timing wrappers around its stages (patched for the
run only) and a pass instrument that times every TVM pass; `--profile` adds a cProfile run
of the mrvl flow (slower: the profiler's overhead falls on Python code).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import os
import pstats
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator

import onnx

MODELS = ("resnet50", "densenet121")


class GcTimer:
    """Seconds spent in the garbage collector while active (from `gc.callbacks`)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start
            self.collections += 1

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        gc.callbacks.append(self)
        try:
            yield
        finally:
            gc.callbacks.remove(self)


class Stopwatch:
    """Inclusive wall time and call count per label, from wrappers patched onto functions."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter = Counter()
        self._patches: list[tuple[object, str, object]] = []

    def wrap(self, owner: object, attr: str, label: str) -> None:
        original = getattr(owner, attr)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - start
                self.calls[label] += 1

        setattr(owner, attr, timed)
        self._patches.append((owner, attr, original))

    def restore(self) -> None:
        for owner, attr, original in reversed(self._patches):
            setattr(owner, attr, original)
        self._patches.clear()

    @contextlib.contextmanager
    def stage(self, label: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[label] += time.perf_counter() - start
            self.calls[label] += 1


def pass_timer():
    """A TVM pass instrument: seconds per (depth, pass name); depth 0 = called directly."""
    import tvm

    @tvm.ir.instrument.pass_instrument
    class PassTimer:
        def __init__(self):
            self.stack: list[float] = []
            self.seconds: dict[tuple[int, str], float] = defaultdict(float)

        def run_before_pass(self, mod, info):
            self.stack.append(time.perf_counter())

        def run_after_pass(self, mod, info):
            start = self.stack.pop()
            self.seconds[(len(self.stack), info.name)] += time.perf_counter() - start

    return PassTimer()


@contextlib.contextmanager
def instrumented(watch: Stopwatch, timer) -> Iterator[None]:
    """Wrap mrvl's and TVM's stages with `watch`, and run TVM passes under `timer`."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx.onnx_frontend import ONNXGraphImporter

    import mrvl.byoc
    import mrvl.compiler
    import mrvl.frontend
    import mrvl.partition
    from mrvl.passes import ALL_PASSES

    watch.wrap(ONNXGraphImporter, "from_onnx", "TVM ONNX importer")
    watch.wrap(mrvl.frontend, "_load", "onnx checker")
    watch.wrap(mrvl.frontend, "_attach_node_names", "attach ONNX node names")
    watch.wrap(mrvl.compiler, "compile_region", "compile_region")
    watch.wrap(mrvl.compiler, "import_region", "Relax region -> mrvl dialect")
    watch.wrap(mrvl.compiler.json_emitter, "emit_json_parts", "Nodes-JSON (+ constants)")
    watch.wrap(mrvl.compiler, "run_pipeline", "pipeline (passes + verify)")
    for name, factory in ALL_PASSES.items():
        watch.wrap(factory(), "apply", f"pass {name}")
    watch.wrap(mrvl.compiler, "assemble", "assemble (mlip -> Program)")
    watch.wrap(mrvl.compiler.binary, "encode", "encode binary")
    watch.wrap(mrvl.byoc, "region_module", "gcc region stubs")
    watch.wrap(relax, "build", "relax.build (llvm)")
    watch.wrap(tvm.runtime.Executable, "export_library", "export_library")
    watch.wrap(tvm.runtime, "load_module", "load_module")
    try:
        with tvm.transform.PassContext(instruments=[timer]):
            yield
    finally:
        watch.restore()


def mrvl_flow(path: str, export_dir: str, num_tiles: int = 8):
    import mrvl

    model = onnx.load(path)
    mod = mrvl.from_onnx(model)
    mod = mrvl.partition_for_mrvl(mod, num_tiles=num_tiles)
    return mrvl.build(mod, export_dir=export_dir)


def tvm_flow(path: str, export_path: str | None = None):
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    model = onnx.load(path)
    mod = from_onnx(model)
    executable = relax.build(mod, target="llvm")
    if export_path:
        executable.export_library(export_path)
    return executable


def measure(path: str, work: str, repeat: int) -> dict:
    """Best-of-`repeat` wall times of both flows, and the breakdown of the best mrvl run."""
    import tvm
    from tvm.relax.frontend.onnx import from_onnx

    from mrvl.frontend import from_onnx as mrvl_from_onnx
    from mrvl.partition import partition_for_mrvl

    best: dict = {}
    for _ in range(repeat):
        # mrvl, stage by stage
        watch, timer, collector = Stopwatch(), pass_timer(), GcTimer()
        with instrumented(watch, timer), collector.active():
            start, cpu_start = time.perf_counter(), time.process_time()
            with watch.stage("onnx.load"):
                model = onnx.load(path)
            with watch.stage("mrvl.from_onnx"):
                mod = mrvl_from_onnx(model)
            fold_in_import = timer.seconds.get((0, "FoldConstant"))
            with watch.stage("mrvl.partition_for_mrvl"):
                mod = partition_for_mrvl(mod, num_tiles=8)
            with watch.stage("mrvl.build"):
                import mrvl

                lib = mrvl.build(mod, export_dir=os.path.join(work, "mrvl"))
            total = time.perf_counter() - start
            cpu = time.process_time() - cpu_start
        regions = len(lib.mrvl_regions)
        del lib
        if "mrvl" not in best or total < best["mrvl"]:
            best.update(
                mrvl=total, mrvl_cpu=cpu, gc=collector, watch=watch, timer=timer, regions=regions,
                fold_in_import=fold_in_import,
            )  # fmt: skip

        # TVM CPU only, with and without export
        tvm_watch, tvm_timer = Stopwatch(), pass_timer()
        with tvm.transform.PassContext(instruments=[tvm_timer]):
            start, cpu_start = time.perf_counter(), time.process_time()
            with tvm_watch.stage("onnx.load"):
                model = onnx.load(path)
            with tvm_watch.stage("TVM from_onnx"):
                mod = from_onnx(model)
            with tvm_watch.stage("relax.build (llvm)"):
                from tvm import relax

                executable = relax.build(mod, target="llvm")
            built = time.perf_counter() - start
            built_cpu = time.process_time() - cpu_start
            with tvm_watch.stage("export_library"):
                executable.export_library(os.path.join(work, "tvm.so"))
            exported = time.perf_counter() - start
        if "tvm" not in best or built < best["tvm"]:
            best.update(
                tvm=built, tvm_cpu=built_cpu, tvm_export=exported, tvm_watch=tvm_watch,
                tvm_timer=tvm_timer,
            )  # fmt: skip
    return best


def warm_up(work: str) -> None:
    """Build MNIST once with both flows: LLVM, gcc and TVM's lazy imports load here."""
    from mrvl.models import bundled_model_path

    path = str(bundled_model_path("mnist"))
    with contextlib.redirect_stdout(io.StringIO()):
        mrvl_flow(path, os.path.join(work, "warm"))
        tvm_flow(path)


def top_passes(timer, depth_limit: int = 1, count: int = 8) -> list[tuple[str, float]]:
    rows = [
        (("  " * depth) + name, seconds)
        for (depth, name), seconds in timer.seconds.items()
        if depth <= depth_limit
    ]
    return sorted(rows, key=lambda r: -r[1])[:count]


def report(name: str, best: dict) -> str:
    watch, timer = best["watch"], best["timer"]
    lines = [
        f"== {name}: {best['regions']} MLIP region(s)",
        "",
        f"{'flow':44s} {'seconds':>8s}",
        f"{'mrvl: ONNX file -> exported executable':44s} {best['mrvl']:8.2f}",
        f"{'TVM CPU: ONNX file -> relax.build(llvm)':44s} {best['tvm']:8.2f}",
        f"{'TVM CPU: ... + export_library':44s} {best['tvm_export']:8.2f}",
        f"{'ratio mrvl / TVM CPU (in-memory)':44s} {best['mrvl'] / best['tvm']:8.2f}",
        f"{'CPU seconds of this process: mrvl':44s} {best['mrvl_cpu']:8.2f}",
        f"{'CPU seconds of this process: TVM CPU':44s} {best['tvm_cpu']:8.2f}",
        (
            f"{'garbage collector in the mrvl flow':44s} {best['gc'].seconds:8.2f}"
            f"  ({best['gc'].collections} collections)"
        ),
        "",
        "mrvl stages (inclusive seconds; indented = part of the line above):",
    ]
    passes = sorted(
        (k for k in watch.seconds if k.startswith("pass ")), key=lambda k: -watch.seconds[k]
    )
    in_passes = sum(watch.seconds[k] for k in passes)
    pipeline = watch.seconds.get("pipeline (passes + verify)")
    if pipeline is not None:
        watch.seconds["verify after each pass"] = pipeline - in_passes
    tree = [
        ("onnx.load", 0),
        ("mrvl.from_onnx", 0),
        ("onnx checker", 1),
        ("TVM ONNX importer", 1),
        ("attach ONNX node names", 1),
        ("FoldConstant", 1),
        ("mrvl.partition_for_mrvl", 0),
        ("mrvl.build", 0),
        ("compile_region", 1),
        ("Relax region -> mrvl dialect", 2),
        ("Nodes-JSON (+ constants)", 2),
        ("pipeline (passes + verify)", 2),
        *[(p, 3) for p in passes],
        ("verify after each pass", 3),
        ("assemble (mlip -> Program)", 2),
        ("encode binary", 2),
        ("gcc region stubs", 1),
        ("relax.build (llvm)", 1),
        ("export_library", 1),
        ("load_module", 1),
    ]
    # FoldConstant run by from_onnx itself (partition_for_mrvl runs it again, inside)
    if best["fold_in_import"] is not None:
        watch.seconds["FoldConstant"] = best["fold_in_import"]
    for label, level in tree:
        if label not in watch.seconds:
            continue
        calls = watch.calls.get(label, 0)
        suffix = f"  ({calls} calls)" if calls > 1 else ""
        text = "  " * level + label
        lines.append(f"  {text:44s} {watch.seconds[label]:8.2f}{suffix}")
    lines += ["", "TVM passes in the mrvl flow (top; depth 0 = run directly):"]
    lines += [f"  {n:46s} {s:8.2f}" for n, s in top_passes(timer)]
    lines += ["", "TVM CPU flow stages:"]
    tvm_watch = best["tvm_watch"]
    lines += [f"  {k:46s} {v:8.2f}" for k, v in tvm_watch.seconds.items()]
    lines += ["TVM passes in the TVM CPU flow (top):"]
    lines += [f"  {n:46s} {s:8.2f}" for n, s in top_passes(best["tvm_timer"])]
    return "\n".join(lines)


def profile(path: str, work: str, out: str, count: int = 30) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    mrvl_flow(path, os.path.join(work, "profile"))
    profiler.disable()
    profiler.dump_stats(out)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).strip_dirs()
    stats.sort_stats("tottime").print_stats(count)
    stats.sort_stats("cumulative").print_stats(count)
    return text.getvalue()


def _quantized(model):
    """`model` as `mrvl.quantize` writes it, calibrated on 8 seeded normal samples (as
    `bench/cycles.py --dtypes int8` does)."""
    import numpy as np

    import mrvl

    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    calibration = np.random.default_rng(0).standard_normal((8, *shape[1:])).astype(np.float32)
    return mrvl.quantize(model, calibration)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "models", nargs="*", default=list(MODELS), help="light model names, or zoo:NAME"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per flow (best is kept)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", metavar="FILE", help="also cProfile the mrvl flow")
    parser.add_argument("--dtypes", nargs="+", choices=("fp16", "int8"), default=["fp16"])
    args = parser.parse_args(argv)

    from mrvl.models.light import load_light_model
    from mrvl.models.zoo import load_zoo_model

    with tempfile.TemporaryDirectory(prefix="mrvl-bench-") as work:
        warm_up(work)
        for name, dtype in ((n, d) for n in args.models for d in args.dtypes):
            if name.startswith("zoo:"):
                model = load_zoo_model(name.removeprefix("zoo:"), seed=args.seed)
            else:
                model = load_light_model(name, seed=args.seed)
            if dtype == "int8":
                model = _quantized(model)
                name = f"{name} (QDQ int8)"
            path = os.path.join(work, f"{name.split()[0].replace(':', '_')}_{dtype}.onnx")
            onnx.save(model, path)
            del model
            best = measure(path, work, args.repeat)
            print(report(name, best), flush=True)
            if args.profile:
                out = f"{args.profile}.{name.split()[0]}.{dtype}"
                if len(args.models) == 1 and len(args.dtypes) == 1:
                    out = args.profile
                print(f"\ncProfile of the mrvl flow ({out}):")
                print(profile(path, work, out))
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
