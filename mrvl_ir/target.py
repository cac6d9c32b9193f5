"""Target descriptions: the machine numbers of each `mcpu`, loaded from `targets/*.json`.

Every size, rate and limit the compiler or the simulator uses comes from here, so that a new
part is a new data file, not a hunt for constants.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .errors import MrvlError

TARGETS_DIR = Path(__file__).parent / "targets"


class UnknownTargetError(MrvlError, ValueError):
    """An `mcpu` name with no target description (a ValueError too, as it always was)."""


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    max_tiles: int
    ocm_bytes_per_tile: int
    act_table_bytes_per_tile: int
    """Activation-table memory of a tile, apart from its OCM: one 65,536-entry f16 table."""
    ddr_bytes: int
    clock_mhz: int
    fp16_macs_per_cycle_per_tile: int
    int8_macs_per_cycle_per_tile: int
    vector_elems_per_cycle_per_tile: int
    mac_setup_cycles: int
    """Cycles a MAC-array instruction spends before its first MAC (fetch, weight load)."""
    vector_setup_cycles: int
    dma_bytes_per_cycle: int
    """Rate of one tile's DMA engine, on its OCM side."""
    dma_setup_cycles: int
    ddr_bytes_per_cycle: int
    """Bandwidth of the one DDR port that all tiles share."""
    ddr_burst_bytes: int
    """DDR moves whole bursts: a contiguous run of a strided transfer costs whole bursts."""
    ddr_alignment: int
    ocm_alignment: int


def available_targets() -> list[str]:
    return sorted(p.stem for p in TARGETS_DIR.glob("*.json"))


@cache
def get_target(mcpu: str) -> Target:
    path = TARGETS_DIR / f"{mcpu}.json"
    if not path.is_file():
        raise UnknownTargetError(
            f"unknown mcpu '{mcpu}': known targets are {', '.join(available_targets())}"
        )
    return Target(**json.loads(path.read_text()))


DEFAULT_MCPU = "cn10ka"
"""The part a region is compiled for when nothing names one (upstream's default too)."""

TILE_COUNTS = (1, 2, 4, 8)
"""Tile counts a program may use (upstream's `num_tiles`): a layer is split evenly over them."""


def valid_tile_count(target: Target, num_tiles: int) -> bool:
    """Whether `num_tiles` is a tile count the compiler splits layers over, on `target`."""
    return num_tiles in TILE_COUNTS and num_tiles <= target.max_tiles


def region_target(attrs, mcpu: str | None, num_tiles: int | None) -> tuple[str, int]:
    """The (mcpu, num_tiles) a region compiles for: the arguments where given, else the
    region's `mrvl.mcpu` / `mrvl.num_tiles` attributes (set by `partition_for_mrvl`), else
    `DEFAULT_MCPU` and all of the part's tiles. The tile count is not checked here."""
    attrs = attrs if attrs is not None else {}
    if mcpu is None:
        mcpu = str(attrs["mrvl.mcpu"]) if "mrvl.mcpu" in attrs else DEFAULT_MCPU
    if num_tiles is None and "mrvl.num_tiles" in attrs:
        num_tiles = int(attrs["mrvl.num_tiles"])
    target = get_target(mcpu)
    return target.name, num_tiles if num_tiles is not None else target.max_tiles
