"""The simulator's elementwise instructions (add, scale, mul) and activations (tables, PRELU)
against float64 references; every run on both engines (`run_both`), as in
test_sim_interpreter.py."""

from __future__ import annotations

import numpy as np
import pytest
from sim_builders import (
    Staging,
    add,
    assert_f16_close,
    conv,
    fc,
    instruction,
    layer_program,
    random_f16,
    run_both,
)

from mrvl.isa import Activation
from mrvl.sim import SimulatorError
from mrvl.target import get_target

# Programs here saturate and make NaNs on purpose; the warning is tested in test_saturation.py.
pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


def run_add(a, b, **kwargs):
    staging = Staging()
    a_addr, b_addr = staging.add(a), staging.add(b)
    out_addr = staging.reserve(a.size * 2)
    ins = add(a_addr, b_addr, out_addr, a.size, **kwargs)
    (y,) = run_both(layer_program(staging, [ins], out_addr, a.shape), [])
    return y


def test_add_rounds_the_fp32_sum_to_f16(rng):
    a, b = random_f16(rng, (2, 3, 4, 5)), random_f16(rng, (2, 3, 4, 5))
    expected = (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(run_add(a, b).view(np.uint16), expected.view(np.uint16))


def test_add_relu_and_saturation():
    a = np.array([60000, -3, 1, -65504], np.float16)
    b = np.array([60000, 1, 2, -65504], np.float16)
    np.testing.assert_array_equal(run_add(a, b, act=Activation.RELU), [65504, 0, 3, 0])
    np.testing.assert_array_equal(run_add(a, b), [65504, -2, 3, -65504])


def test_scale_is_a_per_channel_affine_map_with_two_fp32_roundings(rng):
    x = random_f16(rng, (3, 2, 5))  # NHWC-ordered, 5 channels innermost
    s = rng.standard_normal(5).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    staging = Staging()
    x_addr, s_addr, b_addr = staging.add(x), staging.add(s), staging.add(b)
    out_addr = staging.reserve(x.size * 2)
    ins = instruction(
        "scale",
        in_addr=x_addr,
        out_addr=out_addr,
        count=x.size,
        channels=5,
        s_addr=s_addr,
        b_addr=b_addr,
        act=int(Activation.RELU),
        act_a=0.0,
        act_b=0.0,
        act_addr=-1,
    )
    (y,) = run_both(layer_program(staging, [ins], out_addr, x.shape), [])
    acc = (x.astype(np.float32) * s) + b
    expected = np.where(acc < 0, np.float32(0), acc).astype(np.float16)
    np.testing.assert_array_equal(y.view(np.uint16), expected.view(np.uint16))


# ------------------------------------------------------------------ activations: tables, PRELU


def _f16_bits(values: np.ndarray) -> np.ndarray:
    return values.view(np.uint16)


def test_table_activation_looks_up_the_f16_rounded_accumulator(rng):
    from sim_builders import lut

    from mrvl.act_tables import activation_table

    x = random_f16(rng, (1, 3, 3, 4), scale=4.0)
    w = random_f16(rng, (5, 1, 1, 4))
    b = rng.standard_normal(5).astype(np.float32)
    table = activation_table(Activation.SILU)
    staging = Staging()
    x_addr, w_addr, b_addr, t_addr = (staging.add(a) for a in (x, w, b, table))
    out_addr = staging.reserve(3 * 3 * 5 * 2)
    code = [
        lut(t_addr, Activation.SILU),
        conv(
            x_addr,
            x.shape,
            out_addr,
            (1, 3, 3, 5),
            w_addr,
            kernel=(1, 1),
            b_addr=b_addr,
            act=Activation.SILU,
        ),
    ]
    (y,) = run_both(layer_program(staging, code, out_addr, (1, 3, 3, 5)), [])
    no_act = conv(x_addr, x.shape, out_addr, (1, 3, 3, 5), w_addr, kernel=(1, 1), b_addr=b_addr)
    (plain,) = run_both(layer_program(staging, [no_act], out_addr, (1, 3, 3, 5)), [])
    # the conv without activation stores f16(acc): exactly the table's index
    expected = table[_f16_bits(plain)]
    np.testing.assert_array_equal(_f16_bits(y), _f16_bits(expected))
    silu = plain.astype(np.float64) / (1 + np.exp(-plain.astype(np.float64)))
    np.testing.assert_allclose(y.astype(np.float64), silu, rtol=2**-10, atol=2**-14)


@pytest.mark.parametrize(
    "loads, message",
    [
        ([], "act SILU .* needs its table, but no lut loaded a table on tile 0"),
        ([Activation.SIGMOID], "act SILU .* tile 0's table memory holds SIGMOID"),
    ],
)
def test_table_activation_without_its_table_faults(rng, loads, message):
    from sim_builders import lut

    from mrvl.act_tables import activation_table

    x = random_f16(rng, (1, 2, 2, 1))
    staging = Staging()
    x_addr, w_addr = staging.add(x), staging.add(np.ones((1, 1, 1, 1), np.float16))
    t_addr = staging.add(activation_table(Activation.SIGMOID))
    code = [lut(t_addr, act) for act in loads] + [
        conv(x_addr, x.shape, 0, x.shape, w_addr, kernel=(1, 1), act=Activation.SILU)
    ]
    with pytest.raises(SimulatorError, match=message):
        run_both(layer_program(staging, code, 0, x.shape), [])


def test_lut_of_a_non_table_activation_and_beyond_the_table_memory_fault():
    from sim_builders import lut

    from mrvl.target import Target

    staging = Staging()
    t_addr = staging.add(np.zeros(1 << 16, np.float16))
    program = layer_program(staging, [lut(t_addr, Activation.RELU)], 0, (1,))
    with pytest.raises(SimulatorError, match="act=RELU breaks `act in TABLE_ACTIVATIONS`"):
        run_both(program, [])
    small = get_target("cn10ka").__dict__ | {"act_table_bytes_per_tile": 1024}
    program = layer_program(staging, [lut(t_addr, Activation.TANH)], 0, (1,))
    with pytest.raises(SimulatorError, match="does not fit the tile's 1024-byte"):
        run_both(program, [], target=Target(**small))


def test_prelu_uses_per_channel_slopes_on_conv_fc_and_scale(rng):
    x = random_f16(rng, (1, 2, 3, 4))
    w = random_f16(rng, (4, 1, 1, 4))
    slopes = np.array([0.25, -1.0, 0.0, 3.0], np.float32)
    staging = Staging()
    x_addr, w_addr, s_addr = staging.add(x), staging.add(w), staging.add(slopes)
    out_addr = staging.reserve(x.size * 2)
    ins = conv(
        x_addr,
        x.shape,
        out_addr,
        x.shape,
        w_addr,
        kernel=(1, 1),
        act=Activation.PRELU,
        act_addr=s_addr,
    )
    (y,) = run_both(layer_program(staging, [ins], out_addr, x.shape), [])
    (acc,) = run_both(
        layer_program(
            staging,
            [conv(x_addr, x.shape, out_addr, x.shape, w_addr, kernel=(1, 1))],
            out_addr,
            x.shape,
        ),
        [],
    )
    # acc here is f16(acc); PRELU acts on the fp32 accumulator, so compare within an f16 ulp
    expected = np.where(acc < 0, slopes * acc.astype(np.float32), acc.astype(np.float32))
    assert_f16_close(y, expected.astype(np.float64))
    assert np.all((y < 0) == (expected < 0))

    xs = random_f16(rng, (6, 4))
    staging = Staging()
    xa, ws, sa = staging.add(xs), staging.add(random_f16(rng, (4, 4))), staging.add(slopes)
    out = staging.reserve(6 * 4 * 2)
    one, zero = staging.add(np.ones(4, np.float32)), staging.add(np.zeros(4, np.float32))
    scale = instruction(
        "scale",
        in_addr=xa,
        out_addr=out,
        count=24,
        channels=4,
        s_addr=one,
        b_addr=zero,
        act=int(Activation.PRELU),
        act_a=0.0,
        act_b=0.0,
        act_addr=sa,
    )
    (y,) = run_both(layer_program(staging, [scale], out, (6, 4)), [])
    xf = xs.astype(np.float32)
    expected = np.where(xf < 0, slopes * xf, xf).astype(np.float16)
    np.testing.assert_array_equal(_f16_bits(y), _f16_bits(expected))
    (y,) = run_both(
        layer_program(
            staging, [fc(xa, 6, 4, 4, ws, out, act=Activation.PRELU, act_addr=sa)], out, (6, 4)
        ),
        [],
    )
    assert y.shape == (6, 4)


def test_prelu_on_add_uses_the_slope_of_each_element_s_channel(rng):
    """`add` with `channels` C: element i is channel i mod C of NHWC pixels (a residual sum
    followed by PRelu); the slope acts on the fp32 sum, then one f16 rounding."""
    slopes = np.array([0.25, -1.0, 0.0, 3.0], np.float32)
    a, b = random_f16(rng, (6, 4)), random_f16(rng, (6, 4))
    staging = Staging()
    a_addr, b_addr, s_addr = staging.add(a), staging.add(b), staging.add(slopes)
    out = staging.reserve(a.size * 2)
    fields = dict(a_addr=a_addr, b_addr=b_addr, out_addr=out, count=24, act_a=0.0, act_b=0.0)
    ins = instruction("add", **fields, channels=4, act=int(Activation.PRELU), act_addr=s_addr)
    (y,) = run_both(layer_program(staging, [ins], out, (6, 4)), [])
    acc = a.astype(np.float32) + b.astype(np.float32)
    expected = np.where(acc < 0, slopes * acc, acc).astype(np.float16)
    np.testing.assert_array_equal(_f16_bits(y), _f16_bits(expected))
    no_channels = instruction(
        "add", **fields, channels=0, act=int(Activation.PRELU), act_addr=s_addr
    )
    with pytest.raises(SimulatorError, match="add has no channels for PRELU slopes"):
        run_both(layer_program(staging, [no_channels], out, (6, 4)), [])
    ragged = instruction("add", **fields, channels=5, act=int(Activation.PRELU), act_addr=s_addr)
    with pytest.raises(SimulatorError, match="channels=5 breaks `channels == 0 or count % channels == 0`"):
        run_both(layer_program(staging, [ragged], out, (6, 4)), [])


def run_mul(a, b, channels, **act):
    staging = Staging()
    a_addr, b_addr = staging.add(a), staging.add(b)
    out = staging.reserve(a.size * 2)
    fields = {"act": int(Activation.NONE), "act_a": 0.0, "act_b": 0.0} | act
    ins = instruction(
        "mul", a_addr=a_addr, b_addr=b_addr, out_addr=out, count=a.size, channels=channels, **fields
    )
    (y,) = run_both(layer_program(staging, [ins], out, (a.size,)), [])
    return y


def test_mul_is_an_exact_product_rounded_once(rng):
    a, b = random_f16(rng, 40, 100.0), random_f16(rng, 40, 100.0)
    expected = (a.astype(np.float32) * b.astype(np.float32)).clip(-65504, 65504)
    y = run_mul(a, b, 0)
    np.testing.assert_array_equal(_f16_bits(y), _f16_bits(expected.astype(np.float16)))


def test_mul_broadcasts_b_per_channel(rng):
    a = random_f16(rng, (5, 3))  # 5 pixels, 3 channels
    s = random_f16(rng, 3)
    y = run_mul(a.reshape(-1), s, 3, act=int(Activation.RELU))
    acc = a.astype(np.float32) * s.astype(np.float32)
    expected = np.where(acc < 0, 0, acc).astype(np.float16).reshape(-1)
    np.testing.assert_array_equal(_f16_bits(y), _f16_bits(expected))
    with pytest.raises(SimulatorError, match="channels=4 breaks `channels == 0 or count % channels == 0`"):
        run_mul(a.reshape(-1), np.ones(4, np.float16), 4)
