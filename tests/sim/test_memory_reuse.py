"""A reused Memory starts every run as docs/isa.md §2 says (zeros, the pool, the inputs),
though `Memory.load` zeroes only what the last run could have written (its instructions'
writes and its inputs, `simulator.written_bytes`) or, after `Memory.write`, everything."""

from __future__ import annotations

import numpy as np
import pytest
from sim_builders import copy_bytes, end

from mrvl.isa import DType, IOEntry, MemSpace, Program
from mrvl.sim import new_memory, prepare, run

SIZE = 64
"""Bytes of the input and the output."""


def spill_program(ocm_addr: int, read_back: bool) -> Program:
    """Input x (SIZE bytes at DDR 0) -> OCM of tile 1 at ocm_addr and on to DDR scratch;
    output y (DDR SIZE): x again, or with `read_back` the OCM bytes at ocm_addr + SIZE,
    which this program never writes (zeros)."""
    source = ocm_addr + SIZE if read_back else ocm_addr
    return Program(
        target="cn10ka",
        num_tiles=2,
        ddr_size=4 * SIZE,
        io=[
            IOEntry("x", True, (SIZE,), DType.I8, 0),
            IOEntry("y", False, (SIZE,), DType.I8, SIZE),
        ],
        code=[
            copy_bytes(MemSpace.DDR, 0, MemSpace.OCM, ocm_addr, SIZE, tile=1),
            copy_bytes(MemSpace.OCM, ocm_addr, MemSpace.DDR, 2 * SIZE, SIZE, tile=1),
            copy_bytes(MemSpace.OCM, source, MemSpace.DDR, SIZE, SIZE, tile=1),
            end(),
        ],
        const_base=4 * SIZE,
        consts=b"",
        srcmap=[],
    )


@pytest.mark.parametrize("engine", ["interp", "numba"])
def test_a_reused_memory_starts_each_run_from_zeros(engine):
    writer = prepare(spill_program(4096, read_back=False))
    reader = prepare(spill_program(4096 - SIZE, read_back=True))
    memory = new_memory(writer)
    x = np.arange(1, SIZE + 1, dtype=np.int8)
    (y,) = run(writer, [x], engine=engine, memory=memory)
    np.testing.assert_array_equal(y, x)
    # the reader's input is zeros: the bytes at 4096 it reads are the writer's copy of x
    # unless the load zeroed them (the writer wrote them, the reader never does)
    (y,) = run(reader, [np.zeros(SIZE, np.int8)], engine=engine, memory=memory)
    np.testing.assert_array_equal(y, np.zeros(SIZE, np.int8))
    # bytes written outside any program's writes (Memory.write) are zeroed too
    memory.write(MemSpace.OCM, 1, 8192, np.full(SIZE, 7, np.int8))
    run(writer, [x], engine=engine, memory=memory)
    assert not memory.ocm[1, 8192 : 8192 + SIZE].any()
    # the writer's DDR scratch (2 * SIZE ...) holds x until a load zeroes it
    assert memory.ddr[2 * SIZE : 3 * SIZE].any()
    run(reader, [np.zeros(SIZE, np.int8)], engine=engine, memory=memory)
    assert not memory.ddr[2 * SIZE : 3 * SIZE].any()
