"""A two-node Ray cluster on this machine (`ray start --head`, then a second `ray start
--address` with its own resources, given 127.0.0.1) runs the same evaluation and the same
sweep as a serial run, bit for bit. Both nodes are stopped at the end, by their own process
groups. Ray itself advertises this machine's own address instead of 127.0.0.1 (it resolves
loopback on purpose), so the traffic stays on this machine but not on the loopback device.
Token authentication is off for this throw-away cluster: the nodes and the driver would
otherwise each need the same token."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mrvl.distributed.evaluate import evaluate
from mrvl.distributed.sweep import sweep

pytestmark = pytest.mark.slow
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(address, nodes): `ray start --block` keeps each node's processes under one command,
    whose process group is ended at the end."""
    ray = pytest.importorskip("ray")
    ray.shutdown()
    port = _free_port()
    address = f"127.0.0.1:{port}"
    env = dict(os.environ, MRVL_SIM_THREADS="1", RAY_USAGE_STATS_ENABLED="0",
               RAY_AUTH_MODE="disabled")  # fmt: skip
    saved_auth = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # the driver's side
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--block", "--disable-usage-stats"]
    logs = tmp_path_factory.mktemp("ray-logs")
    nodes = []
    try:
        for name, args in (
            ("head", ["--head", f"--port={port}", "--include-dashboard=false"]),
            ("second", [f"--address={address}", '--resources={"second_node": 1}']),
        ):
            with open(logs / f"{name}.log", "w") as log:
                nodes.append(subprocess.Popen([RAY, "start", *args, *common], stdout=log,
                                              stderr=subprocess.STDOUT, env=env,
                                              start_new_session=True))  # fmt: skip
            if name == "head":
                time.sleep(5)
        ray.init(address=address, log_to_driver=False)
        deadline = time.monotonic() + 90
        while sum(n["Alive"] for n in ray.nodes()) < 2:
            assert time.monotonic() < deadline, (logs / "second.log").read_text()[-2000:]
            time.sleep(1)
        assert ray.cluster_resources().get("second_node") == 1
        yield address
    finally:
        ray.shutdown()
        if saved_auth is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved_auth
        for node in nodes:
            try:
                os.killpg(node.pid, signal.SIGTERM)  # a node drains, then stops its processes
            except ProcessLookupError:
                pass
        for node in nodes:
            try:
                node.wait(timeout=45)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()


def _without_worker(rows):
    return sorted(
        ({k: v for k, v in r.items() if k != "worker"} for r in rows), key=lambda r: r["id"]
    )


def test_evaluation_on_two_nodes(cluster, mnist_path, tmp_path):
    import ray

    data = tmp_path / "digits.npy"
    np.save(data, np.random.default_rng(3).standard_normal((8, 1, 28, 28)).astype(np.float32))
    out = tmp_path / "rows.jsonl"
    summary = evaluate(mnist_path, data, output=out, workers=2, batch_size=2, progress=False)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary.samples == 8 and summary.errors == 0
    assert len({row["worker"] for row in rows}) == 2  # one worker per node (one CPU each)
    assert ray.is_initialized()  # evaluate used the cluster it found, and left it running
    serial = evaluate(mnist_path, data, workers=0, progress=False)
    assert _without_worker(rows) == _without_worker(serial.rows)


def test_sweep_on_two_nodes(cluster, mnist_path, tmp_path):
    spec = {
        "models": [str(mnist_path)],
        "grid": {"max_tiles": [1, 2], "ddr_bytes_per_cycle": [32, 64]},
    }
    on_cluster = sweep(spec, workers=2, cache_dir=tmp_path / "a", progress=False)
    serial = sweep(spec, workers=0, cache_dir=tmp_path / "b", progress=False)
    assert on_cluster.cached == 0 and on_cluster.rows == serial.rows
