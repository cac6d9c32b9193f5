"""The real CNNs of ONNX's light model tests, compiled by mrvl and run hybrid.

Each model (`mrvl.models.light.load_light_model`: the ONNX graph with seeded random weights)
is imported, partitioned for 8 tiles, built, and run in the Relax VM (regions on the
simulator, the rest on the CPU) on a seeded input; the output must meet the fp16 acceptance
rule (DESIGN §9) against onnxruntime on the same model and input, within max(3 %, the error
of an fp16-storage emulation of the same model in onnxruntime): deep networks can miss 3 %
from fp16 storage alone, and both errors are reported. The fraction of the
model's MACs that the partition puts on the MLIP must reach 99 % where issue 3 sets that
goal. SqueezeNet and ShuffleNet take a few seconds each and run by default; the others are
`slow` (`.ci/run` runs them). Each test records its timings as user properties (see
`--junitxml`) and prints them (`-s`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tvm
from tvm import relax

import mrvl
from mrvl.fp16_emulation import fp16_emulation_outputs, judge
from mrvl.models.light import (
    LIGHT_MODELS,
    light_model_path,
    load_light_model,
    model_macs,
    node_macs,
    random_inputs,
)
from mrvl.placement import CPU, node_targets
from mrvl.sim import simulator_wall_time

NUM_TILES = 8
SEED = 0
MAC_GOAL = 0.99
MAC_GOAL_MODELS = frozenset({"resnet50", "vgg19", "bvlc_alexnet", "zfnet512", "squeezenet"})
FAST_MODELS = frozenset({"squeezenet", "shufflenet"})  # < 20 s each, whole flow


def _params(names=LIGHT_MODELS):
    return [
        pytest.param(n, id=n, marks=() if n in FAST_MODELS else (pytest.mark.slow,)) for n in names
    ]


@dataclass
class Partitioned:
    name: str
    model: onnx.ModelProto
    mod: tvm.IRModule
    seconds: dict[str, float] = field(default_factory=dict)


_partitioned: dict[str, Partitioned] = {}


def partitioned(name: str) -> Partitioned:
    """The model, loaded, imported and partitioned once per session (both tests use it)."""
    if name not in _partitioned:
        seconds = {}
        start = time.perf_counter()
        model = load_light_model(name, seed=SEED)
        seconds["load"] = time.perf_counter() - start
        start = time.perf_counter()
        mod = mrvl.from_onnx(model)
        seconds["from_onnx"] = time.perf_counter() - start
        start = time.perf_counter()
        mod = mrvl.partition_for_mrvl(mod, num_tiles=NUM_TILES)
        seconds["partition"] = time.perf_counter() - start
        _partitioned[name] = Partitioned(name, model, mod, seconds)
    return _partitioned[name]


def offloaded_mac_fraction(p: Partitioned) -> float:
    """The report's offloaded MAC fraction, checked against one computed independently: the
    MACs of ONNX shape inference for the nodes placed in a region."""
    fraction = mrvl.partition_report(p.mod, p.model).offloaded_mac_fraction
    macs = node_macs(p.model)
    targets = node_targets(p.mod)
    on_mlip = sum(m for node, m in macs.items() if targets.get(node, CPU) != CPU)
    assert fraction == pytest.approx(on_mlip / sum(macs.values()), abs=1e-9)
    return fraction


@pytest.mark.parametrize("name", _params())
def test_offloaded_mac_fraction(name, record_property):
    p = partitioned(name)
    fraction = offloaded_mac_fraction(p)
    record_property("offloaded_mac_fraction", fraction)
    print(f"\n{name}: {100 * fraction:.2f} % of MACs on the MLIP")
    if name in MAC_GOAL_MODELS:
        assert fraction >= MAC_GOAL, (
            f"{name}: {100 * fraction:.2f} % of MACs offloaded, goal {100 * MAC_GOAL:.0f} %"
        )


@pytest.mark.parametrize("name", _params())
def test_hybrid_run_matches_onnxruntime(name, record_property):
    p = partitioned(name)
    seconds = dict(p.seconds)
    start = time.perf_counter()
    lib = mrvl.build(p.mod, num_tiles=NUM_TILES)
    seconds["build"] = time.perf_counter() - start

    feeds = random_inputs(p.model, seed=SEED)
    vm = relax.VirtualMachine(lib, tvm.cpu())
    with simulator_wall_time() as sim:
        start = time.perf_counter()
        result = vm["main"](*[tvm.runtime.tensor(x) for x in feeds.values()])
        seconds["vm_run"] = time.perf_counter() - start
    seconds["simulator"] = sim.seconds
    actual = result.numpy() if isinstance(result, tvm.runtime.Tensor) else result[0].numpy()

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        p.model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    start = time.perf_counter()
    reference = session.run(None, feeds)[0]
    seconds["onnxruntime"] = time.perf_counter() - start

    emulated = fp16_emulation_outputs(p.model, feeds)[0]
    verdict = judge([actual], [reference], [emulated])
    for key, value in seconds.items():
        record_property(f"seconds_{key}", round(value, 3))
    record_property("regions", len(lib.mrvl_regions))
    record_property("max_relative_error", verdict.error)
    record_property("fp16_emulation_error", verdict.emulation_error)
    timing = ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items())
    print(f"\n{name}: {len(lib.mrvl_regions)} regions, {sim.calls} simulator runs; {timing}")
    print(f"{name}: {verdict}")
    assert sim.calls > 0, f"{name}: nothing ran on the simulator"
    assert verdict.passed, f"{name} vs onnxruntime: {verdict}"


def test_light_models_have_sane_weights():
    """The rewrite keeps the graph, drops every ConstantOfShape, and the output is not flat."""
    original = onnx.load(light_model_path("squeezenet"))
    model = load_light_model("squeezenet", seed=SEED)
    kept = [n.op_type for n in original.graph.node if n.op_type != "ConstantOfShape"]
    assert [n.op_type for n in model.graph.node] == kept
    assert len(model.graph.input) == 1  # the data; every weight is an initializer
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    out = session.run(None, random_inputs(model, seed=SEED))[0].ravel()
    assert np.all(np.isfinite(out)) and out.std() > 1e-4  # the 0.02 weights gave a flat output
    again = load_light_model("squeezenet", seed=SEED)
    assert all(
        a.raw_data == b.raw_data for a, b in zip(model.graph.initializer, again.graph.initializer)
    )


def test_model_macs():
    # ResNet-50 at 224x224 is about 4.1 GMAC (Conv 4.09 G + the 2048x1000 FC).
    resnet50 = load_light_model("resnet50", calibrate=False)
    assert model_macs(resnet50) == pytest.approx(4.089e9, rel=1e-3)
