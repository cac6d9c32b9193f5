"""The profile: the cycle model's timeline of each region, summed up per ONNX node.

`profile_regions([(region, ValidProgram, RunStats | None), ...])` models every region
(`mrvl.sim.cycles`) and returns a `Profile`; `mrvl.profile(model)` (mrvl_ir/profiling.py)
compiles and runs an ONNX model once and calls it. What each field means (docs/isa.md,
"Cycle model"):

- `total_cycles`: the regions' modelled cycles, summed (regions run one after another).
- `roofline_cycles`: the sum of the layers' roofline bounds.
- per layer (the instructions of one ONNX node in one region):
  - `cycles`: busy time, the cycles during which at least one of its instructions runs (the
    union of their intervals). Layers that overlap in time each count the overlap, so the
    layers can add up to more than the total.
  - `macs`; `utilization` = macs / (cycles × MACs per cycle of the tiles it uses), each MAC
    at its own rate (fp16, or int8 for `qconv` and `qfc`).
  - `ocm_peak_bytes`: the most OCM bytes in use (all tiles) at any time between its first
    start and its last end; a value is in use from its writer's start to its last reader's end.
  - `ddr_read_bytes` / `ddr_write_bytes`: what the DDR port moved for it, in whole bursts.
  - `roofline_cycles` = `mrvl.cost.roofline_cycles` of its MACs over all the program's tiles
    and its compulsory DDR bytes: the distinct DDR bytes its instructions read plus those they
    write, each byte once (no burst rounding). With a schedule that goes through DDR between
    layers, that is its weights and bias and its input read once and its output written once.
  - `saturated`: `{"values", "nans"}` the run counted for it (`RunStats`).
  - `dtype`: "int8" when it runs int8 instructions (`quant`, `qconv`, ...) or only moves
    1-byte elements, "float16" otherwise (`layer_dtype`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mrvl import cost
from mrvl.isa import NO_LOC, OPCODES
from mrvl.isa_int8 import INT8_MAC_OPCODES, int8_opcodes
from mrvl.sim.cycles import CONTROL, Access, Timeline, model_cycles
from mrvl.sim.stats import RunStats
from mrvl.sim.validate import ValidProgram

NO_NODE = "no ONNX node"
"""The layer name of instructions without a source location."""

SCHEMA = "profile.schema.json"
"""In the `mrvl.schemas` package (mrvl_ir/schemas/)."""


@dataclass
class Layer:
    onnx_node: str
    region: str
    cycles: int
    macs: int
    utilization: float
    ocm_peak_bytes: int
    ddr_read_bytes: int
    ddr_write_bytes: int
    roofline_cycles: int
    compulsory_ddr_bytes: int
    """The DDR bytes its roofline counts: distinct bytes read plus distinct bytes written."""
    saturated: dict[str, int]
    instructions: int
    tiles: int
    """Tiles its instructions run on."""
    dtype: str
    """The data type it computes in: "int8" or "float16" (`layer_dtype`)."""

    @property
    def roofline_ratio(self) -> float:
        return self.cycles / self.roofline_cycles if self.roofline_cycles else float("inf")


@dataclass
class RegionProfile:
    region: str
    num_tiles: int
    total_cycles: int
    roofline_cycles: int
    ddr_read_bytes: int
    ddr_write_bytes: int
    timeline: Timeline = field(repr=False)


@dataclass
class Profile:
    mcpu: str
    clock_mhz: int
    regions: list[RegionProfile]
    layers: list[Layer]

    @property
    def total_cycles(self) -> int:
        return sum(r.total_cycles for r in self.regions)

    @property
    def roofline_cycles(self) -> int:
        return sum(r.roofline_cycles for r in self.regions)

    @property
    def ddr_read_bytes(self) -> int:
        return sum(r.ddr_read_bytes for r in self.regions)

    @property
    def ddr_write_bytes(self) -> int:
        return sum(r.ddr_write_bytes for r in self.regions)

    @property
    def compulsory_ddr_bytes(self) -> int:
        return sum(layer.compulsory_ddr_bytes for layer in self.layers)

    @property
    def microseconds(self) -> float:
        return self.total_cycles / self.clock_mhz

    def to_json(self) -> dict:
        """The profile.json document (schema: mrvl_ir/schemas/profile.schema.json)."""
        return {
            "mcpu": self.mcpu,
            "clock_mhz": self.clock_mhz,
            "total_cycles": self.total_cycles,
            "roofline_cycles": self.roofline_cycles,
            "ddr_read_bytes": self.ddr_read_bytes,
            "ddr_write_bytes": self.ddr_write_bytes,
            "regions": [
                {
                    "region": r.region,
                    "num_tiles": r.num_tiles,
                    "total_cycles": r.total_cycles,
                    "roofline_cycles": r.roofline_cycles,
                    "ddr_read_bytes": r.ddr_read_bytes,
                    "ddr_write_bytes": r.ddr_write_bytes,
                }
                for r in self.regions
            ],
            "layers": [asdict(layer) for layer in self.layers],
        }

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    def saturating_layers(self) -> list[Layer]:
        return [
            layer for layer in self.layers if layer.saturated["values"] or layer.saturated["nans"]
        ]

    def summary(self, top: int = 10) -> str:
        """Totals, then the `top` layers by cycles with utilization and roofline ratio."""
        from tabulate import tabulate

        total, bound = self.total_cycles, self.roofline_cycles
        ratio = total / bound if bound else float("inf")
        totals = (
            f"total: {total} cycles = {self.microseconds:.1f} us at {self.clock_mhz} MHz; "
            f"roofline {bound} cycles ({ratio:.2f}x); "
            f"DDR read {self.ddr_read_bytes} B, written {self.ddr_write_bytes} B"
        )
        lines = [totals]
        rows = [
            (
                layer.onnx_node,
                layer.cycles,
                f"{100 * layer.cycles / total:.1f}" if total else "-",
                f"{100 * layer.utilization:.1f}",
                layer.roofline_cycles,
                f"{layer.roofline_ratio:.2f}",
            )
            for layer in sorted(self.layers, key=lambda x: -x.cycles)[:top]
        ]
        headers = ["ONNX node", "cycles", "% total", "MAC util %", "roofline", "x roofline"]
        lines.append(tabulate(rows, headers=headers))
        for layer in self.saturating_layers():
            s = layer.saturated
            lines.append(
                f"warning: layer {layer.onnx_node!r} saturated {s['values']} values at "
                f"+-65504 and produced {s['nans']} NaNs"
            )
        return "\n".join(lines)


# ---------------------------------------------------------------------------- computing it


def union_length(starts: np.ndarray, stops: np.ndarray) -> int:
    """Length of the union of the intervals [starts[i], stops[i])."""
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    starts, stops = starts[order], stops[order]
    reach = np.maximum.accumulate(stops)
    before = np.concatenate(([starts[0]], reach[:-1]))
    return int(np.maximum(0, stops - np.maximum(starts, before)).sum())


def distinct_bytes(accesses: Sequence[Access]) -> int:
    """Bytes touched by any of the accesses, each counted once."""
    if not accesses:
        return 0
    starts = np.concatenate([a.run_starts() for a in accesses])
    lengths = np.concatenate([np.full(a.runs, a.run, np.int64) for a in accesses])
    return union_length(starts, starts + lengths)


INT8_OPCODES = frozenset(spec.name for spec in int8_opcodes({s.name: s for s in OPCODES}))
"""The instructions of the ISA's int8 mode (docs/isa.md §4b)."""

INT8 = "int8"
FLOAT16 = "float16"


def layer_dtype(code, members: Sequence[int]) -> str:
    """The data type of a layer of the instructions `members` of `code`: int8 when one of them
    is an int8 instruction, or when they only move data (`dma`) of 1-byte elements, as an
    int8 reshape or concat does; float16 otherwise."""
    opcodes = {code[i].opcode for i in members}
    if opcodes & INT8_OPCODES:
        return INT8
    if opcodes == {"dma"} and all(code[i].fields["elem_bytes"] == 1 for i in members):
        return INT8
    return FLOAT16


def _peak(times: np.ndarray, level: np.ndarray, begin: int, finish: int) -> int:
    """The highest level of the step function in [begin, finish)."""
    if len(times) == 0:
        return 0
    lo = max(int(np.searchsorted(times, begin, side="right")) - 1, 0)
    hi = int(np.searchsorted(times, finish, side="left"))
    window = level[lo : max(hi, lo + 1)]
    if times[lo] > begin and lo == 0:
        window = np.concatenate(([0], window))
    return int(window.max())


def profile_timeline(
    timeline: Timeline, region: str, stats: RunStats | None = None
) -> tuple[RegionProfile, list[Layer]]:
    valid = timeline.valid
    program, target = valid.program, valid.target
    code = valid.code
    saturated = stats.by_node(program) if stats is not None and len(stats.saturated) else {}
    rate = target.fp16_macs_per_cycle_per_tile
    int8_rate = target.int8_macs_per_cycle_per_tile
    int8_macs = np.array([ins.opcode in INT8_MAC_OPCODES for ins in code]) * timeline.macs
    times, level = timeline.ocm_in_use()

    groups: dict[str, list[int]] = {}
    for index, ins in enumerate(code):
        if timeline.queue[index] == CONTROL:
            continue
        node = program.srcmap[ins.loc] if ins.loc != NO_LOC else NO_NODE
        groups.setdefault(node, []).append(index)

    layers = []
    for node, members in groups.items():
        idx = np.array(members)
        starts, ends = timeline.start[idx], timeline.end[idx]
        cycles = union_length(starts, ends)
        macs = int(timeline.macs[idx].sum())
        int8 = int(int8_macs[idx].sum())
        tiles = len({code[i].tile for i in members})
        if not cycles:
            utilization = 0.0
        elif int8:  # each MAC at its own peak rate
            utilization = ((macs - int8) / rate + int8 / int8_rate) / (cycles * tiles)
        else:
            utilization = macs / (cycles * rate * tiles)
        compulsory = distinct_bytes([a for i in members for a in timeline.ddr_reads[i]])
        compulsory += distinct_bytes([a for i in members for a in timeline.ddr_writes[i]])
        values, nans = saturated.get(node, (0, 0))
        layers.append(
            Layer(
                onnx_node=node,
                region=region,
                cycles=cycles,
                macs=macs,
                utilization=utilization,
                ocm_peak_bytes=_peak(times, level, int(starts.min()), int(ends.max())),
                ddr_read_bytes=int(timeline.ddr_read[idx].sum()),
                ddr_write_bytes=int(timeline.ddr_write[idx].sum()),
                roofline_cycles=cost.roofline_cycles(
                    target, program.num_tiles, macs, compulsory, int8_macs=int8
                ),
                compulsory_ddr_bytes=compulsory,
                saturated={"values": int(values), "nans": int(nans)},
                instructions=len(members),
                tiles=tiles,
                dtype=layer_dtype(code, members),
            )
        )
    summary = RegionProfile(
        region=region,
        num_tiles=program.num_tiles,
        total_cycles=timeline.total_cycles,
        roofline_cycles=sum(layer.roofline_cycles for layer in layers),
        ddr_read_bytes=int(timeline.ddr_read.sum()),
        ddr_write_bytes=int(timeline.ddr_write.sum()),
        timeline=timeline,
    )
    return summary, layers


def profile_regions(regions: Sequence[tuple[str, ValidProgram, RunStats | None]]) -> Profile:
    """Model each (region name, program, what its run counted) and sum them up."""
    if not regions:
        raise ValueError("nothing to profile: the model has no MLIP region")
    summaries, layers = [], []
    for name, valid, stats in regions:
        summary, region_layers = profile_timeline(model_cycles(valid), name, stats)
        summaries.append(summary)
        layers += region_layers
    target = regions[0][1].target
    return Profile(target.name, target.clock_mhz, summaries, layers)


def profile_schema() -> dict:
    from importlib import resources

    return json.loads(resources.files("mrvl.schemas").joinpath(SCHEMA).read_text())


def check_profile(document: dict) -> None:
    """Raise jsonschema.ValidationError unless `document` is a valid profile.json."""
    from jsonschema import Draft202012Validator

    Draft202012Validator(profile_schema()).validate(document)
