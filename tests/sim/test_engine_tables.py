"""Table activations on both engines at every alignment: a `lut` from an even or an odd DDR
address (the Numba engine copies an even one as whole halves, an odd one byte by byte) and a
looked-up result stored at an even or an odd OCM address (its lookup rounds the indices in
vectors first)."""

from __future__ import annotations

import numpy as np
import pytest
from sim_builders import Staging, add, f16_data, instruction, layer_program, run_both

from mrvl.act_tables import activation_table
from mrvl.isa import TABLE_ACTIVATIONS

pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


@pytest.mark.parametrize("odd_table", [False, True])
@pytest.mark.parametrize("odd_out", [False, True])
@pytest.mark.parametrize("act", sorted(TABLE_ACTIVATIONS)[:2])
def test_a_table_activation_at_any_alignment_gives_the_interpreters_bytes(odd_table, odd_out, act):
    count = 45  # five vectors of the lookup's rounding and a scalar tail
    staging = Staging()
    a_addr = staging.add(f16_data(3, count, True))
    b_addr = staging.add(f16_data(4, count, True))
    table = np.ascontiguousarray(activation_table(act, 0.2, 0.5)).view(np.uint8)
    if odd_table:  # one byte before it
        src_addr = staging.add(np.concatenate([np.zeros(1, np.uint8), table])) + 1
    else:
        src_addr = staging.add(table)
    out_addr = staging.reserve(2 * count + 2) + int(odd_out)
    fields = dict(act=int(act), act_a=0.2, act_b=0.5)
    code = [
        instruction("lut", src_addr=src_addr, **fields),
        add(a_addr, b_addr, out_addr, count, **fields),
    ]
    run_both(layer_program(staging, code, out_addr, (count,)), [])
