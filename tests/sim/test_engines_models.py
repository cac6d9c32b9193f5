"""The two engines give the same bytes on whole compiled models, no tolerance: the small
models of `helpers.ENGINE_CORPUS` (the e2e nets, a net of the engine paths the large light
models add, and MNIST), and the ONNX node conformance cases that put something in an MLIP
region, each run hybrid in the Relax VM once per engine on the same inputs. Only the regions
run on the simulator, and the CPU part is deterministic, so any difference comes from the
engines. The light models are compared on their one shared build in
tests/models/test_light_models.py.

By default: the small models and a few conformance cases (`DEFAULT_CASES`); the other
conformance cases run as one `slow` test, which compares every case that compiles to at least
one region (CPU-only cases have nothing to compare, so they are counted, not run) and
requires at least `MIN_COMPARED_CASES` of them.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import tvm
from helpers import (
    ENGINE_CORPUS,
    assert_features_pinned,
    assert_same_bytes,
    corpus_build,
    corpus_features,
    corpus_inputs,
    load_module,
)
from tvm import relax

import mrvl
from mrvl.placement import is_region
from mrvl.sim import simulator_wall_time, use_engine

ROOT = Path(__file__).resolve().parents[2]
NUM_TILES = 8


def _flatten(value) -> list[np.ndarray]:
    if isinstance(value, tvm.runtime.Tensor):
        return [value.numpy()]
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        return [array for item in value for array in _flatten(item)]
    return [np.asarray(value)]


def run_on_both_engines(lib, inputs) -> int:
    """Run the VM on `inputs` on the interpreter, then twice on the Numba engine (the second
    run is warm: its weight cache packed, the DMAs only constant weights read skipped),
    require the same output bytes; returns the number of simulator runs per engine run."""
    vm = relax.VirtualMachine(lib, tvm.cpu())
    args = [tvm.runtime.tensor(np.asarray(x)) for x in inputs]
    outputs, calls = [], []
    for engine in ("interp", "numba", "numba"):
        with use_engine(engine), simulator_wall_time() as spent:
            outputs.append(_flatten(vm["main"](*args)))
        calls.append(spent.calls)
        assert set(spent.by_engine) == {engine}
    assert calls[0] == calls[1] == calls[2] > 0, "nothing ran on the simulator"
    assert_same_bytes(outputs[0], outputs[1])
    assert_same_bytes(outputs[0], outputs[2])
    return calls[1]


# --------------------------------------------------------------------------- small models


@pytest.mark.parametrize(
    "name,num_tiles", ENGINE_CORPUS, ids=[f"{n}-{t}" for n, t in ENGINE_CORPUS]
)
def test_small_model_engines_agree(name, num_tiles):
    run_on_both_engines(corpus_build(name, num_tiles), corpus_inputs(name))


def test_corpus_features_are_pinned():
    """The corpus runs exactly the engine paths `helpers.FEATURE_FIXTURE` pins for it, which
    the light models left off the interpreter are checked against."""
    assert_features_pinned("corpus", corpus_features())


# ---------------------------------------------------------------------- conformance cases

conformance = load_module("mrvl_conformance_harness", ROOT / "scripts" / "conformance.py")
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
"""Offloaded cases of several kinds that run by default, one test each; the rest in one `slow`
test."""


MIN_COMPARED_CASES = 110
"""Floor on the conformance cases with a region (124 with onnx 1.23 when this was written):
guards against the selection silently becoming empty."""


def _partitioned(case):
    """The case imported and partitioned, or None if mrvl rejects it (the conformance suite
    reports those: tests/conformance)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return mrvl.partition_for_mrvl(mrvl.from_onnx(case.model), num_tiles=NUM_TILES)
    except mrvl.MrvlError:
        return None


@pytest.mark.parametrize("case", [c for c in CASES if c.id in DEFAULT_CASES], ids=lambda c: c.id)
def test_conformance_case_engines_agree(case):
    mod = _partitioned(case)
    assert mod is not None, f"{case.id} no longer compiles"
    lib = mrvl.build(mod)
    assert lib.mrvl_regions, f"{case.id} no longer has an MLIP region"
    run_on_both_engines(lib, case.inputs)


def test_default_conformance_cases_exist():
    assert {c.id for c in CASES} >= DEFAULT_CASES


@pytest.mark.slow
def test_every_offloaded_conformance_case_engines_agree(record_property):
    """Every case with a region (by the partition; CPU-only cases are not built), compared."""
    compared, cpu_only, rejected, differ = [], [], [], []
    for case in CASES:
        if case.id in DEFAULT_CASES:
            continue  # a test of its own
        mod = _partitioned(case)
        if mod is None:
            rejected.append(case.id)
            continue
        if not any(is_region(func) for func in mod.functions.values()):
            cpu_only.append(case.id)
            continue
        try:
            lib = mrvl.build(mod)
        except mrvl.MrvlError:
            rejected.append(case.id)
            continue
        assert lib.mrvl_regions, f"{case.id}: a region in the partition, none in the build"
        try:
            run_on_both_engines(lib, case.inputs)
        except AssertionError as err:
            differ.append(f"{case.id}: {err}")
        compared.append(case.id)
    total = len(compared) + len(DEFAULT_CASES)
    record_property("compared_cases", total)
    print(
        f"\n{total} conformance cases compared on both engines; {len(cpu_only)} CPU-only and "
        f"{len(rejected)} rejected by mrvl not run"
    )
    assert not differ, "\n".join(differ)
    assert total >= MIN_COMPARED_CASES, f"only {total} conformance cases have a region"
