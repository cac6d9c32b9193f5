"""The compiler's outputs are pinned: a reshape of the compiler must move no hash (issue 18).

`tests/fixtures/output_hashes.json`, written by `scripts/output_hashes.py --record`, holds the
sha256 of every region binary, Nodes-JSON and Constants-JSON, and the modelled cycles, of the
zoo and light models at 1 and 8 tiles, with and without `wb_pin_ocm`. The default run checks
SqueezeNet 1.1 in all four configurations; the slow run checks every zoo model at 8 tiles (the
zoo's configuration) but the three heaviest, which the zoo report builds
(`zoo_report.PARTITION_ONLY_IN_SUITE`). `scripts/output_hashes.py --check` checks all of
them, the light models (VGG-19's half-gigabyte Constants-JSON among them) included.
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


def _zoo_report():
    return load_module("mrvl_zoo_report", ROOT / "scripts" / "zoo_report.py")


# the models whose builds the suite leaves to the report (zoo_report.PARTITION_ONLY_IN_SUITE)
REPORT_ONLY = {f"zoo:{name}" for name in _zoo_report().PARTITION_ONLY_IN_SUITE}


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        n
        for n in sorted(RECORDED)
        if n.startswith("zoo:") and n != FAST_MODEL and n not in REPORT_ONLY
    ],
)
def test_model_outputs_unchanged_at_8_tiles(name):
    got = _script().model_hashes(name, ["8"])["8"]
    assert got == RECORDED[name]["8"], f"{name}: {_script()._diff(RECORDED[name]['8'], got)}"
