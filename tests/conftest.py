"""Fixtures shared by the pytest suites (the bundled MNIST model and its partitioned form), and
how the suite spreads over pytest-xdist workers (`scripts/test.sh`: `--dist loadgroup`).

Scheduling: every test file is one unit of work (`xdist_group`), so that what a file builds
once (module fixtures, module-level caches) is built once, except for three files of
model-scale tests: the zoo and the light models are cut by model, each model one unit with all
of its tests (they share one build and run; the zoo's outputs are also the pinned hashes), and
the hazard tests of test_cycles.py are one unit each (each compiles its own model).
`UNIT_SECONDS` records the longest units as measured. With pytest 9.2, pytest-xdist 3.8
loses the units unless this file writes them into the node ids (`_name_group_in_node_id`).
"""

from __future__ import annotations

import gc
import os

import onnx
import pytest

from mrvl.models.mnist import make_mnist_model

# The compiler and the tests allocate millions of short-lived objects (xDSL IR), and the
# collector's default gen-0 threshold (700) makes it scan them several thousand times per
# model compile: a fifth of the compile's CPU time. A higher threshold collects the same
# garbage in fewer, larger passes. What is computed does not change.
gc.set_threshold(20_000, 20, 20)

# Every Ray node the tests start (embedded, or the two `ray start` nodes of the cluster test,
# which inherit the environment) takes 127.0.0.1 as its address, so that Ray's traffic stays
# on the loopback device (mrvl.distributed.evaluate.loopback_ray).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# Token authentication is off for every Ray the tests start. The two-node cluster test needs
# it off (its nodes and its driver would each need the same token), and Ray fixes the mode of
# a process at its first `ray.init`: a worker that ran an embedded Ray first (the evaluation
# or sweep tests) kept token mode, and its driver then refused the cluster's raylets
# ("InvalidAuthToken"), so the cluster's actors died at their start.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

UNIT_SECONDS = {
    "light:vgg19": 350,
    "light:densenet121": 250,
    "zoo:resnet50": 190,
    "light:zfnet512": 200,
    "tests/e2e/test_reductions_end_to_end.py": 185,
    "zoo:densenet121": 143,
    "tests/e2e/test_int8_zoo.py": 160,
    "light:bvlc_alexnet": 150,
    "tests/quantization/test_quantize.py": 140,
    "tests/sim/test_engines_models.py": 115,
    "light:inception_v2": 111,
    "tests/distributed/test_evaluate.py": 135,
    "light:resnet50": 130,
    "tests/conformance/test_node_conformance.py": 120,
    "cycles:resnet50-1": 108,
    "zoo:deeplabv3_mobilenet_v3_large": 104,
    "zoo:efficientnet_b0": 103,
    "zoo:resnet18": 90,
    "cycles:densenet121-1": 100,
    "zoo:regnet_y_400mf": 88,
    "zoo:regnet_x_400mf": 88,
    "tests/e2e/test_movement_end_to_end.py": 97,
    "zoo:mobilenet_v3_large": 86,
    "tests/distributed/test_sweep.py": 95,
    "tests/compiler/test_cascade.py": 93,
    "tests/tools/test_cli_output.py": 90,
    "tests/distributed/test_cluster.py": 89,
    "light:inception_v1": 83,
}
"""Test-seconds of the longest units of work, measured with `--junitxml` on a loaded machine
(2026-11-22, adjusted for the units changed since: the zoo models off the interpreter by
about their interpreter run; on 2026-11-27 Inception v1 and v2, RegNetY-400MF and
EfficientNet-B0 the same way, and test_engines_models.py by the ratio measured for it alone,
98 s to 197 s, its slow test of every conformance case now on the conformance unit's own
builds, which stays about as long): only their order matters, which is the order in which
the workers get them (`pytest_collection_modifyitems`). Units not listed come
after them, in pytest's order. Refresh from the `--durations` list `scripts/test.sh` prints.

Until 2026-11-27 every test was a unit of its own on the workers (pytest 9.2 had dropped the
units: `_name_group_in_node_id`), so these figures include the builds that the tests of one
unit made on both workers. The conformance unit was re-measured alone then, on one process
under a load of 12 on 2 cores: 643 test-seconds, 85 CPU-seconds, against 1560 and 305 for
light:vgg19 measured the same way (its 510 had counted, besides the split, the engines test
building again the cases whose conformance runs went to the other worker); 120 puts it where
those ratios to light:vgg19's 350 do (100 to 145)."""


def _unit(item: pytest.Item) -> str:
    path = item.path.relative_to(item.config.rootpath).as_posix()
    params = getattr(item, "callspec", None)
    params = params.params if params is not None else {}
    if path == "tests/zoo/test_zoo.py" and "name" in params:
        return f"zoo:{params['name']}"
    if path == "tests/models/test_light_models.py" and "light" in params:
        return f"light:{params['light']}"
    if (
        path == "tests/sim/test_cycles.py"
        and item.originalname == "test_compiled_models_have_no_hazard"
    ):
        return f"cycles:{params['name']}-{params['num_tiles']}"
    return path


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Give every test its unit of work before the other hooks run (pytest-xdist reads the
    marks in its own); then put the units of `UNIT_SECONDS` first, longest first, so that
    pytest-xdist (`--no-loadscope-reorder`, which hands units out in this order) does not leave
    a long unit for the end while the other worker idles. The sort is stable: within a unit,
    and among the units it does not list, the order stays pytest's (which keeps each module
    fixture's tests together)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_unit(item)))
    result = yield
    if getattr(config.option, "loadgroup", False):  # a worker of `--dist loadgroup`
        for item in items:
            _name_group_in_node_id(item)
    items[:] = sorted(items, key=lambda item: -UNIT_SECONDS.get(_group(item), 0))
    return result


def _name_group_in_node_id(item: pytest.Item) -> None:
    """End the test's node id in `@<its unit>`, which is how pytest-xdist's loadgroup
    scheduler learns a test's unit. pytest-xdist 3.8 writes that suffix into `item._nodeid`,
    which pytest 9.2 no longer reads (its node ids are structured, `item._id`: pytest-xdist
    issue 1386), so the suffix was lost and every test went out as a unit of its own: the
    tests of one model or file ran on both workers, each worker building what they share.
    The same suffix, written where pytest 9.2 reads it; nothing if it is already there."""
    suffix = f"@{_group(item)}"
    if item.nodeid.endswith(suffix) or not hasattr(item, "_id"):
        return
    item._id = type(item._id).parse(item.nodeid + suffix)


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return marker.args[0] if marker.args else marker.kwargs.get("name", "")


@pytest.fixture(scope="session")
def mnist_model() -> onnx.ModelProto:
    return make_mnist_model(seed=0)


@pytest.fixture(scope="session")
def mnist_partitioned(mnist_model):
    import mrvl

    return mrvl.partition_for_mrvl(mrvl.from_onnx(mnist_model), mcpu="cn10ka", num_tiles=8)
