"""The tile plan of the Numba engine's threads (`mrvl.sim.thread_plan`): each thread runs the
rows of some tiles, in order, and waits only for the earlier rows of other threads that touch
the same bytes, so a program for several tiles gives program order's bytes and counts on any
number of threads, faults included."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ENGINE_CORPUS, corpus_build, corpus_inputs, engine_run, flatten_outputs
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_builders import (
    Staging,
    assert_same_bytes,
    copy_bytes,
    end,
    instruction,
    multicast_program,
)

from mrvl.isa import DType, IOEntry, MemSpace, Program
from mrvl.sim import RunStats, SimulatorError, prepare, run, thread_plan
from mrvl.sim.engines.numba import dispatch
from mrvl.sim.engines.numba.sharing import THREADS_ENV
from mrvl.sim.thread_plan import plan_threads, use_tile_plan

DDR, OCM = MemSpace.DDR, MemSpace.OCM


@pytest.fixture(autouse=True)
def every_program_by_plan(monkeypatch):
    """The programs here are small: run them by tile plan whatever their multiply-adds."""
    monkeypatch.setattr(thread_plan, "TILE_PLAN_MACS", 0)


def _program(code, *, num_tiles: int, consts: bytes, out_addr: int, out_bytes: int) -> Program:
    return Program(
        target="cn10ka",
        num_tiles=num_tiles,
        ddr_size=out_addr + out_bytes,
        io=[IOEntry("y", False, (out_bytes,), DType.I8, out_addr)],
        code=[*code, end()],
        const_base=0,
        consts=consts,
        srcmap=[],
    )


def _no_slots(rows: int):
    none = np.full(rows, -1, np.int64)
    return (none, none), (np.zeros(0, np.bool_), np.zeros(0, np.bool_))


def test_a_row_waits_for_the_other_threads_rows_that_touch_its_bytes():
    """Tile 1 reads DDR bytes that tile 0 wrote (read after write), and tile 0 then overwrites
    DDR bytes that tile 1 read (write after read): each waits for the other's row; rows on
    bytes nobody else touches wait for nothing, and `end` waits for every row."""
    consts = bytes(range(256))
    out = 512
    code = [
        copy_bytes(DDR, 0, OCM, 0, 64, tile=0),  # tile 0's row 1
        copy_bytes(OCM, 0, DDR, out, 64, tile=0),  # tile 0's row 2: writes y[0:64]
        copy_bytes(DDR, 64, OCM, 0, 64, tile=1),  # tile 1's row 1: bytes of its own
        copy_bytes(DDR, out, OCM, 64, 64, tile=1),  # tile 1's row 2: reads y[0:64]
        copy_bytes(DDR, 128, OCM, 128, 64, tile=0),  # tile 0's row 3: nothing shared
        copy_bytes(DDR, 192, DDR, out, 64, tile=0),  # tile 0's row 4: overwrites y[0:64]
    ]
    rows = prepare(_program(code, num_tiles=2, consts=consts, out_addr=out, out_bytes=64))
    plan = plan_threads(rows, 2, *_no_slots(len(rows.code)))
    assert plan.owner[:6].tolist() == [0, 0, 1, 1, 0, 0]
    assert plan.need[:6].tolist() == [[0, 0], [0, 0], [0, 0], [2, 0], [0, 0], [0, 2]]
    assert plan.need[6].tolist() == [0, 2]  # `end`: thread 1's two rows (thread 0's in order)
    assert plan.announce[:6].tolist() == [0, 1, 0, 1, 0, 0]  # the rows others need done


def test_a_shared_weight_slot_orders_its_convs_until_it_is_only_read():
    """Convs of one weight-cache slot on two threads are ordered while a run may pack it, and
    not once a warm run only reads its constant packing."""
    consts = bytes(64)
    code = [copy_bytes(DDR, 0, OCM, 0, 64, tile=t) for t in (0, 1)]
    rows = prepare(_program(code, num_tiles=2, consts=consts, out_addr=64, out_bytes=64))
    slots = (np.array([0, 0, -1]), np.full(3, -1))
    packs = plan_threads(rows, 2, slots, (np.array([True]), np.zeros(0, np.bool_)))
    reads = plan_threads(rows, 2, slots, (np.array([False]), np.zeros(0, np.bool_)))
    assert packs.need[1].tolist() == [1, 0]
    assert reads.need[1].tolist() == [0, 0]


def _same_on_threads(program: Program) -> None:
    """The interpreter, and the engine on 1, 2 and 3 threads (a fresh program each: its first
    run packs, its second is warm), give the same bytes and counts."""
    expected = RunStats()
    reference = run(prepare(program), [], engine="interp", stats=expected)
    for workers in (1, 2, 3):
        valid = prepare(program)
        for _ in range(2):
            counted = RunStats()
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv(THREADS_ENV, str(workers))
                assert_same_bytes(reference, run(valid, [], engine="numba", stats=counted))
            np.testing.assert_array_equal(counted.saturated, expected.saturated)
            np.testing.assert_array_equal(counted.nans, expected.nans)


BLOCK = 64
MOVES = st.lists(
    st.tuples(
        st.integers(0, 3),  # tile
        st.sampled_from(["load", "store", "ddr"]),
        st.integers(0, 7),  # source block
        st.integers(0, 7),  # destination block
        st.integers(1, 2 * BLOCK),  # bytes
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(moves=MOVES)
def test_any_program_of_moves_between_tiles_gives_program_orders_bytes(moves):
    """DMAs on four tiles that load DDR blocks into their OCM, store OCM blocks to DDR and copy
    DDR to DDR, over overlapping bytes in any order (no tokens: the plan follows the bytes):
    the last block of DDR each tile's stores reach is what program order leaves there."""
    consts = bytes((7 * i + 3) % 251 for i in range(8 * BLOCK))
    out = len(consts)
    code = []
    for tile, kind, src, dst, nbytes in moves:
        if kind == "load":
            code.append(copy_bytes(DDR, src * BLOCK, OCM, dst * BLOCK, nbytes, tile=tile))
        elif kind == "store":
            code.append(copy_bytes(OCM, src * BLOCK, DDR, out + dst * BLOCK, nbytes, tile=tile))
        else:
            code.append(copy_bytes(DDR, out + src * BLOCK, DDR, dst * BLOCK, nbytes, tile=tile))
    program = _program(code, num_tiles=4, consts=consts, out_addr=out, out_bytes=9 * BLOCK)
    _same_on_threads(program)


