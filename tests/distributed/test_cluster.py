"""A two-node Ray cluster on this machine (`ray start --head`, then a second `ray start
--address` with its own resources, given 127.0.0.1) runs the same evaluation and the same
sweep as a serial run, bit for bit. Both nodes are stopped at the end, by their own process
groups. The nodes and the driver take 127.0.0.2 as their address (`NODE_IP`), so the traffic
stays on the loopback device; the test checks that every node says so. Token authentication is off for this throw-away cluster: the nodes and the driver would
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
NODE_IP = "127.0.0.2"
"""A loopback address Ray keeps as it is (it replaces 127.0.0.1 and localhost by this
machine's network address when clusters are enabled, which two nodes need)."""


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
    address = f"{NODE_IP}:{port}"
    env = dict(os.environ, MRVL_SIM_THREADS="1", RAY_USAGE_STATS_ENABLED="0",
               RAY_AUTH_MODE="disabled", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1")  # fmt: skip
    saved_auth = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # the driver's side
    common = [f"--node-ip-address={NODE_IP}", "--num-cpus=1", "--block", "--disable-usage-stats"]
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
        ray.init(address=address, log_to_driver=False, _node_ip_address=NODE_IP)
        deadline = time.monotonic() + 90
        while sum(n["Alive"] for n in ray.nodes()) < 2:
            assert time.monotonic() < deadline, (logs / "second.log").read_text()[-2000:]
            time.sleep(1)
        assert ray.cluster_resources().get("second_node") == 1
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {NODE_IP}
        yield address
    finally:
        ray.shutdown()
        if saved_auth is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved_auth
        # The second node first, then the head, each by its `ray start` process alone: a
        # node drains through the head's GCS before it stops its own processes, and a signal
        # to a whole process group (the GCS included) left each drain waiting 30 s for it.
        for node in reversed(nodes):
            try:
                node.send_signal(signal.SIGTERM)
                node.wait(timeout=45)
            except subprocess.TimeoutExpired:
                node.kill()
                node.wait()
            try:
                os.killpg(node.pid, signal.SIGKILL)  # whatever of the node is still running
            except ProcessLookupError:
                pass


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
