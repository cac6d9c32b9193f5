"""The Numba engine's packed-weight cache: packed weights follow the bytes in OCM, constant
weights are packed once and their DMAs skipped on warm runs, and nothing the program writes is
taken for constant."""

from __future__ import annotations

import numpy as np
import pytest
from sim_builders import (
    Staging,
    assert_same_bytes,
    conv,
    copy_bytes,
    dma,
    end,
    f16_data,
    fc,
    layer_program,
    multicast_program,
    run_both,
)

from mrvl.isa import (
    DType,
    IOEntry,
    MemSpace,
    Program,
)
from mrvl.sim import (
    prepare,
    run,
)
from mrvl.sim.engines.numba.dispatch import PACKING
from mrvl.sim.weight_cache import CONSTANT, weight_cache

# The generated programs saturate and make NaNs on purpose; the warning is tested on its own.
pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


def _two_layers_over_one_weight_address(between, layer="conv"):
    """x, two sets of conv weights in the constant pool, and two 3x3 convs of the same shape
    (two fcs of 7 rows over the same weights flattened, `layer="fc"`: one mac_tile call and
    a tail) reading weights at one OCM address; `between(first, second, w_addr, nbytes,
    scratch)` gives the instructions that put each layer's weights there (a list per layer;
    `scratch`: 64 bytes of OCM nothing else uses). The program, the cache's flags per layer
    and the layers' slots."""
    channels, outs, rows = 5, 32, 7
    staging = Staging()
    x_shape = (1, 3, 3, channels) if layer == "conv" else (rows, 9 * channels)
    x_addr = staging.add(f16_data(7, x_shape, True))
    first = staging.add(f16_data(8, (outs, 3, 3, channels), False))
    second = staging.add(f16_data(9, (outs, 3, 3, channels), False))
    nbytes = outs * 9 * channels * 2
    w_addr = staging.reserve(nbytes)
    out_values = outs if layer == "conv" else rows * outs
    out_addr = staging.reserve(2 * out_values * 2)
    scratch = staging.reserve(64)
    code = []
    for index, setup in enumerate(between(first, second, w_addr, nbytes, scratch)):
        code += setup
        out_at = out_addr + index * out_values * 2
        if layer == "fc":
            code.append(fc(x_addr, rows, 9 * channels, outs, w_addr, out_at))
            continue
        code.append(
            conv(x_addr, (1, 3, 3, channels), out_at, (1, 1, 1, outs), w_addr, kernel=(3, 3))
        )
    valid = prepare(layer_program(staging, code, out_addr, (2, out_values)))
    slots, *_, flags = weight_cache(valid, PACKING).arrays
    layers = [i for i, ins in enumerate(valid.code) if ins.opcode == layer]
    return valid, [int(flags[slots[i]]) & CONSTANT for i in layers], slots[layers]


@pytest.mark.parametrize("layer", ["conv", "fc"])
def test_cached_packed_weights_follow_the_bytes_in_ocm(layer):
    """Two convs (fcs) of the same shape read weights at the same OCM address (one slot of
    the Numba engine's weight cache), each after an OCM-to-OCM copy has put its weights there
    (not a copy of the constant pool): each run, the cache notices the bytes changed and
    repacks; running the program again gives the same."""
    valid, constant, slots = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.OCM, first, MemSpace.OCM, w_addr, nbytes)],
            [copy_bytes(MemSpace.OCM, second, MemSpace.OCM, w_addr, nbytes)],
        ],
        layer,
    )
    assert constant == [0, 0] and slots[0] == slots[1]  # one shared slot, compared at each use
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))
    assert first_run[0][0].tobytes() != first_run[0][1].tobytes()


@pytest.mark.parametrize("layer", ["conv", "fc"])
def test_weights_copied_from_the_constant_pool_are_packed_once(layer):
    """Each conv's (fc's) weights come by DMA from their own part of the constant pool to the
    same OCM address: they are constant (a run uses their packing without comparing bytes),
    each in its own slot, and both engines give the same bytes run after run."""
    valid, constant, slots = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes)],
            [copy_bytes(MemSpace.DDR, second, MemSpace.OCM, w_addr, nbytes)],
        ],
        layer,
    )
    assert all(constant) and slots[0] != slots[1]
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))
    assert first_run[0][0].tobytes() != first_run[0][1].tobytes()


