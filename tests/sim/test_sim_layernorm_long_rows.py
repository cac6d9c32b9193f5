"""`lnstats` then `lnapply` over runs of a row give `layernorm`'s bits on both engines (the
same fp32 steps in the same order), on hypothesis-generated rows with special values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_builders import Staging, instruction, layer_program, run_both
from test_sim_normalization import layernorm_inputs, layernorm_program

from mrvl.sim import SimulatorError, prepare

pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


def long_row_program(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float, width: int):
    """x [rows, length] f16 in OCM: one lnstats, then an lnapply per run of `width` columns
    (each run staged apart, as the lowering loads it), the runs' results out side by side."""
    rows, length = x.shape
    staging = Staging()
    in_addr = staging.add(x)
    stats = staging.reserve(rows * 2 * 4)
    program = [
        instruction(
            "lnstats", in_addr=in_addr, out_addr=stats, rows=rows, length=length, eps=eps
        )
    ]
    out_addr = staging.reserve(x.size * 2)
    for c0 in range(0, length, width):
        count = min(width, length - c0)
        run = staging.add(np.ascontiguousarray(x[:, c0 : c0 + count]))
        g_addr = staging.add(g[c0 : c0 + count].astype(np.float32))
        b_addr = staging.add(b[c0 : c0 + count].astype(np.float32))
        program.append(
            instruction(
                "lnapply", in_addr=run, out_addr=out_addr + c0 * rows * 2, stats_addr=stats,
                rows=rows, count=count, g_addr=g_addr, b_addr=b_addr,
            )  # fmt: skip
        )
    return layer_program(staging, program, out_addr, (rows * length,))


def _runs(flat: np.ndarray, rows: int, length: int, width: int) -> np.ndarray:
    """The [rows, length] result from the runs' [rows, count] blocks laid one after another."""
    out, at = np.empty((rows, length), flat.dtype), 0
    for c0 in range(0, length, width):
        count = min(width, length - c0)
        out[:, c0 : c0 + count] = flat[at : at + rows * count].reshape(rows, count)
        at += rows * count
    return out


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(
    rows=st.integers(1, 4),
    length=st.integers(1, 200),
    width=st.integers(1, 200),
    scale=st.sampled_from([0.01, 1.0, 300.0]),
    eps=st.sampled_from([0.0, 1e-5, 0.1]),
    special=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_lnstats_then_lnapply_give_layernorms_bits(rows, length, width, scale, eps, special, seed):
    x, g, b = layernorm_inputs(seed, rows, length, scale, special)
    width = min(width, length)
    (flat,) = run_both(long_row_program(x, g, b, eps, width), [])
    (whole,) = run_both(layernorm_program(x, g, b, eps), [])
    got = _runs(flat, rows, length, width)
    np.testing.assert_array_equal(got.view(np.uint16), whole.view(np.uint16))


@pytest.mark.parametrize(
    "opcode, field, what", [("lnstats", "length", "input"), ("lnapply", "rows", "output")]
)
def test_a_long_row_instruction_reaching_outside_the_ocm_fails_validation(opcode, field, what):
    x = np.zeros((2, 8), np.float16)
    program = long_row_program(x, np.ones(8), np.zeros(8), 1e-5, 4)
    at = next(i for i, ins in enumerate(program.code) if ins.opcode == opcode)
    ins = program.code[at]
    program.code[at] = instruction(opcode, **{**ins.fields, field: 1 << 20})
    with pytest.raises(SimulatorError, match=f"{opcode}.*{what}.*outside tile 0's OCM"):
        prepare(program)
