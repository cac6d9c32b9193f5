"""`mrvl.profile`: compile an ONNX model, run it once, and model the cycles of every region.

The model is built as `mrvl.build` builds it (regions for the MLIP, the rest for the host),
run once in TVM's VM on the given or seeded random inputs while `mrvl.runtime.recording()`
collects what each region's run counted (`RunStats`), and each region's program is then
replayed on the cycle model (`mrvl.sim.profile`). A hybrid model has several regions: each is
profiled, and the totals are their sums.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mrvl.errors import MrvlError
from mrvl.sim.profile import Profile, profile_regions
from mrvl.sim.stats import RunStats

if TYPE_CHECKING:
    import onnx

__all__ = ["ProfileInputError", "profile", "profile_library", "random_feeds"]


class ProfileInputError(MrvlError, ValueError):
    """The model's inputs cannot be made up: a dynamic dimension without a given size."""


def _graph_inputs(model: onnx.ModelProto) -> list:
    initializers = {i.name for i in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializers]


def random_feeds(
    model: onnx.ModelProto, shapes: dict[str, Sequence[int]] | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """A seeded standard-normal f32 array per model input (`shapes` sizes dynamic inputs)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in _graph_inputs(model):
        dims = list(value.type.tensor_type.shape.dim)
        if shapes and value.name in shapes:
            size = list(shapes[value.name])
        else:
            dynamic = [(a, d.dim_param or "?") for a, d in enumerate(dims) if not d.dim_value]
            if dynamic:
                raise ProfileInputError(
                    f"input '{value.name}' has the dynamic dimension(s) "
                    f"{', '.join(f'{a} ({n!r})' for a, n in dynamic)}: give a size for it"
                )
            size = [d.dim_value for d in dims]
        feeds[value.name] = rng.standard_normal(size).astype(np.float32)
    return feeds


def profile_runs(regions, runs) -> Profile:
    """Match recorded runs (`RunRecorder.runs`) to the compiled regions and profile them."""
    from mrvl.binary import HEADER_SIZE

    counted: dict[bytes, tuple] = {}
    for header, valid, stats in runs:
        known = counted.get(header)
        if known is None:
            counted[header] = (valid, stats)
        else:  # a region run more than once: its counts add up
            total = RunStats(known[1].saturated + stats.saturated, known[1].nans + stats.nans)
            counted[header] = (known[0], total)
    entries = []
    for region in regions:
        run = counted.get(region.binary[:HEADER_SIZE])
        if run is None:
            raise MrvlError(f"region {region.symbol} did not run: nothing to profile it with")
        entries.append((region.symbol, run[0], run[1]))
    return profile_regions(entries)


def profile_library(lib, inputs: Sequence[np.ndarray], *, engine: str | None = None) -> Profile:
    """Run a library made by `mrvl.build` once on `inputs` and profile its regions."""
    import tvm
    from tvm import relax

    from mrvl.runtime import recording
    from mrvl.sim import use_engine

    vm = relax.VirtualMachine(lib, tvm.cpu())
    with recording() as recorder, use_engine(engine) if engine else contextlib.nullcontext():
        vm["main"](*[tvm.runtime.tensor(np.asarray(x)) for x in inputs])
    return profile_runs(lib.mrvl_regions, recorder.runs)


def profile(
    model: str | Path | onnx.ModelProto,
    *,
    mcpu: str = "cn10ka",
    num_tiles: int | None = None,
    input_shapes: dict[str, Sequence[int]] | None = None,
    inputs: Sequence[np.ndarray] | None = None,
    seed: int = 0,
    engine: str | None = None,
) -> Profile:
    """Compile `model` (a path or ModelProto) for `mcpu` on `num_tiles` tiles (default: all),
    run it once on `inputs` (default: seeded standard-normal arrays), and return its
    `Profile`: `profile.to_json()` is profile.json, `mrvl.sim.trace.chrome_trace(profile)` the
    trace, `profile.summary()` the table `mrvlc --profile` prints."""
    import onnx

    import mrvl
    from mrvl.partition import validate_target_options
    from mrvl.target import get_target

    if num_tiles is None:
        num_tiles = get_target(mcpu).max_tiles
    validate_target_options(mcpu, num_tiles)
    shapes = {k: list(v) for k, v in input_shapes.items()} if input_shapes else None
    mod = mrvl.from_onnx(model, shape_dict=shapes)
    mod = mrvl.partition_for_mrvl(mod, mcpu=mcpu, num_tiles=num_tiles)
    lib = mrvl.build(mod, mcpu=mcpu, num_tiles=num_tiles)
    if inputs is None:
        proto = model if isinstance(model, onnx.ModelProto) else onnx.load(model)
        inputs = list(random_feeds(proto, shapes, seed).values())
    return profile_library(lib, inputs, engine=engine)


PLOT_FORMATS = (".svg", ".png")


class PlotUnavailableError(MrvlError):
    """matplotlib, the optional extra `mrvl[plot]`, is not installed."""


def check_plot_path(path: str | Path) -> None:
    """Fail early (before compiling) on a plot `path` or a missing matplotlib."""
    import importlib.util

    if Path(path).suffix.lower() not in PLOT_FORMATS:
        raise ValueError(f"--plot {path}: the file must end in .svg or .png")
    if importlib.util.find_spec("matplotlib") is None:
        raise PlotUnavailableError(
            "--plot needs matplotlib, which is not installed: pip install 'mrvl[plot]'"
        )


def plot_profile(profile: Profile, path: str | Path) -> None:
    """Cycles per layer (in program order) against each layer's roofline bound, as SVG or PNG
    (by the file name), log scale."""
    check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = profile.layers
    x = np.arange(len(layers))
    width = max(6.0, min(40.0, 0.12 * len(layers) + 2))
    figure, axes = plt.subplots(figsize=(width, 4.5))
    try:
        axes.bar(x, [max(1, layer.cycles) for layer in layers], label="modelled cycles")
        axes.hlines(
            [max(1, layer.roofline_cycles) for layer in layers],
            x - 0.4,
            x + 0.4,
            color="black",
            linewidth=2,
            label="roofline bound",
        )
        axes.set_yscale("log")
        axes.set_ylabel("cycles")
        axes.set_xlabel("layer (ONNX node, program order)")
        if len(layers) <= 60:
            axes.set_xticks(x, [layer.onnx_node for layer in layers], rotation=90, fontsize=6)
        axes.set_title(
            f"{profile.mcpu}: {profile.total_cycles} cycles, roofline {profile.roofline_cycles}"
        )
        axes.legend()
        figure.tight_layout()
        figure.savefig(path)
    finally:
        plt.close(figure)
