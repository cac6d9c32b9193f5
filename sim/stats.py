"""What a run counts besides its outputs: per instruction, the values it saturated and the NaNs
it produced (issue 9: a run whose outputs saturated says so, naming the layers).

The engines fill a `RunStats` while they execute (`run(..., stats=RunStats())`); the profile
and the saturation warning read it per ONNX node through the program's source map.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mrvl.isa import NO_LOC, Program


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
        """ONNX node -> (saturated, nans), only for nodes where either is nonzero."""
        totals: dict[str, list[int]] = {}
        for index in np.flatnonzero(self.saturated + self.nans):
            loc = program.code[index].loc
            node = program.srcmap[loc] if loc != NO_LOC else "no ONNX node"
            entry = totals.setdefault(node, [0, 0])
            entry[0] += int(self.saturated[index])
            entry[1] += int(self.nans[index])
        return {node: (s, n) for node, (s, n) in totals.items()}
