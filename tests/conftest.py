"""Fixtures shared by the pytest suites (the bundled MNIST model and its partitioned form), and
how the suite spreads over pytest-xdist workers (`scripts/test.sh`: `--dist loadgroup`).

Scheduling: every test file is one unit of work (`xdist_group`), so that what a file builds
once (module fixtures, module-level caches) is built once, except for three files of
model-scale tests: the zoo and the light models are cut by model, each model one unit with all
of its tests (they share one build and run; the zoo's outputs are also the pinned hashes), and
the hazard tests of test_cycles.py are one unit each (each compiles its own model).
`UNIT_SECONDS` records the longest units as measured.
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

UNIT_SECONDS = {
    "tests/models/test_light_models.py": 430,
    "tests/conformance/test_node_conformance.py": 70,
    "zoo:deeplabv3_mobilenet_v3_large": 40,
    "zoo:resnet50": 35,
    "zoo:densenet121": 35,
    "zoo:mobilenet_v2": 30,
    "tests/sim/test_engines_models.py": 25,
}
"""Seconds of the longest units on one of two loaded cores (2026-11-23, `--durations`): the
figures to beat when the suite is rebalanced."""


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
    items[:] = sorted(items, key=lambda item: -UNIT_SECONDS.get(_group(item), 0))
    return result


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
