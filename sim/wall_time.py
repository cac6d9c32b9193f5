"""Wall time spent in `mrvl.sim.run`, counted explicitly (nothing is patched).

Every completed run adds its elapsed wall-clock seconds to each meter open at the time (a run
that fails, in validation or otherwise, adds nothing), so a benchmark or
a model test can see how much of a VM run the simulator took:

    with simulator_wall_time() as spent:
        vm["main"](*args)
    spent.seconds, spent.calls
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class WallTime:
    """Seconds of wall time and number of simulator runs, per engine and in total."""

    seconds: float = 0.0
    calls: int = 0
    by_engine: dict[str, float] = field(default_factory=dict)


_meters: list[WallTime] = []
_lock = threading.Lock()


@contextmanager
def simulator_wall_time() -> Iterator[WallTime]:
    """A meter that counts every simulator run made while the block runs."""
    meter = WallTime()
    with _lock:
        _meters.append(meter)
    try:
        yield meter
    finally:
        with _lock:
            _meters.remove(meter)


def record(engine: str, seconds: float) -> None:
    """Called by `mrvl.sim.run` once per run."""
    with _lock:
        for meter in _meters:
            meter.seconds += seconds
            meter.calls += 1
            meter.by_engine[engine] = meter.by_engine.get(engine, 0.0) + seconds
