"""scripts/zoo_int8.py's table (docs/zoo.md's int8 section): saved runs make the same rows,
the section replaces only itself, and a bad model name or quantizer is a clear error."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from helpers import load_module  # noqa: E402

zoo_int8 = load_module("mrvl_zoo_int8", ROOT / "scripts" / "zoo_int8.py")


def _runs():
    return [
        zoo_int8.Int8Run(
            "mobilenet_v2", "classifier", regions=1, int8_mac_fraction=1.0,
            steps={"exact": 0.998, "1": 1.0, "3": 1.0, "max": 1.0}, top1=0.75, top1_inputs=64,
            cycles=(318487, 600447), on_cpu={"Softmax: kept on the CPU": 1}, seconds=60.0,
        ),
        zoo_int8.Int8Run(
            "mobilenet_v2", "classifier", regions=3, failure="build: CompileError: no",
            quantizer="static", seconds=30.0,
        ),
    ]  # fmt: skip


def test_saved_runs_make_the_same_table(tmp_path):
    saved = tmp_path / "runs.json"
    saved.write_text(json.dumps([asdict(r) for r in _runs()]))
    loaded = zoo_int8.load_runs([saved])
    assert loaded == _runs()
    text = zoo_int8.markdown(loaded, 90.0)
    assert "| mobilenet_v2 | 1 | 100.00 % | none | 99.80 % / 100.00 % / 100.00 % / 1 " in text
    assert "| 75.00 % of 64 | 318k / 600k (0.53) | 1 Softmax: kept on the CPU |" in text
    assert "| mobilenet_v2 (static) | 3 |" in text and "build: CompileError: no" in text
    assert "1 of 2 runs within 3 steps" in text


def test_the_int8_section_replaces_only_itself():
    float_part = "# The model zoo\n\n| model | regions |\n| a | 1 |\n"
    first = zoo_int8.with_int8_section(float_part, f"{zoo_int8.INT8_HEADING}\n\nold\n")
    second = zoo_int8.with_int8_section(first, f"{zoo_int8.INT8_HEADING}\n\nnew\n")
    assert second == f"{float_part}\n{zoo_int8.INT8_HEADING}\n\nnew\n"


def test_merged_rows_replace_a_models_row_and_keep_the_others():
    """`--merge`: docs/zoo.md's rows of other models and its text stay; a run's row replaces
    its model's or is appended; the count within the goal is recounted over the rows."""
    first = zoo_int8.markdown(_runs(), 90.0)
    document = zoo_int8.with_int8_section("# The model zoo\n", first)
    vit = zoo_int8.Int8Run(
        "vit_tiny_patch16_224", "classifier", regions=1, int8_mac_fraction=0.99,
        steps={"exact": 0.9, "1": 1.0, "3": 1.0, "max": 2.0}, seconds=10.0,
    )  # fmt: skip
    better = zoo_int8.Int8Run(
        "mobilenet_v2", "classifier", regions=1, int8_mac_fraction=1.0,
        steps={"exact": 1.0, "1": 1.0, "3": 1.0, "max": 0.0}, seconds=10.0,
    )  # fmt: skip
    merged = zoo_int8.with_merged_rows(document, [vit, better], "Merged here.")
    rows = [line for line in merged.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split("|")[1].strip() for r in rows[1:]] == [
        "mobilenet_v2", "mobilenet_v2 (static)", "vit_tiny_patch16_224",
    ]  # fmt: skip
    assert "/ 0 |" in rows[1] and "build: CompileError: no" in rows[2]
    assert "2 of 3 runs within 3 steps" in merged and "Merged here." in merged
    assert merged.startswith("# The model zoo\n")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["no_such_model"], "not zoo models: no_such_model"),
        (["resnet18", "--quantizer", "qat"], "invalid choice: 'qat'"),
        (["--from-json", "/no/such/runs.json"], "no such file: /no/such/runs.json"),
    ],
)
def test_bad_arguments_are_clear_errors(argv, message, capsys):
    with pytest.raises(SystemExit):
        zoo_int8.main(argv)
    assert message in capsys.readouterr().err
