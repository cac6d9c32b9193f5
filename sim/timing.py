"""Wall time spent in the simulator, for benchmarks and model tests.

The TVM runtime calls `mrvl.sim.run` once per region per inference; `simulator_clock()` wraps
it for the duration of a `with` block and counts the calls and seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import mrvl.sim as sim


@contextmanager
def simulator_clock() -> Iterator[dict]:
    """Yields {"seconds": float, "calls": int}, filled in as `mrvl.sim.run` is called."""
    spent = {"seconds": 0.0, "calls": 0}
    original = sim.run

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent["seconds"] += time.perf_counter() - start
            spent["calls"] += 1

    sim.run = timed
    try:
        yield spent
    finally:
        sim.run = original
