"""Every Python snippet of the README runs as written, in order, each in a fresh process
(the second loads the library the first exported)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def python_snippets(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def test_readme_python_snippets_run(tmp_path):
    snippets = python_snippets(README.read_text())
    assert len(snippets) >= 2
    for index, snippet in enumerate(snippets):
        result = subprocess.run(
            [sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True
        )
        assert result.returncode == 0, f"README snippet {index}:\n{snippet}\n{result.stderr}"
    assert (tmp_path / "mnist.so").is_file()


def shell_commands(text: str) -> list[list[str]]:
    """The tool commands of the README's ```sh blocks (`scripts/*.sh` lines excluded)."""
    import shlex

    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    lines = [line for block in blocks for line in block.splitlines()]
    return [shlex.split(line, comments=True) for line in lines if line.startswith("mrvl")]


def test_readme_commands_run(mnist_model, tmp_path, monkeypatch, capsys):
    """The tool lines of "Using it", with the bundled MNIST as `model.onnx`, the `mrvl`
    stage it prints as `in.mlir`, an input `x.npy`, and `<region>` its first region."""
    import numpy as np
    import onnx

    from mrvl.tools import mrvl_opt, mrvl_sim, mrvlc

    monkeypatch.chdir(tmp_path)
    onnx.save(mnist_model, "model.onnx")
    np.save("x.npy", np.ones((1, 1, 28, 28), np.float32))
    assert mrvlc.main(["model.onnx", "--emit", "mrvl", "--full-constants"]) == 0
    Path("in.mlir").write_text(capsys.readouterr().out.split("\n", 1)[1])
    tools = {"mrvlc": mrvlc.main, "mrvl-sim": mrvl_sim.main, "mrvl-opt": mrvl_opt.main}
    commands = shell_commands(README.read_text())
    assert {argv[0] for argv in commands} == set(tools)
    for tool, *args in commands:
        args = [a.replace("<region>", "mrvl_region_0") for a in args]
        assert tools[tool](args) in (0, None), f"{tool} {' '.join(args)}"
    assert capsys.readouterr().err == ""
