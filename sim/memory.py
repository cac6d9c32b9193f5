"""The simulated memories, shared by every engine: one DDR and one OCM per tile, as byte arrays.

`ddr` is uint8 [ddr_size]; `ocm` is uint8 [num_tiles, ocm_bytes_per_tile], row t being tile t's
OCM; `tables` is uint16 [num_tiles, 65536], row t being tile t's activation-table memory (the
bits of the f16 entries a `lut` loaded). Multi-byte values are little-endian, as in the binary. Accesses are not checked here:
`mrvl.sim.validate` proved every access of a `ValidProgram` in bounds before it runs. The one
exception is `box`, which builds a strided view with `as_strided` (no checking of its own) and
therefore keeps a last check so that a validation bug cannot read or write outside the buffer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mrvl.isa import ACT_TABLE_ENTRIES, DTYPE_NUMPY, DType, MemSpace, Program
from mrvl.sim.validate import box_extent


def little_endian(dtype: str | np.dtype) -> np.dtype:
    return np.dtype(dtype).newbyteorder("<")


class Memory:
    """DDR plus one OCM per tile; OCM accesses go to the OCM of the instruction's tile."""

    def __init__(self, ddr_size: int, num_tiles: int, ocm_bytes_per_tile: int):
        self.ddr = np.zeros(ddr_size, np.uint8)
        self.ocm = np.zeros((num_tiles, ocm_bytes_per_tile), np.uint8)
        self.tables = np.zeros((num_tiles, ACT_TABLE_ENTRIES), np.uint16)
        self._pool: tuple[int, bytes] | None = None
        """(const_base, consts) of a constant pool in DDR that no run has written since it was
        copied there, or None."""
        self._tables_zero = True
        """No run has loaded an activation table since the tables were zeroed."""
        self._dirty: tuple[int, tuple[tuple[int, int], ...]] | None = (0, ())
        """(ocm_end, ddr_ranges): all the bytes that may not be zero outside the constant
        pool (every OCM below ocm_end, the DDR ranges), or None for any byte."""

    def load(
        self,
        program: Program,
        inputs: Sequence[np.ndarray],
        *,
        pool_kept: bool = False,
        tables_kept: bool = False,
        written: tuple[int, tuple[tuple[int, int], ...]] | None = None,
    ) -> None:
        """The state at the start of a run (docs/isa.md §2): zeros, the constant pool at
        const_base, then each input dense at its ddr_addr. Reusing a Memory across runs costs
        one pass over its bytes instead of a fresh allocation.

        `pool_kept` says the program never writes its constant pool (the simulator knows it
        from the program's DMA and cvt destinations): then a Memory whose last run was of the
        same pool still holds it, and the pool (most of a model's bytes) is not copied again.
        `tables_kept` says the program loads no activation table (no `lut`): the tables, zero
        since the last run that did, are not zeroed again.
        `written` (simulator.written_bytes) is where this run, its inputs included, may
        write: the next load zeroes only that (and all of the memory after a `write`), not
        the whole OCM and DDR (2 MiB of OCM for 8 tiles, much of a small model's run).
        """
        lo, hi = program.const_base, program.const_base + len(program.consts)
        if self._dirty is None:
            self.ddr[:lo].fill(0)
            self.ddr[hi:].fill(0)
            self.ocm.fill(0)
        else:
            ocm_end, ranges = self._dirty
            self.ocm[:, :ocm_end].fill(0)
            for start, stop in ranges:
                self.ddr[start:stop].fill(0)
        self._dirty = written
        if not self._tables_zero:
            self.tables.fill(0)
        self._tables_zero = tables_kept
        pool = (lo, program.consts)
        if self._pool is None or self._pool[0] != lo or self._pool[1] is not program.consts:
            self.ddr[lo:hi] = np.frombuffer(program.consts, np.uint8)
        self._pool = pool if pool_kept else None
        for entry, value in zip(program.inputs, inputs):  # within `written`
            self._store(MemSpace.DDR, 0, entry.ddr_addr, value)

    def outputs(self, program: Program) -> list[np.ndarray]:
        """Each output entry read densely from DDR, in native byte order for the caller."""
        results = []
        for entry in program.outputs:
            dtype = DTYPE_NUMPY[DType(entry.dtype)]
            value = self.read(MemSpace.DDR, 0, entry.ddr_addr, dtype, tuple(entry.shape))
            results.append(value.astype(dtype))
        return results

    def space(self, space: MemSpace, tile: int) -> np.ndarray:
        return self.ddr if space == MemSpace.DDR else self.ocm[tile]

    def read(
        self, space: MemSpace, tile: int, addr: int, dtype: str, shape: tuple[int, ...]
    ) -> np.ndarray:
        """A copy of the dense array of `shape` stored at `addr`."""
        element = little_endian(dtype)
        nbytes = math.prod(shape) * element.itemsize
        raw = self.space(space, tile)[addr : addr + nbytes]
        return raw.view(element).reshape(shape).copy()

    def write(self, space: MemSpace, tile: int, addr: int, array: np.ndarray) -> None:
        """Store `array` densely (C order, little-endian) at `addr`; the next load zeroes
        all of the memory again."""
        self._dirty = None
        self._store(space, tile, addr, array)

    def _store(self, space: MemSpace, tile: int, addr: int, array: np.ndarray) -> None:
        raw = np.ascontiguousarray(array, dtype=little_endian(array.dtype)).view(np.uint8)
        raw = raw.reshape(-1)
        self.space(space, tile)[addr : addr + raw.size] = raw

    def box(
        self,
        space: MemSpace,
        tile: int,
        addr: int,
        strides: tuple[int, ...],
        box: tuple[int, ...],
        elem_bytes: int,
    ) -> np.ndarray:
        """A writable uint8 view [*box, elem_bytes] of a non-empty strided box (strides may be
        zero or negative)."""
        buffer = self.space(space, tile)
        lowest, highest = box_extent(box, strides, elem_bytes)
        if addr + lowest < 0 or addr + highest > buffer.size:
            raise AssertionError(f"validation let a box reach outside {space.name}")
        return np.lib.stride_tricks.as_strided(
            buffer[addr:], shape=(*box, elem_bytes), strides=(*strides, 1)
        )