def test_pool_weights_overwritten_in_ocm_are_compared_at_each_use():
    """The first conv reads its weights where the program's first DMA put the pool; then an
    OCM-to-OCM copy writes the other weights over half of them: the second conv's weights are
    not a copy of the pool, so its slot compares them at each run."""
    valid, constant, slots = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes)],
            [copy_bytes(MemSpace.OCM, second, MemSpace.OCM, w_addr, nbytes // 2)],
        ]
    )
    assert constant == [CONSTANT, 0] and slots[0] != slots[1]
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))


def test_warm_runs_skip_the_dmas_only_constant_weights_read():
    """Once a run has packed every constant slot, the DMAs whose bytes only those convs read
    as weights are skipped: here both weight copies, not the program's first DMA (it also
    brings the input) nor its last. Every run gives the interpreter's bytes."""
    valid, constant, _ = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes)],
            [copy_bytes(MemSpace.DDR, second, MemSpace.OCM, w_addr, nbytes)],
        ]
    )
    cache = weight_cache(valid, PACKING)
    dmas = [i for i, ins in enumerate(valid.code) if ins.opcode == "dma"]
    assert cache.weight_only[dmas].tolist() == [0, 1, 1, 0]
    assert not cache.skip().any()
    first_run = run_both(valid, [])
    assert cache.skip()[dmas].tolist() == [0, 1, 1, 0]
    for _ in range(2):
        assert_same_bytes(first_run, run_both(valid, []))


def test_a_dma_whose_bytes_are_also_read_otherwise_is_never_skipped():
    """The second weights are also copied elsewhere in OCM: their DMA is kept, while the first
    conv's weights, read only as weights, may be skipped."""
    valid, _, _ = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes)],
            [
                copy_bytes(MemSpace.DDR, second, MemSpace.OCM, w_addr, nbytes),
                copy_bytes(MemSpace.OCM, w_addr, MemSpace.OCM, scratch, 64),
            ],
        ]
    )
    cache = weight_cache(valid, PACKING)
    dmas = [i for i, ins in enumerate(valid.code) if ins.opcode == "dma"]
    assert cache.weight_only[dmas].tolist() == [0, 1, 0, 0, 0]
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))


def test_no_weights_are_constant_in_a_program_that_writes_its_constant_pool():
    valid, constant, _ = _two_layers_over_one_weight_address(
        lambda first, second, w_addr, nbytes, scratch: [
            [copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes)],
            [
                copy_bytes(MemSpace.OCM, second, MemSpace.DDR, first, nbytes),
                copy_bytes(MemSpace.DDR, first, MemSpace.OCM, w_addr, nbytes),
            ],
        ]
    )
    assert constant == [0, 0]
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))
    assert first_run[0][0].tobytes() != first_run[0][1].tobytes()


def test_tiles_share_a_weight_cache_slot_and_each_gets_its_own_weights():
    """The same conv (one ONNX node, OCM address, shape) on two tiles whose OCMs hold different
    weights at that address: the tiles share one slot of the weight cache, which repacks when
    the other tile's bytes differ, so each tile's output follows its own weights."""
    channels, outs = 5, 32
    staging = Staging()
    x_addr = staging.add(f16_data(4, (1, 3, 3, channels), True))
    first = staging.add(f16_data(5, (outs, 3, 3, channels), False))
    second = staging.add(f16_data(6, (outs, 3, 3, channels), False))
    w_addr = staging.reserve(outs * 9 * channels * 2)
    out_addr = staging.reserve(outs * 2)
    staging.reserve(outs * 2)  # tile 1's output, copied next to tile 0's
    size = len(staging.blob)
    nbytes = outs * 9 * channels * 2
    scratch = size  # DDR bytes past the constants, before the output entry
    code = [copy_bytes(MemSpace.DDR, 0, MemSpace.OCM, 0, size, tile=1)]
    for tile, source in enumerate((first, second)):
        code.append(copy_bytes(MemSpace.OCM, source, MemSpace.OCM, w_addr, nbytes, tile=tile))
    for tile in (0, 1):
        code.append(
            conv(
                x_addr,
                (1, 3, 3, channels),
                out_addr,
                (1, 1, 1, outs),
                w_addr,
                kernel=(3, 3),
                tile=tile,
            )
        )
    code.append(copy_bytes(MemSpace.OCM, out_addr, MemSpace.DDR, scratch, outs * 2, tile=1))
    code.append(copy_bytes(MemSpace.DDR, scratch, MemSpace.OCM, out_addr + outs * 2, outs * 2))
    program = layer_program(staging, code, out_addr, (2, outs), num_tiles=2)
    program.ddr_size += outs * 2
    program.io[0] = IOEntry("y", False, (2, outs), DType.F16, program.ddr_size - outs * 4)
    program.code[-2] = copy_bytes(
        MemSpace.OCM, out_addr, MemSpace.DDR, program.ddr_size - outs * 4, outs * 4
    )
    valid = prepare(program)
    slots = weight_cache(valid, PACKING).arrays[0].tolist()
    assert slots.count(0) == 2 and slots.count(1) == 0  # the two tiles' convs share one slot
    first_run = run_both(valid, [])
    assert_same_bytes(first_run, run_both(valid, []))
    assert first_run[0][0].tobytes() != first_run[0][1].tobytes()


