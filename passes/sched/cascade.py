"""sched-cascade: with `cascade`, an intermediate tensor stays in OCM between its layers.

Vela's cascading: a tensor is kept in OCM from the layer that writes it to the layers that
read it, instead of a round trip through DDR.

The lowering gives every intermediate tensor a DDR buffer: its producer's pieces store their
output tiles into it and its consumers' pieces load their windows from it. When the
program's `cascade` option is set, this pass moves such a buffer into one tile's OCM when
every access of it is a `sched.dma` on that tile:
- its stores and loads become OCM-to-OCM copies, which do not use the DDR port (a DMA whose
  other side is DDR, a concat's or a strided copy's, now moves between that OCM and DDR);
- a store of a piece that is the whole tensor goes away: the piece's output buffer is the
  tensor (the producer computed it in one piece);
- a load of the whole tensor goes away: the consumer computes from the buffer itself.
A removed DMA's waiters wait for what it waited for instead.

A tile reads only its own OCM (isa.md), so a tensor written or read on two tiles stays in
DDR: at 1 tile every intermediate tensor is a candidate; at more tiles, those whose producer
and consumers run on one tile (single-piece layers, which start at tile 0).

The bytes every reader sees are those it saw in DDR: a buffer is kept only when all its
writes come before all its reads in program order. Cascading lengthens what lives in OCM,
so it is kept only where it fits: a candidate whose tensor does not fit next to what is
already live on its tile is not tried, and the allocator's first fit is tried on the result
(as `sched-pin-weights` does), dropping the largest candidate live across each layer whose
buffers overflow until everything fits. It runs before `sched-pipeline`, which then double
buffers in the OCM left over.

Layers are cut into pieces that fill a tile's OCM, so little would fit next to them. With
`cascade`, the lowering therefore first asks `plan_resident` (here, next to the pass that
relies on it) which tensors to plan for, and cuts the layers of their lifetimes in the OCM
they leave.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from math import ceil, prod

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, i32
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError
from mrvl.passes.common import MrvlModulePass
from mrvl.passes.sched.allocate import overflowing_layers
from mrvl.passes.sched.liveness import WRITTEN_OPERANDS, LiveRange, live_ranges, root
from mrvl.passes.sched.tiling import WindowPiece, plan_window_layer_priced
from mrvl.target import Target

RESIDENT_SHARE = 0.75
"""The most of a tile's OCM that tensors planned to stay there may take at any layer; the
rest is the layers' working set."""

LAYERS = (
    mrvl.Conv2DOp,
    mrvl.Pool2DBase,
    mrvl.FullyConnectedOp,
    mrvl.AddOp,
    mrvl.ScaleShiftOp,
    mrvl.MulOp,
)
"""The layers whose lowering loads their inputs and stores their output with DMAs."""


@dataclass
class ResidentPlan:
    """What the lowering needs to leave room for the tensors planned to stay in OCM."""

    ocm_budget: dict[Operation, int] = field(default_factory=dict)
    """Layer -> the OCM bytes its pieces may use (a tile's whole OCM for the others)."""
    pieces: dict[Operation, list[WindowPiece]] = field(default_factory=dict)
    """Conv or pool -> its pieces, when its input stays in OCM: every row, by output
    channels, so each weight is loaded once and the input is read where it stays."""


