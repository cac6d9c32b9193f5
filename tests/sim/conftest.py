"""Fixtures of the simulator tests."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    """A generator seeded the same for every test, so a failure repeats."""
    return np.random.default_rng(0)
