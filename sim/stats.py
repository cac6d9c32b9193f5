"""What a run counts besides its outputs: per instruction, the values it saturated and the NaNs
it produced (docs/isa.md §4, "Counted"), and the warning a run gives when they are not zero.

The engines fill a `RunStats` while they execute (`run(..., stats=RunStats())`); the profile
and the saturation warning read it per ONNX node through the program's source map.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from mrvl.isa import NO_LOC, Program

LAYERS_NAMED = 5
"""How many layers the saturation warning names before it says how many more there are."""


class SaturationWarning(UserWarning):
    """A run stored values saturated at +-65504 or NaN, so its outputs may be far from the
    model's (an input out of the f16 range, a layer that overflows). Silence it with
    `warnings.filterwarnings("ignore", category=mrvl.sim.SaturationWarning)`."""


@dataclass
class RunStats:
    saturated: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Per instruction of the validated program: f16 results stored as ±65504 because the
    fp32 value was beyond it (±inf included), docs/isa.md §4."""
    nans: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Per instruction: results stored as NaN."""

    def reset(self, count: int) -> None:
        self.saturated = np.zeros(count, np.int64)
        self.nans = np.zeros(count, np.int64)

    def by_node(self, program: Program) -> dict[str, tuple[int, int]]:
        """ONNX node -> (saturated, nans), only for nodes where either is nonzero, in program
        order; an instruction without a node counts under "<opcode> (no ONNX node)"."""
        totals: dict[str, list[int]] = {}
        for index in np.flatnonzero(self.saturated + self.nans):
            ins = program.code[index]
            node = program.srcmap[ins.loc] if ins.loc != NO_LOC else f"{ins.opcode} (no ONNX node)"
            entry = totals.setdefault(node, [0, 0])
            entry[0] += int(self.saturated[index])
            entry[1] += int(self.nans[index])
        return {node: (s, n) for node, (s, n) in totals.items()}

    def warning(self, program: Program) -> str | None:
        """One line naming the layers that saturated or produced NaN, or None if none did."""
        nodes = self.by_node(program)
        if not nodes:
            return None
        saturated, nans = int(self.saturated.sum()), int(self.nans.sum())
        named = []
        for node, (s, n) in list(nodes.items())[:LAYERS_NAMED]:
            what = [f"{s} saturated"] * bool(s) + [f"{n} NaN"] * bool(n)
            named.append(f"{node!r} ({', '.join(what)})")
        more = len(nodes) - len(named)
        layers = ", ".join(named) + (f" and {more} more" if more else "")
        stored = [f"{saturated} values saturated at +-65504"] * bool(saturated)
        stored += [f"{nans} NaNs"] * bool(nans)
        return (
            f"the simulated run stored {' and '.join(stored)}, so its outputs may be wrong; "
            f"in {len(nodes)} layer{'s' * (len(nodes) > 1)}: {layers}"
        )

    def warn(self, program: Program, stacklevel: int = 2) -> None:
        """Warn (SaturationWarning) if the run saturated any value or produced a NaN."""
        message = self.warning(program)
        if message is not None:
            warnings.warn(message, SaturationWarning, stacklevel=stacklevel + 1)


@contextmanager
def one_line_warnings(prog: str) -> Iterator[None]:
    """Inside the block, a SaturationWarning that the filters let through prints as one line,
    `<prog>: warning: <message>`, on stderr (for command-line tools); others print as usual."""
    previous = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, SaturationWarning):
            print(f"{prog}: warning: {message}", file=file or sys.stderr)
        else:
            previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous
