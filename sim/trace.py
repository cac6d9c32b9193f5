"""The Chrome trace of a profile: the JSON that Perfetto (ui.perfetto.dev) and chrome://tracing
open, in the Trace Event Format.

- one process per tile (`pid` = region offset + tile) and one thread per engine (`tid` 0 dma,
  1 mac, 2 vector), named by `M` (metadata) events;
- one `X` (complete) event per instruction, named by its ONNX node, with the instruction
  (region, index, opcode, its fields) and its layer's `dtype` ("int8" or "float16", as in
  profile.json) in `args`;
- a `C` (counter) track "OCM bytes" per tile: the bytes in use (see `mrvl.sim.cycles`).

Time is in microseconds at the target's clock (`ts` = cycle / clock_mhz). Regions run one
after another: each starts where the previous one ended, with its own processes.
"""

from __future__ import annotations

import json
from pathlib import Path

from mrvl.isa import NO_LOC
from mrvl.sim.cycles import CONTROL, UNITS
from mrvl.sim.profile import NO_NODE, Profile


def chrome_trace(profile: Profile) -> dict:
    events: list[dict] = []
    clock = profile.clock_mhz
    offset = 0
    first_pid = 0
    dtypes = {(layer.region, layer.onnx_node): layer.dtype for layer in profile.layers}
    for region in profile.regions:
        timeline = region.timeline
        program, code = timeline.program, timeline.valid.code
        for tile in range(region.num_tiles):
            pid = first_pid + tile
            name = f"{region.region} tile {tile}" if len(profile.regions) > 1 else f"tile {tile}"
            events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
            events.append(
                {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}
            )
            for tid, unit in enumerate(UNITS):
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": pid,
                        "tid": tid,
                        "args": {"name": unit.value},
                    }
                )
        for index, ins in enumerate(code):
            queue = int(timeline.queue[index])
            if queue == CONTROL:
                continue
            start, end = int(timeline.start[index]), int(timeline.end[index])
            node = program.srcmap[ins.loc] if ins.loc != NO_LOC else NO_NODE
            events.append(
                {
                    "ph": "X",
                    "name": node,
                    "cat": ins.opcode,
                    "pid": first_pid + ins.tile,
                    "tid": queue % 3,
                    "ts": (offset + start) / clock,
                    "dur": (end - start) / clock,
                    "args": {
                        "region": region.region,
                        "index": index,
                        "opcode": ins.opcode,
                        "dtype": dtypes[region.region, node],
                        "start_cycle": offset + start,
                        "cycles": end - start,
                        "macs": int(timeline.macs[index]),
                        "ddr_read": int(timeline.ddr_read[index]),
                        "ddr_write": int(timeline.ddr_write[index]),
                        "fields": {
                            k: list(v) if isinstance(v, tuple) else v for k, v in ins.fields.items()
                        },
                    },
                }
            )
        for tile in range(region.num_tiles):
            times, level = timeline.ocm_in_use(tile)
            for t, value in zip(times.tolist(), level.tolist()):
                events.append(
                    {
                        "ph": "C",
                        "name": "OCM bytes",
                        "pid": first_pid + tile,
                        "ts": (offset + t) / clock,
                        "args": {"bytes": value},
                    }
                )
        offset += region.total_cycles
        first_pid += region.num_tiles
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "mcpu": profile.mcpu,
            "clock_mhz": clock,
            "total_cycles": profile.total_cycles,
        },
    }


def write_trace(profile: Profile, path: str | Path) -> None:
    Path(path).write_text(json.dumps(chrome_trace(profile)))
