"""The two engines give the same bytes on whole compiled models, no tolerance: the small
models of `helpers.ENGINE_CORPUS` (the e2e nets, a net of the engine paths the large light
models add, and MNIST), and a few ONNX node conformance cases that put something in an MLIP
region (`helpers.CONFORMANCE_ENGINE_CASES`), each run hybrid in the Relax VM once per engine
on the same inputs. Only the regions run on the simulator, and the CPU part is deterministic,
so any difference comes from the engines. The light models are compared on their one shared
build in tests/models/test_light_models.py, the other conformance cases on the builds of
tests/conformance/test_node_conformance.py (a `slow` test there).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import (
    CONFORMANCE_ENGINE_CASES,
    ENGINE_CORPUS,
    assert_features_pinned,
    conformance_partitioned,
    corpus_build,
    corpus_features,
    corpus_inputs,
    load_module,
    run_model_on_both_engines,
)

import mrvl

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- small models


@pytest.mark.parametrize(
    "name,num_tiles", ENGINE_CORPUS, ids=[f"{n}-{t}" for n, t in ENGINE_CORPUS]
)
def test_small_model_engines_agree(name, num_tiles):
    run_model_on_both_engines(corpus_build(name, num_tiles), corpus_inputs(name))


def test_corpus_features_are_pinned():
    """The corpus runs exactly the engine paths `helpers.FEATURE_FIXTURE` pins for it, which
    the light models left off the interpreter are checked against."""
    assert_features_pinned("corpus", corpus_features())


# ---------------------------------------------------------------------- conformance cases

conformance = load_module("mrvl_conformance_harness", ROOT / "scripts" / "conformance.py")
CASES = conformance.node_cases()


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.id in CONFORMANCE_ENGINE_CASES], ids=lambda c: c.id
)
def test_conformance_case_engines_agree(case):
    mod = conformance_partitioned(case)
    assert mod is not None, f"{case.id} no longer compiles"
    lib = mrvl.build(mod)
    assert lib.mrvl_regions, f"{case.id} no longer has an MLIP region"
    run_model_on_both_engines(lib, case.inputs)


def test_default_conformance_cases_exist():
    assert {c.id for c in CASES} >= CONFORMANCE_ENGINE_CASES
