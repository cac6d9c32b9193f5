"""The simulated memories: one DDR and one OCM per tile, as flat byte arrays.

Every access is bounds-checked here, so an instruction with a bad address faults with the byte
range it tried to touch instead of corrupting a neighbouring buffer. Multi-byte values are
little-endian, as in the binary.
"""

from __future__ import annotations

import math

import numpy as np

from mrvl.isa import MemSpace
from mrvl.sim.errors import Fault


def little_endian(dtype: str | np.dtype) -> np.dtype:
    return np.dtype(dtype).newbyteorder("<")


def box_extent(box: tuple[int, ...], strides: tuple[int, ...], elem_bytes: int) -> tuple[int, int]:
    """Byte offsets [lowest, highest) that a non-empty strided box touches, relative to its
    address; strides may be zero or negative."""
    lowest = sum(min(0, (n - 1) * s) for n, s in zip(box, strides))
    highest = sum(max(0, (n - 1) * s) for n, s in zip(box, strides)) + elem_bytes
    return lowest, highest


class Memory:
    """DDR plus one OCM per tile; OCM accesses go to the OCM of the instruction's tile."""

    def __init__(
        self,
        ddr_size: int,
        num_tiles: int,
        ocm_bytes_per_tile: int,
        act_table_bytes_per_tile: int = 0,
    ):
        self.ddr = np.zeros(ddr_size, np.uint8)
        self.ocms = [np.zeros(ocm_bytes_per_tile, np.uint8) for _ in range(num_tiles)]
        self.act_table_bytes = act_table_bytes_per_tile
        self.act_tables: list[tuple[tuple[int, float, float], np.ndarray] | None] = [
            None
        ] * num_tiles
        """Per tile: the (act, act_a, act_b) a `lut` loaded and its float16[65536] table."""

    def space(self, space: MemSpace, tile: int) -> tuple[np.ndarray, str]:
        if space == MemSpace.DDR:
            return self.ddr, "DDR"
        return self.ocms[tile], f"tile {tile}'s OCM"

    @staticmethod
    def _check(buffer: np.ndarray, name: str, start: int, stop: int, what: str) -> None:
        if start < 0 or stop > buffer.size:
            raise Fault(
                f"{what} [{start:#x}, {stop:#x}) is outside {name} of {buffer.size:#x} bytes"
            )

    def check_dense(
        self, space: MemSpace, tile: int, addr: int, dtype: str, shape: tuple[int, ...], what: str
    ) -> None:
        """Fault unless a dense array of `shape` fits at `addr`; compute instructions call it
        for their output before allocating anything of that shape."""
        buffer, name = self.space(space, tile)
        self._check(buffer, name, addr, addr + math.prod(shape) * np.dtype(dtype).itemsize, what)

    def read(
        self, space: MemSpace, tile: int, addr: int, dtype: str, shape: tuple[int, ...], what: str
    ) -> np.ndarray:
        """A copy of the dense array of `shape` stored at `addr`."""
        self.check_dense(space, tile, addr, dtype, shape, what)
        buffer, _ = self.space(space, tile)
        element = little_endian(dtype)
        nbytes = math.prod(shape) * element.itemsize
        return buffer[addr : addr + nbytes].view(element).reshape(shape).copy()

    def write(self, space: MemSpace, tile: int, addr: int, array: np.ndarray, what: str) -> None:
        """Store `array` densely (C order, little-endian) at `addr`."""
        buffer, name = self.space(space, tile)
        raw = (
            np.ascontiguousarray(array, dtype=little_endian(array.dtype)).view(np.uint8).reshape(-1)
        )
        self._check(buffer, name, addr, addr + raw.size, what)
        buffer[addr : addr + raw.size] = raw

    def box(
        self,
        space: MemSpace,
        tile: int,
        addr: int,
        strides: tuple[int, ...],
        box: tuple[int, ...],
        elem_bytes: int,
        what: str,
    ) -> np.ndarray:
        """A writable uint8 view [*box, elem_bytes] of a strided box, after checking its lowest
        and highest byte (strides may be zero or negative). The box must not be empty."""
        buffer, name = self.space(space, tile)
        lowest, highest = box_extent(box, strides, elem_bytes)
        self._check(buffer, name, addr + lowest, addr + highest, what)
        # as_strided does no checking of its own: the bounds check above is what makes it safe,
        # also for negative strides that reach below `addr`.
        return np.lib.stride_tricks.as_strided(
            buffer[addr:], shape=(*box, elem_bytes), strides=(*strides, 1)
        )
