"""Lowering of the reductions (`mrvl.reduce`) and of the broadcasting elementwise ops
(`mrvl.binary`).

A reduction is seen as [outer, length, inner] (`reduced_view`), as a softmax is, so no data
moves: a piece is a box [outer slices, band of the reduced axis, inner run]. While a whole row
fits a tile, pieces hold whole rows (`plan_reduce`, like `plan_rows`). A row that does not fit
(a global pool over a plane larger than a tile) is cut into bands of the reduced axis: the
bands of one run of rows are a chain on one tile, the first writing fp32 partials
(`acc_out`), each next continuing them (`acc`), the last giving the result. The ISA reduces in
order of the axis, so the chain has the bits of one instruction over the whole row.

A binary op is seen as a 4-D result (dimensions merged where both operands broadcast alike);
pieces are boxes of it, each operand loaded as the box it reads (1 along its broadcast
dimensions, which the instruction steps with stride 0).
"""

from __future__ import annotations

from math import ceil, prod
from typing import NamedTuple

from xdsl.dialects.builtin import Float16Type, IntegerAttr, StringAttr, UnitAttr, f32, i64
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError
from mrvl.passes.sched.lowering.normalization import _require_f16
from mrvl.passes.sched.lowering.state import (
    F16_BYTES,
    LayerLowering,
    buffer_type,
    dense_strides,
    i64_array,
    int_attr,
)
from mrvl.passes.sched.tiling import DoesNotFit

F32_BYTES = 4
PARTIAL_BYTES = 2 * F32_BYTES
"""Per result element of a piece: the fp32 partials it reads and those it writes."""


class ReducePiece(NamedTuple):
    """A box of the [outer, length, inner] view: outer slices o0.. (oc), elements l0.. (lc)
    of the reduced axis, inner indices i0.. (ic)."""

    o0: int
    oc: int
    l0: int
    lc: int
    i0: int
    ic: int


MIN_RUN = 32
"""Inner indices a piece reads at least (unless there are fewer): a narrower strided run of
f16 elements wastes most of each DDR burst."""


