"""Every command line gives one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import onnx
import pytest

from mrvl.tools import mrvl_opt, mrvlc


class _exit_status:
    """`main`'s return value, or the code of the SystemExit argparse raises."""

    code: int | None = None

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is SystemExit:
            self.code = value.code
            return True
        return False


def _one_error_line(capsys, tool: str, *needles: str) -> str:
    """The one `tool: error:` line on stderr (argparse's usage lines may come first)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(f"{tool}: error: ")]
    assert len(errors) == 1, err
    others = [line for line in lines if line not in errors]
    assert all(line.startswith(("usage: ", " ")) for line in others), err
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.mark.parametrize(
    "argv, needles",
    [
        (["--mcpu", "foo"], ["unknown mcpu 'foo'", "cn10ka"]),
        (["--num-tiles", "3"], ["num_tiles", "3"]),
        (["--mcpu", "cnf10kb", "--num-tiles", "8"], ["exceeds the 4 tiles", "cnf10kb"]),
        (["--input-shape", "nosuch=1,1,28,28"], ["no input 'nosuch'", "'input'"]),
        (["--input-shape", "input=1,x"], ["bad --input-shape"]),
        (["--input-shape", "input=2,1,28,28"], ["dimension 0 of 'input' is fixed at 1"]),
        (["--input-shape", "input=1,28,28"], ["'input' has rank 4"]),
        (["--seed", "-1"], ["--seed", ">= 0"]),
        (["--deny-nodes", "nonode"], ["no ONNX node named 'nonode'"]),
        (["--deny-ops", "NotAnOp"], ["'NotAnOp' is not an ONNX operator"]),
    ],
)
def test_mrvlc_bad_options(mnist_path, capsys, argv, needles):
    with _exit_status() as status:
        status.code = mrvlc.main([str(mnist_path), "--report", *argv])
    assert status.code == 2
    _one_error_line(capsys, "mrvlc", *needles)


def test_mrvlc_empty_file(tmp_path, capsys):
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert mrvlc.main([str(tmp_path / "empty.onnx"), "--report"]) == 1
    line = _one_error_line(capsys, "mrvlc", "not an ONNX model", "empty")
    assert "IR version 0" not in line


def test_mrvlc_missing_file(tmp_path, capsys):
    assert mrvlc.main([str(tmp_path / "nope.onnx"), "--report"]) == 1
    _one_error_line(capsys, "mrvlc", "no such file")


def test_mrvlc_run_when_onnxruntime_cannot_load_the_model(tmp_path, capsys, conv_relu):
    """The model is fine for mrvl, but its IR version is newer than onnxruntime reads."""
    import onnxruntime

    model = conv_relu(batch=1, ir_version=onnx.IR_VERSION)
    onnx.save(model, tmp_path / "m.onnx")
    try:
        onnxruntime.InferenceSession(model.SerializeToString())
        pytest.skip(f"onnxruntime {onnxruntime.__version__} loads IR {onnx.IR_VERSION}")
    except Exception:  # noqa: BLE001 - the case this test is about
        pass
    assert mrvlc.main([str(tmp_path / "m.onnx"), "-o", str(tmp_path / "out"), "--run"]) == 1
    _one_error_line(capsys, "mrvlc", "onnxruntime", "cannot load")


def test_mrvlc_symbolic_batch_is_named_up_front(tmp_path, capsys, conv_relu):
    onnx.save(conv_relu(batch="N"), tmp_path / "m.onnx")
    assert mrvlc.main([str(tmp_path / "m.onnx"), "--report"]) == 0
    err = capsys.readouterr().err
    assert "input 'x' has a dynamic dimension 0 ('N')" in err
    assert "--input-shape x=1,1,8,8" in err


def test_mrvlc_run_with_a_symbolic_batch_asks_for_its_size(tmp_path, capsys, conv_relu):
    onnx.save(conv_relu(batch="N"), tmp_path / "m.onnx")
    out = str(tmp_path / "out")
    assert mrvlc.main([str(tmp_path / "m.onnx"), "-o", out, "--run"]) == 2
    _one_error_line(capsys, "mrvlc", "dynamic dimension", "'N'", "--input-shape")
    argv = [str(tmp_path / "m.onnx"), "-o", out, "--run", "--input-shape", "x=0,1,8,8"]
    assert mrvlc.main(argv) == 2
    _one_error_line(capsys, "mrvlc", "dimension 0 of 'x' must be >= 1")
    argv = [str(tmp_path / "m.onnx"), "-o", out, "--run", "--input-shape", "x=2,1,8,8"]
    assert mrvlc.main(argv) == 0
    assert "PASS" in capsys.readouterr().out


def test_an_empty_comparison_never_passes():
    import numpy as np

    from mrvl.accuracy import fp16_agreement

    empty = np.zeros((0, 4), np.float32)
    assert not fp16_agreement(empty, empty).passed
    assert fp16_agreement(np.zeros(3), np.zeros(3)).passed  # all zeros, all equal


@pytest.fixture
def empty_module(tmp_path):
    path = tmp_path / "e.mlir"
    path.write_text("builtin.module {}\n")
    return path


@pytest.mark.parametrize(
    "passes, needle",
    [
        ("no-such-pass", "no-such-pass"),
        ("convert-mrvl-to-sched{num-tiles=abc}", "abc"),
        ("convert-mrvl-to-sched{mcpu=foo}", "unknown mcpu 'foo'"),
    ],
)
def test_mrvl_opt_bad_pipeline(empty_module, capsys, passes, needle):
    with pytest.raises(SystemExit) as exit:
        mrvl_opt.main([str(empty_module), "-p", passes])
    assert exit.value.code == 1
    _one_error_line(capsys, "mrvl-opt", needle)


def test_mrvl_opt_missing_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        mrvl_opt.main([str(tmp_path / "missing.mlir")])
    assert exit.value.code == 1
    _one_error_line(capsys, "mrvl-opt", "No such file", "missing.mlir")


@pytest.mark.parametrize(
    "argv",
    [["mrvlc", "MODEL", "--report", "--mcpu", "foo"], ["mrvl-opt", "missing.mlir"]],
)
def test_installed_tools_exit_with_one_line(mnist_path, tmp_path, argv):
    """The console scripts themselves, as a user runs them."""
    tool = str(__import__("pathlib").Path(sys.executable).parent / argv[0])
    args = [str(mnist_path) if a == "MODEL" else a for a in argv[1:]]
    result = subprocess.run([tool, *args], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
