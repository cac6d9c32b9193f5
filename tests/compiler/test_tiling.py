"""The tiler's plans: every element covered once, every piece within a tile's OCM."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

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
    cells = sorted(
        (r, o)
        for p in chosen
        for r in range(p.orow0, p.orow0 + p.rows)
        for o in range(p.oc0, p.oc0 + p.ocs)
    )
    assert cells == [(r, o) for r in range(h) for o in range(oc)]


@settings(max_examples=40, deadline=None)
@given(
    h=st.integers(1, 30),
    w=st.integers(1, 30),
    c=st.integers(1, 300),
    oc=st.integers(1, 300),
    k=st.sampled_from((1, 3, 5)),
    s=st.sampled_from((1, 2)),
    tiles=st.sampled_from((1, 2, 4, 8)),
    pool=st.booleans(),
    pick=st.integers(0, 10**6),
)
def test_every_candidate_plan_covers_the_output_once_and_fits(h, w, c, oc, k, s, tiles, pool, pick):
    """Whatever block sizes and split the search may choose, every output element is computed
    by exactly one piece on a tile that exists, and every piece fits a tile's OCM."""
    from mrvl.passes.sched.tiling import WindowLayer, splits, window_candidates, window_pieces
    from mrvl.target import get_target

    target = get_target("cn10ka")
    oc = c if pool else oc
    oh, ow = (h + 2 * (k // 2) - k) // s + 1, (w + 2 * (k // 2) - k) // s + 1
    wbytes = 0 if pool else k * k * c * F16 + F32
    layer = WindowLayer(
        1, h, w, c, oh, ow, oc, k, k, s, k // 2, 1, wbytes, pool, sw=s, pad_left=k // 2
    )
    plans = window_candidates(layer, target, tiles, split_columns=not pool)
    plan = plans[pick % len(plans)]
    budget = target.ocm_bytes_per_tile - 4 * target.ocm_alignment
    for split in splits(tiles):
        pieces = window_pieces(layer, replace(plan, split=split), tiles)
        cells = Counter(
            (r, col, o)
            for p in pieces
            for r in range(p.orow0, p.orow0 + p.rows)
            for col in range(p.ocol0, p.ocol0 + p.cols)
            for o in range(p.oc0, p.oc0 + p.ocs)
        )
        assert len(cells) == oh * ow * oc and set(cells.values()) == {1}
        assert all(0 <= p.tile < tiles for p in pieces)
        cbs = plan.cbs if plan.cbs and plan.cbs < c else None
        assert all(layer.piece_bytes(p.rows, p.ocs, p.cols, cbs) <= budget for p in pieces)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 300),
    k=st.integers(1, 4096),
    o=st.integers(1, 2048),
    tiles=st.sampled_from((1, 2, 4, 8)),
    pinned=st.booleans(),
)
def test_the_priced_fc_plan_covers_the_output_and_is_never_dearer_than_the_fixed_one(
    rows, k, o, tiles, pinned
):
    from mrvl.passes.sched.tiling import FcLayer, fc_plan_cycles, plan_fc_layer_priced
    from mrvl.target import get_target

    target = get_target("cn10ka")
    fixed = plan_fc_layer(rows, k, o, OCM, tiles, ALIGN, "fc")
    chosen = plan_fc_layer_priced(rows, k, o, target, tiles, "fc", pinned=pinned)
    layer = FcLayer(rows, k, o, 1)
    assert fc_plan_cycles(layer, chosen, tiles, target, pinned=pinned) <= fc_plan_cycles(
        layer, fixed, tiles, target, pinned=pinned
    )
    cells = Counter((n, f) for p in chosen for n in range(p.n0, p.n0 + p.ns)
                    for f in range(p.o0, p.o0 + p.os))  # fmt: skip
    assert len(cells) == rows * o and set(cells.values()) == {1}
    for p in chosen:
        assert (p.ns * k + p.os * k + p.ns * p.os) * F16 + p.os * F32 + 4 * ALIGN <= OCM


