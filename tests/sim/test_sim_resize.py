"""The `resize` instruction: two-tap interpolation by row and column tables, bit for bit as
docs/isa.md states it, and its faults."""

from __future__ import annotations

import numpy as np
import pytest
from sim_builders import Staging, instruction, layer_program, random_f16, run_both

from mrvl.sim import SimulatorError, run
from mrvl.strided import interpolation_table


def resize_ins(x_addr, x_shape, row0, out_addr, out_shape, y_addr, x_tab_addr):
    return instruction(
        "resize",
        in_addr=x_addr,
        in_shape=tuple(x_shape),
        row0=row0,
        out_addr=out_addr,
        out_shape=tuple(out_shape),
        ytab_addr=y_addr,
        xtab_addr=x_tab_addr,
    )


def reference(x, ytab, xtab, row0):
    """docs/isa.md's loop, one element at a time, in numpy float32 scalars."""
    n, _, _, c = x.shape
    out = np.zeros((n, len(ytab), len(xtab), c), np.float16)
    f32 = np.float32
    for r, (y0, y1, wy0, wy1) in enumerate(ytab):
        for q, (x0, x1, wx0, wx1) in enumerate(xtab):
            a, b = x[:, int(y0) - row0, int(x0)], x[:, int(y0) - row0, int(x1)]
            d, e = x[:, int(y1) - row0, int(x0)], x[:, int(y1) - row0, int(x1)]
            top = f32(wx0) * a.astype(f32) + f32(wx1) * b.astype(f32)
            bottom = f32(wx0) * d.astype(f32) + f32(wx1) * e.astype(f32)
            out[:, r, q] = (f32(wy0) * top + f32(wy1) * bottom).astype(np.float16)
    return out


@pytest.mark.parametrize("mode", ["half_pixel", "align_corners", "asymmetric"])
def test_resize_follows_the_documented_order_bit_for_bit(mode):
    rng = np.random.default_rng(0)
    x = random_f16(rng, (2, 4, 5, 3))  # a window of input rows 2..5 of a 7-row tensor
    row0 = 2
    ytab = interpolation_table(7, 14, "linear", mode)[5:9]  # output rows 5..8
    assert ytab[:, :2].min() >= row0 and ytab[:, :2].max() < row0 + 4
    xtab = interpolation_table(5, 10, "linear", mode)
    staging = Staging()
    x_addr, y_addr, t_addr = staging.add(x), staging.add(ytab), staging.add(xtab)
    out_shape = (2, len(ytab), len(xtab), 3)
    out_addr = staging.reserve(int(np.prod(out_shape)) * 2)
    ins = resize_ins(x_addr, x.shape, row0, out_addr, out_shape, y_addr, t_addr)
    (y,) = run_both(layer_program(staging, [ins], out_addr, out_shape), [])
    np.testing.assert_array_equal(y.view(np.uint16), reference(x, ytab, xtab, row0).view(np.uint16))


def test_integer_factor_weights_are_exact_fractions():
    table = interpolation_table(6, 12, "linear", "half_pixel")
    assert set(np.round(table[:, 2:] * 4).reshape(-1) / 4) == set(table[:, 2:].reshape(-1))
    assert set(table[:, 3]) == {0.0, 0.25, 0.75}


@pytest.mark.parametrize("engine", ["numba", "interp"])
def test_a_row_outside_the_window_faults(engine):
    rng = np.random.default_rng(1)
    x = random_f16(rng, (1, 2, 3, 1))
    ytab = np.array([[0, 2, 0.5, 0.5]], np.float32)  # row 2 is not in the 2-row window
    xtab = interpolation_table(3, 3, "linear", "asymmetric")
    staging = Staging()
    x_addr, y_addr, t_addr = staging.add(x), staging.add(ytab), staging.add(xtab)
    out_addr = staging.reserve(6)
    ins = resize_ins(x_addr, x.shape, 0, out_addr, (1, 1, 3, 1), y_addr, t_addr)
    with pytest.raises(SimulatorError, match=r"row table indices fall outside \[0, 2\)"):
        run(layer_program(staging, [ins], out_addr, (1, 1, 3, 1)), [], engine=engine)


@pytest.mark.parametrize("engine", ["numba", "interp"])
def test_a_fractional_index_faults(engine):
    x = np.ones((1, 2, 2, 1), np.float16)
    ytab = np.array([[0.5, 1, 0.5, 0.5]], np.float32)
    xtab = np.array([[0, 1, 0.5, 0.5]], np.float32)
    staging = Staging()
    x_addr, y_addr, t_addr = staging.add(x), staging.add(ytab), staging.add(xtab)
    out_addr = staging.reserve(2)
    ins = resize_ins(x_addr, x.shape, 0, out_addr, (1, 1, 1, 1), y_addr, t_addr)
    with pytest.raises(SimulatorError, match="row table indices are not integers"):
        run(layer_program(staging, [ins], out_addr, (1, 1, 1, 1)), [], engine=engine)
