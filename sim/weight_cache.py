"""The weight cache: the packed weights of a program's convs and fcs, kept from run to run, and
which DMAs a warm run may skip. Any engine that packs weights for its multiply-accumulate
kernels can use it: the engine says how it packs (`Packing`), the cache decides which
instructions share a packing, which weights are constant, and which DMAs only feed them.

The arrays it hands an engine (`WeightCache.arrays`) are a flat layout that compiled code can
read: per row its slot (-1: none), per slot where its raw f16 bits and its packing start in
two flat arrays, and per slot a flag (PACKED, CONSTANT)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mrvl import isa
from mrvl.sim.multicast import single_tile
from mrvl.sim.operands import operands
from mrvl.sim.validate import ValidProgram


@dataclass(frozen=True)
class Packing:
    """How an engine packs the weights of one slot: `size(outputs, steps)`, the float32
    elements of the packing of `outputs` x `steps` weights; `min_outputs`, the fewest output
    channels of a conv that gets a slot (fewer run on another kernel, unpacked)."""

    size: Callable[[int, int], int]
    min_outputs: int


PACKED, CONSTANT = 1, 2
"""Bits of a weight-cache slot's `filled` flag: its packing is there; its weights are a fixed
slice of the constant pool (constant_weights), so a run need not compare them."""


WEIGHT_BYTES = {"conv": 2, "fc": 2, "qconv": 1}
"""The bytes a weight takes, per opcode whose weights an engine may pack: f16 for `conv` and
`fc`, int8 for `qconv` (the Numba engine's `int8_weights.QWeightCache`)."""


def weight_shape(ins) -> tuple[int, int] | None:
    """(outputs, steps per output) of a conv's, qconv's or fc's weights; None for other
    opcodes."""
    f = ins.fields
    if ins.opcode in ("conv", "qconv"):
        return f["out_shape"][3], f["kernel"][0] * f["kernel"][1] * f["in_shape"][3] // f["groups"]
    if ins.opcode == "fc":
        return f["o"], f["k"]
    return None


def weight_bytes(ins) -> tuple[int, int]:
    """[start, stop) of a conv's, qconv's or fc's weights in its tile's OCM."""
    outs, steps = weight_shape(ins)
    size = WEIGHT_BYTES[ins.opcode] * outs * steps
    return ins.fields["w_addr"], ins.fields["w_addr"] + size


def constant_weights(valid: ValidProgram, accesses: list) -> list:
    """Per instruction, for a conv, qconv or fc whose weights are a fixed slice of the
    constant pool, what they are a copy of; else None. They are when, in program order, the
    bytes of its weights in its tile's OCM were last written by one `dma` from the constant
    pool into a dense OCM range (no later write to that tile's OCM touched them) and no
    instruction writes the pool:
    the pool is the program's own and is loaded before each run, so the weights are the same
    at every run, and the same for every conv with the same copy and offset in it.
    `accesses`: each instruction's (reads, writes) (`mrvl.sim.operands.operands`)."""
    from mrvl.sim.simulator import memory_use

    program = valid.program
    pool = (program.const_base, program.const_base + len(program.consts))
    found: list = [None] * len(valid.code)
    if not memory_use(valid).pool_kept:
        return found  # the program writes its constant pool
    copies_by_tile: dict[int, list] = {}  # tile -> [(start, stop, the copy)] of OCM bytes
    for index, (ins, (reads, writes)) in enumerate(zip(valid.code, accesses, strict=True)):
        copies = copies_by_tile.setdefault(ins.tile, [])
        if ins.opcode in WEIGHT_BYTES:
            start, stop = weight_bytes(ins)
            for lo, hi, copy in copies:
                if lo <= start and stop <= hi:
                    found[index] = (copy, start - lo)
        for w in writes:
            if w.space == isa.MemSpace.OCM:
                lo, hi = w.hull
                copies[:] = [c for c in copies if c[1] <= lo or hi <= c[0]]
        if ins.opcode == "dma" and reads and writes:
            (r,), (w,) = reads, writes
            lo, hi = r.hull
            in_pool = r.space == isa.MemSpace.DDR and pool[0] <= lo and hi <= pool[1]
            if in_pool and w.space == isa.MemSpace.OCM and not w.dims:
                f = ins.fields
                copy = (f["src_addr"], tuple(f["src_strides"]), tuple(f["box"]),
                        tuple(f["dst_strides"]), f["elem_bytes"])  # fmt: skip
                copies.append((*w.hull, copy))
    return found


def weight_only_dmas(
    valid: ValidProgram, accesses: list, slots: np.ndarray, constant: np.ndarray
) -> np.ndarray:
    """Per instruction, 1 for a DDR-to-OCM `dma` whose bytes no instruction reads except as
    the weights of convs with a constant slot (`constant_weights`; `slots` and `constant`:
    one cache's, the fp16 one's or the int8 one's, whose slots are of different opcodes, so a
    read by the other's layers keeps the DMA). Once every such slot is
    packed, those convs read their packing and not the bytes, so a run may skip the DMA: no
    instruction can tell, and OCM is not an output. A read of any other kind, even of part of
    the bytes, keeps the DMA. Bytes stop being the DMA's when a dense write covers them (a
    strided write removes none: that only keeps more DMAs); a read counts as its whole hull."""
    weight_only = np.zeros(len(valid.code), np.uint8)
    watched: dict[int, list] = {}  # tile -> [(start, stop, dma index)] of bytes DMAs wrote
    read_otherwise: set[int] = set()
    for index, (ins, (reads, writes)) in enumerate(zip(valid.code, accesses, strict=True)):
        ranges = watched.setdefault(ins.tile, [])
        slot = slots[index]
        weights = weight_bytes(ins) if slot >= 0 and constant[slot] else None
        for r in reads:
            if r.space != isa.MemSpace.OCM or r.hull == weights:
                continue
            lo, hi = r.hull
            read_otherwise.update(d for start, stop, d in ranges if start < hi and lo < stop)
        for w in writes:
            if w.space == isa.MemSpace.OCM and not w.dims:  # bytes it wrote are not the DMAs'
                lo, hi = w.hull
                ranges[:] = [
                    piece
                    for start, stop, d in ranges
                    for piece in ((start, min(stop, lo), d), (max(start, hi), stop, d))
                    if piece[0] < piece[1]
                ]
        loads = ins.opcode == "dma" and reads and reads[0].space == isa.MemSpace.DDR
        if loads and writes and writes[0].space == isa.MemSpace.OCM:
            ranges.append((*writes[0].hull, index))
            weight_only[index] = 1
    for index in read_otherwise:
        weight_only[index] = 0
    return weight_only


class SlotTable:
    """The slots of an engine's packed weights as the flat arrays compiled code reads: per row
    its slot (-1: none), per slot where its raw weights and its packing start in two flat
    arrays, and per slot a flag. Instructions with one key share a slot. One builder for the
    fp16 `WeightCache` and the Numba engine's int8 one (`int8_weights.QWeightCache`), which
    differ in their keys, their element types and how much a packing holds."""

    def __init__(self, rows: int, raw_dtype, packed_dtype):
        self.raw_dtype, self.packed_dtype = raw_dtype, packed_dtype
        self.slots = np.full(rows, -1, np.int64)
        self.keys: dict = {}
        self.raw_at, self.packed_at = [0], [0]

    def add(self, index: int, key, raw_size: int, packed_size: int) -> bool:
        """Row `index` takes the slot of `key`, a new one of `raw_size` raw and `packed_size`
        packed elements if no row had it; returns whether the slot is new."""
        new = key not in self.keys
        if new:
            self.keys[key] = len(self.keys)
            self.raw_at.append(self.raw_at[-1] + raw_size)
            self.packed_at.append(self.packed_at[-1] + packed_size)
        self.slots[index] = self.keys[key]
        return new

    def arrays(self, flags: np.ndarray) -> tuple:
        """(slots per row, raw_at, packed_at, raw, packed, flags per slot), raw and packed
        zero."""
        return (
            self.slots,
            np.array(self.raw_at, np.int64),
            np.array(self.packed_at, np.int64),
            np.zeros(self.raw_at[-1], self.raw_dtype),
            np.zeros(self.packed_at[-1], self.packed_dtype),
            flags,
        )

    @staticmethod
    def empty(rows: int, raw_dtype, packed_dtype) -> tuple:
        """The arrays of a table without slots (every row -1), of the same types: for a run
        while another holds the cache's lock."""
        return (
            np.full(rows, -1, np.int64),
            np.zeros(1, np.int64),
            np.zeros(1, np.int64),
            np.zeros(0, raw_dtype),
            np.zeros(0, packed_dtype),
            np.zeros(0, np.uint8),
        )


class PerProgram:
    """Caches made on a program's first run and dropped with it, one per (program, key)."""

    def __init__(self):
        self._entries: dict = {}
        self._lock = threading.Lock()

    def get(self, valid: ValidProgram, key, make: Callable[[], object]):
        """The cache of (`valid`, `key`), made by `make()` if there is none yet."""
        full = (id(valid), key)
        with self._lock:
            entry = self._entries.get(full)
            if entry is not None and entry[0]() is valid:
                return entry[1]
            cache = make()
            drop = weakref.ref(valid, lambda _: self._entries.pop(full, None))
            self._entries[full] = (drop, cache)
            return cache


class WeightCache:
    """The packed fp32 weights of a program's convs and fcs (in the engine's `Packing`), kept
    from run to run.

    Packing reads every weight of every conv and costs more than the multiply-adds of the
    layers with few output positions (and of an fc at batch 1). Each conv with one run of
    output channels (groups=1, at least `packing.min_outputs` channels) and each fc, its
    weights at an even address, gets a slot holding the f16 bits it packed and their packing.
    Weights that are a fixed slice of the constant pool (`constant_weights`: the compiler's
    case) are packed once and used as they are; for any other a run compares the weights in
    OCM with the bits (one vectorized pass over 2-byte values instead of a conversion and a
    scattered write per weight, the Numba engine's `packing_stale`) and repacks only if they
    differ, so the cache is right whatever the weights are. Convs of one ONNX node and first
    output channel that read the same OCM range with the same shape and the same copy of the
    pool share a slot, whatever their tile (the row pieces of one slice of a layer's output
    channels, which the tiles compute one after another with the same weights: one packing,
    read while it is still in the CPU's caches); other slices, input-channel blocks and
    layers get their own, or they would repack each other's.

    It also holds what the engine runs, made once per program: `rows`, the program with each
    multicast `dma` as single-tile ones (`single_tile`), `origin`, the instruction each
    row comes from, and `firsts`; all None when the program has no multicast and runs its
    own rows (the cache must not hold the program itself: `_weight_caches` keeps the cache
    until the program dies). Its per-instruction arrays (slots, `weight_only`) are per row."""

    def __init__(self, valid: ValidProgram, packing: Packing):
        self.lock = threading.Lock()
        self.rows, self.origin = single_tile(valid) or (None, None)
        self.firsts = None
        """Each instruction's first row (None with `origin`): a run's counts per row are
        summed back to instructions by np.add.reduceat over them."""
        if self.rows is not None:
            self.firsts = np.flatnonzero(np.diff(self.origin, prepend=-1))
            valid = self.rows
        table, constant = SlotTable(len(valid.code), np.uint16, np.float32), []
        accesses = [operands(ins) for ins in valid.code]
        sources = constant_weights(valid, accesses)
        for index, ins in enumerate(valid.code):
            f = ins.fields
            if ins.opcode == "fc":
                out_channels, steps = weight_shape(ins)
                key = (ins.loc, "fc", f["w_addr"], out_channels, steps, sources[index])
            elif ins.opcode == "conv" and f["groups"] == 1:
                out_channels, steps = weight_shape(ins)
                if out_channels < packing.min_outputs:
                    continue
                kernel = tuple(f["kernel"])
                key = (ins.loc, f["w_addr"], f["oc0"], out_channels, kernel, steps, sources[index])
            else:
                continue
            if f["w_addr"] % 2:
                continue
            packed = int(packing.size(out_channels, steps))
            if table.add(index, key, out_channels * steps, packed):
                constant.append(sources[index] is not None)
        self.arrays = table.arrays(np.array(constant, np.uint8) * np.uint8(CONSTANT))
        slots = table.slots
        self.weight_only = weight_only_dmas(valid, accesses, slots, np.array(constant, np.bool_))
        self.warm = False
        """Whether a whole run has used the cache, packing every slot (programs have no
        branches: each run executes every instruction up to the first `end`)."""

    def skip(self) -> np.ndarray:
        """Per instruction, 1 for a DMA a run may skip: one whose bytes only constant-slot
        convs read (`weight_only_dmas`), once a run has packed every slot."""
        return self.weight_only if self.warm else np.zeros_like(self.weight_only)

    @staticmethod
    def none(valid: ValidProgram) -> tuple:
        """The arrays of an empty cache (every slot -1): for a run while another holds the
        lock."""
        return SlotTable.empty(len(valid.words), np.uint16, np.float32)


_weight_caches = PerProgram()


def weight_cache(valid: ValidProgram, packing: Packing) -> WeightCache:
    """The WeightCache of `valid` for an engine that packs as `packing`, made on its first run
    and dropped with it."""
    return _weight_caches.get(valid, packing, lambda: WeightCache(valid, packing))
