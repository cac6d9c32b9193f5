"""sched-plan-tiling: choose each conv, pool and FC layer's tiling plan and record it on the
layer as `sched.plan` (a `#sched.window_plan` or `#sched.fc_plan`), before
`convert-mrvl-to-sched` lowers the layer by the plan.

The plan is priced exactly as the conversion priced it (`tiling.plan_window_reads`,
`plan_fc_layer_priced`); its pieces and their tiles are regenerated from the few numbers
recorded (`tiling.window_pieces`, `fc_pieces`). A plan already on a layer (written by hand)
is kept, but checked: one whose pieces do not fit the tile's OCM is a `DoesNotFit` naming the
layer. With `cascade`, the layers `cascade.plan_resident` keeps in OCM get their resident
pieces in the conversion and no plan here; the others are planned in the OCM left to them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError, layer_boundary
from mrvl.locations import location_name
from mrvl.passes.common import MrvlModulePass
from mrvl.passes.sched.cascade import plan_resident
from mrvl.passes.sched.ddr_fit import refuse_tensors_beyond_ddr
from mrvl.passes.sched.tiling import (
    CONV_CI_BLOCK,
    FC_SPLITS,
    SPLITS,
    DoesNotFit,
    FcLayer,
    FcPiece,
    WindowLayer,
    WindowPiece,
    WindowPlan,
    conv_weight_bytes_per_oc,
    fc_grid,
    grid_splits,
    plan_fc_layer_priced,
    plan_window_reads,
    window_pieces,
)
from mrvl.target import Target, get_target

PLAN = "sched.plan"
"""The attribute of a conv, pool or FC layer that holds its plan."""


def _what(op: Operation) -> str:
    return f"layer {location_name(op.location) or op.name}"


# ------------------------------------------------------------ window layers


def window_geometry(op: mrvl.Conv2DOp | mrvl.Pool2DBase) -> WindowLayer:
    """The tiling geometry of a conv or pool op (`pattern_checks` builds the same from
    Relax before there is an op)."""
    n, h, w, c = mrvl.shape_of(op.input)
    _, oh, ow, oc = mrvl.shape_of(op.output)
    int8 = mrvl.is_int8(op.output)  # 1-byte elements: twice the elements of fp16 fit
    if isinstance(op, mrvl.Conv2DOp):
        _, kh, kw, cg = mrvl.shape_of(op.weight)
        dh, dw = op.dilations.get_values()
        per_oc = conv_weight_bytes_per_oc(
            kh, kw, cg, bias=op.bias is not None, slopes=op.slopes is not None, int8=int8
        )
        groups = op.group_count
    else:
        kh, kw = op.kernel.get_values()
        dh = dw = 1
        per_oc, groups = 0, 1
    sh, sw = op.strides.get_values()
    pads = op.pads.get_values()
    return WindowLayer(
        n, h, w, c, oh, ow, oc, kh, kw, sh, pads[0], dh, per_oc,
        depthwise_channels=not isinstance(op, mrvl.Conv2DOp),
        sw=sw, pad_left=pads[1], dw=dw, groups=groups, int8=int8,
    )  # fmt: skip


def window_plan_attr(
    layer: WindowLayer, geometry: WindowLayer, pieces: list[WindowPiece], num_tiles: int
) -> sched.WindowPlanAttr:
    """The plan whose pieces are `pieces` (in `geometry`, `layer` or its subsampled form)."""
    first = pieces[0]
    plan = WindowPlan(
        ocs=max(p.ocs for p in pieces),
        rows=max(p.rows for p in pieces),
        cols=max(p.cols for p in pieces),
        cbs=first.ci_blocks[0][1] if first.ci_blocks else None,
    )
    for split in SPLITS + grid_splits(num_tiles):
        candidate = dataclasses.replace(plan, split=split)
        if window_pieces(geometry, candidate, num_tiles) == pieces:
            return sched.WindowPlanAttr(
                plan.ocs, plan.rows, plan.cols, plan.cbs or 0, split, geometry != layer
            )
    raise AssertionError(f"the pieces of {plan} are in no split")


def recorded_window_pieces(
    attr: sched.WindowPlanAttr, layer: WindowLayer, target: Target, num_tiles: int, what: str
) -> tuple[WindowLayer, list[WindowPiece]]:
    """The geometry and pieces of a recorded plan, checked to fit `target`'s OCM."""
    geometry = layer.subsampled() if attr.strided.data else layer
    if attr.strided.data and geometry == layer:
        raise CompileError(f"{what}: a strided plan for a layer that reads every row and column")
    split = attr.split.data
    if split not in SPLITS + grid_splits(num_tiles):
        raise CompileError(
            f"{what}: plan split '{split}' is not one of {SPLITS + grid_splits(num_tiles)}"
        )
    cbs = attr.cbs.data or None
    if cbs is not None and (
        cbs % CONV_CI_BLOCK or layer.depthwise_channels or layer.groups != 1
    ):  # fmt: skip
        raise CompileError(
            f"{what}: input-channel blocks need a conv without groups and a multiple of "
            f"{CONV_CI_BLOCK} channels per block, not {cbs}"
        )
    plan = WindowPlan(attr.ocs.data, attr.rows.data, attr.cols.data, cbs, split)
    needed = geometry.piece_bytes(plan.rows, plan.ocs, plan.cols, cbs)
    if needed > target.ocm_bytes_per_tile - 4 * target.ocm_alignment:
        raise DoesNotFit(
            f"{what}: its plan {attr}", "piece", needed + 4 * target.ocm_alignment,
            target.ocm_bytes_per_tile,
        )  # fmt: skip
    return geometry, window_pieces(geometry, plan, num_tiles)


