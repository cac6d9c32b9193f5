"""The zoo's transformers in int8 (issue 20's goal for issue 21's layers): quantized by
`mrvl.quantize`, each builds in as few regions as its float form (one) with at least 99 % of
its MACs in int8 (Q·Kᵀ and A·V as `qbmm`, the MatMuls' biases as `qadd`, GELU as tables and
`qmul`), its LayerNormalizations and Softmaxes in fp16 between the region's dequant and
quant (reported fp16), nothing on the CPU; judged against onnxruntime running the same QDQ
model on the zoo's seed-0 input (`scripts/zoo_int8.py`'s run, docs/zoo.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from helpers import load_module  # noqa: E402

pytestmark = pytest.mark.slow

zoo_int8 = load_module("zoo_int8", ROOT / "scripts" / "zoo_int8.py")

_RUNS: dict = {}


def _run(name: str):
    if name not in _RUNS:
        _RUNS[name] = zoo_int8.run_int8(name, inputs=0, cycles=False)
    return _RUNS[name]


@pytest.mark.parametrize("name", ["vit_tiny_patch16_224", "bert_mini", "mobilevit_xxs"])
def test_transformer_runs_in_int8_in_one_region(name):
    run = _run(name)
    assert run.failure is None, run.failure
    assert run.regions == 1 and not run.on_cpu, (run.regions, run.on_cpu)
    assert run.int8_mac_fraction >= 0.99, run.int8_mac_fraction
    assert run.steps["3"] >= 0.98, run.steps


@pytest.mark.parametrize("name", ["vit_tiny_patch16_224", "mobilevit_xxs"])
def test_transformer_is_within_3_steps_of_onnxruntime(name):
    assert _run(name).within_goal, _run(name).steps


@pytest.mark.xfail(
    strict=True,
    reason="measured 2026-11-27: 31.0 % exact, 98.4 % within 3, up to 7 steps (main, with "
    "40 regions and its attention, LayerNorms and biases on the CPU: 31.7 % / 98.7 % / 6): "
    "1-step roundings carried through 4 encoder layers (docs/zoo.md)",
)
def test_bert_mini_is_within_3_steps_of_onnxruntime():
    assert _run("bert_mini").within_goal, _run("bert_mini").steps
