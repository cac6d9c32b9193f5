"""The compiler's outputs are pinned: a reshape of the compiler must move no hash (issue 18).

`tests/fixtures/output_hashes.json`, written by `scripts/output_hashes.py --record`, holds the
sha256 of every region binary, Nodes-JSON and Constants-JSON, and the modelled cycles, of the
zoo and light models at 1 and 8 tiles, with and without `wb_pin_ocm`. The suite checks
SqueezeNet 1.1 in all four configurations here; the zoo's 8-tile outputs are pinned on the
builds `tests/zoo/test_zoo.py` makes anyway (`tests/fixtures/zoo_run_hashes.json`), rather
than by compiling each zoo model a second time with other weights.
`scripts/output_hashes.py --check` checks all of this fixture, the light models (VGG-19's
half-gigabyte Constants-JSON among them) included.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import load_module

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "output_hashes.json"


def _script():
    return load_module("mrvl_output_hashes", ROOT / "scripts" / "output_hashes.py")


RECORDED = json.loads(FIXTURE.read_text())
FAST_MODEL = "zoo:squeezenet1_1"


def test_every_model_and_config_is_recorded():
    script = _script()
    assert sorted(RECORDED) == sorted(script.all_models())
    for name, configs in RECORDED.items():
        assert sorted(configs) == sorted(script.CONFIGS), name
        assert all(configs.values()), f"{name}: a configuration without regions"


@pytest.mark.parametrize("config", sorted(_script().CONFIGS))
def test_fast_model_outputs_unchanged(config):
    got = _script().model_hashes(FAST_MODEL, [config])[config]
    assert got == RECORDED[FAST_MODEL][config]
