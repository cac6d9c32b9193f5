"""Custom parts: a target file checked against its schema, overrides registered under their own
name, the built-in parts unchanged, and `mrvlc --target-file` compiling for one."""

from __future__ import annotations

import json

import pytest

from mrvl.target import (
    TargetFileError,
    available_targets,
    derive_target,
    get_target,
    load_target_file,
    register_target,
)
from mrvl.tools import mrvlc


def test_builtin_parts_unchanged():
    for name in available_targets():
        target = get_target(name)
        assert target is get_target(name)
        assert target.name == name


def test_derived_target_is_registered_under_a_stable_name():
    a = derive_target("cn10ka", ocm_bytes_per_tile=131072, ddr_bytes_per_cycle=32)
    b = derive_target("cn10ka", ddr_bytes_per_cycle=32, ocm_bytes_per_tile=131072)
    assert a == b and get_target(a.name) is a
    assert a.ocm_bytes_per_tile == 131072 and a.ddr_bytes_per_cycle == 32
    assert a.clock_mhz == get_target("cn10ka").clock_mhz
    assert len(a.name) <= 16
    assert derive_target("cn10ka") is get_target("cn10ka")


def test_a_name_means_one_part(tmp_path):
    with pytest.raises(TargetFileError, match="built-in part"):
        register_target(get_target("cnf10kb").__class__(**vars(get_target("cnf10kb"))))
    first = tmp_path / "a.json"
    first.write_text(json.dumps({"name": "same-name", "base": "cn10ka", "clock_mhz": 800}))
    load_target_file(first)
    first.write_text(json.dumps({"name": "same-name", "base": "cn10ka", "clock_mhz": 900}))
    with pytest.raises(TargetFileError, match="registered already"):
        load_target_file(first)


@pytest.mark.parametrize(
    "document, message",
    [
        ({"name": "x", "base": "cn10ka", "ddr_bytes_per_cycle": "fast"}, "ddr_bytes_per_cycle: 'fast' is not of type 'integer'"),
        ({"name": "x", "base": "cn10ka", "max_tiles": 3}, "max_tiles: 3 is not one of"),
        ({"name": "x", "base": "cn10ka", "ocm_bytes": 1}, "Additional properties are not allowed"),
        ({"name": "a name far too long", "base": "cn10ka"}, "name: 'a name far too long' does not match"),
        ({"name": "x", "base": "cn99"}, "base: unknown mcpu 'cn99'"),
        ({"name": "x", "clock_mhz": 800}, "without 'base' every machine number is needed"),
    ],
)  # fmt: skip
def test_schema_rejects_with_a_clear_error(tmp_path, document, message):
    path = tmp_path / "part.json"
    path.write_text(json.dumps(document))
    with pytest.raises(TargetFileError, match="target file .*part.json: ") as info:
        load_target_file(path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_mrvlc_rejects_a_bad_target_file(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    assert mrvlc.main(["model.onnx", "--target-file", str(path), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mrvlc: error: target file") and "not JSON" in err


def test_mrvlc_compiles_for_a_target_file(tmp_path, mnist_path, capsys):
    path = tmp_path / "four.json"
    path.write_text(json.dumps({"name": "four-tiles", "base": "cn10ka", "max_tiles": 4}))
    out = tmp_path / "out"
    assert mrvlc.main([str(mnist_path), "--target-file", str(path), "-o", str(out), "--run"]) == 0
    assert "PASS" in capsys.readouterr().out
    from mrvl.binary import decode

    program = decode(next(out.glob("*.bin")).read_bytes())
    assert program.target == "four-tiles" and program.num_tiles == 4
