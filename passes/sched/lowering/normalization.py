"""Lowering of the normalization layers (softmax, layernorm): pieces of whole rows that fit a
tile's OCM, dealt round-robin over the tiles, each loaded, computed and stored.

A layer is seen as [outer, length, inner], the reduced axes in the middle (`reduced_view`).
A piece is a box [outer slices, length, inner slices] of it: whole outer slices while one
fits a tile, else runs of inner indices of one outer slice (a strided DMA gathers them, so
the reduced axis never needs to be moved innermost). A layernorm's rows are its leading
axes and a row its trailing ones (inner = 1); each piece also loads the f32 scale and shift
of a row. A row that cannot fit is refused by `plan_rows` (`DoesNotFit`), which the partition
check asks first; a layernorm row that cannot fit beside its scale and shift is lowered by
`layernorm_long_rows.py` instead (`plan_layernorm` asks both).
"""

from __future__ import annotations

from math import ceil
from typing import NamedTuple

from xdsl.dialects.builtin import Float16Type
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError
from mrvl.passes.sched.lowering.layernorm_long_rows import lower_long_rows, plan_long_rows
from mrvl.passes.sched.lowering.state import F16_BYTES, LayerLowering, buffer_type, int_attr
from mrvl.passes.sched.tiling import DoesNotFit


class RowPiece(NamedTuple):
    """A box of the [outer, length, inner] view: outer slices o0.. (oc of them), inner
    indices i0.. (ic of them), every element of the reduced axis."""

    o0: int
    oc: int
    i0: int
    ic: int


def plan_rows(
    outer: int,
    length: int,
    inner: int,
    ocm_bytes: int,
    num_tiles: int,
    alignment: int,
    what: str,
    *,
    row_param_bytes: int = 0,
    buffers: int = 2,
) -> list[RowPiece]:
    """Pieces of a row-wise layer: each holds `buffers` f16 blocks (input, output) and
    `row_param_bytes` of parameters per element of a row (none for softmax), every buffer
    aligned. At least one piece per tile where there are enough rows: outer slices while
    there are as many as tiles (or a row is contiguous), else runs of inner indices."""
    slack = (buffers + 2) * alignment
    budget = (ocm_bytes - slack - length * row_param_bytes) // (buffers * F16_BYTES)
    if budget < length:
        needed = length * (buffers * F16_BYTES + row_param_bytes) + slack
        raise DoesNotFit(what, f"row of {length} elements", needed, ocm_bytes)
    slice_elements = length * inner
    if slice_elements <= budget and (outer >= num_tiles or inner == 1):
        oc = max(1, min(budget // slice_elements, ceil(outer / num_tiles)))
        return [RowPiece(o, min(oc, outer - o), 0, inner) for o in range(0, outer, oc)]
    ic = max(1, min(budget // length, ceil(inner / max(1, num_tiles // outer))))
    return [
        RowPiece(o, 1, i, min(ic, inner - i)) for o in range(outer) for i in range(0, inner, ic)
    ]


F32_BYTES = 4


def plan_layernorm(
    rows: int, length: int, ocm_bytes: int, num_tiles: int, alignment: int, what: str
) -> None:
    """Whether a layernorm of `rows` rows of `length` elements can be lowered: by `plan_rows`
    (a row with its f32 scale and shift), else by `plan_long_rows`; `DoesNotFit` if neither."""
    try:
        plan_rows(rows, length, 1, ocm_bytes, num_tiles, alignment, what,
                  row_param_bytes=2 * F32_BYTES)  # fmt: skip
    except DoesNotFit:
        plan_long_rows(rows, length, ocm_bytes, num_tiles, alignment, what)


def _require_f16(low, op) -> None:
    if not isinstance(mrvl.element_type_of(op.output), Float16Type):
        raise CompileError(f"{low.what(op)}: the MLIP computes in f16; run mrvl-cast-fp16 first")


class LowerSoftmax(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.SoftmaxOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.SoftmaxOp) -> None:
        """Each piece: one (strided) load of its box, a softmax task, one store."""
        _require_f16(self.low, op)
        outer, length, inner = op.rows()
        target = self.low.target
        pieces = plan_rows(
            outer, length, inner, self.low.ocm_bytes(op), self.low.num_tiles,
            target.ocm_alignment, self.low.what(op),
        )  # fmt: skip
        et = mrvl.element_type_of(op.output)
        view = buffer_type("ddr", (outer, length, inner), et)
        src = self.low.flat_view(self.low.ddr_buffer(op.input), view)
        dst = self.low.new_ddr(op.output)
        out = self.low.flat_view(dst, view)
        for index, p in enumerate(pieces):
            tile = index % self.low.num_tiles
            box = [p.oc, length, p.ic]
            x, t_x = self.low.load(src, [p.o0, 0, p.i0], box, tile)
            y = self.low.ocm(box, et, tile)
            task = sched.SoftmaxTaskOp.make(
                {"tile": int_attr(tile)}, deps=[t_x], input=x, output=y
            )
            self.low.store(y, out, [p.o0, 0, p.i0], tile, self.low.emit(task).results[0])


class LowerLayerNorm(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.LayerNormOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.LayerNormOp) -> None:
        """Each piece: its rows, the whole f32 scale and shift (a row's worth), a layernorm
        task, one store; a row that cannot fit with them, `lnstats` and `lnapply` tasks
        (`layernorm_long_rows.py`)."""
        _require_f16(self.low, op)
        rows, length = op.rows()
        target = self.low.target
        try:
            pieces = plan_rows(
                rows, length, 1, self.low.ocm_bytes(op), self.low.num_tiles,
                target.ocm_alignment, self.low.what(op), row_param_bytes=2 * F32_BYTES,
            )  # fmt: skip
        except DoesNotFit:  # a row too long to hold beside its f32 scale and shift
            lower_long_rows(self.low, op)
            return
        et = mrvl.element_type_of(op.output)
        view = buffer_type("ddr", (rows, length), et)
        src = self.low.flat_view(self.low.ddr_buffer(op.input), view)
        dst = self.low.new_ddr(op.output)
        out = self.low.flat_view(dst, view)
        scale, shift = self.low.ddr_buffer(op.scale), self.low.ddr_buffer(op.shift)
        for index, p in enumerate(pieces):
            tile = index % self.low.num_tiles
            g, t_g = self.low.load(scale, [0], [length], tile)
            b, t_b = self.low.load(shift, [0], [length], tile)
            x, t_x = self.low.load(src, [p.o0, 0], [p.oc, length], tile)
            y = self.low.ocm([p.oc, length], et, tile)
            task = sched.LayerNormTaskOp.make(
                {"tile": int_attr(tile), "epsilon": op.epsilon},
                deps=[t_g, t_b, t_x], input=x, scale=g, shift=b, output=y,
            )  # fmt: skip
            self.low.store(y, out, [p.o0, 0], tile, self.low.emit(task).results[0])
