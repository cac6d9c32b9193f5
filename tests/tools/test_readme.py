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
