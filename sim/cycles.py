"""The cycle model: when each instruction of a validated program runs on a parallel MLIP, and
whether the program's tokens order every pair of instructions that touch the same bytes.

Time does not depend on data, so the model needs no engine run; it replays the program once,
in program order (docs/isa.md, "Cycle model", says the same in prose):

- **Queues.** Each tile has three in-order queues, one per engine (`dma`: dma/cvt/lut, `mac`:
  conv/fc, `vector`: pool/add/scale/mul/resize). An instruction starts when the previous one on
  its queue has finished, and when **every earlier signaller** (in program order) of each token
  it waits on has finished. `end` takes no time: the program ends when its last instruction does.
- **Cost.** What an instruction costs is `mrvl.cost` applied to its fields (`instruction_cost`),
  the same functions the scheduler prices its pieces with.
- **The DDR port.** One port, shared by all tiles, moves `ddr_bytes_per_cycle`. A DMA that moves
  DDR bytes (counted in whole bursts per contiguous run) needs `ddr_port_cycles(bytes)` of it,
  from the end of its set-up on. The port interleaves bursts: DMAs are given its free cycles in
  program order, each taking every free cycle from when it is ready until it has its count, in
  as many pieces as the earlier DMAs' cycles leave. The DMA starts `set-up` before its first
  port cycle and ends at the later of its last port cycle and `start + its engine time`.
- **Dependencies.** Happens-before is queue order plus token chains, kept as vector clocks over
  the queues. A read of bytes whose last write does not happen before it, or a write over bytes
  that an earlier instruction reads or writes and that does not happen before it, raises
  `HazardError` naming both instructions and their ONNX nodes. The check is exact, per byte
  (tracked in units of the largest granularity every access of the program is aligned to): OCM
  in shadow arrays per tile, the activation-table memory of each tile as one more location, DDR
  in shadow arrays over the bytes that some instruction writes (bytes only ever read, the
  constants and inputs, cannot take part in a hazard).
- **Multicast.** A `dma` with `dst_tiles` is one transfer: it runs on its own tile's `dma`
  queue and claims the port once for its source, and its destination box is a write on the
  OCM of each destination tile (`Access.tile`), checked against that tile's shadow.
- **OCM in use.** The value an instruction writes to OCM holds its bytes, on each tile it
  writes, from that instruction's start until the end of the last instruction on that tile
  that reads any of it (or its own end, if none does).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import reduce

import numpy as np

from mrvl import cost
from mrvl.cost import Cost, Unit
from mrvl.isa import (
    ACT_TABLE_ENTRIES,
    DTYPE_BYTES,
    OPCODES,
    DType,
    Instruction,
    MemSpace,
    OpcodeTable,
    Program,
)
from mrvl.sim.errors import SimulatorError
from mrvl.sim.operands import (  # noqa: F401 (Access and operands: part of this module's API)
    DDR,
    OCM,
    TABLE,
    Access,
    Operands,
    operands,
)
from mrvl.sim.validate import ValidProgram, describe
from mrvl.target import Target

UNITS = (Unit.DMA, Unit.MAC, Unit.VECTOR)
"""The engines of a tile, in queue order: queue `tile * 3 + UNITS.index(unit)`."""

CONTROL = -1
"""The queue of `end`, which takes no time and touches no memory."""

UNIT_OF = {
    spec.name: CONTROL if spec.engine == "control" else UNITS.index(Unit(spec.engine))
    for spec in OPCODES
}
"""Queue slot of each opcode (CONTROL for `end`), as the ISA table's `OpcodeSpec.engine` says."""

SPACE_NAMES = {DDR: "DDR", OCM: "OCM", TABLE: "activation-table memory"}


class HazardError(SimulatorError):
    """Two instructions touch the same bytes, at least one writing, and no queue order or token
    chain orders them: on a parallel machine the result would depend on timing."""


# --------------------------------------------------------------------------------- the costs


COSTS = OpcodeTable("a cycle cost")
"""Per opcode, its (Cost, MACs) from its fields, by the functions of `mrvl.cost`."""
costs = COSTS.register


