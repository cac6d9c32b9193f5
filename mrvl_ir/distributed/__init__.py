"""Beyond one machine (DESIGN §11): data-set evaluation (`evaluate`) and design-space sweeps
(`sweep`) on Ray workers, and remote boards over TVM RPC (`rpc`).

Ray, TVM and the compiler load when first used, so importing this package stays cheap.
"""

from __future__ import annotations

from importlib import import_module

__all__ = ["evaluate", "sweep"]

_LAZY = {"evaluate": "evaluate", "sweep": "sweep"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'mrvl.distributed' has no attribute {name!r}")
