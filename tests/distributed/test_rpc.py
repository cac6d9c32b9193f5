"""`mrvl-rpc-server` on 127.0.0.1 (started by the test) and `mrvl.evaluate(rpc=...)`: the
library uploaded and run on the server gives the same bits as a local run; the server says
where the upload went; an unreachable server is one clear line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from mrvl.distributed.evaluate import evaluate
from mrvl.distributed.rpc import RpcSession
from mrvl.tools import mrvl_eval


@pytest.fixture(scope="module")
def server():
    env = dict(os.environ, MRVL_SIM_THREADS="1")
    command = [sys.executable, "-m", "mrvl.tools.mrvl_rpc_server",
               "--host", "127.0.0.1", "--port", "9540", "--port-end", "9640"]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("mrvl-rpc-server: listening on 127.0.0.1:"), line
        yield "127.0.0.1", int(line.rsplit(":", 1)[1])
    finally:  # the server and the session it forked, by their process group
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "digits.npy"
    np.save(path, np.random.default_rng(2).standard_normal((4, 1, 28, 28)).astype(np.float32))
    return path


def test_remote_run_gives_the_local_bits(server, mnist_path, data, tmp_path):
    local = evaluate(mnist_path, data, workers=0, progress=False)
    out = tmp_path / "rows.jsonl"
    remote = evaluate(mnist_path, data, output=out, rpc=RpcSession(*server), progress=False)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert remote.samples == 4 and remote.errors == 0
    for mine, theirs in zip(local.rows, rows):
        assert {k: v for k, v in mine.items() if k != "worker"} == {
            k: v for k, v in theirs.items() if k != "worker"
        }
    assert all(row["worker"].endswith(".so") for row in rows)  # where the library went


def test_workpath_names_the_upload(server, mnist_path):
    """While the session lasts, the path `tvm.rpc.server.workpath` gave holds the library (the
    server removes its session folder when the session ends)."""
    from mrvl.distributed.evaluate import compile_library
    from mrvl.distributed.rpc import RpcRunner
    from mrvl.target import get_target

    library = compile_library(mnist_path, get_target("cn10ka"), None)
    runner = RpcRunner(RpcSession(*server).connect(), library, mnist_path.read_bytes())
    try:
        with open(runner.remote_path, "rb") as uploaded:  # the server is on this machine
            assert uploaded.read() == library
    finally:
        runner.close()


def test_unreachable_server_is_one_line(mnist_path, data, tmp_path, capsys):
    argv = [str(mnist_path), str(data), "-o", str(tmp_path / "r.jsonl"), "--rpc", "127.0.0.1:1"]
    assert mrvl_eval.main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("mrvl-eval: error: cannot reach the RPC server at 127.0.0.1:1")
    assert "\n" not in err


@pytest.fixture(scope="module")
def tracked_server():
    """TVM's RPC tracker on 127.0.0.1 and an mrvl server that offers itself to it as `mlip`."""
    import time

    from tvm import rpc

    env = dict(os.environ, MRVL_SIM_THREADS="1")
    command = [sys.executable, "-m", "tvm.exec.rpc_tracker",
               "--host", "127.0.0.1", "--port", "9650", "--port-end", "9700"]  # fmt: skip
    tracker = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    processes = [tracker]
    try:
        port = None
        for line in tracker.stderr:  # "bind to 127.0.0.1:PORT"
            if "bind to" in line:
                port = int(line.rsplit(":", 1)[1])
                break
        assert port is not None, "the tracker did not start"
        command = [sys.executable, "-m", "mrvl.tools.mrvl_rpc_server", "--host", "127.0.0.1",
                   "--port", "9710", "--port-end", "9760", "--tracker", f"127.0.0.1:{port}",
                   "--key", "mlip"]  # fmt: skip
        server = subprocess.Popen(
            command, stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
        processes.append(server)
        assert server.stdout.readline().startswith("mrvl-rpc-server: listening on")
        deadline = time.monotonic() + 60
        while "mlip" not in rpc.connect_tracker("127.0.0.1", port).text_summary():
            assert time.monotonic() < deadline, "the server never registered with the tracker"
            time.sleep(0.2)
        yield "127.0.0.1", port
    finally:
        for process in reversed(processes):
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


def test_tracker_finds_the_board(tracked_server, mnist_path, data, tmp_path):
    """`mrvl-eval --rpc-tracker HOST:PORT --rpc-key mlip`: the tracker hands out the mrvl
    server, which runs the samples with the local bits."""
    host, port = tracked_server
    local = evaluate(mnist_path, data, workers=0, progress=False)
    out = tmp_path / "rows.jsonl"
    argv = [str(mnist_path), str(data), "-o", str(out), "--rpc-tracker", f"{host}:{port}",
            "--rpc-key", "mlip"]  # fmt: skip
    assert mrvl_eval.main(argv) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["output_sha256"] for r in rows] == [r["output_sha256"] for r in local.rows]
    assert all(row["worker"].endswith(".so") for row in rows)
