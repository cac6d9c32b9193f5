"""`mrvl.evaluate`: a compiled model over a whole data set, on Ray workers.

The model is compiled once (`mrvl.build`) and its exported library shipped to the workers
through Ray's object store; each worker is a Ray actor (`LocalRunner`) that keeps one VM. The
driver reads samples lazily, a few batches ahead of the workers, and appends each finished
batch's rows to the JSONL file (a Parquet output's journal: `results.py`), so that a run killed at any point resumes (`resume=True`)
from the rows on disk. A worker that dies has its unfinished batches sent again to another
worker (a new one replaces it): a batch's rows are written only when the batch is done, so no
sample is lost or written twice.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrvl.errors import MrvlError
from mrvl.target import Target, available_targets, get_target, load_target_file

from .data import InputSpec, Preprocess, SampleError, SampleRef, input_specs, read, samples
from .results import ResultsFile
from .runner import Batch, LocalRunner, first_line, new_row

IN_FLIGHT = 2
"""Batches queued on each worker: one running, one waiting, so a worker never idles."""


class EvaluationError(MrvlError):
    """The evaluation cannot go on (workers keep dying, a bad output file)."""


@dataclass
class Summary:
    """Totals over every row of the output (rows of an earlier run too, with `resume`)."""

    samples: int = 0
    errors: int = 0
    passed: int = 0
    top1: int = 0
    top5: int = 0
    classified: int = 0
    saturated_samples: int = 0
    nan_samples: int = 0
    max_relative_error: float = 0.0
    resumed: int = 0
    retried_batches: int = 0
    seconds: float = 0.0
    new_samples: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list, repr=False)
    """The rows of this run when no output file was given."""

    def add(self, row: dict[str, Any]) -> None:
        self.samples += 1
        if row.get("error") is not None:
            self.errors += 1
            return
        self.passed += bool(row["passed"])
        if row["top1"] is not None:
            self.classified += 1
            self.top1 += bool(row["top1"])
            self.top5 += bool(row["top5"])
        self.saturated_samples += bool(row["saturated"])
        self.nan_samples += bool(row["nans"])
        self.max_relative_error = max(self.max_relative_error, row["max_relative_error"])

    def table(self) -> str:
        from tabulate import tabulate

        def share(count: int, total: int) -> str:
            return f"{count} ({count / total:.1%})" if total else "-"

        scored = self.samples - self.errors
        rate = self.new_samples / self.seconds if self.seconds else 0.0
        rows = [
            ("samples", self.samples),
            ("error rows", self.errors),
            ("fp16 rule passed", share(self.passed, scored)),
            ("top-1 agrees", share(self.top1, self.classified)),
            ("top-5 agrees", share(self.top5, self.classified)),
            ("saturated samples", share(self.saturated_samples, scored)),
            ("samples with NaN", share(self.nan_samples, scored)),
            ("max relative error", f"{self.max_relative_error:.3e}"),
            ("resumed from file", self.resumed),
            ("batches re-run", self.retried_batches),
            ("samples/s (this run)", f"{rate:.1f}"),
        ]
        return tabulate(rows, headers=["", "value"])


def resolve_target(mcpu: str, target_file: str | os.PathLike | None) -> Target:
    """The part to compile for: a target file's (registered here) or a named one."""
    return load_target_file(target_file) if target_file else get_target(mcpu)


_libraries: dict[tuple, bytes] = {}
"""Libraries this process compiled, by (model bytes' hash, part, tiles, options): evaluating
the same model again (another data set, a notebook's second call) skips the compile."""


def compile_library(
    model: str | os.PathLike, target: Target, num_tiles: int | None, **options: Any
) -> bytes:
    """Compile once: the exported library's bytes, which every worker loads."""
    import mrvl
    from mrvl.partition import validate_target_options

    num_tiles = num_tiles or target.max_tiles
    validate_target_options(target.name, num_tiles)
    digest = hashlib.sha256(Path(model).read_bytes()).hexdigest()
    key = (digest, target, num_tiles, tuple(sorted(options.items())))
    if key in _libraries:
        return _libraries[key]
    mod = mrvl.from_onnx(model)
    mod = mrvl.partition_for_mrvl(mod, mcpu=target.name, num_tiles=num_tiles)
    with tempfile.TemporaryDirectory(prefix="mrvl-eval-build-") as work:
        lib = mrvl.build(mod, mcpu=target.name, num_tiles=num_tiles, export_dir=work, **options)
        library = Path(lib.library_path).read_bytes()
    if len(_libraries) >= 4:
        _libraries.pop(next(iter(_libraries)))
    _libraries[key] = library
    return library


