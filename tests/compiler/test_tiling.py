"""The tiler's plans: every element covered once, every piece within a tile's OCM."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mrvl.passes.sched.tiling import F16, F32, plan_fc_layer, plan_per_channel

OCM, ALIGN = 262144, 64


@settings(max_examples=200, deadline=None)
@given(
    pixels=st.integers(1, 6),
    channels=st.integers(1, 60000),
    tiles=st.sampled_from((1, 2, 4, 8)),
    params=st.sampled_from((2, 3)),
)
def test_per_channel_chunks_cover_the_tensor_and_fit(pixels, channels, tiles, params):
    count = pixels * channels
    chunks = plan_per_channel(count, channels, OCM, tiles, ALIGN, "bn", param_bytes=params * F32)
    covered = [i for c in chunks for i in range(c.start, c.start + c.length)]
    assert covered == list(range(count))
    for c in chunks:
        assert c.start % channels == c.c0 or c.cs == channels  # the chunk's first channel
        assert c.length % c.cs == 0 and c.c0 + c.cs <= channels
        in_ocm = 2 * c.length * F16 + c.cs * params * F32 + (2 + params) * ALIGN
        assert in_ocm <= OCM, c


def test_a_pixel_too_large_for_a_tile_is_cut_into_channel_groups():
    chunks = plan_per_channel(2 * 23040, 23040, OCM, 1, ALIGN, "bn", param_bytes=2 * F32)
    assert [(c.c0, c.cs) for c in chunks] == [(0, 21818), (21818, 1222)] * 2


@given(rows=st.integers(1, 64), k=st.integers(1, 8192), o=st.integers(1, 4096))
@settings(max_examples=200, deadline=None)
def test_fc_pieces_count_the_prelu_slopes(rows, k, o):
    pieces = plan_fc_layer(rows, k, o, OCM, 1, ALIGN, "fc", slopes=True)
    for p in pieces:
        in_ocm = (p.ns * k + p.os * k + p.ns * p.os) * F16 + p.os * 2 * F32 + 5 * ALIGN
        assert in_ocm <= OCM, p


@settings(max_examples=60, deadline=None)
@given(
    h=st.integers(1, 64),
    c=st.integers(1, 256),
    oc=st.integers(1, 256),
    k=st.sampled_from((1, 3)),
    tiles=st.sampled_from((1, 2, 4, 8)),
    pool=st.booleans(),
)
def test_the_priced_plan_is_never_dearer_than_spreading_over_every_tile(h, c, oc, k, tiles, pool):
    from mrvl.passes.sched.tiling import (
        WindowLayer,
        plan_window_layer,
        plan_window_layer_priced,
        window_plan_cycles,
    )
    from mrvl.target import get_target

    target = get_target("cn10ka")
    oc = c if pool else oc
    wbytes = 0 if pool else k * k * c * F16 + F32
    layer = WindowLayer(1, h, h, c, h, h, oc, k, k, 1, k // 2, 1, wbytes, pool, pad_left=k // 2)
    spread = plan_window_layer(layer, target.ocm_bytes_per_tile, tiles, ALIGN, "l")
    chosen = plan_window_layer_priced(layer, target, tiles, "l")
    assert window_plan_cycles(layer, chosen, tiles, target) <= window_plan_cycles(
        layer, spread, tiles, target
    )
    # every output row and channel is computed once
    cells = sorted((r, o) for p in chosen for r in range(p.orow0, p.orow0 + p.rows)
                   for o in range(p.oc0, p.oc0 + p.ocs))
    assert cells == [(r, o) for r in range(h) for o in range(oc)]
