"""The per-layer rewrite patterns of `convert-mrvl-to-sched`, one per `mrvl` op.

A new layer adds its pattern to `LAYER_LOWERINGS` (in its own module of this package); the
completeness test (`tests/compiler/test_layer_completeness.py`) names any `mrvl` op without one.
"""

from __future__ import annotations

from mrvl.passes.sched.lowering.data_movement import (
    LowerCast,
    LowerConcat,
    LowerConstant,
    LowerDilate,
    LowerLayoutConvert,
    LowerReshape,
    LowerStridedCopy,
)
from mrvl.passes.sched.lowering.elementwise import LowerAdd, LowerMul, LowerScaleShift
from mrvl.passes.sched.lowering.fc import LowerFullyConnected
from mrvl.passes.sched.lowering.normalization import LowerLayerNorm, LowerSoftmax
from mrvl.passes.sched.lowering.resize import LowerResize
from mrvl.passes.sched.lowering.state import LayerLowering, LoweringState
from mrvl.passes.sched.lowering.window import LowerConv2D, LowerPool2D

LAYER_LOWERINGS: tuple[type[LayerLowering], ...] = (
    LowerConstant,
    LowerCast,
    LowerLayoutConvert,
    LowerReshape,
    LowerConv2D,
    LowerPool2D,
    LowerFullyConnected,
    LowerAdd,
    LowerScaleShift,
    LowerMul,
    LowerConcat,
    LowerStridedCopy,
    LowerDilate,
    LowerResize,
    LowerSoftmax,
    LowerLayerNorm,
)

__all__ = ["LAYER_LOWERINGS", "LayerLowering", "LoweringState"]
