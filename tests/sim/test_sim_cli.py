"""`mrvl-sim`: runs a binary on .npy files; every user error is one line on stderr and exit 1."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sim_builders import conv_region_program, end, random_f16

from mrvl.binary import encode
from mrvl.isa import DType, IOEntry, Program
from mrvl.sim import run
from mrvl.tools.mrvl_sim import main


@pytest.fixture
def model(tmp_path):
    rng = np.random.default_rng(1)
    program = conv_region_program(
        random_f16(rng, (4, 3, 3, 3)), rng.standard_normal(4).astype(np.float32)
    )
    path = tmp_path / "model.bin"
    path.write_bytes(encode(program))
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return program, path, x


def test_run_writes_outputs(model, tmp_path, capsys):
    program, path, x = model
    assert main([str(path), "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "out")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "y.npy"), run(program, [x])[0])
    assert "y: float32[1, 4, 6, 6] ->" in capsys.readouterr().out


@pytest.mark.parametrize("engine", ["numba", "interp"])
def test_engine_option(model, tmp_path, capsys, engine):
    program, path, x = model
    out = tmp_path / engine
    assert main([str(path), "-i", str(tmp_path / "x.npy"), "-o", str(out), "--engine", engine]) == 0
    assert np.load(out / "y.npy").tobytes() == run(program, [x], engine="interp")[0].tobytes()


def test_unknown_engine_is_a_usage_error(model, tmp_path, capsys):
    _, path, _ = model
    with pytest.raises(SystemExit):
        main([str(path), "-i", str(tmp_path / "x.npy"), "--engine", "gpu"])
    assert "invalid choice: 'gpu'" in capsys.readouterr().err


def test_run_prints_outputs(model, tmp_path, capsys):
    _, path, _ = model
    assert main([str(path), "-i", str(tmp_path / "x.npy")]) == 0
    assert capsys.readouterr().out.startswith("y: float32[1, 4, 6, 6]\n[[[[")


def test_info(model, capsys):
    _, path, _ = model
    assert main([str(path), "--info"]) == 0
    out = capsys.readouterr().out
    assert "MLIP model binary 2.2" in out and "target      cn10ka" in out
    assert "input  x  f32[1, 3, 6, 6]" in out and "output y  f32[1, 4, 6, 6]" in out
    assert "instructions 7" in out
    for line in ["  conv   1", "  cvt    2", "  dma    3", "  end    1"]:
        assert line in out.splitlines()


@pytest.mark.parametrize(
    "make_args, message",
    [
        (lambda d: [str(d / "missing.bin"), "--info"], "No such file or directory"),
        (lambda d: [str(d / "x.npy"), "--info"], "bad magic"),
        (lambda d: [str(d / "model.bin")], r"expected 1 inputs \('x'\), got 0"),
        (lambda d: [str(d / "model.bin"), "-i", str(d / "model.bin")], "not a .npy array file"),
        (lambda d: [str(d / "model.bin"), "-i", str(d / "wrong.npy")], "input 'x': expected shape"),
    ],
)
def test_user_errors_are_one_line(model, tmp_path, capsys, make_args, message):
    np.save(tmp_path / "wrong.npy", np.zeros((1, 3, 5, 5), np.float32))
    assert main(make_args(tmp_path)) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("mrvl-sim: error: ") and captured.err.count("\n") == 1
    assert re.search(message, captured.err)
    assert "Traceback" not in captured.err


def test_truncated_binary(model, tmp_path, capsys):
    _, path, _ = model
    data = path.read_bytes()
    path.write_bytes(data[:-3])
    assert main([str(path), "--info"]) == 1
    assert (
        f"truncated file: header says {len(data)} bytes, got {len(data) - 3}"
        in capsys.readouterr().err
    )


def test_output_file_names_are_safe_and_distinct(tmp_path):
    program = Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=16,
        io=[
            IOEntry("/head/out", False, (2,), DType.F32, 0),
            IOEntry("/head:out", False, (2,), DType.F32, 8),
        ],
        code=[end()],
        const_base=0,
        consts=np.array([1, 2, 3, 4], np.float32).tobytes(),
        srcmap=[],
    )
    (tmp_path / "m.bin").write_bytes(encode(program))
    assert main([str(tmp_path / "m.bin"), "-o", str(tmp_path)]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "head_out.npy"), [1, 2])
    np.testing.assert_array_equal(np.load(tmp_path / "head_out_1.npy"), [3, 4])