# ------------------------------------------------------------ FC layers


def fc_pieces(n: int, o: int, attr: sched.FcPlanAttr, num_tiles: int) -> list[FcPiece]:
    return fc_grid(n, o, attr.ns.data, attr.os.data, num_tiles, attr.split.data)


def fc_plan_attr(n: int, o: int, pieces: list[FcPiece], num_tiles: int) -> sched.FcPlanAttr:
    """The plan whose pieces are `pieces`."""
    os, ns = max(p.os for p in pieces), max(p.ns for p in pieces)
    for split in FC_SPLITS:
        attr = sched.FcPlanAttr(os, ns, split)
        if fc_pieces(n, o, attr, num_tiles) == pieces:
            return attr
    raise AssertionError(f"the pieces of an FC plan of {os} features x {ns} rows are in no split")


def recorded_fc_pieces(
    attr: sched.FcPlanAttr, op: mrvl.FullyConnectedOp, target: Target, num_tiles: int, what: str
) -> list[FcPiece]:
    """The pieces of a recorded FC plan, checked to fit `target`'s OCM."""
    n, k = mrvl.shape_of(op.input)
    o, _ = mrvl.shape_of(op.weight)
    if attr.split.data not in FC_SPLITS:
        raise CompileError(f"{what}: plan split '{attr.split.data}' is not one of {FC_SPLITS}")
    slopes, int8 = op.slopes is not None, mrvl.is_int8(op.output)
    vectors = int(op.bias is not None) + (2 if int8 else int(slopes))  # int8: requant pairs
    layer = FcLayer(n, k, o, vectors, int8)
    slack = (5 if slopes or int8 else 4) * target.ocm_alignment
    needed = layer.piece_bytes(min(attr.ns.data, n), min(attr.os.data, o))
    if needed > target.ocm_bytes_per_tile - slack:
        raise DoesNotFit(
            f"{what}: its plan {attr}", "piece", needed + slack, target.ocm_bytes_per_tile
        )
    return fc_pieces(n, o, attr, num_tiles)


def plan_fc(op: mrvl.FullyConnectedOp, target: Target, num_tiles: int, pinned: bool):
    n, k = mrvl.shape_of(op.input)
    o, _ = mrvl.shape_of(op.weight)
    int8 = mrvl.is_int8(op.output)  # 1-byte elements, an i32 bias and requantization pairs
    return plan_fc_layer_priced(
        n, k, o, target, num_tiles, _what(op),
        slopes=op.slopes is not None, bias=op.bias is not None or int8, pinned=pinned,
        int8=int8,
    )  # fmt: skip


@dataclass(frozen=True)
class PlanTilingPass(MrvlModulePass):
    """Options as `convert-mrvl-to-sched`'s: `mcpu`, `num-tiles` (required), `wb-pin-ocm`
    (plans are priced with the weights kept in OCM) and `cascade` (layers kept resident are
    not planned here)."""

    name = "sched-plan-tiling"
    mcpu: str | None = None
    num_tiles: int | None = None
    wb_pin_ocm: bool = False
    cascade: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.mcpu is None or self.num_tiles is None:
            raise CompileError("sched-plan-tiling needs the options mcpu and num-tiles")
        target = get_target(self.mcpu)
        refuse_tensors_beyond_ddr(op, target)
        num_tiles = self.num_tiles
        for fn in op.body.block.ops:
            if not isinstance(fn, func.FuncOp):
                continue
            block = fn.body.block
            resident = plan_resident(block, target, num_tiles) if self.cascade else None
            for layer in block.ops:
                if not isinstance(layer, mrvl.Conv2DOp | mrvl.Pool2DBase | mrvl.FullyConnectedOp):
                    continue
                if resident is not None and layer in resident.pieces:
                    continue
                budget = target.ocm_bytes_per_tile
                if resident is not None:
                    budget = resident.ocm_budget.get(layer, budget)
                tile_target = dataclasses.replace(target, ocm_bytes_per_tile=budget)
                what = _what(layer)
                with layer_boundary(f"{self.name} of {layer.name}", location_name(layer.location)):
                    recorded = layer.attributes.get(PLAN)
                    if isinstance(layer, mrvl.FullyConnectedOp):
                        if recorded is None:
                            pieces = plan_fc(layer, tile_target, num_tiles, self.wb_pin_ocm)
                            n, o = mrvl.shape_of(layer.output)
                            layer.attributes[PLAN] = fc_plan_attr(n, o, pieces, num_tiles)
                        elif isinstance(recorded, sched.FcPlanAttr):
                            recorded_fc_pieces(recorded, layer, tile_target, num_tiles, what)
                        else:
                            raise CompileError(f"{what}: {PLAN} must be a #sched.fc_plan")
                        continue
                    layer_geometry = window_geometry(layer)
                    if recorded is None:
                        geometry, pieces = plan_window_reads(
                            layer_geometry, tile_target, num_tiles, what,
                            split_columns=isinstance(layer, mrvl.Conv2DOp),
                            pinned=self.wb_pin_ocm,
                        )  # fmt: skip
                        layer.attributes[PLAN] = window_plan_attr(
                            layer_geometry, geometry, pieces, num_tiles
                        )
                    elif isinstance(recorded, sched.WindowPlanAttr):
                        recorded_window_pieces(
                            recorded, layer_geometry, tile_target, num_tiles, what
                        )
                    else:
                        raise CompileError(f"{what}: {PLAN} must be a #sched.window_plan")