def plan_reduce(
    outer: int,
    length: int,
    inner: int,
    ocm_bytes: int,
    num_tiles: int,
    alignment: int,
    what: str,
    *,
    bands: bool = True,
) -> list[list[ReducePiece]]:
    """Chains of pieces, each chain on one tile. While a row fits, one piece of whole rows
    per chain: whole outer slices where a slice fits (and there are as many as tiles, or
    the slice is narrow), else runs of at least `MIN_RUN` inner indices of one slice. Else
    bands of the reduced axis over a run of inner indices, chained by fp32 partials; without
    `bands` (argmax, which takes no partials) a row that does not fit is `DoesNotFit`."""
    budget = ocm_bytes - 4 * alignment
    if budget < F16_BYTES + PARTIAL_BYTES:
        raise DoesNotFit(what, "element", F16_BYTES + PARTIAL_BYTES + 4 * alignment, ocm_bytes)
    per_row = length * F16_BYTES + PARTIAL_BYTES
    if per_row * inner <= budget and (outer >= num_tiles or inner < 2 * MIN_RUN):
        oc = max(1, min(budget // (per_row * inner), ceil(outer / num_tiles)))
        return [
            [ReducePiece(o, min(oc, outer - o), 0, length, 0, inner)] for o in range(0, outer, oc)
        ]
    if per_row * min(inner, MIN_RUN) <= budget:
        share = max(MIN_RUN, ceil(inner / max(1, num_tiles // outer)))
        ic = min(inner, budget // per_row, share)
        return [
            [ReducePiece(o, 1, 0, length, i, min(ic, inner - i))]
            for o in range(outer)
            for i in range(0, inner, ic)
        ]
    if not bands:
        raise DoesNotFit(what, f"row of {length} elements", per_row + 4 * alignment, ocm_bytes)
    # a row does not fit: bands of at least 16 elements of the axis where the budget allows
    ic = max(1, min(inner, budget // (16 * F16_BYTES + PARTIAL_BYTES)))
    lc = (budget - ic * PARTIAL_BYTES) // (ic * F16_BYTES)
    lc = ceil(length / ceil(length / lc))  # bands of even length
    return [
        [ReducePiece(o, 1, l0, min(lc, length - l0), i, min(ic, inner - i))
         for l0 in range(0, length, lc)]
        for o in range(outer)
        for i in range(0, inner, ic)
    ]  # fmt: skip


class LowerReduce(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.ReduceOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.ReduceOp) -> None:
        """Each chain: per band a (strided) load and a reduce task, the partials handed on in
        OCM; the last band's result stored."""
        argmax = op.kind.data == "argmax"
        if not argmax:
            _require_f16(self.low, op)
        elif not isinstance(mrvl.element_type_of(op.input), Float16Type):
            raise CompileError(f"{self.low.what(op)}: argmax reads f16; run mrvl-cast-fp16 first")
        outer, length, inner = op.rows()
        chains = plan_reduce(
            outer, length, inner, self.low.ocm_bytes(op), self.low.num_tiles,
            self.low.target.ocm_alignment, self.low.what(op), bands=not argmax,
        )  # fmt: skip
        et = mrvl.element_type_of(op.output)
        src = self.low.flat_view(
            self.low.ddr_buffer(op.input),
            buffer_type("ddr", (outer, length, inner), mrvl.element_type_of(op.input)),
        )
        dst = self.low.new_ddr(op.output)
        out = self.low.flat_view(dst, buffer_type("ddr", (outer, inner), et))
        props = {"mode": StringAttr(op.kind.data), "divisor": IntegerAttr(length, i64)}
        for index, chain in enumerate(chains):
            tile = index % self.low.num_tiles
            acc, t_acc = [], []
            for p in chain:
                x, t_x = self.low.load(src, [p.o0, p.l0, p.i0], [p.oc, p.lc, p.ic], tile)
                last = p is chain[-1]
                y = self.low.ocm([p.oc, p.ic], et if last else f32, tile)
                extra = {} if last else {"acc_out": UnitAttr()}
                task = sched.ReduceTaskOp.make(
                    {"tile": int_attr(tile), **props, **extra},
                    deps=[t_x, *t_acc], input=x, acc=acc, output=y,
                )  # fmt: skip
                token = self.low.emit(task).results[0]
                acc, t_acc = [y], [token]
            self.low.store(y, out, [chain[0].o0, chain[0].i0], tile, token)


def store_index_output(low, value, io) -> None:
    """Argmax's f32 indices leave the region as they are: a `cvt` copy (F32 to F32) into the
    output buffer; whoever reads them converts them (TVM's runtime, to ONNX's int64)."""
    src = low.ddr_buffer(value)
    rank = len(sched.buffer_type(io).dims)
    token = low.emit(
        sched.ConvertOp(src, io, list(range(rank)), 0, low.write_deps(io, 0, *low.writes_to(src)))
    ).token
    low.record_write(io, 0, token)
    low.buffers[value] = io


def merged_broadcast(
    out: tuple[int, ...], a: tuple[int, ...], b: tuple[int, ...]
) -> tuple[list[int], list[int], list[int]]:
    """The three shapes with unit result dimensions dropped and neighbours merged where each
    operand either has them all or repeats them all (the same bytes, fewer dimensions)."""
    dims: list[list[int]] = []
    last = None
    for n, x, y in zip(out, a, b):
        if n == 1:
            continue
        kind = (x == n, y == n)
        if kind == last:
            dims[-1] = [dims[-1][0] * n, dims[-1][1] * x, dims[-1][2] * y]
        else:
            dims.append([n, x, y])
        last = kind
    dims = dims or [[1, 1, 1]]
    return [d[0] for d in dims], [d[1] for d in dims], [d[2] for d in dims]


MAX_BINARY_DIMS = 4
"""A binary op whose broadcast needs more dimensions than the instruction's 4 stays on the CPU."""


def binary_dims(op_shapes) -> tuple[list[int], list[int], list[int]]:
    """The merged shapes (`merged_broadcast`) padded to the instruction's 4 dimensions."""
    out, a, b = merged_broadcast(*op_shapes)
    if len(out) > MAX_BINARY_DIMS:
        raise ValueError(f"a broadcast over {len(out)} alternating dimensions")
    pad = [1] * (MAX_BINARY_DIMS - len(out))
    return pad + out, pad + a, pad + b


class BinaryPiece(NamedTuple):
    offsets: tuple[int, ...]
    box: tuple[int, ...]


def plan_binary(
    shape: list[int], ocm_bytes: int, num_tiles: int, alignment: int, what: str
) -> list[BinaryPiece]:
    """Boxes of the 4-D result that fit a tile with both operands (at most the result's
    size each): whole dimensions from the innermost out, then a chunk of the next one, at
    least one piece per tile where there are enough."""
    per_element = 3 * F16_BYTES
    budget = (ocm_bytes - 4 * alignment) // per_element
    if budget < 1:
        raise DoesNotFit(what, "element", per_element + 4 * alignment, ocm_bytes)
    whole = next(d for d in range(len(shape) + 1) if prod(shape[d:]) <= budget)
    if whole == 0:  # the whole result fits: cut its outermost dimension of several
        split = next((d for d, n in enumerate(shape) if n > 1), len(shape) - 1)
        chunk = shape[split]
    else:  # whole dimensions from `whole` on, chunks of the one before
        split = whole - 1
        chunk = max(1, min(shape[split], budget // prod(shape[whole:])))
    outer = prod(shape[:split])
    chunk = max(1, min(chunk, ceil(shape[split] / max(1, ceil(num_tiles / outer)))))
    pieces = []
    for flat in range(outer):
        index, rest = [], flat
        for n in reversed(shape[:split]):
            index.insert(0, rest % n)
            rest //= n
        for c0 in range(0, shape[split], chunk):
            c = min(chunk, shape[split] - c0)
            box = (1,) * split + (c,) + tuple(shape[split + 1 :])
            pieces.append(BinaryPiece(tuple(index) + (c0,) + (0,) * (len(shape) - split - 1), box))
    return pieces


class LowerBinary(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.BinaryOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.BinaryOp) -> None:
        """Each piece: each operand's box (1 along its broadcast dimensions), a binary task
        stepping those with stride 0, one store."""
        _require_f16(self.low, op)
        shapes = tuple(mrvl.shape_of(v) for v in (op.output, op.lhs, op.rhs))
        out4, a4, b4 = binary_dims(shapes)
        et = mrvl.element_type_of(op.output)
        pieces = plan_binary(
            out4, self.low.ocm_bytes(op), self.low.num_tiles, self.low.target.ocm_alignment,
            self.low.what(op),
        )  # fmt: skip
        lhs = self.low.flat_view(self.low.ddr_buffer(op.lhs), buffer_type("ddr", tuple(a4), et))
        rhs = self.low.flat_view(self.low.ddr_buffer(op.rhs), buffer_type("ddr", tuple(b4), et))
        dst = self.low.new_ddr(op.output)
        out = self.low.flat_view(dst, buffer_type("ddr", tuple(out4), et))
        for index, p in enumerate(pieces):
            tile = index % self.low.num_tiles
            operands, deps, strides = [], [], []
            for source, shape in ((lhs, a4), (rhs, b4)):
                box = [n if s == o else 1 for n, s, o in zip(p.box, shape, out4)]
                offsets = [f if s == o else 0 for f, s, o in zip(p.offsets, shape, out4)]
                buf, token = self.low.load(source, offsets, box, tile)
                operands.append(buf)
                deps.append(token)
                steps = dense_strides(box)
                strides.append([st if n == full else 0 for st, n, full in zip(steps, box, p.box)])
            y = self.low.ocm(list(p.box), et, tile)
            task = sched.BinaryTaskOp.make(
                {
                    "tile": int_attr(tile),
                    "mode": StringAttr(op.kind.data),
                    "lhs_strides": i64_array(strides[0]),
                    "rhs_strides": i64_array(strides[1]),
                },
                deps=deps, lhs=operands[0], rhs=operands[1], output=y,
            )  # fmt: skip
            self.low.store(y, out, list(p.offsets), tile, self.low.emit(task).results[0])