def plan_resident(block: Block, target: Target, num_tiles: int) -> ResidentPlan:
    """Which tensors the lowering plans to stay in OCM, and how it cuts the layers next to
    them.

    At 1 tile, a tensor that one layer writes and only layers read (each lowered to DMAs) is
    planned to stay, taking the tensors in program order, when:
    - it and the other planned tensors live at each layer of its lifetime (writer to last
      reader) take at most `RESIDENT_SHARE` of the OCM;
    - the DDR bytes its round trip costs (one store, one load per reader) are more than the
      conv and pool layers of its lifetime move in addition once they are cut into pieces
      that leave room for it (weights reloaded for more pieces, more halo rows). A conv or
      pool reading it is cut by output channels only (`_resident_input_pieces`) where that
      moves fewer bytes than the usual plan.
    `sched-cascade` then finds that it fits. At more tiles pieces spread over the tiles and
    a tensor stays only when its layers happen to run on one tile, so nothing is planned."""
    plan = ResidentPlan()
    if num_tiles != 1:
        return plan
    layers = list(block.ops)
    index = {o: i for i, o in enumerate(layers)}
    ocm = target.ocm_bytes_per_tile
    limit = int(ocm * RESIDENT_SHARE)
    resident = [0] * len(layers)
    input_stays: set[Operation] = set()
    known: dict[tuple, tuple[int, list[WindowPiece] | None] | None] = {}

    def cheapest(layer: Operation, budget: int, stays: bool):
        """(DDR bytes, pieces or None for the usual plan) of a conv or pool, or None."""
        if (layer, budget, stays) not in known:
            options = [(_window_ddr_bytes(layer, budget, target), None)]
            if stays:
                options.append(_resident_input_pieces(layer, budget, target))
            options = [o for o in options if o is not None and o[0] is not None]
            known[layer, budget, stays] = min(options, key=lambda o: o[0]) if options else None
        return known[layer, budget, stays]

    for i, layer in enumerate(layers):
        if not isinstance(layer, LAYERS) or len(layer.results) != 1:
            continue
        result = layer.results[0]
        readers = [use.operation for use in result.uses]
        if not readers or not all(isinstance(r, LAYERS) for r in readers):
            continue
        size = _align(
            prod(mrvl.shape_of(result)) * mrvl.element_type_of(result).bitwidth // 8,
            target.ocm_alignment,
        )
        last = max(index[r] for r in readers)
        if max(resident[i : last + 1]) + size > limit:
            continue
        extra = 0
        for j in range(i, last + 1):
            other = layers[j]
            if isinstance(other, mrvl.Conv2DOp | mrvl.Pool2DBase):
                stays = other in input_stays
                before = cheapest(other, ocm - resident[j], stays)
                after = cheapest(other, ocm - resident[j] - size, stays or other.input is result)
                if before is None or after is None:
                    extra = None
                    break
                extra += after[0] - before[0]
        if extra is None or extra >= size * (1 + len(readers)):
            continue
        for j in range(i, last + 1):
            resident[j] += size
        input_stays.update(
            r
            for r in readers
            if isinstance(r, mrvl.Conv2DOp | mrvl.Pool2DBase) and r.input is result
        )
    for i, layer in enumerate(layers):
        if resident[i]:
            plan.ocm_budget[layer] = ocm - resident[i]
        if layer in input_stays:
            best = cheapest(layer, ocm - resident[i], True)
            if best is not None and best[1] is not None:
                plan.pieces[layer] = best[1]
    return plan


def _window_ddr_bytes(layer: Operation, budget: int, target: Target) -> int | None:
    """The DDR bytes a conv or pool moves when its pieces may use `budget` bytes of OCM
    (every piece's window, weights and output); None when it needs input-channel blocks
    or does not fit."""
    from mrvl.passes.sched.plan_tiling import window_geometry

    geometry = window_geometry(layer)
    try:
        pieces = plan_window_layer_priced(
            geometry,
            dataclasses.replace(target, ocm_bytes_per_tile=budget),
            1,
            "",
            split_columns=isinstance(layer, mrvl.Conv2DOp),
        )
    except CompileError:
        return None
    if any(p.ci_blocks for p in pieces):
        return None
    moved = 0
    for p in pieces:
        in_cols = p.in_cols or geometry.w
        ics = p.ics or geometry.input_channels(p.oc0, p.ocs)[1]
        moved += geometry.n * p.in_rows * in_cols * ics * geometry.elem
        moved += p.ocs * geometry.weight_bytes_per_oc
        moved += geometry.n * p.rows * (p.cols or geometry.ow) * p.ocs * geometry.elem
    return moved


def _resident_input_pieces(
    layer: Operation, budget: int, target: Target
) -> tuple[int, list[WindowPiece]] | None:
    """(DDR bytes, pieces) of a conv or pool whose input stays in OCM, cut by output
    channels only: each piece computes every output row of its channels from the input
    where it stays (or an OCM copy of its channels, for a grouped conv or a pool), so every
    weight is loaded once. None when one output channel's weights and output do not fit
    `budget`."""
    from mrvl.passes.sched.plan_tiling import window_geometry

    g = window_geometry(layer)
    alignment = target.ocm_alignment
    in_row0, in_rows = g.input_rows(0, g.oh)

    def need(ocs: int) -> int:
        ics = g.input_channels(0, ocs)[1]
        window = 0 if ics == g.c and in_rows == g.h else g.n * in_rows * g.w * ics * g.elem
        weights = ocs * g.weight_bytes_per_oc
        out = g.n * g.oh * g.ow * ocs * g.elem
        return sum(_align(b, alignment) for b in (window, weights, out)) + 2 * alignment

    ocs = g.oc
    while ocs > 1 and need(ocs) > budget:
        ocs = g.channel_step(ceil(ocs / 2))
    if need(ocs) > budget:
        return None
    pieces = []
    for oc0, width in g.channel_pieces(ocs):
        ic0, ics = g.input_channels(oc0, width)
        pieces.append(
            WindowPiece(
                0, g.oh, oc0, width, in_row0, in_rows,
                ocol0=0, cols=g.ow, in_col0=0, in_cols=g.w, ic0=ic0, ics=ics,
            )
        )  # fmt: skip
    moved = g.n * g.h * g.w * g.c * g.elem + g.oc * g.weight_bytes_per_oc
    return moved + g.n * g.oh * g.ow * g.oc * g.elem, pieces


