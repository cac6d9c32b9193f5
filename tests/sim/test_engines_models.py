"""The two engines give the same bytes on whole compiled models, no tolerance: the e2e nets,
the ONNX node conformance cases and the light models, each run hybrid in the Relax VM once per
engine on the same inputs. Only the regions run on the simulator, and the CPU part is
deterministic, so any difference comes from the engines.

By default: every e2e net, a few conformance cases (`DEFAULT_CASES`), SqueezeNet and
ShuffleNet; the other conformance cases and the large models are `slow`. (All 52 offloaded
conformance cases agreed when this test was written.)
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import tvm
from sim_builders import assert_same_bytes
from tvm import relax

import mrvl
from mrvl.sim import simulator_wall_time, use_engine

ROOT = Path(__file__).resolve().parents[2]
NUM_TILES = 8


def _load(name: str, path: Path):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _flatten(value) -> list[np.ndarray]:
    if isinstance(value, tvm.runtime.Tensor):
        return [value.numpy()]
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        return [array for item in value for array in _flatten(item)]
    return [np.asarray(value)]


def run_on_both_engines(lib, inputs) -> int:
    """Run the VM once per engine on `inputs`, require the same output bytes; returns the
    number of simulator runs per engine."""
    vm = relax.VirtualMachine(lib, tvm.cpu())
    args = [tvm.runtime.tensor(np.asarray(x)) for x in inputs]
    outputs, calls = {}, {}
    for engine in ("interp", "numba"):
        with use_engine(engine), simulator_wall_time() as spent:
            outputs[engine] = _flatten(vm["main"](*args))
        calls[engine] = spent.calls
        assert set(spent.by_engine) == {engine}
    assert calls["interp"] == calls["numba"] > 0, "nothing ran on the simulator"
    assert_same_bytes(outputs["interp"], outputs["numba"])
    return calls["numba"]


# ------------------------------------------------------------------------------- e2e nets

e2e = _load("mrvl_e2e_nets", ROOT / "tests" / "e2e" / "test_layers_end_to_end.py")


@pytest.mark.parametrize("name", sorted(e2e.NETS))
@pytest.mark.parametrize("num_tiles", [1, 8])
def test_e2e_net_engines_agree(name, num_tiles):
    model = e2e.NETS[name]()
    lib = mrvl.build(mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=num_tiles))
    rng = np.random.default_rng(1)
    inputs = [
        rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in model.graph.input
    ]
    run_on_both_engines(lib, inputs)


# ---------------------------------------------------------------------- conformance cases

conformance = _load("mrvl_conformance_harness", ROOT / "scripts" / "conformance.py")
CASES = conformance.node_cases()
DEFAULT_CASES = frozenset(
    {
        "test_conv_with_strides_and_asymmetric_padding+const",
        "test_maxpool_2d_ceil",
        "test_averagepool_2d_pads_count_include_pad",
        "test_globalaveragepool",
        "test_gemm_all_attributes+const",
        "test_batchnorm_example+const",
        "test_concat_2d_axis_1",
    }
)
"""Offloaded cases of several kinds that run by default; the rest are `slow`."""


def _case_param(case):
    marks = () if case.id in DEFAULT_CASES else (pytest.mark.slow,)
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_case_param(c) for c in CASES])
def test_conformance_case_engines_agree(case):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = mrvl.partition_for_mrvl(mrvl.from_onnx(case.model), num_tiles=NUM_TILES)
        lib = mrvl.build(mod)
    except mrvl.MrvlError as err:  # the conformance suite reports these; nothing to compare
        pytest.skip(f"does not compile: {err}")
    if not lib.mrvl_regions:
        pytest.skip("runs on the CPU only")
    run_on_both_engines(lib, case.inputs)


# ----------------------------------------------------------------------------- light models

FAST_MODELS = frozenset({"squeezenet", "shufflenet"})


def _model_params():
    from mrvl.models.light import LIGHT_MODELS

    return [
        pytest.param(n, id=n, marks=() if n in FAST_MODELS else (pytest.mark.slow,))
        for n in LIGHT_MODELS
    ]


@pytest.mark.parametrize("name", _model_params())
def test_light_model_engines_agree(name):
    from mrvl.models.light import load_light_model, random_inputs

    model = load_light_model(name, seed=0)
    lib = mrvl.build(mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=NUM_TILES))
    run_on_both_engines(lib, list(random_inputs(model, seed=0).values()))


def test_mnist_engines_agree():
    from mrvl.models.mnist import make_mnist_model

    model = make_mnist_model(seed=0)
    lib = mrvl.build(mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=NUM_TILES))
    x = np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32)
    run_on_both_engines(lib, [x])
