"""`mrvl.evaluate` and `mrvl-eval` on the bundled MNIST model: serial, 1 and 2 Ray workers give
the same rows; resume; unreadable and misshapen samples are error rows; a killed worker loses
nothing and counts nothing twice. One embedded Ray session serves the whole module."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mrvl.distributed.evaluate import evaluate
from mrvl.tools import mrvl_eval

SAMPLES = 12


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "mnist.npy"
    rng = np.random.default_rng(1)
    np.save(path, rng.standard_normal((SAMPLES, 1, 28, 28)).astype(np.float32))
    return path


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _results(rows):
    """The rows by id without the worker that ran them (which differs from run to run)."""
    return {row["id"]: {k: v for k, v in row.items() if k != "worker"} for row in rows}


@pytest.fixture(scope="module")
def serial(mnist_path, data, tmp_path_factory):
    out = tmp_path_factory.mktemp("serial") / "rows.jsonl"
    summary = evaluate(mnist_path, data, output=out, workers=0, progress=False)
    assert summary.samples == SAMPLES and summary.errors == 0
    return _rows(out)


def test_serial_rows(serial):
    assert [row["id"] for row in serial] == [f"mnist.npy[{i}]" for i in range(SAMPLES)]
    assert all(row["passed"] and row["top1"] is not None for row in serial)
    assert len({row["output_sha256"] for row in serial}) == SAMPLES


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_give_the_serial_rows(ray_session, mnist_path, data, serial, tmp_path, workers):
    out = tmp_path / "rows.jsonl"
    summary = evaluate(mnist_path, data, output=out, workers=workers, progress=False)
    rows = _rows(out)
    assert len(rows) == SAMPLES == summary.samples
    assert _results(rows) == _results(serial)
    assert len({row["worker"] for row in rows}) == workers


def test_resume_runs_only_what_is_missing(mnist_path, data, serial, tmp_path):
    out = tmp_path / "rows.jsonl"
    lines = [json.dumps(row) + "\n" for row in serial[:6]]
    out.write_text("".join(lines[:5]) + lines[5][:40])  # a run killed while writing row 6
    summary = evaluate(mnist_path, data, output=out, workers=0, resume=True, progress=False)
    assert summary.resumed == 5 and summary.new_samples == SAMPLES - 5
    rows = _rows(out)
    assert [row["id"] for row in rows[:5]] == [row["id"] for row in serial[:5]]
    assert _results(rows) == _results(serial) and len(rows) == SAMPLES


def _parquet_rows(path):
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def test_parquet_output_holds_the_jsonl_rows(mnist_path, data, serial, tmp_path):
    out = tmp_path / "rows.parquet"
    summary = evaluate(mnist_path, data, output=out, workers=0, progress=False)
    assert summary.samples == SAMPLES and summary.new_samples == SAMPLES
    rows = _parquet_rows(out)
    assert [row["id"] for row in rows] == [row["id"] for row in serial]
    assert _results(rows) == _results(serial)
    assert not (tmp_path / "rows.parquet.partial.jsonl").exists()


def test_parquet_run_killed_midway_resumes(mnist_path, data, serial, tmp_path):
    """Until a Parquet run ends its rows are in a JSONL journal beside it; a killed run
    resumes from the journal, and the finished file has every row once."""
    out = tmp_path / "rows.parquet"
    journal = tmp_path / "rows.parquet.partial.jsonl"
    lines = [json.dumps(row) + "\n" for row in serial[:4]]
    journal.write_text("".join(lines[:3]) + lines[3][:30])  # killed while writing row 4
    summary = evaluate(mnist_path, data, output=out, workers=0, resume=True, progress=False)
    assert summary.resumed == 3 and summary.new_samples == SAMPLES - 3
    rows = _parquet_rows(out)
    assert len(rows) == SAMPLES and _results(rows) == _results(serial)
    assert not journal.exists()
    # resuming a finished file runs nothing and keeps every row
    again = evaluate(mnist_path, data, output=out, workers=0, resume=True, progress=False)
    assert again.resumed == SAMPLES and again.new_samples == 0
    assert _results(_parquet_rows(out)) == _results(serial)


def test_bad_samples_are_error_rows(ray_session, mnist_path, tmp_path):
    from PIL import Image

    folder = tmp_path / "data"
    folder.mkdir()
    np.save(folder / "a_good.npy", np.zeros((2, 1, 28, 28), np.float32))
    np.save(folder / "b_shape.npy", np.zeros((1, 1, 27, 28), np.float32))
    (folder / "c_corrupt.npy").write_bytes(b"\x93NUMPY garbage")
    Image.fromarray(np.full((40, 30), 128, np.uint8)).save(folder / "d_digit.png")
    (folder / "e_broken.jpg").write_bytes(b"not a jpeg")
    (folder / "notes.txt").write_text("not a sample")
    summary = evaluate(mnist_path, folder, workers=1, progress=False)
    rows = {row["id"]: row for row in summary.rows}
    assert sorted(rows) == ["a_good.npy[0]", "a_good.npy[1]", "b_shape.npy[0]",
                            "c_corrupt.npy", "d_digit.png", "e_broken.jpg"]  # fmt: skip
    for good in ("a_good.npy[0]", "a_good.npy[1]", "d_digit.png"):
        assert rows[good]["error"] is None and rows[good]["passed"], rows[good]
    assert "(1, 27, 28)" in rows["b_shape.npy[0]"]["error"]
    assert "c_corrupt.npy: not a readable numpy file" in rows["c_corrupt.npy"]["error"]
    assert "e_broken.jpg: not a readable image" in rows["e_broken.jpg"]["error"]
    assert summary.errors == 3 and summary.samples == 6


def test_a_killed_worker_loses_nothing(ray_session, mnist_path, data, serial, tmp_path):
    out = tmp_path / "rows.jsonl"
    killed = []

    def kill_one(rows, pool):
        """Kill the worker that ran the first batch: it has another batch queued by now."""
        if not killed:
            [actor] = [
                a for a in pool.actors if ray_session.get(a.pid.remote()) == rows[0]["worker"]
            ]
            killed.append(rows[0]["worker"])
            ray_session.kill(actor, no_restart=True)

    # The interpreter (same bits as Numba, ~0.1 s a sample) keeps the next batch running
    # when the kill lands.
    summary = evaluate(mnist_path, data, output=out, workers=2, batch_size=1, engine="interp",
                       on_batch=kill_one, progress=False)  # fmt: skip
    rows = _rows(out)
    assert summary.retried_batches >= 1  # the killed worker had a batch in flight
    assert sorted(row["id"] for row in rows) == sorted(row["id"] for row in serial)
    assert _results(rows) == _results(serial)
    assert sum(row["worker"] == killed[0] for row in rows) < SAMPLES // 2
    assert len({row["worker"] for row in rows}) >= 2


def test_cli(mnist_path, data, tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    assert mrvl_eval.main([str(mnist_path), str(data), "-o", str(out), "--workers", "0"]) == 0
    printed = capsys.readouterr().out
    assert "fp16 rule passed" in printed and f"wrote {SAMPLES} rows" in printed
    assert len(_rows(out)) == SAMPLES


@pytest.mark.parametrize(
    "argv, status, message",
    [
        (["{model}", "{tmp}/nothing.npy", "-o", "{tmp}/r.jsonl", "--workers", "0"], 1, "no such file or folder"),
        (["{model}", "{tmp}", "-o", "{tmp}/r.jsonl", "--workers", "-1"], 2, "--workers must be >= 0"),
        (["{model}", "{tmp}", "-o", "{tmp}/r.jsonl", "--rpc", "nohost"], 2, "want HOST:PORT"),
        (["{model}", "{tmp}", "-o", "{tmp}/r.jsonl", "--preprocess", "{tmp}/none.json"], 2, "preprocessing spec"),
    ],
)  # fmt: skip
def test_cli_errors_are_one_line(mnist_path, tmp_path, capsys, argv, status, message):
    argv = [a.format(model=mnist_path, tmp=tmp_path) for a in argv]
    assert mrvl_eval.main(argv) == status
    err = capsys.readouterr().err.strip()
    assert err.startswith("mrvl-eval: error:") and message in err and "\n" not in err