def test_only_a_program_on_two_tiles_with_enough_work_runs_by_plan(monkeypatch):
    """One tile, or fewer than TILE_PLAN_MACS multiply-adds: the threads share instructions."""
    program = multicast_program(True)
    assert use_tile_plan(prepare(program))
    monkeypatch.setattr(thread_plan, "TILE_PLAN_MACS", 1 << 23)
    assert not use_tile_plan(prepare(program))


def test_multicast_loads_give_the_same_bytes_on_any_number_of_threads():
    """A multicast dma (one row per destination tile in the engine) and the convs of three
    tiles that read what it brought."""
    for multicast in (True, False):
        program = multicast_program(multicast)
        assert use_tile_plan(prepare(program))
        _same_on_threads(program)


def _resize(tile, x_addr, out_addr, y_addr, x_tab_addr):
    """A resize of a [1, 2, 2, 1] window to [1, 1, 1, 1] on `tile` by the given tables."""
    return instruction(
        "resize",
        tile,
        in_addr=x_addr,
        in_shape=(1, 2, 2, 1),
        row0=0,
        out_addr=out_addr,
        out_shape=(1, 1, 1, 1),
        ytab_addr=y_addr,
        xtab_addr=x_tab_addr,
    )


def test_the_first_fault_in_program_order_is_reported_on_any_number_of_threads(monkeypatch):
    """Two resizes whose tables fault, on tiles 0 and 1, the later one in program order first
    in its thread's rows (tile 0 copies for a while before its own): the earlier one is named
    on any number of threads, as on one."""
    staging = Staging()
    x_addr = staging.add(np.ones((1, 2, 2, 1), np.float16))
    outside = staging.add(np.array([[0, 2, 0.5, 0.5]], np.float32))  # row 2 of a 2-row window
    fractional = staging.add(np.array([[0.5, 1, 0.5, 0.5]], np.float32))
    columns = staging.add(np.array([[0, 1, 0.5, 0.5]], np.float32))
    out_addr = staging.reserve(2)
    consts = bytes(staging.blob)
    size = len(consts)
    code = [copy_bytes(DDR, 0, OCM, 0, size, tile=t) for t in (0, 1)]
    busy = [copy_bytes(DDR, 0, OCM, 4096 + 512 * (k % 8), size, tile=0) for k in range(2000)]
    code += busy
    code.append(_resize(0, x_addr, out_addr, outside, columns))
    code.append(_resize(1, x_addr, out_addr, fractional, columns))
    program = _program(code, num_tiles=2, consts=consts, out_addr=size, out_bytes=2)
    for workers in (1, 2, 3):
        monkeypatch.setenv(THREADS_ENV, str(workers))
        with pytest.raises(SimulatorError, match=r"row table indices fall outside \[0, 2\)"):
            run(prepare(program), [], engine="numba")


@pytest.mark.parametrize(
    "name", sorted({n for n, t in ENGINE_CORPUS if t > 1}), ids=lambda n: f"{n}-8"
)
def test_compiled_models_give_the_same_bytes_on_two_and_three_threads(name, monkeypatch):
    """The corpus's 8-tile builds (compiled models, with multicasts, weight slots shared
    between tiles and layers that meet in DDR), cold and warm, on 2 and 3 threads by tile plan:
    the bytes of one thread."""
    import tvm
    from tvm import relax

    lib = corpus_build(name, 8)
    args = [tvm.runtime.tensor(np.asarray(x)) for x in corpus_inputs(name)]
    planned = []
    real = dispatch.thread_plan
    monkeypatch.setattr(dispatch, "thread_plan", lambda *a: planned.append(a[1]) or real(*a))

    def outputs(workers: int):
        monkeypatch.setenv(THREADS_ENV, str(workers))
        vm = relax.VirtualMachine(lib, tvm.cpu())
        return [engine_run("numba", lambda: flatten_outputs(vm["main"](*args)))[0] for _ in "ab"]

    one = outputs(1)
    for workers in (2, 3):
        for got in outputs(workers):
            assert_same_bytes(one[0], got)
    assert one[0] and 2 in planned and 3 in planned