def test_a_grid_split_gives_each_tile_a_block_of_channels_and_bands_and_loads_each_window_once():
    """2x4 over 8 tiles: 4 channel pieces by 4 bands; each tile takes 2 channel pieces (one
    channel group) of one band, the second reading the window the first loaded, so the
    layer reads its input once and its weights 4 times, where by channels it reads its
    input 4 times; and is priced so."""
    from mrvl.passes.sched.tiling import (
        WindowLayer,
        WindowPlan,
        shares_window,
        window_pieces,
        window_plan_cycles,
    )
    from mrvl.target import get_target

    target = get_target("cn10ka")
    layer = WindowLayer(1, 28, 28, 256, 28, 28, 512, 1, 1, 1, 0, 1, 256 * F16 + F32, False)
    grid = window_pieces(layer, WindowPlan(128, 7, 28, split="2x4"), 8)
    by_tile = {}
    for p in grid:
        by_tile.setdefault(p.tile, []).append(p)
    assert sorted(by_tile) == list(range(8))
    for tile, pieces in by_tile.items():
        assert len({p.orow0 for p in pieces}) == 1  # one band
        assert {p.oc0 // 256 for p in pieces} == {tile // 4}  # its channel group
        assert shares_window(pieces[0], pieces[1])
    by_channels = window_pieces(layer, WindowPlan(128, 7, 28, split="channels"), 8)
    assert not any(shares_window(a, b) for a, b in zip(by_channels, by_channels[8:]))
    assert window_plan_cycles(layer, grid, 8, target) < window_plan_cycles(
        layer, by_channels, 8, target
    )


def test_a_ddr_bound_layer_at_8_tiles_prices_the_reads_multicast_shares():
    """Light ResNet-50's 14x14x1024 -> 512 1x1 conv at 8 tiles is bound by its DDR bytes.
    One piece of all rows per channel group on 4 tiles reads each weight once; cutting the
    rows in two to use all 8 tiles has two tiles load each weight, which `sched-multicast`
    reads once for both. The planner must price that (`tiling.MULTICAST`) and take the
    8-tile plan; without it the 4-tile plan is the cheaper one. The cycle model agrees."""
    from unittest import mock

    import numpy as np
    from compiler.test_schedule_invariance import _compile, _layer_module

    from mrvl.passes.sched import tiling
    from mrvl.sim import prepare
    from mrvl.sim.cycles import model_cycles
    from mrvl.target import get_target

    target = get_target("cn10ka")
    layer = tiling.WindowLayer(1, 14, 14, 1024, 14, 14, 512, 1, 1, 1, 0, 1, 1024 * F16 + F32, False)
    chosen = tiling.plan_window_layer_priced(layer, target, 8, "l", split_columns=True)
    assert len({p.tile for p in chosen}) == 8 and all(p.rows == 7 for p in chosen)
    four = tiling.window_pieces(layer, tiling.WindowPlan(128, 14, 14, 64), 8)
    assert len({p.tile for p in four}) == 4
    assert tiling.window_plan_cycles(layer, chosen, 8, target) < tiling.window_plan_cycles(
        layer, four, 8, target
    )
    with mock.patch.object(tiling.pricing, "MULTICAST", False):
        assert tiling.window_plan_cycles(layer, four, 8, target) < tiling.window_plan_cycles(
            layer, chosen, 8, target
        )

    text, _ = _layer_module("conv", 14, 14, 1024, 512, 1, 1, np.random.default_rng(0))

    def modelled(pieces) -> int:
        with mock.patch.object(tiling.search, "plan_window_layer_priced", lambda *a, **k: pieces):
            return model_cycles(prepare(_compile(text, "cn10ka", 8, False))).total_cycles

    assert modelled(chosen) < modelled(four)


def test_double_buffered_layout_is_the_allocators_first_fit():
    """The planner lays out a tile's double-buffered steps with `sched-allocate`'s first fit:
    three steps of a 100-byte load and a 50-byte output (64-byte alignment) in
    `sched-pipeline`'s order need 320 bytes (the second load cannot take the first's bytes,
    which its compute still reads; the third fits between the second output and load)."""
    from mrvl.passes.sched.tiling.double_buffering import _pipelined_top

    assert _pipelined_top([((100,), 50, False)] * 3, 64) == 320
    assert _pipelined_top([((100,), 50, False)], 64) == 192  # nothing to overlap
    assert _pipelined_top([], 64) == 0


def test_pinned_loads_are_the_pin_pass_rule():
    """`LastSlices` is what sched-pin-weights removes and what the planner prices: a load
    repeats only the slice its tile loaded last from that constant."""
    from mrvl.passes.sched.pin_weights import LastSlices

    held = LastSlices()
    assert held.repeated(0, "w", (0, 8), "first") is None
    assert held.repeated(0, "w", (0, 8), "again") == "first"
    assert held.repeated(1, "w", (0, 8)) is None  # another tile
    assert held.repeated(0, "w", (8, 8)) is None  # another slice: now the last one
    assert held.repeated(0, "w", (0, 8)) is None


def test_dma_cycles_is_setup_then_port_or_engine():
    """`cost.dma_cycles`, the cycle model's timing of a DMA, as the planner uses it: set-up
    then the port window, or the engine's own time, whichever ends later."""
    from mrvl import cost
    from mrvl.target import get_target

    target = get_target("cn10ka")
    setup = target.dma_setup_cycles
    dma = cost.dma(target, 4096, reads_ddr=True)
    port = cost.ddr_port_cycles(target, dma.ddr_bytes)
    assert cost.dma_cycles(target, dma, port) == max(dma.cycles, setup + port)
    assert cost.dma_cycles(target, dma, 0) == dma.cycles
    assert cost.dma_cycles(target, dma, 10 * dma.cycles) == setup + 10 * dma.cycles


def test_int8_pieces_hold_twice_the_elements_and_double_buffer():
    """An int8 conv is planned in 1-byte activations and weights (its i32 bias and 8-byte
    requantization pair per channel aside), so its pieces hold twice the elements of fp16;
    and a weight-streaming int8 conv (3x3, 512 channels, 7x7, one tile) gets a plan whose
    loads overlap its MACs, priced near its MAC bound."""
    from mrvl.passes.sched.tiling import (
        WindowLayer,
        conv_weight_bytes_per_oc,
        plan_window_reads,
        window_plan_cycles,
    )
    from mrvl.target import get_target

    def layer(int8: bool) -> WindowLayer:
        per_oc = conv_weight_bytes_per_oc(3, 3, 512, bias=True, slopes=False, int8=int8)
        return WindowLayer(
            1, 7, 7, 512, 7, 7, 512, 3, 3, 1, 1, 1, per_oc, False, pad_left=1, int8=int8
        )

    fp16, int8 = layer(False), layer(True)
    assert int8.weight_bytes_per_oc == 9 * 512 + 4 + 8
    assert fp16.weight_bytes_per_oc == 9 * 512 * 2 + 4
    assert int8.piece_bytes(7, 16) == 7 * 7 * 512 + 7 * 7 * 16 + 16 * (9 * 512 + 12)
    target = get_target("cn10ka")
    geometry, pieces = plan_window_reads(int8, target, 1, "conv", split_columns=True)
    macs_bound = 7 * 7 * 512 * 9 * 512 // target.int8_macs_per_cycle_per_tile
    assert window_plan_cycles(geometry, pieces, 1, target) <= 1.1 * macs_bound