def test_a_multicast_dma_stores_what_one_dma_per_tile_stores():
    """A multicast to tiles 0, 1 and 2 gives each tile's conv the same input and weights as
    one dma per tile would: the engines agree with each other and with that program, each tile
    computes its own rows, and warm runs, which skip the weight copies the Numba engine made
    of the multicast, still do."""
    from mrvl.sim.cycles import model_cycles

    multicast, separate = prepare(multicast_program(True)), prepare(multicast_program(False))
    first_run = run_both(multicast, [])
    assert_same_bytes(first_run, run_both(separate, []))
    rows = [row.tobytes() for row in first_run[0]]
    assert len(set(rows)) == 3 and bytes(len(rows[0])) not in rows
    cache = weight_cache(multicast, PACKING)
    assert cache.origin.tolist() == [0, 0, 0, 1, 1, 1, *range(2, len(multicast.code))]
    assert [(ins.tile, ins.fields["dst_tiles"]) for ins in cache.rows.code[:6]] == [
        (t, 0) for t in (0, 1, 2, 0, 1, 2)
    ]
    assert cache.weight_only[:6].tolist() == [0, 0, 0, 1, 1, 1]  # the weights' copies
    assert cache.skip()[:6].tolist() == [0, 0, 0, 1, 1, 1]
    for _ in range(2):
        assert_same_bytes(first_run, run_both(multicast, []))
    assert weight_cache(separate, PACKING).rows is None
    model_cycles(multicast)  # the tokens order every tile's conv after the multicasts
    model_cycles(separate)


@pytest.mark.parametrize("engine", ["numba", "interp"])
def test_a_reused_memory_reloads_a_constant_pool_the_program_wrote(engine):
    """y = the pool's first 8 bytes, read before a DMA overwrites them with the input x: each
    run must see the pool of the binary, not what the previous run left there."""
    from mrvl.sim import new_memory
    from mrvl.sim.simulator import writes_constant_pool

    pool = bytes(range(100, 116))
    ddr = (0, 0, 0, 1)
    program = Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=64,
        io=[IOEntry("x", True, (8,), DType.I8, 0), IOEntry("y", False, (8,), DType.I8, 16)],
        code=[
            dma(MemSpace.DDR, 32, ddr, MemSpace.DDR, 16, ddr, (1, 1, 1, 8), 1),
            dma(MemSpace.DDR, 0, ddr, MemSpace.DDR, 32, ddr, (1, 1, 1, 8), 1),
            end(),
        ],
        const_base=32,
        consts=pool,
        srcmap=[],
    )
    valid = prepare(program)
    assert writes_constant_pool(valid)
    memory = new_memory(valid)
    for seed in range(3):
        x = np.random.default_rng(seed).integers(-100, 100, 8).astype(np.int8)
        (y,) = run(valid, [x], engine=engine, memory=memory)
        assert y.tobytes() == pool[:8]
    program.code.pop(1)  # no more writes to the pool: a reused Memory keeps it
    kept = prepare(program)
    assert not writes_constant_pool(kept)
    memory = new_memory(kept)
    for _ in range(2):
        (y,) = run(kept, [x], engine=engine, memory=memory)
        assert y.tobytes() == pool[:8]
