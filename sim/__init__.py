"""The MLIP simulator: run a model binary (or a decoded Program) on numpy inputs.

`run` is the reference interpreter, the executable form of docs/isa.md.
"""

from mrvl.sim.errors import SimulatorError, SimulatorInputError
from mrvl.sim.interpreter import run

__all__ = ["SimulatorError", "SimulatorInputError", "run"]
