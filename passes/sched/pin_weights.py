"""sched-pin-weights: with `wb_pin_ocm`, a tile loads a constant slice once and keeps it.

The lowering gives every piece its own loads of the layer's weights, bias and other
per-channel constants. When the program's `wb_pin_ocm` option is set, this pass finds the
loads of a constant that repeat, on one tile, the slice (offsets and box) that tile loaded
last from the same constant, and makes their readers use the first copy instead: the repeated
DMA and its OCM buffer go away, and the first buffer stays live until its last reader.

Pinning lengthens live ranges, so it is kept only where it fits: the pass runs the
allocator's first fit on the result, and a layer with a buffer beyond a tile's OCM keeps
its loads (upstream's option says the same: pin "when they fit").
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.rewriter import Rewriter

from mrvl.dialects import sched
from mrvl.passes.common import MrvlModulePass
from mrvl.passes.sched.allocate import overflowing_layers
from mrvl.passes.sched.liveness import live_ranges


@dataclass(frozen=True)
class _Load:
    dma: sched.DmaOp
    alloc: sched.AllocOp


def _constant_load(op: Operation) -> _Load | None:
    """A DMA of a box of a constant into an OCM buffer that nothing else writes."""
    if not isinstance(op, sched.DmaOp) or op.src_strides is not None or op.dst_strides is not None:
        return None
    if not isinstance(op.source.owner, sched.ConstOp) or not isinstance(
        op.dest.owner, sched.AllocOp
    ):
        return None
    for use in op.dest.uses:
        user = use.operation
        if user is op:
            continue
        names = [name for name, _ in type(user).get_irdl_definition().operands]
        written = {"dest", "output"}
        if any(
            getattr(user, n) is op.dest or (
                isinstance(getattr(user, n), tuple) and op.dest in getattr(user, n)
            )
            for n in names
            if n in written
        ):
            return None
    return _Load(op, op.dest.owner)


class LastSlices:
    """What each tile loaded last from each constant. A load of that same slice again is a
    repeat: this pass removes it (the tile keeps the first copy), and the planner prices
    `wb_pin_ocm` by asking the same question of a plan's pieces."""

    def __init__(self):
        self._last: dict[tuple, tuple[tuple, object]] = {}

    def repeated(self, tile: int, source, slice_: tuple, load: object = True):
        """The load that this one (of `slice_` of `source` on `tile`) repeats, or None, and
        then this one is the tile's last load of `source`."""
        known = self._last.get((tile, source))
        if known is not None and known[0] == slice_:
            return known[1]
        self._last[tile, source] = (slice_, load)
        return None


@dataclass(frozen=True)
class PinWeightsPass(MrvlModulePass):
    name = "sched-pin-weights"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        program = sched.program_of(op)
        if not program.pin_weights:
            return
        ops = list(program.ops)
        held = LastSlices()
        merges: list[tuple[_Load, _Load]] = []  # (repeat, first)
        for o in ops:
            load = _constant_load(o)
            if load is None:
                continue
            slice_ = (tuple(o.src_offsets.get_values()), tuple(o.box.get_values()))
            first = held.repeated(o.tile.value.data, o.source, slice_, load)
            if first is not None:
                merges.append((load, first))
        while merges:
            failing = self._overflowing_layers(ops, merges, program.target)
            if not failing:
                break
            kept = [m for m in merges if m[0].dma.location not in failing]
            merges = kept if len(kept) < len(merges) else []
        for repeat, first in merges:
            repeat.alloc.buffer.replace_all_uses_with(first.alloc.buffer)
            repeat.dma.token.replace_all_uses_with(first.dma.token)
            Rewriter.erase_op(repeat.dma)
            Rewriter.erase_op(repeat.alloc)

    @staticmethod
    def _overflowing_layers(ops, merges, target) -> set:
        """Layers with an OCM buffer beyond a tile's capacity under the allocator's first
        fit, were `merges` applied (each first copy live until its repeats' last reader)."""
        ranges = {r.op: r for r in live_ranges(ops)}
        for repeat, first in merges:
            gone = ranges.pop(repeat.alloc)
            keep = ranges[first.alloc]
            keep.end = max(keep.end, gone.end)
        return overflowing_layers(ranges.values(), target)
