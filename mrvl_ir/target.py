"""Target descriptions: the machine numbers of each `mcpu`, loaded from `targets/*.json`.

Every size, rate and limit the compiler or the simulator uses comes from here, so that a new
part is a new data file, not a hunt for constants.

A design point that is not a built-in part (a sweep's, or a user's `--target-file`) is
registered in this process under its own name (`register_target`, `load_target_file`,
`derive_target`); every stage asks `get_target(name)`, so it compiles and simulates like a
built-in one. The binary header carries only the name, so a process that runs such a binary
(a Ray worker, an RPC server) registers the same target first.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from functools import cache
from pathlib import Path
from typing import Any

from .errors import MrvlError

TARGETS_DIR = Path(__file__).parent / "targets"
SCHEMA = Path(__file__).parent / "schemas" / "target.schema.json"


class UnknownTargetError(MrvlError, ValueError):
    """An `mcpu` name with no target description (a ValueError too, as it always was)."""


class TargetFileError(MrvlError, ValueError):
    """A target file or override that does not describe a part (names the file and field)."""


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


_registered: dict[str, Target] = {}
"""Custom targets of this process, by name (never a built-in name)."""


def available_targets() -> list[str]:
    """The built-in parts (`targets/*.json`)."""
    return sorted(p.stem for p in TARGETS_DIR.glob("*.json"))


def get_target(mcpu: str) -> Target:
    custom = _registered.get(mcpu)
    return custom if custom is not None else _builtin_target(mcpu)


@cache
def _builtin_target(mcpu: str) -> Target:
    path = TARGETS_DIR / f"{mcpu}.json"
    if not path.is_file():
        known = available_targets() + sorted(_registered)
        raise UnknownTargetError(f"unknown mcpu '{mcpu}': known targets are {', '.join(known)}")
    return Target(**json.loads(path.read_text()))


def register_target(target: Target) -> Target:
    """Make `target` known to `get_target` in this process. A name is given once: the compiler
    caches work by target name, so one name must always mean the same numbers."""
    if target.name in available_targets():
        raise TargetFileError(f"target '{target.name}': the name of a built-in part")
    known = _registered.setdefault(target.name, target)
    if known != target:
        raise TargetFileError(
            f"target '{target.name}' is registered already with other numbers; give it a new name"
        )
    return known


def target_fields() -> list[str]:
    """The machine numbers a target file or a sweep may set."""
    return [f.name for f in fields(Target) if f.name not in ("name", "description")]


def target_from_dict(document: dict[str, Any], source: str = "target") -> Target:
    """A Target from a target-file document: checked against `schemas/target.schema.json`,
    then completed from its `base` part; raises TargetFileError naming `source` and the field."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(json.loads(SCHEMA.read_text()))
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        where = "/".join(map(str, error.absolute_path)) or "(top level)"
        raise TargetFileError(f"{source}: {where}: {error.message}")
    document = dict(document)
    base = document.pop("base", None)
    if base is None:
        missing = [name for name in target_fields() if name not in document]
        if missing:
            raise TargetFileError(
                f"{source}: without 'base' every machine number is needed; missing "
                f"{', '.join(missing)}"
            )
        document.setdefault("description", f"custom part {document['name']}")
        return Target(**document)
    try:
        parent = _builtin_target(base)
    except UnknownTargetError as err:
        raise TargetFileError(f"{source}: base: {err}") from None
    document.setdefault("description", f"{parent.name} with {_changes(parent, document)}")
    return replace(parent, **document)


def _changes(parent: Target, document: dict[str, Any]) -> str:
    changed = [f"{k}={document[k]}" for k in target_fields() if k in document]
    return ", ".join(changed) or f"the numbers of {parent.name}"


def load_target_file(path: str | Path) -> Target:
    """Read, check and register the target file at `path` (see `target_from_dict`)."""
    try:
        document = json.loads(Path(path).read_text())
    except OSError as err:
        raise TargetFileError(f"target file {path}: {err.strerror or err}") from None
    except json.JSONDecodeError as err:
        raise TargetFileError(f"target file {path}: not JSON: {err}") from None
    if not isinstance(document, dict):
        raise TargetFileError(f"target file {path}: (top level): must be a JSON object")
    return register_target(target_from_dict(document, f"target file {path}"))


def derive_target(base: str | Target, **overrides: Any) -> Target:
    """`base` with some machine numbers changed, registered under a name made from them (the
    base's name and a hash of the numbers), so that equal design points share one name."""
    parent = base if isinstance(base, Target) else get_target(base)
    overrides = {k: v for k, v in overrides.items() if getattr(parent, k, None) != v}
    if not overrides:  # the base's own numbers: the base itself
        return parent
    document = {**asdict(parent), **overrides}
    digest = hashlib.sha256(
        json.dumps({k: document[k] for k in target_fields()}, sort_keys=True).encode()
    ).hexdigest()
    name = f"{parent.name[:7]}-{digest[:8]}"
    document.pop("name")
    document["description"] = f"{parent.name} with {_changes(parent, overrides)}"
    document["base"] = parent.name if parent.name in available_targets() else None
    if document["base"] is None:  # a custom parent: every number is in the document
        del document["base"]
    return register_target(target_from_dict({"name": name, **document}, f"target {name}"))


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
