"""The MLIP simulator: run a model binary (or a decoded Program) on numpy inputs.

`run` validates the program once (`mrvl.sim.validate`), then runs it on an engine:
`numba` (compiled, the default) or `interp` (the reference interpreter, the executable form of
docs/isa.md); both give the same bits.
"""

from mrvl.sim.engines import DEFAULT_ENGINE, ENGINE_ENV, ENGINES, use_engine
from mrvl.sim.errors import SimulatorError, SimulatorInputError
from mrvl.sim.simulator import new_memory, prepare, run
from mrvl.sim.stats import RunStats, SaturationWarning, one_line_warnings
from mrvl.sim.validate import ValidProgram, validate
from mrvl.sim.wall_time import WallTime, simulator_wall_time

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "ENGINE_ENV",
    "RunStats",
    "SaturationWarning",
    "SimulatorError",
    "SimulatorInputError",
    "ValidProgram",
    "WallTime",
    "new_memory",
    "one_line_warnings",
    "prepare",
    "run",
    "simulator_wall_time",
    "use_engine",
    "validate",
]
