"""Writing a region's Nodes-JSON and Constants-JSON files (upstream's file names).

`write_json` writes two documents held in memory. `write_region_json` streams the
Constants-JSON from the constant arrays, base64 a few megabytes at a time, so that a region
with hundreds of megabytes of weights never holds its base64 text (a third larger than the
weights) in memory.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from mrvl.errors import CompileError
from mrvl.json_schema import validate

_CHUNK = 3 << 20
"""Bytes base64-encoded at a time (a multiple of 3, so the chunks concatenate)."""


def _paths(outdir: str | Path, symbol: str) -> tuple[Path, Path]:
    if not symbol or "/" in symbol or "\\" in symbol:
        raise CompileError(f"write_json: '{symbol}' cannot be used in a file name")
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    return out / f"{symbol}-nodes.json", out / f"{symbol}-consts.json"


def write_json(
    outdir: str | Path, symbol: str, nodes: dict, consts: dict, *, check: bool = True
) -> tuple[Path, Path]:
    """Write `<symbol>-nodes.json` and `<symbol>-consts.json` (upstream's names) into `outdir`.

    With `check` (the default) both documents are validated first and nothing is written if
    they are not valid.
    """
    if check:
        validate(nodes, consts)
    path_nodes, path_consts = _paths(outdir, symbol)
    with path_nodes.open("w") as f:
        json.dump(nodes, f, indent=2)
        f.write("\n")
    with path_consts.open("w") as f:
        json.dump(consts, f, indent=2)
        f.write("\n")
    return path_nodes, path_consts


def write_region_json(
    outdir: str | Path,
    symbol: str,
    nodes: dict,
    consts: Mapping[str, dict],
    arrays: Mapping[str, np.ndarray],
    *,
    check: bool = True,
) -> tuple[Path, Path]:
    """Write `<symbol>-nodes.json` and `<symbol>-consts.json`, the latter streamed: `consts`
    holds each constant's entry without its data, `arrays` the data (little-endian)."""
    if check:
        validate(nodes, {n: {**e, "data_base64": ""} for n, e in consts.items()}, data=False)
    path_nodes, path_consts = _paths(outdir, symbol)
    with path_nodes.open("w") as f:
        json.dump(nodes, f, indent=2)
        f.write("\n")
    with path_consts.open("w") as f:
        f.write("{")
        for index, (name, entry) in enumerate(consts.items()):
            f.write(",\n" if index else "\n")
            fields = "".join(f"\n    {json.dumps(k)}: {json.dumps(v)}," for k, v in entry.items())
            f.write(f'  {json.dumps(name)}: {{{fields}\n    "data_base64": "')
            data = memoryview(np.ascontiguousarray(arrays[name])).cast("B")
            for start in range(0, len(data), _CHUNK):
                f.write(base64.b64encode(data[start : start + _CHUNK]).decode("ascii"))
            f.write('"\n  }')
        f.write("\n}\n")
    return path_nodes, path_consts