def _align(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


@dataclass(eq=False)
class _Candidate:
    """A DDR intermediate whose every access is a DMA on `tile`."""

    alloc: sched.AllocOp
    tile: int
    views: list[sched.ViewOp]
    writes: list[sched.DmaOp]
    reads: list[sched.DmaOp]
    store: sched.DmaOp | None = None
    """The one store of a whole piece that is the whole tensor (the piece becomes the buffer)."""
    loads: list[sched.DmaOp] = field(default_factory=list)
    """The loads of the whole tensor (their destinations become the buffer)."""

    @property
    def size(self) -> int:
        return self.alloc.buffer_type.size_bytes


def _whole(dma: sched.DmaOp, source: SSAValue, dest: SSAValue) -> bool:
    """Whether `dma` copies all of `source` to all of `dest`, both dense and of one shape."""
    dims = sched.buffer_type(source).dims
    return (
        dma.src_strides is None
        and dma.dst_strides is None
        and dims == sched.buffer_type(dest).dims
        and tuple(dma.box.get_values()) == dims
        and not any(dma.src_offsets.get_values())
        and not any(dma.dst_offsets.get_values())
    )


def _written_by(op: Operation, value: SSAValue) -> bool:
    if isinstance(op, sched.DmaOp | sched.DDR_CONVERSIONS):
        return op.dest is value
    names = [name for name, _ in type(op).get_irdl_definition().operands]
    return any(getattr(op, n) is value for n in names if n in WRITTEN_OPERANDS)


def _only_written_by(buffer: SSAValue, writer: Operation) -> bool:
    """Whether `writer` is the only op writing `buffer` (which has no views)."""
    for use in buffer.uses:
        user = use.operation
        if isinstance(user, sched.ViewOp):
            return False
        if user is not writer and _written_by(user, buffer):
            return False
    return True


def _candidate(alloc: sched.AllocOp, position: dict[Operation, int]) -> _Candidate | None:
    if alloc.tile is not None:
        return None
    values, views, dmas = [alloc.buffer], [], []
    for value in values:  # grows with the views
        for use in value.uses:
            user = use.operation
            if isinstance(user, sched.ViewOp):
                views.append(user)
                values.append(user.buffer)
            elif isinstance(user, sched.DmaOp):
                dmas.append(user)
            else:
                return None
    mine = set(values)
    tiles = {d.tile.value.data for d in dmas}
    if len(tiles) != 1:
        return None
    (tile,) = tiles
    writes, reads = [], []
    for d in dmas:
        if (d.source in mine) == (d.dest in mine):
            return None
        other = d.dest if d.source in mine else d.source
        if sched.buffer_type(other).space.data == "ocm" and root(other).tile.value.data != tile:
            return None
        (reads if d.source in mine else writes).append(d)
    if not writes or not reads:
        return None
    if max(position[d] for d in writes) > min(position[d] for d in reads):
        return None
    c = _Candidate(alloc, tile, views, writes, reads)
    if len(writes) == 1:
        w = writes[0]
        piece = w.source.owner
        if (
            w.dest is alloc.buffer
            and isinstance(piece, sched.AllocOp)
            and _whole(w, w.source, w.dest)
            and all(position[v] > position[piece] for v in views)
            and not any(
                position[u.operation] > position[w] and _written_by(u.operation, w.source)
                for u in w.source.uses
            )
        ):
            c.store = w
    for r in reads:
        if (
            isinstance(r.dest.owner, sched.AllocOp)
            and _whole(r, r.source, r.dest)
            and _only_written_by(r.dest, r)
        ):
            c.loads.append(r)
    return c


def _ocm_levels(ranges, n: int, alignment: int) -> dict[int, np.ndarray]:
    """Tile -> the OCM bytes live (aligned) at each op of the program."""
    deltas: dict[int, np.ndarray] = {}
    for r in ranges:
        if r.tile is not None:
            d = deltas.setdefault(r.tile, np.zeros(n + 1, np.int64))
            size = _align(r.size, alignment)
            d[r.start] += size
            d[r.end + 1] -= size
    return {tile: np.cumsum(d[:n]) for tile, d in deltas.items()}


def _set_deps(op: sched.TaskBase, deps: list[SSAValue]) -> None:
    """Replace `op`'s `after(...)` tokens (its last operand segment)."""
    count = len(op.deps)
    fixed = list(op.operands)[: len(op.operands) - count]
    op.operands = [*fixed, *deps]
    sizes = op.properties.get("operandSegmentSizes")
    if sizes is not None:
        values = list(sizes.get_values())
        values[-1] = len(deps)
        op.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, values)


