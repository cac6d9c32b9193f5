"""`mrvl.sweep`: design points compiled and measured on the cycle model, on Ray workers.

A design point is a model (a zoo name `zoo:NAME`, with seeded random weights, or an ONNX
file), a part (a base part with some machine numbers changed: `mrvl.target.derive_target`),
the tiles to use and the compile options. Each point compiles every MLIP region and replays it
on the cycle model, as `bench/cycles.py` does; cycles do not depend on data, so nothing runs.
A point's result is cached under a hash of the model's bytes, every number of its part, its
options and mrvl's own code (`compiler_digest`): a re-run of an unchanged point reads the
cache and starts no worker. The driver alone reads and writes the cache, so cluster nodes need no shared disk.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import time
import tomllib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mrvl.errors import MrvlError
from mrvl.target import (
    Target,
    available_targets,
    derive_target,
    get_target,
    load_target_file,
    target_fields,
)

from .evaluate import connect_ray, loopback_ray, worker_env
from .runner import first_line

OPTIONS = ("num_tiles", "wb_pin_ocm", "cascade")
"""Keys of a point besides `model` and the part's numbers."""

COLUMNS = (
    "model",
    "mcpu",
    "max_tiles",
    "num_tiles",
    "ocm_bytes_per_tile",
    "ddr_bytes_per_cycle",
    "clock_mhz",
    "fp16_macs_per_cycle_per_tile",
    "wb_pin_ocm",
    "cascade",
    "error",
    "total_cycles",
    "latency_us",
    "roofline_cycles",
    "roofline_ratio",
    "ddr_read_bytes",
    "ddr_write_bytes",
    "ocm_peak_bytes",
    "costliest_layers",
)
"""The CSV's columns; a swept number not among them is added after `mcpu`."""


class SweepSpecError(MrvlError, ValueError):
    """The sweep spec does not describe design points (names the file and the key)."""


@dataclass(frozen=True)
class Point:
    model: str
    overrides: tuple[tuple[str, int], ...] = ()
    num_tiles: int | None = None
    wb_pin_ocm: bool = False
    cascade: bool = False


@dataclass
class SweepResult:
    rows: list[dict[str, Any]]
    cached: int
    seconds: float
    swept: list[str] = field(default_factory=list)
    """The part's numbers that the points change."""

    def columns(self) -> list[str]:
        extra = [k for k in self.swept if k not in COLUMNS]
        return [*COLUMNS[:2], *extra, *COLUMNS[2:]]


def _spec_error(source: str, message: str) -> SweepSpecError:
    return SweepSpecError(f"{source}: {message}")


def _check_value(source: str, key: str, value: Any) -> Any:
    if key == "model":
        ok = isinstance(value, str) and value
    elif key in ("wb_pin_ocm", "cascade"):
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    if not ok:
        want = {
            "model": "a zoo:NAME or a file",
            "wb_pin_ocm": "true or false",
            "cascade": "true or false",
        }.get(key, "a positive integer")
        raise _spec_error(source, f"{key} = {value!r}: want {want}")
    return value


