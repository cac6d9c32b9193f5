"""One worker's share of an evaluation: run samples on the compiled model and score each one.

A `LocalRunner` loads the exported library once, keeps one Relax VM and one onnxruntime
session, and turns a batch of samples into result rows. The same class is the Ray actor of
`mrvl.evaluate` and the in-process runner of a serial run; `mrvl.distributed.rpc.RpcRunner`
gives the same rows from a remote TVM RPC server. A row is a flat JSON object (`ROW_FIELDS`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from mrvl.accuracy import fp16_agreement
from mrvl.target import Target, register_target

from .data import SampleRef

ROW_FIELDS = (
    "id",
    "file",
    "error",
    "passed",
    "max_relative_error",
    "max_abs_error",
    "top1",
    "top5",
    "saturated",
    "nans",
    "output_sha256",
)
"""Every row has these keys, in this order (`worker`, the pid that ran it, follows)."""

Batch = list[tuple[SampleRef, dict[str, np.ndarray] | None, str | None]]
"""(sample, its feeds, or None and the reason it could not be read)."""


def first_line(err: BaseException) -> str:
    text = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def new_row(ref: SampleRef) -> dict[str, Any]:
    row = dict.fromkeys(ROW_FIELDS)
    row.update(id=ref.id, file=ref.path)
    return row


def score(
    outputs: Sequence[np.ndarray],
    references: Sequence[np.ndarray],
    saturated: int | None,
    nans: int | None,
    classifier: bool | None = None,
) -> dict[str, Any]:
    """The row fields of one sample: the fp16 rule over every output (`mrvl.accuracy`), top-1
    and top-5 agreement of the first output if it is a classifier's scores (shape (1, C); by
    default when C >= 2), the saturated values and NaNs the run counted, and the sha256 of the
    outputs' bytes (two runs agree bit for bit when these do)."""
    if len(outputs) != len(references):
        raise ValueError(f"{len(outputs)} outputs, onnxruntime gave {len(references)}")
    agreements = [fp16_agreement(o, r) for o, r in zip(outputs, references)]
    digest = hashlib.sha256()
    for output in outputs:
        digest.update(np.ascontiguousarray(output).tobytes())
    first, reference = np.asarray(outputs[0]), np.asarray(references[0])
    is_classifier = classifier
    if is_classifier is None:
        is_classifier = first.ndim == 2 and first.shape[0] == 1 and first.shape[1] >= 2
    top1 = top5 = None
    if is_classifier:
        scores, truth = first.reshape(-1), int(np.argmax(reference.reshape(-1)))
        top1 = int(np.argmax(scores)) == truth
        top5 = truth in np.argsort(-scores, kind="stable")[:5].tolist()
    return {
        "passed": all(a.passed for a in agreements),
        "max_relative_error": max(a.max_relative_error for a in agreements),
        "max_abs_error": max(a.max_abs_error for a in agreements),
        "top1": top1,
        "top5": top5,
        "saturated": saturated,
        "nans": nans,
        "output_sha256": digest.hexdigest(),
    }


def run_batch(batch: Batch, run_one, session, classifier, worker) -> list[dict[str, Any]]:
    """One row per sample of `batch`: `run_one(feeds)` (outputs, saturated, NaNs) scored
    against onnxruntime's `session`; a sample that fails, or could not be read, is an error
    row. Shared by the local and the RPC runner, which differ in how they run and who the
    worker is."""
    rows = []
    for ref, feeds, error in batch:
        row = new_row(ref)
        if error is None:
            try:
                outputs, saturated, nans = run_one(feeds)
                references = session.run(None, feeds)
                row.update(score(outputs, references, saturated, nans, classifier))
            except Exception as err:  # noqa: BLE001 - one sample's failure is its row
                error = first_line(err)
        row["error"] = error
        row["worker"] = worker
        rows.append(row)
    return rows


class LocalRunner:
    """The compiled model and its float reference, loaded once, run sample after sample."""

    def __init__(
        self,
        library: bytes,
        model: bytes,
        targets: Sequence[Target] = (),
        engine: str | None = None,
        classifier: bool | None = None,
    ):
        import onnxruntime as ort
        import tvm
        from tvm import relax

        import mrvl  # noqa: F401 - registers mrvl.runtime.run_region, which the library calls
        from mrvl.accuracy import reference_session

        for target in targets:  # the library's binaries name them
            register_target(target)
        self._work = tempfile.TemporaryDirectory(prefix="mrvl-eval-")
        path = os.path.join(self._work.name, "model.so")
        with open(path, "wb") as f:
            f.write(library)
        self._vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # one core per worker, like the simulator's thread
        self._session = reference_session(model, options)
        self._engine = engine
        self._classifier = classifier

    def pid(self) -> int:
        return os.getpid()

    def cpu_seconds(self) -> float:
        """CPU time of this worker's process so far (bench/distributed.py: CPU per sample)."""
        import time

        return time.process_time()

    def _run(self, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], int, int]:
        import tvm

        from mrvl.runtime import recording
        from mrvl.sim import SaturationWarning, use_engine

        with recording() as recorder, warnings.catch_warnings(), use_engine(self._engine):
            warnings.simplefilter("ignore", SaturationWarning)  # counted in the row instead
            result = self._vm["main"](*[tvm.runtime.tensor(x) for x in feeds.values()])
        outputs = [result] if isinstance(result, tvm.runtime.Tensor) else list(result)
        saturated = sum(int(stats.saturated.sum()) for _, _, stats in recorder.runs)
        nans = sum(int(stats.nans.sum()) for _, _, stats in recorder.runs)
        return [o.numpy() for o in outputs], saturated, nans

    def run(self, batch: Batch) -> list[dict[str, Any]]:
        return run_batch(batch, self._run, self._session, self._classifier, os.getpid())
