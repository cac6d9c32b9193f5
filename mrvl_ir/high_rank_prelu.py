"""A PRelu with per-channel slopes on a rank-5 tensor (a 3-D conv net's activation): its
slopes lie along one axis k of [N, A, B, C, D], so the MLIP computes it as a `scale_shift`
on the 4-D view [prod(axes before k), shape[k], prod(axes after k), 1] (NCHW) of the same
bytes, whose channel axis is k: exact, converted to NHWC and back as a rank-4 PRelu on NCHW
data is. The other affine steps of such a chain stay scalar (`_elementwise_channels`)."""

from __future__ import annotations

from math import prod

from xdsl.ir import SSAValue

from mrvl.dialects import mrvl


def prelu_channel_axis(form, rank: int) -> int | None:
    """The axis of a fused PRelu's per-channel slopes at rank 5, else None (no PRelu, one
    slope, or another rank)."""
    if form is None or form.kind != "prelu" or rank != 5 or form.params["slopes"].size == 1:
        return None
    return int(form.calls[-1].attrs.axis) % 5


def channel_view(shape: tuple[int, ...], axis: int) -> tuple[int, int, int, int]:
    """The NCHW view of a rank-5 tensor whose channel axis is its `axis`."""
    return (prod(shape[:axis]), shape[axis], prod(shape[axis + 1 :]), 1)


def to_channel_view(importer, x: SSAValue, shape, axis: int, node) -> SSAValue:
    """`x` (rank 5, Relax's order) as its channel view, in NHWC for the layer."""
    x = importer._in_layout(x, mrvl.RELAX_LAYOUT[5], node)
    view = mrvl.tensor(channel_view(shape, axis), mrvl.element_type_of(x), "NCHW")
    x = importer._located(mrvl.ReshapeOp(x, view), node)
    return importer._in_layout(x, "NHWC", node)


def from_channel_view(importer, y: SSAValue, shape, node) -> SSAValue:
    """The layer's result (NHWC, the channel view) back at rank 5 in Relax's order."""
    y = importer._in_layout(y, "NCHW", node)
    out = mrvl.tensor(shape, mrvl.element_type_of(y), mrvl.RELAX_LAYOUT[5])
    return importer._located(mrvl.ReshapeOp(y, out), node)