def load_spec(path: str | os.PathLike) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            spec = tomllib.load(f)
    except OSError as err:
        raise SweepSpecError(f"sweep spec {path}: {err.strerror or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise SweepSpecError(f"sweep spec {path}: not TOML: {err}") from None
    spec.setdefault("base_dir", str(Path(path).resolve().parent))
    spec.setdefault("source", f"sweep spec {path}")
    return spec


def design_points(spec: dict[str, Any]) -> tuple[Target, list[Point]]:
    """The base part and the points of a spec: `target` (or `target_file`), `models`, a
    `[grid]` of lists (every combination, crossed with `models`) and `[[points]]` tables."""
    source = spec.get("source", "sweep spec")
    allowed = {"target", "target_file", "models", "grid", "points", "base_dir", "source"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise _spec_error(
            source,
            f"unknown key(s) {', '.join(unknown)}; known: "
            "target, target_file, models, grid, points",
        )
    base_dir = Path(spec.get("base_dir", "."))
    if "target_file" in spec:
        base = load_target_file(base_dir / spec["target_file"])
    else:
        try:
            base = get_target(spec.get("target", "cn10ka"))
        except ValueError as err:
            raise _spec_error(source, f"target: {err}") from None
    keys = set(target_fields()) | set(OPTIONS) | {"model"}

    def point(values: dict[str, Any], where: str) -> Point:
        bad = sorted(set(values) - keys)
        if bad:
            raise _spec_error(
                source,
                f"{where}: unknown key(s) {', '.join(bad)}; a point sets "
                "model, num_tiles, wb_pin_ocm, cascade or a part's number: "
                f"{', '.join(target_fields())}",
            )
        for key, value in values.items():
            _check_value(source, key, value)
        if "model" not in values:
            raise _spec_error(source, f"{where}: no model (give models = [...] or model = ...)")
        model = values["model"]
        if not model.startswith("zoo:"):
            model = str((base_dir / model).resolve())
        overrides = tuple(sorted((k, v) for k, v in values.items() if k in target_fields()))
        return Point(
            model,
            overrides,
            values.get("num_tiles"),
            values.get("wb_pin_ocm", False),
            values.get("cascade", False),
        )

    models = spec.get("models", [])
    if not isinstance(models, list):
        models = [models]
    grid = spec.get("grid", {})
    if not isinstance(grid, dict):
        raise _spec_error(source, "grid must be a table of lists")
    axes = {k: v if isinstance(v, list) else [v] for k, v in grid.items()}
    if models:
        axes = {"model": models, **axes}
    points = []
    if axes.get("model") or "points" not in spec:
        names = list(axes)
        for combo in itertools.product(*axes.values()):
            points.append(point(dict(zip(names, combo)), "grid"))
    explicit = spec.get("points", [])
    if not isinstance(explicit, list) or not all(isinstance(p, dict) for p in explicit):
        raise _spec_error(source, "points must be an array of tables ([[points]])")
    for index, values in enumerate(explicit):
        points.append(
            point({"model": models[0]} | values if len(models) == 1 else values, f"points[{index}]")
        )
    if not points:
        raise _spec_error(
            source, "no design points: give models = [...] and a [grid] or [[points]]"
        )
    return base, points


def _model_digest(model: str) -> str:
    """What identifies a model's bytes: a zoo model is its weight-free file and the seed."""
    if model.startswith("zoo:"):
        from mrvl.models.zoo import zoo_model_path

        try:
            data = zoo_model_path(model[4:]).read_bytes() + b"seed=0"
        except (KeyError, ValueError) as err:
            raise MrvlError(f"model {model}: {err}") from None
    else:
        try:
            data = Path(model).read_bytes()
        except OSError as err:
            raise MrvlError(f"model {model}: {err.strerror or err}") from None
    return hashlib.sha256(data).hexdigest()


def _load_model(model: str):
    import onnx

    if model.startswith("zoo:"):
        from mrvl.models.zoo import load_zoo_model

        return load_zoo_model(model[4:], calibrate=False)
    return onnx.load(model)


@functools.cache
def compiler_digest() -> str:
    """The sha256 of mrvl's own code: every Python source and data file of its packages.

    A cached point stays valid exactly as long as the code that computed it. The package
    version alone would not do: an editable checkout keeps its version while the compiler
    and the cycle model change under it.
    """
    import mrvl
    import mrvl.dialects
    import mrvl.passes
    import mrvl.sim

    digest = hashlib.sha256()
    for package in (mrvl, mrvl.dialects, mrvl.passes, mrvl.sim):
        for root in package.__path__:
            base = Path(root)
            for path in sorted(base.rglob("*")):
                if path.suffix in (".py", ".json", ".c") and "__pycache__" not in path.parts:
                    digest.update(f"{package.__name__}/{path.relative_to(base)}\0".encode())
                    digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(point: Point, base: Target, model_digest: str) -> str:
    part = asdict(derive_target(base, **dict(point.overrides)))
    document = {
        "model": model_digest,
        "part": {k: part[k] for k in target_fields()},
        "num_tiles": point.num_tiles,
        "wb_pin_ocm": point.wb_pin_ocm,
        "cascade": point.cascade,
        "mrvl": compiler_digest(),
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def run_point(point: Point, base: Target) -> dict[str, Any]:
    """Compile one point and model its cycles: its CSV row (`error` set if it does not
    compile, e.g. a layer that fits in no tile's OCM)."""
    from tvm import relax

    import mrvl
    from mrvl.compiler import compile_region
    from mrvl.sim import prepare
    from mrvl.sim.profile import profile_regions

    if base.name not in available_targets():
        from mrvl.target import register_target

        register_target(base)
    target = derive_target(base, **dict(point.overrides))
    num_tiles = point.num_tiles or target.max_tiles
    row: dict[str, Any] = {
        "model": point.model if point.model.startswith("zoo:") else Path(point.model).name
    }
    row.update(mcpu=target.name, **{k: getattr(target, k) for k in target_fields()})
    row.update(num_tiles=num_tiles, wb_pin_ocm=point.wb_pin_ocm, cascade=point.cascade, error=None)
    try:
        mod = mrvl.from_onnx(_load_model(point.model))
        mod = mrvl.partition_for_mrvl(mod, mcpu=target.name, num_tiles=num_tiles)
        programs = []
        for gv, func in mod.functions.items():
            attrs = func.attrs if isinstance(func, relax.Function) and func.attrs else {}
            if "Codegen" in attrs and str(attrs["Codegen"]) == "mrvl":
                func = func.with_attr("global_symbol", gv.name_hint)
                region = compile_region(
                    func,
                    mcpu=target.name,
                    num_tiles=num_tiles,
                    wb_pin_ocm=point.wb_pin_ocm,
                    cascade=point.cascade,
                )
                programs.append((region.symbol, prepare(region.binary), None))
        profile = profile_regions(programs)
    except (MrvlError, ValueError) as err:
        row["error"] = first_line(err)
        return row
    costly = sorted(profile.layers, key=lambda layer: -layer.cycles)[:3]
    row.update(
        total_cycles=profile.total_cycles,
        latency_us=round(profile.microseconds, 3),
        roofline_cycles=profile.roofline_cycles,
        roofline_ratio=round(profile.total_cycles / max(1, profile.roofline_cycles), 4),
        ddr_read_bytes=profile.ddr_read_bytes,
        ddr_write_bytes=profile.ddr_write_bytes,
        ocm_peak_bytes=max((layer.ocm_peak_bytes for layer in profile.layers), default=0),
        costliest_layers="; ".join(f"{layer.onnx_node}={layer.cycles}" for layer in costly),
    )
    return row


def default_cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "mrvl" / "sweep"


def sweep(
    spec: dict[str, Any] | str | os.PathLike,
    *,
    workers: int | None = None,
    address: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    cache: bool = True,
    progress: bool | None = None,
) -> SweepResult:
    """Run every design point of `spec` (a TOML file or its dict: see `design_points`) and
    return the rows, in the spec's order. `workers` Ray tasks at a time (default: the
    cluster's CPUs; 0: serially in this process); `address` joins a Ray cluster. Cached
    points are read from `cache_dir` (default: ~/.cache/mrvl/sweep) and never run again."""
    from tqdm import tqdm

    if not isinstance(spec, dict):
        spec = load_spec(spec)
    base, points = design_points(spec)
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    start = time.perf_counter()
    digests = {model: _model_digest(model) for model in {p.model for p in points}}
    keys = [cache_key(p, base, digests[p.model]) for p in points]
    rows: list[dict[str, Any] | None] = [None] * len(points)
    if cache:
        for index, key in enumerate(keys):
            path = directory / f"{key}.json"
            if path.is_file():
                rows[index] = json.loads(path.read_text())
    cached = sum(row is not None for row in rows)
    todo = [i for i, row in enumerate(rows) if row is None]
    bar = tqdm(
        total=len(todo),
        unit="point",
        desc="mrvl-sweep",
        disable=None if progress is None else not progress,
    )
    try:
        for index, row in _run(points, todo, base, workers, address):
            rows[index] = row
            bar.update(1)
            if cache and row["error"] is None:  # a failed point may compile after a fix
                directory.mkdir(parents=True, exist_ok=True)
                tmp = directory / f"{keys[index]}.json.{os.getpid()}"
                tmp.write_text(json.dumps(row))
                tmp.replace(directory / f"{keys[index]}.json")
    finally:
        bar.close()
    swept = sorted({k for p in points for k, _ in p.overrides})
    return SweepResult(rows, cached, time.perf_counter() - start, swept)


def _run(points, todo, base, workers, address) -> Iterator[tuple[int, dict[str, Any]]]:
    if not todo:
        return
    if workers == 0:
        for index in todo:
            yield index, run_point(points[index], base)
        return
    if not address:
        loopback_ray()
    import ray

    started = connect_ray(address, workers)
    try:
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        task = ray.remote(num_cpus=1)(run_point).options(runtime_env={"env_vars": worker_env()})
        base_ref = ray.put(base)
        queue, pending = list(reversed(todo)), {}
        while queue or pending:
            while queue and len(pending) < workers:
                index = queue.pop()
                pending[task.remote(points[index], base_ref)] = index
            [ref], _ = ray.wait(list(pending), num_returns=1)
            yield pending.pop(ref), ray.get(ref)
    finally:
        if started:
            ray.shutdown()


def write_csv(result: SweepResult, path: str | os.PathLike) -> None:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=result.columns(), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(result.rows)


def plot_pareto(
    result: SweepResult, path: str | os.PathLike, x: str = "ocm_bytes_per_tile"
) -> None:
    """Latency against `x` (OCM per tile, or `num_tiles`), one colour per model, each model's
    Pareto front (no other point is both faster and smaller) drawn as a line."""
    from mrvl.profiling import check_plot_path

    check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scale, label = (1024, "OCM per tile (KiB)") if x == "ocm_bytes_per_tile" else (1, x)
    figure, axes = plt.subplots(figsize=(7, 4.5))
    try:
        for model in dict.fromkeys(row["model"] for row in result.rows):
            done = [r for r in result.rows if r["model"] == model and r["error"] is None]
            if not done:
                continue
            xs = [r[x] / scale for r in done]
            ys = [r["latency_us"] for r in done]
            dots = axes.scatter(xs, ys, s=14, alpha=0.6, label=model)
            front, best = [], float("inf")
            for px, py in sorted(zip(xs, ys)):
                if py < best:
                    front.append((px, py))
                    best = py
            axes.step(*zip(*front), where="post", color=dots.get_facecolor()[0], linewidth=1.5)
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xlabel(label)
        axes.set_ylabel("latency (µs, modelled)")
        axes.set_title(f"{len(result.rows)} design points: latency and its Pareto front")
        axes.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(path)
    finally:
        plt.close(figure)