def _batches(
    refs: Iterable[SampleRef], inputs: list[InputSpec], preprocess: Preprocess | None, size: int
) -> Iterator[Batch]:
    """Read the samples as they are asked for, `size` at a time; an unreadable one carries
    its reason instead of its feeds."""
    batch: Batch = []
    for ref in refs:
        try:
            batch.append((ref, read(ref, inputs, preprocess), None))
        except SampleError as err:
            batch.append((ref, None, str(err)))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch for a node that is no cluster member: off, a node takes 127.0.0.1 as its
address (as Ray does on Windows and macOS) instead of this machine's own network address."""


def loopback_ray() -> None:
    """Keep an embedded Ray on the loopback device: its node address is 127.0.0.1, so its
    processes talk to each other on this machine only. Ray reads the switch when it is first
    imported, so this must come first; the user's own setting wins."""
    import sys

    if "ray" not in sys.modules:
        os.environ.setdefault(LOOPBACK_ENV, "0")


def connect_ray(address: str | None, workers: int | None) -> bool:
    """Join `address`, or start an embedded Ray on this machine; True if this call started it.
    An already initialised Ray (a test's, or an earlier call's) is used as it is."""
    import logging

    if not address:
        loopback_ray()
    import ray

    if ray.is_initialized():
        return False
    common = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
    if address:
        ray.init(address=address, **common)
    else:
        # "local": a new instance even when `ray start` left one running on this machine.
        cpus = max(os.cpu_count() or 1, workers or 0)
        ray.init(address="local", num_cpus=cpus, **common)
    return True


def worker_env() -> dict[str, str]:
    """The workers' environment: one simulator thread and one TVM thread each unless the user
    chose otherwise (several workers share the cores; DESIGN §11), and the user's engine."""
    env = {
        "MRVL_SIM_THREADS": os.environ.get("MRVL_SIM_THREADS", "1"),
        # TVM's host-side thread pool (one thread per core, spinning between calls) would
        # take the other workers' cores just as the simulator's threads would.
        "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS", "1"),
    }
    if "MRVL_SIM_ENGINE" in os.environ:
        env["MRVL_SIM_ENGINE"] = os.environ["MRVL_SIM_ENGINE"]
    return env


class RayPool:
    """Batches over a pool of `LocalRunner` actors, re-sent when an actor dies."""

    def __init__(self, workers: int, runner_args: tuple, max_replacements: int):
        import ray

        self._actor_class = ray.remote(num_cpus=1, max_restarts=0)(LocalRunner).options(
            runtime_env={"env_vars": worker_env()}
        )
        self._args = [ray.put(a) if isinstance(a, bytes) else a for a in runner_args]
        self.actors = [self._actor_class.remote(*self._args) for _ in range(workers)]
        self.replacements_left = max_replacements
        self.retried_batches = 0

    def ready(self) -> list[int]:
        """Wait for every worker to have loaded the model; their pids."""
        import ray

        return ray.get([actor.pid.remote() for actor in self.actors])

    def run(self, batches: Iterator[Batch]) -> Iterator[list[dict[str, Any]]]:
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        pending: dict[Any, tuple[Any, Batch]] = {}
        starting: dict[Any, Any] = {}  # a replacement's first call -> the actor: fed once up
        load = {actor: 0 for actor in self.actors}
        retry: deque[Batch] = deque()

        def feed() -> None:
            for actor in list(load):
                while load[actor] < IN_FLIGHT:
                    batch = retry.popleft() if retry else next(batches, None)
                    if batch is None:
                        return
                    pending[actor.run.remote(batch)] = (actor, batch)
                    load[actor] += 1

        feed()
        while pending or (starting and retry):
            [ref], _ = ray.wait([*pending, *starting], num_returns=1)
            if ref in starting:
                actor = starting.pop(ref)
                try:
                    ray.get(ref)
                except RayActorError:
                    self.actors.remove(actor)
                else:
                    load[actor] = 0
                feed()
                continue
            actor, batch = pending.pop(ref)
            try:
                rows = ray.get(ref)
            except RayActorError as err:
                self.retried_batches += 1
                retry.append(batch)
                if actor in load:  # the first of its batches to fail: replace the actor
                    del load[actor]
                    self.actors.remove(actor)
                    if self.replacements_left > 0:
                        self.replacements_left -= 1
                        new = self._actor_class.remote(*self._args)
                        self.actors.append(new)
                        starting[new.pid.remote()] = new
                    elif not load and not starting:
                        raise EvaluationError(
                            f"every worker died; the last: {first_line(err)}"
                        ) from None
                feed()
                continue
            except RayTaskError as err:  # not a sample's error (those are rows): the batch's
                rows = [dict(new_row(r), error=first_line(err), worker=None) for r, _, _ in batch]
            if actor in load:
                load[actor] -= 1
            feed()
            yield rows
        for actor in starting.values():  # replacements that were not needed after all
            ray.kill(actor)
        if retry:
            raise EvaluationError(f"{len(retry)} batch(es) left with no worker to run them")


