"""Fixtures of the distributed tests: the bundled MNIST model as a file."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def mnist_path() -> Path:
    return Path(str(resources.files("mrvl.models").joinpath("mnist.onnx")))