def _bypass(task: sched.TaskBase) -> None:
    """Erase `task`; what waited for it waits for what it waited for."""
    deps = list(task.deps)
    for use in list(task.token.uses):
        user = use.operation
        kept = [d for d in user.deps if d is not task.token]
        kept += [d for d in deps if not any(d is k for k in kept)]
        _set_deps(user, kept)
    Rewriter.erase_op(task)


@dataclass(frozen=True)
class CascadePass(MrvlModulePass):
    name = "sched-cascade"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        program = sched.program_of(op)
        if not program.cascades:
            return
        target = program.target
        ops = list(program.ops)
        position = {o: i for i, o in enumerate(ops)}
        candidates = [
            c
            for o in ops
            if isinstance(o, sched.AllocOp) and (c := _candidate(o, position)) is not None
        ]
        if not candidates:
            return
        ranges = {r.op: r for r in live_ranges(ops)}
        levels = _ocm_levels(ranges.values(), len(ops), target.ocm_alignment)
        candidates = [c for c in candidates if self._fits_alone(c, ranges, levels, target)]
        while candidates:
            trial, spans = self._trial(candidates, ranges, target)
            failing = overflowing_layers(trial, target)
            if not failing:
                break
            dropped = set()
            layers = {c: {o.location for o in ops[s : e + 1]} for c, (s, e) in spans.items()}
            for location in failing:
                across = [c for c in candidates if location in layers[c]]
                if across:
                    dropped.add(max(across, key=lambda c: c.size))
            candidates = [c for c in candidates if c not in dropped] if dropped else []
        for c in candidates:
            self._rewrite(c)

    @staticmethod
    def _fits_alone(c: _Candidate, ranges, levels, target) -> bool:
        """Whether the tensor fits in its tile's OCM next to the bytes live there over its
        lifetime (aligned, before fragmentation), without the pieces it replaces."""
        span = ranges[c.alloc]
        level = levels.get(c.tile)
        if level is None:
            return True
        window = level[span.start : span.end + 1].copy()
        replaced = [r.dest.owner for r in c.loads]
        if c.store is not None:
            replaced.append(c.store.source.owner)
        for piece in replaced:
            r = ranges[piece]
            lo, hi = max(r.start, span.start), min(r.end, span.end)
            if lo <= hi:
                window[lo - span.start : hi - span.start + 1] -= _align(
                    r.size, target.ocm_alignment
                )
        return int(window.max()) + _align(c.size, target.ocm_alignment) <= target.ocm_bytes_per_tile

    @staticmethod
    def _trial(candidates, ranges, target):
        """The live ranges were the candidates applied, and each candidate's [start, end]."""
        trial = {o: LiveRange(r.op, r.start, r.end) for o, r in ranges.items()}
        spans = {}
        for c in candidates:
            gone = trial.pop(c.alloc)
            if c.store is not None:
                kept = trial[c.store.source.owner]
            else:
                ocm = sched.AllocOp(
                    sched.BufferType(
                        "ocm", c.alloc.buffer_type.dims, c.alloc.buffer_type.element_type
                    ),
                    c.tile,
                )
                ocm.location = c.alloc.location
                kept = trial[ocm] = LiveRange(ocm, gone.start, gone.end)
            kept.end = max(kept.end, gone.end)
            for r in c.loads:
                kept.end = max(kept.end, trial.pop(r.dest.owner).end)
            spans[c] = (kept.start, kept.end)
        return list(trial.values()), spans

    @staticmethod
    def _rewrite(c: _Candidate) -> None:
        bt = c.alloc.buffer_type
        if c.store is not None:
            buffer = c.store.source
            _bypass(c.store)
        else:
            new = sched.AllocOp(sched.BufferType("ocm", bt.dims, bt.element_type), c.tile)
            new.location = c.alloc.location
            Rewriter.insert_op(new, InsertPoint.before(c.alloc))
            buffer = new.buffer
        c.alloc.buffer.replace_all_uses_with(buffer)
        Rewriter.erase_op(c.alloc)
        for view in c.views:
            vt = sched.buffer_type(view.buffer)
            new_view = sched.ViewOp(view.source, sched.BufferType("ocm", vt.dims, vt.element_type))
            new_view.location = view.location
            Rewriter.replace_op(view, new_view)
        for r in c.loads:
            piece = r.dest.owner
            source = r.source
            _bypass(r)
            piece.buffer.replace_all_uses_with(source)
            Rewriter.erase_op(piece)
