"""The arithmetic rules, bit for bit: f16 rounding, saturation, NaN, activations."""

from __future__ import annotations

import numpy as np
import pytest

from mrvl.isa import Activation
from mrvl.sim.numerics import apply_activation, fp32_mac, round_to_f16


def f16_bits(values) -> list[int]:
    return round_to_f16(np.array(values, np.float32)).view(np.uint16).tolist()


@pytest.mark.parametrize(
    "value, bits",
    [
        (1.0, 0x3C00),
        (1 + 2**-11, 0x3C00),  # halfway between 1 and 1 + 2^-10: to even (down)
        (1 + 3 * 2**-11, 0x3C02),  # halfway between 1 + 2^-10 and 1 + 2^-9: to even (up)
        (2**-25, 0x0000),  # half the smallest subnormal: to even (zero)
        (3 * 2**-25, 0x0002),  # subnormals are kept, not flushed
        (-0.0, 0x8000),
        (65504.0, 0x7BFF),
        (65519.99, 0x7BFF),  # below the overflow threshold: plain rounding
        (65520.0, 0x7BFF),  # would round to infinity: saturates
        (3.0e38, 0x7BFF),
        (-1.0e9, 0xFBFF),
        (np.inf, 0x7BFF),  # infinities saturate too
        (-np.inf, 0xFBFF),
    ],
)
def test_round_to_f16(value, bits):
    assert f16_bits([value]) == [bits]


def test_every_nan_becomes_the_canonical_quiet_nan():
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF], np.uint32).view(np.float32)
    assert round_to_f16(nans).view(np.uint16).tolist() == [0x7E00] * 4


def test_round_to_f16_agrees_with_numpy_on_the_finite_range():
    """Inside +-65504 the rule is plain IEEE round-to-nearest-even, which numpy implements."""
    bits = np.arange(0, 1 << 32, 65537, dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    values = values[np.isfinite(values) & (np.abs(values) <= 65504)]
    np.testing.assert_array_equal(
        round_to_f16(values).view(np.uint16), values.astype(np.float16).view(np.uint16)
    )


def test_round_to_f16_refuses_other_dtypes():
    with pytest.raises(TypeError, match="float64"):
        round_to_f16(np.zeros(2))


def test_fp32_mac_products_are_exact():
    """The largest and smallest f16 products are exact in fp32, so only the add rounds."""
    x = np.array([65504, 2**-24, 1 + 2**-10], np.float16)
    w = np.array([-65504, 2**-24, 1 + 2**-10], np.float16)
    result = fp32_mac(np.zeros(3, np.float32), x, w)
    assert result.dtype == np.float32
    assert result.tolist() == [-(65504.0**2), 2.0**-48, (1 + 2**-10) ** 2]


@pytest.mark.parametrize(
    "act, a, b, expected",
    [
        (Activation.NONE, 0, 0, [-2.0, -0.0, 0.5, 3.0, np.nan]),
        (Activation.RELU, 0, 0, [0.0, -0.0, 0.5, 3.0, np.nan]),
        (Activation.CLIP, -1.0, 1.0, [-1.0, -0.0, 0.5, 1.0, np.nan]),
        (Activation.LEAKY_RELU, 0.25, 0, [-0.5, -0.0, 0.5, 3.0, np.nan]),
    ],
)
def test_activations(act, a, b, expected):
    acc = np.array([-2.0, -0.0, 0.5, 3.0, np.nan], np.float32)
    result = apply_activation(acc, act, a, b)
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result, np.array(expected, np.float32))
    assert np.signbit(result[1])  # -0.0 passes through every activation unchanged


def test_leaky_relu_product_rounds_in_fp32():
    acc = np.array([-(1 + 2**-23)], np.float32)
    alpha = 1 / 3
    expected = np.float32(alpha) * acc  # one fp32 rounding of the fp32 alpha times acc
    assert apply_activation(acc, Activation.LEAKY_RELU, alpha, 0.0)[0] == expected[0]
