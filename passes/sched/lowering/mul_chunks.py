"""The chunks of a product, fp16 (`elementwise.LowerMul`) or int8 (`int8_elementwise.lower_qmul`):
chunks of the flat tensor dealt over the tiles; a broadcast `rhs` ([N, 1, 1, C]) is cut per
image, so a chunk takes whole pixels of one image and that image's C gate values. The two
differ only in the element size and the task that computes a chunk."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xdsl.ir import SSAValue

from mrvl.dialects import mrvl
from mrvl.passes.sched.lowering.state import buffer_type
from mrvl.passes.sched.tiling import Chunk, plan_elementwise


@dataclass
class MulChunks:
    lhs: SSAValue
    rhs: SSAValue
    out: SSAValue
    """Flat views of the operands and of the product (a broadcast `rhs`: N * C values)."""
    channels: int
    """C of a broadcast `rhs`, 0 for a full one."""
    chunks: list[tuple[int, Chunk]]
    """(image, chunk of the flat product), in the order the tiles are dealt them."""

    @classmethod
    def plan(cls, low, op: mrvl.MulOp, elem_bytes: int) -> MulChunks:
        """The flat views (emitted: lhs, product, rhs) and the chunks of `op`."""
        shape = mrvl.shape_of(op.output)
        count = prod(shape)
        et = mrvl.element_type_of(op.output)
        flat = buffer_type("ddr", (count,), et)
        lhs = low.flat_view(low.ddr_buffer(op.lhs), flat)
        out = low.flat_view(low.new_ddr(op.output), flat)
        if op.broadcasts:
            images, channels = shape[0], shape[-1]
            rhs_type = buffer_type("ddr", (images * channels,), et)
        else:
            images, channels, rhs_type = 1, 0, flat
        rhs = low.flat_view(low.ddr_buffer(op.rhs), rhs_type)
        per_image = count // images
        chunks = [
            (n, Chunk(n * per_image + c.start, c.length))
            for n in range(images)
            for c in plan_elementwise(
                per_image,
                2 if channels else 3,
                low.ocm_bytes(op),
                low.num_tiles,
                low.target.ocm_alignment,
                granule=max(channels, 1),
                reserved_bytes=channels * elem_bytes,
                elem_bytes=elem_bytes,
            )
        ]
        return cls(lhs, rhs, out, channels, chunks)

    def load(self, low, n: int, chunk: Chunk, tile: int) -> tuple[tuple, tuple]:
        """(buffer, token) of the chunk's lhs and of its rhs (image `n`'s gate values when
        broadcast) loaded into `tile`'s OCM."""
        lhs = low.load(self.lhs, [chunk.start], [chunk.length], tile)
        if self.channels:
            return lhs, low.load(self.rhs, [n * self.channels], [self.channels], tile)
        return lhs, low.load(self.rhs, [chunk.start], [chunk.length], tile)
