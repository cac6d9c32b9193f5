"""The per-layer rewrite patterns of `convert-mrvl-to-sched`, one per `mrvl` op.

A new layer's pattern is a `LayerLowering` subclass in a module of this package: importing the
package imports every module, and each pattern class registers itself
(`LayerLowering.registered`). The completeness test (`tests/compiler/test_layer_completeness.py`)
names any `mrvl` op without one.
"""

from __future__ import annotations

import importlib
import pkgutil

from mrvl.passes.sched.lowering.state import LayerLowering, LoweringState

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

LAYER_LOWERINGS: tuple[type[LayerLowering], ...] = tuple(LayerLowering.registered)
"""Every layer's pattern (each matches its own op types, so their order does not matter)."""

__all__ = ["LAYER_LOWERINGS", "LayerLowering", "LoweringState"]
