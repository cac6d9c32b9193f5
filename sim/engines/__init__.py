"""The engines that run a validated program, and how one is chosen.

- `interp`: `mrvl.sim.engines.reference`, the numpy reference interpreter (the executable spec);
- `numba`: `mrvl.sim.engines.numba`, compiled kernels, bit for bit the same results.

Each engine is a module with `execute(valid: ValidProgram, memory: Memory) -> None`, imported on
first use (importing Numba costs time a run on the interpreter need not pay).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType

from mrvl.sim.errors import SimulatorInputError

ENGINES = {"numba": "mrvl.sim.engines.numba", "interp": "mrvl.sim.engines.reference"}
DEFAULT_ENGINE = "numba"
ENGINE_ENV = "MRVL_SIM_ENGINE"
"""Environment variable naming the engine of runs that do not choose one; read at each run."""


_chosen: ContextVar[str | None] = ContextVar("mrvl_sim_engine", default=None)


@contextmanager
def use_engine(engine: str) -> Iterator[None]:
    """Runs inside the block that name no engine (such as the TVM runtime's) use `engine`."""
    token = _chosen.set(engine_name(engine))
    try:
        yield
    finally:
        _chosen.reset(token)


def engine_name(engine: str | None = None) -> str:
    """`engine` if given, else the one `use_engine` chose, else $MRVL_SIM_ENGINE, else the
    default; checked."""
    name = engine or _chosen.get() or os.environ.get(ENGINE_ENV) or DEFAULT_ENGINE
    if name not in ENGINES:
        source = "engine" if engine else f"${ENGINE_ENV}"
        raise SimulatorInputError(
            f"{source}={name!r} is not a simulator engine (choose from {', '.join(ENGINES)})"
        )
    return name


def load_engine(engine: str | None = None) -> ModuleType:
    return importlib.import_module(ENGINES[engine_name(engine)])
