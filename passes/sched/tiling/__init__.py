"""Tiling plans: how a layer's output is cut so each piece's working set fits a tile's OCM.

A window layer (conv, pool) is cut into bands of output rows, groups of output channels,
columns and (a conv) blocks of input channels; an FC layer into groups of output features and
bands of rows. Which cut, and which tile computes each piece, is a search over candidate plans
priced with `mrvl.cost` (the cycle model's functions). The fixed rules (`plan_window_layer`,
`plan_fc_layer`) say whether a layer fits at all. The plan is pure arithmetic, so the lowering
that emits the DMA and compute ops stays readable.

One module per job:
- `geometry`: a layer's shape and what one piece reads and holds;
- `layout`: a plan's pieces and the tile that computes each;
- `fit`: the fixed rules, and the plans of the layers that are not searched;
- `double_buffering`: whether `sched-pipeline` can overlap a plan's steps, as
  `sched-allocate`'s first fit lays them out;
- `pricing`: a plan's modelled cycles, with `mrvl.cost`;
- `search`: the cheapest window plan; `fc`: the cheapest FC plan.
"""

from mrvl.isa import CONV_CI_BLOCK
from mrvl.passes.sched.tiling.double_buffering import early_outputs
from mrvl.passes.sched.tiling.fc import fc_plan_cycles, plan_fc_layer_priced
from mrvl.passes.sched.tiling.fit import (
    DoesNotFit,
    plan_elementwise,
    plan_fc_layer,
    plan_per_channel,
    plan_resize_layer,
    plan_window_layer,
)
from mrvl.passes.sched.tiling.geometry import (
    F16,
    F32,
    ChannelChunk,
    Chunk,
    FcLayer,
    FcPiece,
    InputSampling,
    ResizePiece,
    WindowLayer,
    WindowPiece,
    conv_weight_bytes_per_oc,
)
from mrvl.passes.sched.tiling.layout import (
    FC_SPLITS,
    SPLITS,
    FcPlan,
    WindowPlan,
    fc_grid,
    grid_splits,
    shares_window,
    splits,
    window_pieces,
)
from mrvl.passes.sched.tiling.pricing import window_plan_cycles
from mrvl.passes.sched.tiling.search import (
    plan_window_layer_priced,
    plan_window_reads,
    window_candidates,
)

__all__ = [
    "CONV_CI_BLOCK", "F16", "F32", "FC_SPLITS", "SPLITS", "ChannelChunk", "Chunk", "DoesNotFit",
    "FcLayer", "FcPiece", "FcPlan", "InputSampling", "ResizePiece", "WindowLayer", "WindowPiece",
    "WindowPlan", "conv_weight_bytes_per_oc", "early_outputs", "fc_grid", "fc_plan_cycles", "grid_splits",
    "plan_elementwise", "plan_fc_layer", "plan_fc_layer_priced", "plan_per_channel",
    "plan_resize_layer", "plan_window_layer", "plan_window_layer_priced", "plan_window_reads",
    "shares_window", "splits", "window_candidates", "window_pieces", "window_plan_cycles",
]  # fmt: skip
