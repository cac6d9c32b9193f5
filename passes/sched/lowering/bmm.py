"""Lowering of the batched product of two activations (`mrvl.bmm`): its plan (pieces over the
batch, rows of the left operand, columns of the right one and blocks of the reduction, each
fitting a tile's OCM) and the loads, `sched.bmm` tasks and stores of each piece.

A piece computes out[b0:b0+bs, m0:m0+ms, n0:n0+ns]. When the reduction is cut into blocks, the
piece is a chain on one tile: the first block writes fp32 partial sums, each next block
continues them, the last rounds to f16. The ISA sums in order of k, so any cut gives the same
bits as one instruction over the whole reduction.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from xdsl.dialects.builtin import Float32Type, UnitAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.passes.sched.lowering.state import LayerLowering, int_attr
from mrvl.passes.sched.tiling.fit import DoesNotFit

F16_BYTES, F32_BYTES = 2, 4


@dataclass(frozen=True)
class BmmShape:
    """A batched product: `batch` results [m, n], reducing over k; each operand holds
    `batch` matrices or one shared by all (`lhs_batch`/`rhs_batch` = 1)."""

    batch: int
    m: int
    k: int
    n: int
    lhs_batch: int
    rhs_batch: int

    @classmethod
    def of(cls, op: mrvl.BatchMatMulOp) -> BmmShape:
        batch, m, k, n = op.dims()
        return cls(batch, m, k, n, mrvl.shape_of(op.lhs)[0], mrvl.shape_of(op.rhs)[0])


@dataclass(frozen=True)
class BmmPiece:
    b0: int
    bs: int
    m0: int
    ms: int
    n0: int
    ns: int
    k_blocks: tuple[tuple[int, int], ...]
    tile: int


def _aligned(nbytes: int, alignment: int) -> int:
    return -(-nbytes // alignment) * alignment


FP16_SIZES = (F16_BYTES, F16_BYTES, F32_BYTES)
"""Bytes of an operand element, a result element and a partial sum of the fp16 `bmm`."""


def piece_bytes(
    s: BmmShape,
    bs: int,
    ms: int,
    kb: int,
    ns: int,
    blocks: int,
    align: int,
    sizes: tuple[int, int, int] = FP16_SIZES,
) -> int:
    """OCM a piece holds at once: its operands' block, and its result, or with blocks of the
    reduction the partial sums it reads and the ones (or the result) it writes; `sizes` are
    the bytes of an operand element, a result element and a partial sum."""
    operand, result, partial = sizes
    a = (bs if s.lhs_batch > 1 else 1) * ms * kb * operand
    b = (bs if s.rhs_batch > 1 else 1) * kb * ns * operand
    out = bs * ms * ns
    results = [out * result] if blocks == 1 else [out * partial, out * partial]
    return sum(_aligned(x, align) for x in (a, b, *results))


def plan_bmm(
    s: BmmShape,
    ocm_bytes: int,
    num_tiles: int,
    align: int,
    what: str,
    sizes: tuple[int, int, int] = FP16_SIZES,
) -> list[BmmPiece]:
    """The pieces of a batched product (elements of `sizes`, `piece_bytes`), dealt
    round-robin over the tiles. The right operand's
    block (the bytes every row of a piece reads) first gets at most half the tile, cutting the
    reduction and then the columns; then the batch and the rows are halved until the piece
    fits, and further until each tile has a piece. Raises DoesNotFit when a piece of one
    element does not fit."""
    b_, m_, k_, n_ = s.batch, s.m, s.k, s.n

    def need() -> int:
        return piece_bytes(s, b_, m_, k_, n_, ceil(s.k / k_), align, sizes)

    while piece_bytes(s, 1, 1, k_, n_, ceil(s.k / k_), align, sizes) > ocm_bytes // 2 and (
        k_ > 1 or n_ > 1
    ):
        if k_ > 1:
            k_ = ceil(k_ / 2)
        else:
            n_ = ceil(n_ / 2)
    while need() > ocm_bytes:
        if b_ > 1:
            b_ = ceil(b_ / 2)
        elif m_ > 1:
            m_ = ceil(m_ / 2)
        elif k_ > 1:
            k_ = ceil(k_ / 2)
        elif n_ > 1:
            n_ = ceil(n_ / 2)
        else:
            raise DoesNotFit(what, "output element", need(), ocm_bytes)

    def count() -> int:
        return ceil(s.batch / b_) * ceil(s.m / m_) * ceil(s.n / n_)

    while count() < num_tiles and (b_ > 1 or m_ > 1):
        if b_ > 1:
            b_ = ceil(b_ / 2)
        else:
            m_ = ceil(m_ / 2)
    blocks = tuple((k0, min(k_, s.k - k0)) for k0 in range(0, s.k, k_))
    pieces = []
    for b0 in range(0, s.batch, b_):
        for m0 in range(0, s.m, m_):
            for n0 in range(0, s.n, n_):
                pieces.append(
                    BmmPiece(
                        b0,
                        min(b_, s.batch - b0),
                        m0,
                        min(m_, s.m - m0),
                        n0,
                        min(n_, s.n - n0),
                        blocks,
                        len(pieces) % num_tiles,
                    )
                )
    return pieces


class LowerBatchMatMul(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.BatchMatMulOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.BatchMatMulOp) -> None:
        self.low.require_f16(op)
        shape = BmmShape.of(op)
        target = self.low.target
        pieces = plan_bmm(
            shape, self.low.ocm_bytes(op), self.low.num_tiles, target.ocm_alignment, self.low.what(op)
        )
        emit_pieces(self.low, op, shape, pieces, Float32Type(), sched.BatchMatMulTaskOp, {})


def emit_pieces(
    low, op, shape: BmmShape, pieces: list[BmmPiece], partial: Attribute, task_class, extra: dict
) -> None:
    """The loads, tasks (`task_class`, with the properties `extra` besides the tile, the
    transposes and `acc_out`) and stores of each piece of a batched product `op` (`mrvl.bmm`
    or `mrvl.qbmm`): a chain of tasks over the blocks of the reduction on the piece's tile,
    each but the last writing partial sums of element type `partial`."""
    lhs, rhs = low.ddr_buffer(op.lhs), low.ddr_buffer(op.rhs)
    dst = low.new_ddr(op.output)
    trans_a, trans_b = op.trans_a is not None, op.trans_b is not None
    element = mrvl.element_type_of(op.output)
    for p in pieces:
        tile = p.tile
        acc: list[SSAValue] = []
        t_acc: SSAValue | None = None
        for index, (k0, kb) in enumerate(p.k_blocks):
            last = index == len(p.k_blocks) - 1
            a_b0, a_bs = (p.b0, p.bs) if shape.lhs_batch > 1 else (0, 1)
            b_b0, b_bs = (p.b0, p.bs) if shape.rhs_batch > 1 else (0, 1)
            a_off, a_box = (
                ([a_b0, k0, p.m0], [a_bs, kb, p.ms])
                if trans_a
                else ([a_b0, p.m0, k0], [a_bs, p.ms, kb])
            )
            b_off, b_box = (
                ([b_b0, p.n0, k0], [b_bs, p.ns, kb])
                if trans_b
                else ([b_b0, k0, p.n0], [b_bs, kb, p.ns])
            )
            a, t_a = low.load(lhs, a_off, a_box, tile)
            b, t_b = low.load(rhs, b_off, b_box, tile)
            deps = [t_a, t_b] + ([t_acc] if t_acc is not None else [])
            out = low.ocm([p.bs, p.ms, p.ns], element if last else partial, tile)
            props = {"tile": int_attr(tile), **extra}
            if trans_a:
                props["trans_a"] = UnitAttr()
            if trans_b:
                props["trans_b"] = UnitAttr()
            if not last:
                props["acc_out"] = UnitAttr()
            task = task_class.make(props, deps=deps, lhs=a, rhs=b, acc=acc, output=out)
            t_acc = low.emit(task).results[0]
            acc = [out]
        low.store(acc[0], dst, [p.b0, p.m0, p.n0], tile, t_acc)
