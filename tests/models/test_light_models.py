"""The real CNNs of ONNX's light model tests, compiled by mrvl and run hybrid.

Each model (`mrvl.models.light.load_light_model`: the ONNX graph with seeded random weights)
is imported, partitioned for 8 tiles, built, and run in the Relax VM (regions on the
simulator, the rest on the CPU) on a seeded input; the output must meet the fp16 acceptance
rule (DESIGN §9) against onnxruntime on the same model and input, within max(3 %, the error
of an fp16-storage emulation of the same model in onnxruntime): deep networks can miss 3 %
from fp16 storage alone, and both errors are reported. The fraction of the
model's MACs that the partition puts on the MLIP must reach 99 % where issue 3 sets that
goal. On the models of `ENGINE_IDENTITY_MODELS` the same build also runs on the reference
interpreter, which must give the same output bytes as the numba engine (see
tests/sim/test_engines_models.py for the rest of the engine-identity corpus).

Every test of one model shares one `LightModel` (a module-scoped fixture, so pytest runs a
model's tests together and frees it before the next): loaded, imported and partitioned once,
built once, run once per engine. SqueezeNet and ShuffleNet take a few seconds each and run by
default; the others are `slow` (`.ci/run` runs them). Each test records its timings as user
properties (see `--junitxml`) and prints them (`-s`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tvm
from helpers import assert_features_pinned, assert_same_bytes, lib_features, pinned_features
from tvm import relax

import mrvl
from mrvl.fp16_emulation import judge_model
from mrvl.models.light import (
    LIGHT_MODELS,
    light_model_path,
    load_light_model,
    model_macs,
    node_macs,
    random_inputs,
)
from mrvl.placement import CPU, node_targets
from mrvl.sim import prepare, simulator_wall_time, use_engine
from mrvl.sim.cycles import model_cycles

NUM_TILES = 8
SEED = 0
MAC_GOAL = 0.99
MAC_GOAL_MODELS = frozenset({"resnet50", "vgg19", "bvlc_alexnet", "zfnet512", "squeezenet"})
FAST_MODELS = frozenset({"squeezenet", "shufflenet"})  # < 20 s each, whole flow
ENGINE_IDENTITY_MODELS = frozenset({"squeezenet", "shufflenet"})
"""Models whose build also runs on the interpreter (engine identity, no tolerance): each runs
some engine path (`helpers.instruction_features`) that neither the small models of
`helpers.ENGINE_CORPUS` nor another of these runs. The others run only paths these and the
corpus run, at other sizes (`test_engine_identity_covers_the_model`; `helpers.blocks_net`
holds the paths DenseNet-121, ResNet-50 and Inception v1 and v2 used to be the only ones to
run), and their interpreter runs cost minutes (on 2 cores: VGG-19 247 s, ZFNet-512 75 s;
DenseNet-121, ResNet-50 and AlexNet up to a minute each)."""


def _params(names=LIGHT_MODELS):
    return [
        pytest.param(n, id=n, marks=() if n in FAST_MODELS else (pytest.mark.slow,))
        for n in LIGHT_MODELS
        if n in names
    ]


@dataclass
class Run:
    outputs: list[np.ndarray]
    calls: int
    seconds: float


@dataclass
class LightModel:
    """One model, loaded, imported and partitioned on creation; built and run on demand, once."""

    name: str
    model: onnx.ModelProto
    mod: tvm.IRModule
    seconds: dict[str, float] = field(default_factory=dict)
    _lib: relax.VMExecutable | None = None
    _runs: dict[tuple[str, bool], Run] = field(default_factory=dict)

    @classmethod
    def load(cls, name: str) -> LightModel:
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
        return cls(name, model, mod, seconds)

    @property
    def lib(self) -> relax.VMExecutable:
        if self._lib is None:
            start = time.perf_counter()
            self._lib = mrvl.build(self.mod, num_tiles=NUM_TILES)
            self.seconds["build"] = time.perf_counter() - start
        return self._lib

    @property
    def feeds(self) -> dict[str, np.ndarray]:
        return random_inputs(self.model, seed=SEED)

    def run(self, engine: str, *, again: bool = False) -> Run:
        """The VM's outputs with the regions on `engine`, on the seeded input; `again`: a
        second run of the same build (the Numba engine's warm run: weight cache packed, the
        DMAs only constant weights read skipped)."""
        key = (engine, again)
        if again:
            self.run(engine)
        if key not in self._runs:
            vm = relax.VirtualMachine(self.lib, tvm.cpu())
            args = [tvm.runtime.tensor(x) for x in self.feeds.values()]
            with use_engine(engine), simulator_wall_time() as sim:
                start = time.perf_counter()
                result = vm["main"](*args)
                seconds = time.perf_counter() - start
            assert set(sim.by_engine) <= {engine}
            self._runs[key] = Run(_flatten(result), sim.calls, seconds)
            label = f"{engine}_again" if again else engine
            self.seconds[f"vm_run_{label}"] = seconds
            self.seconds[f"simulator_{label}"] = sim.seconds
        return self._runs[key]


def _flatten(value) -> list[np.ndarray]:
    if isinstance(value, tvm.runtime.Tensor):
        return [value.numpy()]
    return [array for item in value for array in _flatten(item)]


@pytest.fixture(scope="module", params=_params())
def light(request) -> LightModel:
    return LightModel.load(request.param)


def offloaded_mac_fraction(p: LightModel) -> float:
    """The report's offloaded MAC fraction, checked against one computed independently: the
    MACs of ONNX shape inference for the nodes placed in a region."""
    fraction = mrvl.partition_report(p.mod, p.model).offloaded_mac_fraction
    macs = node_macs(p.model)
    targets = node_targets(p.mod)
    on_mlip = sum(m for node, m in macs.items() if targets.get(node, CPU) != CPU)
    assert fraction == pytest.approx(on_mlip / sum(macs.values()), abs=1e-9)
    return fraction


def test_offloaded_mac_fraction(light, record_property):
    name = light.name
    fraction = offloaded_mac_fraction(light)
    record_property("offloaded_mac_fraction", fraction)
    print(f"\n{name}: {100 * fraction:.2f} % of MACs on the MLIP")
    if name in MAC_GOAL_MODELS:
        assert fraction >= MAC_GOAL, (
            f"{name}: {100 * fraction:.2f} % of MACs offloaded, goal {100 * MAC_GOAL:.0f} %"
        )


def test_hybrid_run_matches_onnxruntime(light, record_property):
    name, feeds = light.name, light.feeds
    run = light.run("numba")
    actual = run.outputs[0]

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        light.model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    start = time.perf_counter()
    reference = session.run(None, feeds)[0]
    seconds = dict(light.seconds, onnxruntime=time.perf_counter() - start)

    def run_numba(inputs):  # the re-drawn inputs of the rule's second look
        vm = relax.VirtualMachine(light.lib, tvm.cpu())
        with use_engine("numba"):
            return _flatten(vm["main"](*[tvm.runtime.tensor(x) for x in inputs.values()]))

    verdict = judge_model([actual], run_numba, light.model, feeds, [reference])
    regions = len(light.lib.mrvl_regions)
    for key, value in seconds.items():
        record_property(f"seconds_{key}", round(value, 3))
    record_property("regions", regions)
    record_property("max_relative_error", verdict.error)
    record_property("fp16_emulation_error", verdict.emulation_error)
    timing = ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items())
    print(f"\n{name}: {regions} regions, {run.calls} simulator runs; {timing}")
    print(f"{name}: {verdict}")
    assert run.calls > 0, f"{name}: nothing ran on the simulator"
    assert verdict.passed, f"{name} vs onnxruntime: {verdict}"


def test_build_has_no_hazard(light):
    """Every region of the 8-tile build replays on the cycle model, whose exact check raises
    `HazardError` at any pair of instructions that touch the same bytes with nothing ordering
    them (tests/sim/test_cycles.py checks the 1-tile builds)."""
    for region in light.lib.mrvl_regions:
        assert model_cycles(prepare(region.binary)).total_cycles > 0, region.symbol


@pytest.mark.parametrize("light", _params(ENGINE_IDENTITY_MODELS), indirect=True)
def test_engines_agree(light):
    """The interpreter and the numba engine give the same output bytes on the same build, the
    engine's second (warm) run too; the build runs exactly the engine paths its entry of
    `helpers.FEATURE_FIXTURE` pins, which the models left off the interpreter are checked
    against."""
    assert_features_pinned(f"light:{light.name}", lib_features(light.lib))
    interp, numba = light.run("interp"), light.run("numba")
    assert interp.calls == numba.calls > 0, "nothing ran on the simulator"
    assert_same_bytes(interp.outputs, numba.outputs)
    assert_same_bytes(interp.outputs, light.run("numba", again=True).outputs)
    print(f"\n{light.name}: interp {interp.seconds:.2f} s, numba {numba.seconds:.2f} s")


def test_feature_pins_are_the_identity_builds():
    """`helpers.FEATURE_FIXTURE` pins the corpus and exactly the light models that run on
    both engines (each pin checked by the test that runs it; tests/zoo checks its `zoo:`
    entries)."""
    expected = {"corpus", *(f"light:{name}" for name in ENGINE_IDENTITY_MODELS)}
    assert {key for key in pinned_features() if not key.startswith("zoo:")} == expected


@pytest.mark.parametrize(
    "light", _params(set(LIGHT_MODELS) - ENGINE_IDENTITY_MODELS), indirect=True
)
def test_engine_identity_covers_the_model(light):
    """The models left off the interpreter use no engine code path (`helpers.
    instruction_features`) that the engine-identity builds do not: the small models of
    tests/sim/test_engines_models.py and the models of ENGINE_IDENTITY_MODELS, whose paths
    `helpers.FEATURE_FIXTURE` pins. They run only other sizes of the same paths."""
    covered = set().union(*pinned_features().values())
    missing = lib_features(light.lib) - covered
    assert not missing, (
        f"{light.name} runs engine paths no engine-identity build runs: {sorted(missing)}; "
        "add a small model that has them to helpers.ENGINE_CORPUS (or this model to "
        "ENGINE_IDENTITY_MODELS) and re-record scripts/engine_features.py"
    )


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
