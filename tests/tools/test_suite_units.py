"""The suite's units of work reach pytest-xdist's scheduler (tests/conftest.py, run as
scripts/test.sh runs it: two workers, `--dist loadgroup`). pytest 9.2 with pytest-xdist 3.8
dropped them without a word: every test went to either worker, and the tests of one model
or file built what they share on both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_each_unit_runs_whole_on_one_worker(tmp_path):
    """tests/conftest.py over two files of three tests each (two units): each file's tests
    all run on one worker."""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    for name in ("a", "b"):
        log = tmp_path / f"workers_{name}.txt"
        (tmp_path / f"test_{name}.py").write_text(
            "import os\n\nimport pytest\n\n\n"
            "@pytest.mark.parametrize('index', range(3))\n"
            "def test_worker(index):\n"
            f"    with open({str(log)!r}, 'a') as log:\n"
            "        log.write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n"
        )
    command = [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup"]
    command += ["--no-loadscope-reorder", "-p", "no:cacheprovider", "-q", str(tmp_path)]
    run = subprocess.run(
        command, check=False, cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for name in ("a", "b"):
        workers = (tmp_path / f"workers_{name}.txt").read_text().split()
        assert len(workers) == 3 and len(set(workers)) == 1, f"test_{name}.py ran on {workers}"
