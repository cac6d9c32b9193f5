"""The scheduler's choices never change the numbers: for random conv / pool / fc layers, every
target, tile count and `wb_pin_ocm` gives the same output bits, and every program is free of
hazards under the cycle model (its tokens order every pair of conflicting accesses)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st
from xdsl.parser import Parser

from mrvl.assembler import assemble
from mrvl.compiler import run_pipeline
from mrvl.dialects import mrvl_context
from mrvl.passes import DEFAULT_PIPELINE
from mrvl.sim import prepare, run
from mrvl.sim.cycles import model_cycles

CHOICES = [  # mcpu, num_tiles, wb_pin_ocm, cascade
    ("cn10ka", 1, False, True),
    ("cn10ka", 2, True, True),
    ("cn10ka", 8, False, False),
    ("cnf10kb", 4, True, True),
]


def _hex(array: np.ndarray) -> str:
    return '"0x' + array.tobytes().hex().upper() + '"'


def _t(shape, dtype, layout) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}, #mrvl.layout<{layout}>>"


def _layer_module(
    kind: str, h: int, w: int, c: int, oc: int, k: int, s: int, rng, pad: int | None = None
) -> str:
    if kind == "fc":
        x_shape, y_shape = (h, c * w), (h, oc)
        weights = rng.standard_normal((oc, c * w)).astype(np.float16)
        body = (
            f'%w = mrvl.constant "w" = dense<{_hex(weights)}> : tensor<{oc}x{c * w}xf16> -> '
            f"{_t(weights.shape, 'f16', 'OI')}\n"
            f"%1 = mrvl.fc %0, %w act relu : ({_t(x_shape, 'f16', 'NC')}, "
            f"{_t(weights.shape, 'f16', 'OI')}) -> {_t(y_shape, 'f16', 'NC')}"
        )
        layout = "NC"
    else:
        pad = k // 2 if pad is None else pad
        oh, ow = (h + 2 * pad - k) // s + 1, (w + 2 * pad - k) // s + 1
        x_shape = (1, h, w, c)
        layout = "NHWC"
        if kind == "conv":
            y_shape = (1, oh, ow, oc)
            weights = rng.standard_normal((oc, k, k, c)).astype(np.float16)
            bias = rng.standard_normal(oc).astype(np.float32)
            body = (
                f'%w = mrvl.constant "w" = dense<{_hex(weights)}> : '
                f"tensor<{oc}x{k}x{k}x{c}xf16> -> {_t(weights.shape, 'f16', 'OHWI')}\n"
                f'%b = mrvl.constant "b" = dense<{_hex(bias)}> : tensor<{oc}xf32> -> '
                f"{_t((oc,), 'f32', 'O')}\n"
                f"%1 = mrvl.conv2d %0, %w bias %b strides [{s}, {s}] pads [{pad}, {pad}, {pad}, "
                f"{pad}] act relu : ({_t(x_shape, 'f16', 'NHWC')}, "
                f"{_t(weights.shape, 'f16', 'OHWI')}, {_t((oc,), 'f32', 'O')}) -> "
                f"{_t(y_shape, 'f16', 'NHWC')}"
            )
        else:
            y_shape = (1, oh, ow, c)
            body = (
                f"%1 = mrvl.maxpool2d %0 kernel [{k}, {k}] strides [{s}, {s}] pads [{pad}, "
                f"{pad}, {pad}, {pad}] : {_t(x_shape, 'f16', 'NHWC')} -> "
                f"{_t(y_shape, 'f16', 'NHWC')}"
            )
    return (
        f"builtin.module {{\n func.func @r(%x: {_t(x_shape, 'f32', layout)}) -> "
        f"{_t(y_shape, 'f32', layout)} {{\n"
        f"%0 = mrvl.cast %x : {_t(x_shape, 'f32', layout)} -> {_t(x_shape, 'f16', layout)}\n"
        f"{body}\n"
        f"%2 = mrvl.cast %1 : {_t(y_shape, 'f16', layout)} -> {_t(y_shape, 'f32', layout)}\n"
        f"func.return %2 : {_t(y_shape, 'f32', layout)}\n }}\n}}"
    ), x_shape


def _compile(text: str, mcpu: str, tiles: int, pin: bool, cascade: bool = False):
    module = Parser(mrvl_context(), text).parse_module()
    options = {"mcpu": mcpu, "num_tiles": tiles, "wb_pin_ocm": pin, "cascade": cascade}
    run_pipeline(module, DEFAULT_PIPELINE, options={"convert-mrvl-to-sched": options})
    return assemble(module)


@settings(max_examples=12, deadline=None)
@given(
    kind=st.sampled_from(("conv", "pool", "fc")),
    h=st.integers(1, 24),
    w=st.integers(1, 12),
    c=st.integers(1, 24),
    oc=st.integers(1, 40),
    k=st.sampled_from((1, 3)),
    s=st.sampled_from((1, 2)),
    seed=st.integers(0, 2**16),
)
def test_every_schedule_gives_the_same_bits(kind, h, w, c, oc, k, s, seed):
    rng = np.random.default_rng(seed)
    text, x_shape = _layer_module(kind, h, w, c, oc, k, s, rng)
    x = rng.standard_normal(x_shape).astype(np.float32)
    results = []
    for mcpu, tiles, pin, cascade in CHOICES:
        valid = prepare(_compile(text, mcpu, tiles, pin, cascade))
        model_cycles(valid)  # raises HazardError on a missing token
        results.append(run(valid, [x])[0])
    for other in results[1:]:
        assert other.tobytes() == results[0].tobytes()


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(("conv", "pool", "fc")),
    h=st.integers(1, 14),
    w=st.integers(1, 10),
    c=st.one_of(st.integers(1, 24), st.integers(65, 140)),
    oc=st.integers(1, 40),
    k=st.sampled_from((1, 3)),
    s=st.sampled_from((1, 2)),
    tiles=st.sampled_from((1, 2, 8)),
    pin=st.booleans(),
    pick=st.integers(0, 10**6),
    split=st.integers(0, 11),
    seed=st.integers(0, 2**16),
)
def test_every_tiling_plan_gives_the_same_bits(
    kind, h, w, c, oc, k, s, tiles, pin, pick, split, seed
):
    """Whatever plan the tiler's search could choose (block sizes of rows, columns, output
    and input channels, and the split across tiles by channels, rows or columns), the
    program computes the same bits as the one the search chose, without a hazard. With the
    grid splits (channel groups by band groups) a tile loads a window once for its channel
    pieces of that band."""
    from unittest import mock

    from mrvl.passes.sched import plan_tiling as lowering
    from mrvl.passes.sched import tiling

    rng = np.random.default_rng(seed)
    text, x_shape = _layer_module(kind, h, w, c, oc, k, s, rng)
    x = rng.standard_normal(x_shape).astype(np.float32)
    expected = run(prepare(_compile(text, "cn10ka", 1, False)), [x])[0]
    chosen = []

    def window_plan(layer, target, num_tiles, what, *, split_columns=False, pinned=False):
        plans = tiling.window_candidates(
            layer, target, num_tiles, split_columns=split_columns, pinned=pinned
        )
        every = tiling.splits(num_tiles)
        plan = replace(plans[pick % len(plans)], split=every[split % len(every)])
        chosen.append(plan)
        return tiling.window_pieces(layer, plan, num_tiles)

    def fc_plan(
        n, k_, o, target, num_tiles, what, *, slopes=False, bias=True, pinned=False, int8=False
    ):
        pieces = tiling.plan_fc_layer(
            n, k_, o, target.ocm_bytes_per_tile, num_tiles, target.ocm_alignment, what, int8=int8
        )
        os = max(1, pieces[0].os >> (pick % 4))
        ns = max(1, pieces[0].ns >> (pick // 4 % 3))
        chosen.append((os, ns))
        return tiling.fc_grid(n, o, ns, os, num_tiles, tiling.FC_SPLITS[split % 3])

    with (
        mock.patch.object(tiling.search, "plan_window_layer_priced", window_plan),
        mock.patch.object(lowering, "plan_fc_layer_priced", fc_plan),
    ):
        valid = prepare(_compile(text, "cn10ka", tiles, pin))
    assert chosen
    model_cycles(valid)  # raises HazardError on a missing token
    assert run(valid, [x])[0].tobytes() == expected.tobytes(), chosen


@settings(max_examples=15, deadline=None)
@given(
    h=st.integers(1, 20),
    w=st.integers(1, 12),
    c=st.one_of(st.integers(1, 24), st.integers(65, 140)),
    oc=st.integers(1, 40),
    s=st.sampled_from((2, 3)),
    pad=st.integers(0, 2),
    tiles=st.sampled_from((1, 8)),
    pin=st.booleans(),
    seed=st.integers(0, 2**16),
)
@example(h=14, w=14, c=64, oc=32, s=2, pad=0, tiles=8, pin=False, seed=1)
@example(h=9, w=11, c=96, oc=20, s=3, pad=1, tiles=1, pin=True, seed=2)
# a column piece past the input's end (w=1, pad 1, stride 2): its taps are all padding
@example(h=7, w=1, c=11, oc=35, s=2, pad=1, tiles=8, pin=False, seed=0)
def test_a_strided_1x1_conv_loads_only_what_it_reads(h, w, c, oc, s, pad, tiles, pin, seed):
    """A 1x1 conv with strides loads only the rows and columns its taps read (DMA strides)
    and runs as a stride-1 conv over them when that is cheaper: the same bits as loading
    whole rows, fewer DDR bytes read when pixels are whole bursts, no hazard."""
    from unittest import mock

    from mrvl.passes.sched import tiling
    from mrvl.sim.profile import profile_regions

    rng = np.random.default_rng(seed)
    text, x_shape = _layer_module("conv", h, w, c, oc, 1, s, rng, pad=pad)
    x = rng.standard_normal(x_shape).astype(np.float32)
    strided = prepare(_compile(text, "cn10ka", tiles, pin))
    with mock.patch.object(tiling.WindowLayer, "subsampled", lambda layer: layer):
        whole = prepare(_compile(text, "cn10ka", tiles, pin))
    assert run(strided, [x])[0].tobytes() == run(whole, [x])[0].tobytes()
    model_cycles(strided)  # raises HazardError on a missing token
    if h > s + pad and w > s + pad and c >= 32:  # rows and columns skipped, in whole bursts
        reads = [profile_regions([("r", v, None)]).ddr_read_bytes for v in (strided, whole)]
        assert reads[0] < reads[1]


@settings(max_examples=6, deadline=None)
@given(
    h=st.integers(2, 10),
    c=st.integers(65, 200),
    oc=st.integers(1, 24),
    k=st.sampled_from((1, 3)),
    tiles=st.sampled_from((2, 8)),
    pin=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_chains_of_input_channel_blocks_run_in_lockstep_over_the_tiles(
    h, c, oc, k, tiles, pin, seed
):
    """A round of chains (a piece per tile, each cut into input-channel blocks) is emitted
    block by block over the tiles, so each tile's loads share the DDR port with the others'
    instead of waiting for whole chains before them; the bits are those of one tile."""
    from unittest import mock

    from mrvl.passes.sched import tiling

    rng = np.random.default_rng(seed)
    text, x_shape = _layer_module("conv", h, 5, c, oc, k, 1, rng)
    x = rng.standard_normal(x_shape).astype(np.float32)
    expected = run(prepare(_compile(text, "cn10ka", 1, False)), [x])[0]

    def chains(layer, target, num_tiles, what, *, split_columns=False, pinned=False):
        plan = tiling.WindowPlan(layer.oc, 1, layer.ow, tiling.CONV_CI_BLOCK)
        return tiling.window_pieces(layer, plan, num_tiles)

    with mock.patch.object(tiling.search, "plan_window_layer_priced", chains):
        valid = prepare(_compile(text, "cn10ka", tiles, pin))
    model_cycles(valid)  # raises HazardError on a missing token
    assert run(valid, [x])[0].tobytes() == expected.tobytes()
    convs = [ins.tile for ins in valid.code if ins.opcode == "conv"]
    if min(h, tiles) > 1:  # the first round: every tile's first block before any second one
        first_round = convs[: min(h, tiles)]
        assert sorted(first_round) == list(range(min(h, tiles)))


@settings(max_examples=8, deadline=None)
@example(kind="conv", h=4, c=1, oc=4, k=1, grid="4x2", pin=False, seed=0)
@given(
    kind=st.sampled_from(("conv", "pool")),
    h=st.integers(4, 16),
    c=st.integers(1, 40),
    oc=st.integers(4, 40),
    k=st.sampled_from((1, 3)),
    grid=st.sampled_from(("2x4", "4x2")),
    pin=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_a_grid_split_loads_each_window_once_per_tile_and_gives_the_same_bits(
    kind, h, c, oc, k, grid, pin, seed
):
    """A 2-D split (channel groups by band groups): a tile's channel pieces of one band read
    the window its first one loaded; the same bits as one tile, no hazard, fewer loads."""
    from unittest import mock

    from mrvl.passes.sched import tiling

    rng = np.random.default_rng(seed)
    text, x_shape = _layer_module(kind, h, 6, c, oc, k, 1, rng)
    x = rng.standard_normal(x_shape).astype(np.float32)
    expected = run(prepare(_compile(text, "cn10ka", 1, False)), [x])[0]
    shared = []

    def plan(layer, target, num_tiles, what, *, split_columns=False, pinned=False):
        width = layer.channel_step(-(-layer.oc // 4)) if kind == "conv" else layer.oc
        chosen = tiling.WindowPlan(width, -(-layer.oh // 4), layer.ow, split=grid)
        pieces = tiling.window_pieces(layer, chosen, num_tiles)
        last = {}
        for p in pieces:
            shared.append(tiling.shares_window(last.get(p.tile), p))
            last[p.tile] = p
        return pieces

    with mock.patch.object(tiling.search, "plan_window_layer_priced", plan):
        valid = prepare(_compile(text, "cn10ka", 8, pin))
    model_cycles(valid)  # raises HazardError on a missing token
    assert run(valid, [x])[0].tobytes() == expected.tobytes()
    from mrvl.passes.sched.lowering import window as lowering

    with (
        mock.patch.object(tiling.search, "plan_window_layer_priced", plan),
        mock.patch.object(lowering, "shares_window", lambda previous, piece: False),
    ):
        unshared = prepare(_compile(text, "cn10ka", 8, pin))
    dmas = [sum(ins.opcode == "dma" for ins in v.code) for v in (valid, unshared)]
    assert (dmas[0] < dmas[1]) == any(shared)
    if kind == "conv" and grid == "2x4":  # 2 channel groups of 2 or more pieces: some share
        assert any(shared)  # (a pool's channel pieces read different channels)


def test_each_output_is_allocated_before_the_previous_store_so_they_overlap():
    """A double-buffered conv cut into bands: each band's output is allocated before the
    previous band's store (`early_outputs`), so the first-fit allocator keeps them apart and
    the compute of band i+1 runs while band i is stored; the same bits, no hazard."""
    from unittest import mock

    from mrvl.passes.sched import tiling

    rng = np.random.default_rng(5)
    text, x_shape = _layer_module("conv", 16, 16, 32, 32, 3, 1, rng)
    x = rng.standard_normal(x_shape).astype(np.float32)
    expected = run(prepare(_compile(text, "cn10ka", 1, False)), [x])[0]

    def bands(layer, target, num_tiles, what, *, split_columns=False, pinned=False):
        pieces = tiling.window_pieces(layer, tiling.WindowPlan(layer.oc, 2, layer.ow), num_tiles)
        assert tiling.early_outputs(layer, pieces, target, pinned)
        return pieces

    with mock.patch.object(tiling.search, "plan_window_layer_priced", bands):
        valid = prepare(_compile(text, "cn10ka", 1, False))
    timeline = model_cycles(valid)  # raises HazardError on a missing token
    assert run(valid, [x])[0].tobytes() == expected.tobytes()
    convs = [i for i, ins in enumerate(valid.code) if ins.opcode == "conv"]
    stores = [
        i
        for i, ins in enumerate(valid.code)
        if ins.opcode == "dma" and ins.fields["dst_space"] != ins.fields["src_space"]
        and i > convs[0] and tuple(ins.fields["box"])[:2] == (1, 2)
    ]  # fmt: skip
    assert len(convs) == 8
    overlapping = sum(timeline.start[c] < timeline.end[s] for c, s in zip(convs[1:], stores))
    assert overlapping >= 4