class _Serial:
    """The same rows from one runner in this process (`workers=0`) or over RPC."""

    retried_batches = 0

    def __init__(self, runner):
        self.runner = runner

    def ready(self) -> list[int]:
        return [self.runner.pid()]

    def run(self, batches: Iterator[Batch]) -> Iterator[list[dict[str, Any]]]:
        for batch in batches:
            yield self.runner.run(batch)

    def close(self) -> None:
        if hasattr(self.runner, "close"):
            self.runner.close()


def evaluate(
    model: str | os.PathLike,
    data: str | os.PathLike,
    *,
    output: str | os.PathLike | None = None,
    workers: int | None = None,
    address: str | None = None,
    mcpu: str = "cn10ka",
    target_file: str | os.PathLike | None = None,
    num_tiles: int | None = None,
    preprocess: Preprocess | dict | None = None,
    classifier: bool | None = None,
    resume: bool = False,
    batch_size: int = 4,
    rpc: Any = None,
    engine: str | None = None,
    progress: bool | None = None,
    on_batch: Callable[[list[dict[str, Any]], Any], None] | None = None,
    **compile_options: Any,
) -> Summary:
    """Run `model` (an ONNX file) compiled for the MLIP over every sample of `data` and score
    each against onnxruntime on the same float model; returns the `Summary`.

    Rows go to `output` (JSONL, one per sample, or Parquet for a `.parquet` name:
    `results.py`; kept in `Summary.rows` without it). `workers`
    Ray actors run them (default: one per CPU of the cluster; 0: serially in this process);
    `address` joins a Ray cluster instead of starting one here. `rpc` (an
    `mrvl.distributed.rpc.RpcSession`) runs them on a remote TVM RPC server instead. `resume`
    keeps the rows already in `output` and runs only the other samples. `on_batch(rows, pool)`
    is called after each batch is written. `compile_options` go to `mrvl.build`
    (`wb_pin_ocm`, `cascade`).
    """
    import onnx
    from tqdm import tqdm

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if isinstance(preprocess, dict):
        preprocess = Preprocess.from_dict(preprocess)
    target = resolve_target(mcpu, target_file)
    proto = onnx.load(os.fspath(model), load_external_data=False)
    inputs = input_specs(proto)
    summary = Summary()
    out = ResultsFile(Path(output), resume) if output is not None else None
    done: set[str] = set()
    if out is not None:
        for row in out.done:
            summary.add(row)
            done.add(row["id"])
        summary.resumed = len(done)
    todo = [ref for ref in samples(data, inputs) if ref.id not in done]

    remote = rpc.connect() if rpc is not None else None  # an unreachable server fails first
    library = compile_library(model, target, num_tiles, **compile_options)
    model_bytes = Path(model).read_bytes()
    custom = [] if target.name in available_targets() else [target]
    runner_args = (library, model_bytes, custom, engine, classifier)
    started = False
    if rpc is not None:
        from .rpc import RpcRunner

        pool = _Serial(RpcRunner(remote, library, model_bytes, classifier))
        remote = None  # the runner's now: its close() ends the session
    elif workers == 0:
        pool = _Serial(LocalRunner(*runner_args))
    else:
        import ray

        started = connect_ray(address, workers)
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        pool = RayPool(workers, runner_args, max_replacements=2 * workers + 2)

    if out is not None:
        out.start()
    pool.ready()  # the rate counts samples, not the workers' start
    start = time.perf_counter()
    bar = tqdm(
        total=len(todo),
        unit="sample",
        desc="mrvl-eval",
        disable=None if progress is None else not progress,
    )
    finished = False
    try:
        for rows in pool.run(_batches(todo, inputs, preprocess, batch_size)):
            for row in rows:
                summary.add(row)
                summary.new_samples += 1
                if out is None:
                    summary.rows.append(row)
            if out is not None:
                out.write(rows)
            bar.update(len(rows))
            if on_batch is not None:
                on_batch(rows, pool)
        finished = True
    finally:
        bar.close()
        if out is not None:
            out.close(finished)
        summary.seconds = time.perf_counter() - start
        summary.retried_batches = pool.retried_batches
        if hasattr(pool, "close"):
            pool.close()
        if started:
            import ray

            ray.shutdown()
    return summary
