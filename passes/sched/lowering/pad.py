"""Lowering of a standalone constant Pad (`mrvl.pad`): two DMA passes, DDR to DDR.

The result is filled with the pad value (a DMA repeating one f16 element of the constant pool
with source stride 0, cut into one chunk per tile), then the input is copied into its interior
with destination strides. The copy's dimensions are merged where the padding leaves them
whole (an inner dimension without padding continues its outer one); beyond a descriptor's 4,
the smallest are walked one DMA per index, and the outermost kept one is cut across the tiles
(as a strided copy is). Every interior DMA waits for every fill: they write the same bytes.
"""

from __future__ import annotations

import itertools
from math import ceil, prod

import numpy as np
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.passes.sched.lowering.state import LayerLowering, buffer_type, dense_strides


def interior_dims(shape, before, out_shape) -> tuple[list[int], list[int], int]:
    """The copy of a dense input of `shape` into the result: (extents, destination element
    strides, destination offset of the first element), neighbouring dimensions merged where
    the inner one has no padding (its extent and the result's are the same)."""
    dst = dense_strides(out_shape)
    offset = sum(b * s for b, s in zip(before, dst))
    merged_n, merged_s = [shape[-1]], [dst[-1]]
    for n, s in zip(reversed(shape[:-1]), reversed(dst[:-1])):
        if s == merged_n[0] * merged_s[0]:  # the inner group is whole: one dimension
            merged_n[0] *= n
        else:
            merged_n.insert(0, n)
            merged_s.insert(0, s)
    return merged_n, merged_s, offset


class LowerPad(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.PadOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.PadOp) -> None:
        """The fill, a chunk per tile, then the interior copy."""
        self.low.require_f16(op)
        et = mrvl.element_type_of(op.output)
        shape, out_shape = mrvl.shape_of(op.input), mrvl.shape_of(op.output)
        total = prod(out_shape)
        dst = self.low.new_ddr(op.output)
        out = self.low.flat_view(dst, buffer_type("ddr", (total,), et))
        value = op.value.value.data
        if value == 0.0 and not np.signbit(value):
            fill = self.low.zero(et)
        else:
            array = np.array([value], mrvl.numpy_dtype(et))
            fill = self.low.made_constant(f"mrvl_pad_value_{self.low.made_constants}", array)
        tiles = self.low.num_tiles
        step = ceil(total / tiles)
        for tile, start in enumerate(range(0, total, step)):
            tok = self.low.emit(
                sched.DmaOp(
                    fill, [0], out, [start], [min(step, total - start)], tile,
                    self.low.write_deps(out, tile), src_strides=[0], dst_strides=[1],
                )
            ).token  # fmt: skip
            self.low.record_write(out, tile, tok)
        before, _ = op.before_after()
        extents, strides, offset = interior_dims(shape, before, out_shape)
        src = self.low.flat_view(
            self.low.ddr_buffer(op.input), buffer_type("ddr", (prod(shape),), et)
        )
        dense = dense_strides(extents)
        walked = sorted(range(len(extents)), key=lambda d: (extents[d], d))
        walked = walked[: max(0, len(extents) - 4)]
        kept = [d for d in range(len(extents)) if d not in walked]
        after = [*self.low.writes_to(out), *self.low.writes_to(src)]  # every fill, the input
        used = 0
        for index in itertools.product(*(range(extents[d]) for d in walked)):
            src0 = sum(i * dense[d] for i, d in zip(index, walked))
            dst0 = offset + sum(i * strides[d] for i, d in zip(index, walked))
            outer = kept[0]
            cut = ceil(extents[outer] / tiles)
            for first in range(0, extents[outer], cut):
                tile = used % tiles
                used += 1
                box = [min(cut, extents[outer] - first), *(extents[d] for d in kept[1:])]
                tok = self.low.emit(
                    sched.DmaOp(
                        src, [src0 + first * dense[outer]], out,
                        [dst0 + first * strides[outer]], box, tile,
                        list(dict.fromkeys(self.low.write_deps(out, tile, *after))),
                        src_strides=[dense[d] for d in kept],
                        dst_strides=[strides[d] for d in kept],
                    )
                ).token  # fmt: skip
                self.low.record_write(out, tile, tok)
