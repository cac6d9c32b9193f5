"""`pip install` is quiet: setuptools builds mrvl without a single warning, and the wheel
holds every data file mrvl reads at run time."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "mrvl_ir", "dialects", "passes", "sim")


@pytest.fixture(scope="module")
def wheel_build(tmp_path_factory):
    """Build the wheel with the venv's pinned setuptools, offline, from a copy of the tree."""
    work = tmp_path_factory.mktemp("build")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, work / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, work / name)
    script = "from setuptools import build_meta; print(build_meta.build_wheel('dist'))"
    result = subprocess.run(
        [sys.executable, "-W", "always", "-c", script], cwd=work, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return work / "dist" / result.stdout.strip().splitlines()[-1], result.stdout + result.stderr


def test_setuptools_prints_no_warning(wheel_build):
    import setuptools

    _, output = wheel_build
    warnings = [line for line in output.splitlines() if "Warning" in line]
    assert not warnings, f"setuptools {setuptools.__version__}:\n" + "\n".join(warnings)


def test_the_wheel_holds_the_data_files(wheel_build):
    wheel, _ = wheel_build
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in (ROOT / "mrvl_ir").glob("*/*"):
        if data.suffix in (".json", ".c", ".onnx"):
            assert f"mrvl/{data.parent.name}/{data.name}" in names