@costs("dma")
def _dma(f: dict, target: Target) -> tuple[Cost, int]:
    return cost.dma_box(
        target,
        tuple(f["box"]),
        f["elem_bytes"],
        tuple(f["src_strides"]),
        tuple(f["dst_strides"]),
        src_ddr=f["src_space"] == MemSpace.DDR,
        dst_ddr=f["dst_space"] == MemSpace.DDR,
    ), 0


@costs("cvt")
def _cvt(f: dict, target: Target) -> tuple[Cost, int]:
    count = math.prod(f["src_shape"])
    read, write = count * DTYPE_BYTES[f["src_dtype"]], count * DTYPE_BYTES[f["dst_dtype"]]
    return cost.convert(target, read, write), 0


@costs("lut")
def _lut(f: dict, target: Target) -> tuple[Cost, int]:
    return cost.lut(target, ACT_TABLE_ENTRIES * DTYPE_BYTES[DType.F16]), 0


@costs("conv")
def _conv(f: dict, target: Target) -> tuple[Cost, int]:
    macs = cost.conv_macs(f["out_shape"], f["kernel"], f["in_shape"][3] // f["groups"])
    return cost.mac(target, macs), macs


@costs("fc")
def _fc(f: dict, target: Target) -> tuple[Cost, int]:
    macs = f["n"] * f["k"] * f["o"]
    return cost.mac(target, macs), macs


@costs("bmm")
def _bmm(f: dict, target: Target) -> tuple[Cost, int]:
    macs = f["batch"] * f["m"] * f["k"] * f["n"]
    return cost.mac(target, macs), macs


@costs("pool")
def _pool(f: dict, target: Target) -> tuple[Cost, int]:
    return cost.vector(target, cost.pool_element_ops(f["out_shape"], f["kernel"])), 0


@costs("resize")
@costs("qresize")
def _resize(f: dict, target: Target) -> tuple[Cost, int]:
    return cost.vector(target, cost.resize_element_ops(f["out_shape"])), 0


@costs("add")
@costs("scale")
@costs("mul")
def _elementwise(f: dict, target: Target) -> tuple[Cost, int]:
    return cost.vector(target, f["count"]), 0


@costs("softmax")
def _softmax(f: dict, target: Target) -> tuple[Cost, int]:
    count = f["outer"] * f["length"] * f["inner"]
    return cost.vector(target, cost.softmax_element_ops(count)), 0


@costs("layernorm")
def _layernorm(f: dict, target: Target) -> tuple[Cost, int]:
    return cost.vector(target, cost.layernorm_element_ops(f["rows"] * f["length"])), 0


@costs("lnstats")
def _lnstats(f: dict, target: Target) -> tuple[Cost, int]:
    return cost.vector(target, cost.LAYERNORM_STATS_OPS * f["rows"] * f["length"]), 0


@costs("lnapply")
def _lnapply(f: dict, target: Target) -> tuple[Cost, int]:
    count = f["rows"] * f["count"]
    ops = cost.layernorm_element_ops(count) - cost.LAYERNORM_STATS_OPS * count
    return cost.vector(target, ops), 0


@costs("quant")
@costs("dequant")
def _quant(f: dict, target: Target) -> tuple[Cost, int]:
    """A conversion like `cvt`'s: its f32 or f16 side and its int8 side, one byte each."""
    count = math.prod(f["src_shape"])
    wide = DTYPE_BYTES[f["src_dtype"] if "src_dtype" in f else f["dst_dtype"]]
    return cost.convert(target, count * wide, count), 0


@costs("qconv")
def _qconv(f: dict, target: Target) -> tuple[Cost, int]:
    macs = cost.conv_macs(f["out_shape"], f["kernel"], f["in_shape"][3] // f["groups"])
    return cost.mac(target, macs, int8=True), macs


@costs("qfc")
def _qfc(f: dict, target: Target) -> tuple[Cost, int]:
    macs = f["n"] * f["k"] * f["o"]
    return cost.mac(target, macs, int8=True), macs


@costs("qbmm")
def _qbmm(f: dict, target: Target) -> tuple[Cost, int]:
    macs = f["batch"] * f["m"] * f["k"] * f["n"]
    return cost.mac(target, macs, int8=True), macs


@costs("qpool")
def _qpool(f: dict, target: Target) -> tuple[Cost, int]:
    return cost.vector(target, cost.pool_element_ops(f["out_shape"], f["kernel"])), 0


@costs("qadd")
@costs("requant")
@costs("qmul")
def _int8_elementwise(f: dict, target: Target) -> tuple[Cost, int]:
    return cost.vector(target, f["count"]), 0


@costs("reduce")
def _reduce(f: dict, target: Target) -> tuple[Cost, int]:
    return cost.vector(target, f["outer"] * f["length"] * f["inner"]), 0


@costs("binary")
def _binary(f: dict, target: Target) -> tuple[Cost, int]:
    return cost.vector(target, math.prod(f["shape"])), 0


@costs("end")
def _end(f: dict, target: Target) -> tuple[Cost, int]:
    return Cost(Unit.DMA, 0), 0


COSTS.require_complete()


def instruction_cost(ins: Instruction, target: Target) -> tuple[Cost, int]:
    """(Cost, MACs) of one instruction, by the functions of `mrvl.cost`."""
    return COSTS[ins.opcode](ins.fields, target)


# ------------------------------------------------------------------------------- the result


@dataclass(frozen=True)
class Timeline:
    """The modelled run of one program: per instruction (arrays in program order, up to and
    including `end`) its queue, start and end cycle, MACs and DDR bytes."""

    valid: ValidProgram
    queue: np.ndarray
    """tile * 3 + engine slot (0 dma, 1 mac, 2 vector); CONTROL for `end`."""
    start: np.ndarray
    end: np.ndarray
    macs: np.ndarray
    ddr_read: np.ndarray
    """DDR bytes read, whole bursts (what the port moved)."""
    ddr_write: np.ndarray
    ocm_bytes: np.ndarray
    """[instructions, tiles]: OCM bytes the instruction writes on each tile (its value's size
    on its own tile, or on each destination tile of a multicast dma; 0 elsewhere)."""
    ocm_free: np.ndarray
    """[instructions, tiles]: when the value it wrote to a tile's OCM stops being needed
    there: the end of its last reader on that tile (its own end if none)."""
    ddr_reads: tuple[tuple[Access, ...], ...]
    """The DDR accesses of each instruction, for footprints (reads)."""
    ddr_writes: tuple[tuple[Access, ...], ...]
    port_first: np.ndarray
    """The first cycle the DDR port moves bytes of the instruction (0 if it moves none)."""
    port_last: np.ndarray
    """One past the last such cycle: its bytes moved in [port_first, port_last), interleaved
    with other transfers' bursts."""

    @property
    def program(self) -> Program:
        return self.valid.program

    @property
    def total_cycles(self) -> int:
        return int(self.end.max()) if len(self.end) else 0

    def ocm_in_use(self, tile: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The step function of OCM bytes in use on `tile` (None: all tiles together):
        (distinct times, bytes in use from each time on); empty if nothing is ever in use."""
        written = self.ocm_bytes if tile is None else self.ocm_bytes[:, tile : tile + 1]
        freed = self.ocm_free if tile is None else self.ocm_free[:, tile : tile + 1]
        rows, cols = np.nonzero(written)  # each value on each tile it was written to
        nbytes = written[rows, cols]
        times = np.concatenate([self.start[rows], freed[rows, cols]])
        deltas = np.concatenate([nbytes, -nbytes])
        order = np.argsort(times, kind="stable")
        times, level = times[order], np.cumsum(deltas[order])
        if not len(times):
            return times, times
        last = np.concatenate((times[1:] != times[:-1], [True]))
        return times[last], level[last]


# ------------------------------------------------------------------------ the DDR port


class Port:
    """Busy windows of the shared DDR port, sorted, disjoint and not touching (touching windows
    are merged)."""

    def __init__(self):
        self.starts: list[int] = []
        self.stops: list[int] = []

    def claim(self, ready: int, length: int) -> tuple[int, int]:
        """Give a transfer ready at `ready` `length` cycles of the port: the free cycles from
        `ready` on, in as many pieces as the busy windows leave (the port interleaves the
        bursts of the tiles' transfers). Returns its first cycle and one past its last."""
        if length <= 0:
            return ready, ready
        lo = bisect.bisect_left(self.stops, ready)  # windows from here on may touch the claim
        k, t, left = lo, ready, length
        pieces = []
        while left:
            if k < len(self.starts) and self.starts[k] <= t:
                t = max(t, self.stops[k])
                k += 1
                continue
            take = min(left, self.starts[k] - t) if k < len(self.starts) else left
            pieces.append((t, t + take))
            left -= take
            t += take
        hi = k + 1 if k < len(self.starts) and self.starts[k] == t else k
        merged: list[list[int]] = []
        for start, stop in sorted([*zip(self.starts[lo:hi], self.stops[lo:hi]), *pieces]):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], stop)
            else:
                merged.append([start, stop])
        self.starts[lo:hi] = [start for start, _ in merged]
        self.stops[lo:hi] = [stop for _, stop in merged]
        return pieces[0][0], t


# ------------------------------------------------------------------------ the shadow memory


class Shadow:
    """Per unit of one memory: the instruction whose value it holds (`writer`, -1 none), and per
    queue that may access it the latest reader since that write (`readers[l]`, its position in
    its queue, -1 none). Queues `queues[l]` (global ids) are the only ones that reach it."""

    def __init__(self, units: int, queues: list[int], longest_queue: int):
        self.writer = np.full(units, -1, np.int32)
        kind = np.int16 if longest_queue < np.iinfo(np.int16).max else np.int32
        self.readers = np.full((len(queues), units), -1, kind)
        self.queues = np.array(queues, np.int64)
        self.lane = {q: lane for lane, q in enumerate(queues)}


class _Hazards:
    """The dependency check; see the module docstring."""

    def __init__(self, valid: ValidProgram, accesses: list[Operands], queue, seq, members):
        program = valid.program
        self.program, self.code = program, valid.code
        self.queue, self.seq, self.members = queue, seq, members
        tiles = program.num_tiles
        longest = max((len(m) for m in members), default=0)
        ocm_runs = [a for reads, writes in accesses for a in reads + writes if a.space == OCM]
        ddr_runs = [a for reads, writes in accesses for a in reads + writes if a.space == DDR]
        self.ocm_unit = _granularity(ocm_runs)
        self.ddr_unit = _granularity(ddr_runs)
        ocm_units = -(-valid.target.ocm_bytes_per_tile // self.ocm_unit)
        self.table_unit = ocm_units  # one more location after the OCM: the table memory
        self.ocm = [
            Shadow(ocm_units + 1, [t * 3 + 0, t * 3 + 1, t * 3 + 2], longest) for t in range(tiles)
        ]
        # DDR: only the bytes some instruction writes, in merged windows (units), compacted.
        hulls = sorted(
            _unit_hull(a, self.ddr_unit) for _, writes in accesses for a in writes if a.space == DDR
        )
        starts, stops = [], []
        for lo, hi in hulls:
            if starts and lo <= stops[-1]:
                stops[-1] = max(stops[-1], hi)
            else:
                starts.append(lo)
                stops.append(hi)
        self.win_start = np.array(starts, np.int64)
        self.win_stop = np.array(stops, np.int64)
        self.win_offset = np.concatenate([[0], np.cumsum(self.win_stop - self.win_start)])
        self.ddr = Shadow(int(self.win_offset[-1]), [t * 3 for t in range(tiles)], longest)

    # -- unit indices of an access in its shadow: a slice, or an index array

    def _units(self, access: Access, unit: int):
        lo = access.base // unit
        if not access.dims:
            return slice(lo, lo + access.run // unit)
        run = np.arange(access.run // unit, dtype=np.int64)
        return ((access.run_starts() // unit)[:, None] + run).reshape(-1)

    def _ddr_units(self, access: Access):
        """Compacted DDR units of an access (only those in written windows), or None."""
        unit = self.ddr_unit
        lo, hi = _unit_hull(access, unit)
        k = int(np.searchsorted(self.win_stop, lo, side="right"))
        if k >= len(self.win_start) or self.win_start[k] >= hi:
            return None  # touches no byte that any instruction writes
        if lo >= self.win_start[k] and hi <= self.win_stop[k]:
            shift = self.win_offset[k] - self.win_start[k]
            units = self._units(access, unit)
            if isinstance(units, slice):
                return slice(units.start + shift, units.stop + shift)
            return units + shift
        units = self._units(access, unit)
        if isinstance(units, slice):
            units = np.arange(units.start, units.stop, dtype=np.int64)
        window = np.searchsorted(self.win_start, units, side="right") - 1
        inside = (window >= 0) & (units < self.win_stop[np.maximum(window, 0)])
        units, window = units[inside], window[inside]
        return units - self.win_start[window] + self.win_offset[window]

    def tile(self, index: int, access: Access) -> int:
        """The tile whose OCM or table memory an access of instruction `index` touches."""
        return self.code[index].tile if access.tile is None else access.tile

    def locate(self, index: int, access: Access):
        """(shadow, units) of an access by instruction `index`, or None if untracked."""
        if access.space == TABLE:
            tile = self.tile(index, access)
            return self.ocm[tile], slice(self.table_unit, self.table_unit + 1)
        if access.space == OCM:
            return self.ocm[self.tile(index, access)], self._units(access, self.ocm_unit)
        units = self._ddr_units(access)
        return None if units is None else (self.ddr, units)

    # -- the checks

    def writers_of(self, shadow: Shadow, units) -> np.ndarray:
        """The distinct instructions whose values the units hold (none: empty)."""
        held = shadow.writer[units]
        if held.size == 0:
            return held
        first = held[0]
        if held[-1] == first and (held == first).all():  # the common case: one value
            return held[:1] if first >= 0 else held[:0]
        firsts = np.unique(held[np.concatenate(([True], held[1:] != held[:-1]))])
        return firsts[firsts >= 0]

    def check_writers(self, index, access, shadow, units, vc, doing: str) -> np.ndarray:
        """Every instruction whose value the units hold happens before `index` (which
        `doing`: "reads" or "writes" them); returns those instructions."""
        writers = self.writers_of(shadow, units)
        if writers.size:
            late = self.seq[writers] >= vc[self.queue[writers]]
            if late.any():
                other = int(writers[np.argmax(late)])
                self.fail(index, doing, other, "wrote", access)
        return writers

    def check_readers(self, index, access, shadow, units, vc) -> None:
        """Every instruction that read the units since their last write happens before
        `index`, which writes them. Per queue only the latest such reader needs checking:
        the earlier ones of its queue happen before it."""
        latest = shadow.readers[:, units]
        latest = latest.max(axis=1) if latest.shape[1] else np.full(len(shadow.queues), -1)
        late = latest >= vc[shadow.queues]
        if late.any():
            lane = int(np.argmax(late))
            # The earliest reader of these bytes on that queue that is not ordered before us.
            readers = shadow.readers[lane, units]
            seq = int(readers[readers >= vc[shadow.queues[lane]]].min())
            other = self.members[int(shadow.queues[lane])][seq]
            self.fail(index, "writes", other, "reads", access)

    def fail(self, index: int, doing: str, other: int, did: str, access: Access) -> None:
        mine = describe(self.program, index, self.code[index])
        theirs = describe(self.program, other, self.code[other])
        space = SPACE_NAMES[access.space]
        if access.space == OCM:
            space = f"tile {self.tile(index, access)}'s OCM"
        if access.space == TABLE:
            space = f"tile {self.tile(index, access)}'s activation-table memory"
        lo, hi = access.hull
        where = space if access.space == TABLE else f"{space} bytes in [{lo:#x}, {hi:#x})"
        raise HazardError(
            f"{mine} {doing} {where} that {theirs} {did} them, "
            "and no queue order or token chain orders the two: on a parallel machine the "
            "result depends on timing (a missing wait)"
        )


def _unit_hull(access: Access, unit: int) -> tuple[int, int]:
    lo, hi = access.hull
    return lo // unit, -(-hi // unit)


def _granularity(accesses: list[Access]) -> int:
    """The largest power of two dividing every run start and length: tracking memory in
    units of it is exact."""
    values = [a.base for a in accesses] + [a.run for a in accesses]
    values += [s for a in accesses for _, s in a.dims]
    g = reduce(math.gcd, values, 0)
    if g == 0:
        return 1
    return g & -g  # a power of two keeps unit indices cheap to reason about


# ------------------------------------------------------------------------------ the model


def model_cycles(valid: ValidProgram) -> Timeline:
    """Replay `valid` on the cycle model; raise HazardError at the first pair of unordered
    instructions that touch the same bytes (see the module docstring)."""
    code, target = valid.code, valid.target
    count = len(code)
    tiles = valid.program.num_tiles
    nq = tiles * 3

    queue = np.full(count, CONTROL, np.int64)
    seq = np.zeros(count, np.int64)
    members: list[list[int]] = [[] for _ in range(nq)]
    for i, ins in enumerate(code):
        if UNIT_OF[ins.opcode] != CONTROL:
            q = ins.tile * 3 + UNIT_OF[ins.opcode]
            queue[i], seq[i] = q, len(members[q])
            members[q].append(i)

    accesses = [operands(ins) for ins in code]
    hazards = _Hazards(valid, accesses, queue, seq, members)

    start = np.zeros(count, np.int64)
    end = np.zeros(count, np.int64)
    macs = np.zeros(count, np.int64)
    ddr_read = np.zeros(count, np.int64)
    ddr_write = np.zeros(count, np.int64)
    ocm_bytes = np.zeros((count, tiles), np.int64)
    ocm_free = np.zeros((count, tiles), np.int64)
    port_first = np.zeros(count, np.int64)
    port_last = np.zeros(count, np.int64)

    free = [0] * nq
    token_ready: dict[int, int] = {}
    port = Port()
    setup = target.dma_setup_cycles
    # vector clocks: what of each queue has finished (count of its instructions)
    queue_clock = [np.zeros(nq, np.int64) for _ in range(nq)]
    token_clock: dict[int, np.ndarray] = {}

    for i, ins in enumerate(code):
        q = int(queue[i])
        if q == CONTROL:  # `end`: the program is over when everything before it is
            start[i] = end[i] = end[:i].max() if i else 0
            continue
        c, macs[i] = instruction_cost(ins, target)
        ready = free[q]
        for token in ins.waits:
            ready = max(ready, token_ready[token])
        moved = c.ddr_read + c.ddr_write
        if moved:
            port_cycles = cost.ddr_port_cycles(target, moved)
            first, last = port.claim(ready + setup, port_cycles)
            port_first[i], port_last[i] = first, last
            begin = first - setup
            finish = max(begin + c.cycles, last)
        else:
            begin, finish = ready, ready + c.cycles
        start[i], end[i] = begin, finish
        ddr_read[i], ddr_write[i] = c.ddr_read, c.ddr_write
        free[q] = finish
        if ins.signal:
            token_ready[ins.signal] = max(token_ready.get(ins.signal, 0), finish)

        reads, writes = accesses[i]
        for a in writes:
            if a.space == OCM:
                tile = hazards.tile(i, a)
                ocm_bytes[i, tile] = a.nbytes
                ocm_free[i, tile] = finish
        vc = queue_clock[q]
        for token in ins.waits:
            vc = np.maximum(vc, token_clock[token])
        for a in reads:
            located = hazards.locate(i, a)
            if located is None:
                continue
            shadow, units = located
            writers = hazards.check_writers(i, a, shadow, units, vc, "reads")
            if a.space == OCM and writers.size:
                np.maximum.at(ocm_free[:, hazards.tile(i, a)], writers, finish)
            shadow.readers[shadow.lane[q], units] = seq[i]
        # it writes after its own reads: `post` orders it after itself too
        post = vc.copy()
        post[q] = seq[i] + 1
        for a in writes:
            located = hazards.locate(i, a)
            if located is None:
                continue
            shadow, units = located
            hazards.check_writers(i, a, shadow, units, post, "writes")
            hazards.check_readers(i, a, shadow, units, post)
            shadow.writer[units] = i
            shadow.readers[:, units] = -1
        queue_clock[q] = post
        if ins.signal:
            known = token_clock.get(ins.signal)
            token_clock[ins.signal] = post if known is None else np.maximum(known, post)

    return Timeline(
        valid,
        queue,
        start,
        end,
        macs,
        ddr_read,
        ddr_write,
        ocm_bytes,
        ocm_free,
        tuple(tuple(a for a in reads if a.space == DDR) for reads, _ in accesses),
        tuple(tuple(a for a in writes if a.space == DDR) for _, writes in accesses),
        port_first,
        port_last,
    )
