"""mrvl-opt over a grammar of malformed IR (tests/tools/malformed_ir.py, issue 19): no input
ends in a traceback or a hang; every wrong input is refused with one `mrvl-opt: error:` line
that says where (file:line:col, the line, the ONNX node, or the offending op marked in
context); a corrupted input is either accepted or refused in the same way."""

from __future__ import annotations

import random
import re
import time

import malformed_ir
import pytest

from mrvl.tools import mrvl_opt

CORRUPT = malformed_ir.corrupt(random.Random(19), 25)
LOCATED = re.compile(
    r"\.mlir:\d+:\d+"  # a parse error's position
    r"|\.mlir: (line \d+|while )"  # the input file, and the line or the stage
    r"|\^\^\^"  # the offending op marked in the IR printed after the error
    r"| at /[\w/.-]+| \(/[\w/.-]+\)"  # the layer's ONNX node
)


def run_opt(tmp_path, capsys, name: str, text: str, args: list[str]) -> tuple[int, str]:
    path = tmp_path / f"{name}.mlir"
    path.write_text(text)
    start = time.perf_counter()
    try:
        mrvl_opt.main([str(path), *args])
        code = 0
    except SystemExit as e:
        code = e.code
    assert time.perf_counter() - start < 30, "mrvl-opt hung"
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code:
        assert err.startswith("mrvl-opt: error: "), err[:300]
        assert LOCATED.search(err), f"no location in: {err[:300]}"
    return code, err


def test_the_grammar_has_over_a_hundred_inputs():
    assert len(malformed_ir.WRONG) + len(CORRUPT) >= 100


@pytest.mark.parametrize(
    "name, text, args", malformed_ir.WRONG, ids=[c[0] for c in malformed_ir.WRONG]
)
def test_a_wrong_input_is_refused_with_its_location(tmp_path, capsys, name, text, args):
    code, err = run_opt(tmp_path, capsys, name, text, args)
    assert code == 1
    if name == "mrvl-i32-after-cast-fp16":
        assert "run mrvl-cast-fp16 first" not in err and "not i32" in err


@pytest.mark.parametrize("name, text, args", CORRUPT, ids=[c[0] for c in CORRUPT])
def test_a_corrupted_input_is_accepted_or_refused_with_its_location(
    tmp_path, capsys, name, text, args
):
    code, _ = run_opt(tmp_path, capsys, name, text, args)
    assert code in (0, 1)


def test_the_bases_are_valid(tmp_path, capsys):
    for name, (text, args) in malformed_ir.BASES.items():
        code, err = run_opt(tmp_path, capsys, name, text, args)
        assert code == 0, err
