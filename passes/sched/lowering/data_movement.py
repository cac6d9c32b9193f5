"""Lowering of the layers that only move data: constants, casts and layout conversions,
reshapes, concatenation, strided copies (slices, transposes, space-to-depth) and dilation.

Each is a rewrite pattern of `convert-mrvl-to-sched` (see `state.LayerLowering`).
"""

from __future__ import annotations

import itertools
from math import prod

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.passes.sched.lowering.state import LayerLowering, buffer_type, dense_strides


class LowerConstant(LayerLowering):
    """A constant becomes a DDR constant of the program's constant pool."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.ConstantOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.ConstantOp) -> None:
        t = buffer_type("ddr", tuple(mrvl.shape_of(op.result)), mrvl.element_type_of(op.result))
        buf = self.low.emit(sched.ConstOp(op.const_name.data, op.value, t)).buffer
        self.low.buffers[op.result] = buf
        self.low.writers[buf] = {}


class _LowerConvert(LayerLowering):
    """A cast or layout conversion is one `sched.convert` on tile 0, DDR to DDR (into the
    region's output buffer when it produces an output)."""

    def lower(self, op: mrvl.CastOp | mrvl.LayoutConvertOp) -> None:
        dest = self.low.outputs.get(op.output)
        src = self.low.ddr_buffer(op.input)
        if dest is None:
            dest = self.low.new_ddr(op.output)
        else:
            self.low.buffers[op.output] = dest
        deps = self.low.write_deps(dest, 0, *self.low.writes_to(src))
        tok = self.low.emit(self.task(op, src, dest, deps)).token
        self.low.record_write(dest, 0, tok)

    def task(self, op, src, dest, deps) -> sched.TaskBase:
        """The conversion task of `op` from `src` into `dest`, after `deps`."""
        perm = (
            op.permutation
            if isinstance(op, mrvl.LayoutConvertOp)
            else range(len(mrvl.shape_of(op.input)))
        )
        return sched.ConvertOp(src, dest, list(perm), 0, deps)


class LowerCast(_LowerConvert):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.CastOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerLayoutConvert(_LowerConvert):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.LayoutConvertOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerReshape(LayerLowering):
    """A reshape is a view of the same DDR bytes."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.ReshapeOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.ReshapeOp) -> None:
        src = self.low.ddr_buffer(op.input)
        t = buffer_type("ddr", tuple(mrvl.shape_of(op.output)), mrvl.element_type_of(op.output))
        view = self.low.emit(sched.ViewOp(src, t)).buffer
        self.low.buffers[op.output] = view
        self.low.writers[view] = self.low.writers.setdefault(src, {})  # the same bytes, the same writes


class LowerConcat(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.ConcatOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.ConcatOp) -> None:
        """Each input is copied by DMA, DDR to DDR, into its slice of the result."""
        dst = self.low.new_ddr(op.output)
        axis = op.concat_axis
        offset = 0
        for index, value in enumerate(op.inputs):
            src = self.low.ddr_buffer(value)
            shape = mrvl.shape_of(value)
            dst_offsets = [0] * len(shape)
            dst_offsets[axis] = offset
            tile = index % self.low.num_tiles
            deps = self.low.write_deps(dst, tile, *self.low.writes_to(src))
            tok = self.low.emit(
                sched.DmaOp(src, [0] * len(shape), dst, dst_offsets, shape, tile, deps)
            ).token
            self.low.record_write(dst, tile, tok)
            offset += shape[axis]


class LowerStridedCopy(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.StridedCopyOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.StridedCopyOp) -> None:
        """DDR to DDR DMAs. A descriptor has 4 dimensions: beyond those, the smallest
        dimensions are walked one index per DMA; the outermost remaining dimension is cut
        into one piece per tile."""
        box, strides = list(op.box.get_values()), list(op.strides.get_values())
        et = mrvl.element_type_of(op.output)
        src = self.low.flat_view(
            self.low.ddr_buffer(op.input), buffer_type("ddr", (prod(mrvl.shape_of(op.input)),), et)
        )
        dst = self.low.new_ddr(op.output)
        out = self.low.flat_view(dst, buffer_type("ddr", (prod(box),), et))
        dense = dense_strides(box)
        walked = sorted(range(len(box)), key=lambda d: (box[d], d))[: max(0, len(box) - 4)]
        kept = [d for d in range(len(box)) if d not in walked]
        reads = self.low.writes_to(src)
        tiles_used = 0
        for index in itertools.product(*(range(box[d]) for d in walked)):
            src0 = op.offset.value.data + sum(i * strides[d] for i, d in zip(index, walked))
            dst0 = sum(i * dense[d] for i, d in zip(index, walked))
            outer = kept[0]
            step = -(-box[outer] // self.low.num_tiles)
            for first in range(0, box[outer], step):
                tile = tiles_used % self.low.num_tiles
                tiles_used += 1
                piece = [min(step, box[outer] - first), *(box[d] for d in kept[1:])]
                tok = self.low.emit(
                    sched.DmaOp(
                        src,
                        [src0 + first * strides[outer]],
                        out,
                        [dst0 + first * dense[outer]],
                        piece,
                        tile,
                        self.low.write_deps(out, tile, *reads),
                        src_strides=[strides[d] for d in kept],
                        dst_strides=[dense[d] for d in kept],
                    )
                ).token
                self.low.record_write(out, tile, tok)


class LowerDilate(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.DilateOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.DilateOp) -> None:
        """Zero insertion: fill the result with zeros (a DMA repeating one zero element of the
        constant pool), then scatter the input into it with destination strides."""
        n, h, w, c = mrvl.shape_of(op.input)
        _, oh, ow, _ = mrvl.shape_of(op.output)
        sh, sw = op.strides.get_values()
        et = mrvl.element_type_of(op.output)
        total = n * oh * ow * c
        dst = self.low.new_ddr(op.output)
        out = self.low.flat_view(dst, buffer_type("ddr", (total,), et))
        zero = self.low.zero(et)
        tok = self.low.emit(
            sched.DmaOp(
                zero, [0], out, [0], [total], 0, self.low.write_deps(out, 0),
                src_strides=[0], dst_strides=[1],
            )
        ).token  # fmt: skip
        self.low.record_write(out, 0, tok)
        src = self.low.ddr_buffer(op.input)
        deps = self.low.write_deps(out, 0, *self.low.writes_to(src))
        tok = self.low.emit(
            sched.DmaOp(
                src, [0, 0, 0, 0], out, [0], [n, h, w, c], 0, deps,
                dst_strides=[oh * ow * c, sh * ow * c, sw * c, 1],
            )
        ).token  # fmt: skip
        self.low.record_write(out, 0, tok)
