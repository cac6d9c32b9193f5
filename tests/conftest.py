"""Fixtures shared by the pytest suites: the bundled MNIST model and its partitioned form."""

from __future__ import annotations

import onnx
import pytest

from mrvl.models.mnist import make_mnist_model


@pytest.fixture(scope="session")
def mnist_model() -> onnx.ModelProto:
    return make_mnist_model(seed=0)


@pytest.fixture(scope="session")
def mnist_partitioned(mnist_model):
    import mrvl

    return mrvl.partition_for_mrvl(mrvl.from_onnx(mnist_model), mcpu="cn10ka", num_tiles=8)
