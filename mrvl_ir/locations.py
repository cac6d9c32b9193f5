"""ONNX node names as MLIR locations: `loc("/layer1/conv1/Conv")` on every op.

The name travels from the ONNX node (through the Relax span) to each `mrvl`, `sched` and
`mlip` op, and from there into the binary's source map.
"""

from __future__ import annotations

from xdsl.dialects.builtin import NameLoc, NoneAttr, StringAttr, UnknownLoc
from xdsl.ir import Attribute


def location_name(loc: Attribute | None) -> str | None:
    """The ONNX node name a location carries, if any."""
    if isinstance(loc, NameLoc):
        return loc.desc.data
    return None


def name_location(name: str | None) -> Attribute:
    return NameLoc(StringAttr(name), NoneAttr()) if name is not None else UnknownLoc()
