"""Exceptions of the simulator: bad caller input versus a fault of the program being run."""

from mrvl.errors import MrvlError


class SimulatorInputError(MrvlError, ValueError):
    """The inputs given to `run` do not match the program's input table."""


class SimulatorError(MrvlError, RuntimeError):
    """The program faulted while running; the message names the instruction and its ONNX node."""


class Fault(Exception):
    """A fault found while executing one instruction; the engine rewraps it as SimulatorError
    with the instruction's index, opcode and ONNX node, which the code raising it does not know."""
