"""The activation tables: every entry of every table against an independent float64 reference.

The reference evaluates f with Python's `math` (not numpy), one entry at a time; an entry passes
when it is the f16 nearest to the reference value (no f16 value is nearer; at an exact tie, the
one with an even last bit), with the machine's saturation to +-65504 and canonical NaN.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mrvl.act_tables import activation_table, table_key, table_name
from mrvl.isa import ACT_TABLE_ENTRIES, TABLE_ACTIVATIONS, Activation


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


def _mish(x: float) -> float:
    return x * math.tanh(math.log1p(math.exp(x))) if x < 700 else x


def _exp(x: float) -> float:
    return math.exp(x) if x < 709 else math.inf


def _log(x: float) -> float:
    if x == 0:
        return -math.inf
    return math.log(x) if x > 0 else math.nan


def _sqrt(x: float) -> float:
    return math.sqrt(x) if x >= 0 else math.nan  # sqrt(-0.0) = -0.0


def _reciprocal(x: float) -> float:
    return 1.0 / x if x != 0 else math.copysign(math.inf, x)


def _pow(exponent: float):
    def f(x: float) -> float:
        try:
            return math.pow(x, exponent)
        except OverflowError:  # only an integer exponent overflows a negative base
            return math.copysign(math.inf, x) if exponent % 2 == 1 else math.inf
        except ValueError:  # a negative base and a fractional exponent, or 0 ** negative
            if x != 0:
                return math.nan
            odd = exponent == int(exponent) and int(exponent) % 2 == 1
            return math.copysign(math.inf, x) if odd else math.inf  # IEEE pow(+-0, y < 0)

    return f


def _gelu(x: float) -> float:
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def _gelu_tanh(x: float) -> float:
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


REFERENCES = {
    Activation.SIGMOID: _sigmoid,
    Activation.TANH: math.tanh,
    Activation.HARD_SWISH: lambda x: x * min(max(x + 3.0, 0.0), 6.0) / 6.0,
    Activation.SILU: lambda x: x * _sigmoid(x),
    Activation.MISH: _mish,
    Activation.GELU: _gelu,
    Activation.GELU_TANH: _gelu_tanh,
    Activation.ERF: math.erf,
    Activation.EXP: _exp,
    Activation.LOG: _log,
    Activation.SQRT: _sqrt,
    Activation.RECIPROCAL: _reciprocal,
    Activation.ABS: abs,
}

F16_VALUES = np.arange(ACT_TABLE_ENTRIES, dtype=np.uint32).astype(np.uint16).view(np.float16)
F16_MAX = 65504.0


def _reference_values(f) -> np.ndarray:
    out = np.empty(ACT_TABLE_ENTRIES, np.float64)
    for bits, value in enumerate(F16_VALUES.tolist()):
        if math.isnan(value):
            out[bits] = math.nan
        else:
            out[bits] = f(max(-F16_MAX, min(F16_MAX, value)))
    return out


def _assert_correctly_rounded(table: np.ndarray, reference: np.ndarray) -> None:
    nan = np.isnan(reference)
    assert np.all(table.view(np.uint16)[nan] == 0x7E00), "NaN entries must be the canonical NaN"
    ref = np.clip(reference[~nan], -F16_MAX, F16_MAX)
    got = table[~nan]
    assert not np.any(np.isnan(got)) and not np.any(np.isinf(got))
    g = got.astype(np.float64)
    with np.errstate(over="ignore"):  # the neighbours of +-65504 are +-inf
        below = np.nextafter(got, np.float16(-np.inf)).astype(np.float64)
        above = np.nextafter(got, np.float16(np.inf)).astype(np.float64)
    err = np.abs(ref - g)
    # no f16 neighbour is nearer (err <= half the gap to the neighbour on the reference's side)
    nearer_below = np.abs(ref - below) < err
    nearer_above = np.abs(ref - above) < err
    bad = np.flatnonzero(nearer_below | nearer_above)
    assert bad.size == 0, f"entries {bad[:5]} are not the nearest f16 of the reference"
    tie = (np.abs(ref - below) == err) | (np.abs(ref - above) == err)
    tie &= err > 0
    odd = got.view(np.uint16)[tie] & 1
    assert not np.any(odd), "a tie must round to the f16 with an even last bit"


@pytest.mark.parametrize("act", sorted(REFERENCES, key=int), ids=lambda a: a.name)
def test_every_entry_is_the_nearest_f16_of_the_float64_reference(act):
    table = activation_table(act)
    assert table.dtype == np.float16 and table.shape == (ACT_TABLE_ENTRIES,)
    _assert_correctly_rounded(table, _reference_values(REFERENCES[act]))


@pytest.mark.parametrize("alpha, beta", [(0.2, 0.5), (1 / 6, 0.5)])
def test_hard_sigmoid_table_follows_its_binary32_parameters(alpha, beta):
    a, b = float(np.float32(alpha)), float(np.float32(beta))
    table = activation_table(Activation.HARD_SIGMOID, alpha, beta)
    _assert_correctly_rounded(table, _reference_values(lambda x: min(max(a * x + b, 0.0), 1.0)))


@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5, -0.5, -1.0])
def test_pow_table_follows_its_binary32_exponent(exponent):
    table = activation_table(Activation.POW, exponent)
    _assert_correctly_rounded(table, _reference_values(_pow(float(np.float32(exponent)))))


@pytest.mark.parametrize("alpha, floor", [(0.2, -0.4), (0.01, 0.0), (0.1, 0.5), (1.5, -2.0)])
def test_leaky_floor_table_follows_its_binary32_parameters(alpha, floor):
    a, b = float(np.float32(alpha)), float(np.float32(floor))
    table = activation_table(Activation.LEAKY_FLOOR, alpha, floor)
    _assert_correctly_rounded(table, _reference_values(lambda x: max(a * x if x < 0 else x, b)))
    assert table_name(Activation.LEAKY_FLOOR, alpha, floor) != table_name(Activation.LEAKY_FLOOR)


def test_domain_edges_of_the_new_tables():
    """log 0 and 1/0 saturate to -65504 and 65504, a negative log or sqrt is NaN, erf
    saturates to +-1, and GELU is x for large x and -0 or 0 for very negative x."""
    bits = lambda v: int(np.float16(v).view(np.uint16))  # noqa: E731
    assert activation_table(Activation.LOG)[bits(0.0)] == np.float16(-65504)
    assert activation_table(Activation.RECIPROCAL)[bits(0.0)] == np.float16(65504)
    assert activation_table(Activation.RECIPROCAL)[bits(-0.0)] == np.float16(-65504)
    assert activation_table(Activation.LOG).view(np.uint16)[bits(-1.0)] == 0x7E00
    assert activation_table(Activation.SQRT).view(np.uint16)[bits(-2.0)] == 0x7E00
    assert activation_table(Activation.ERF)[bits(10.0)] == 1
    assert activation_table(Activation.GELU)[bits(100.0)] == np.float16(100)
    assert activation_table(Activation.GELU)[bits(-100.0)] == 0
    assert activation_table(Activation.EXP)[bits(12.0)] == np.float16(65504)


def test_tables_saturate_and_index_infinities_as_65504():
    silu = activation_table(Activation.SILU)
    bits = lambda v: int(np.float16(v).view(np.uint16))  # noqa: E731
    assert silu[bits(np.inf)] == silu[bits(65504)] == np.float16(65504)
    assert silu[bits(-np.inf)] == silu[bits(-65504)]
    assert activation_table(Activation.SIGMOID)[bits(-np.inf)] == 0
    assert activation_table(Activation.TANH)[bits(0.0)] == 0


def test_tables_are_deterministic_and_read_only():
    first = activation_table(Activation.MISH)
    again = activation_table(Activation.MISH)
    assert first.tobytes() == again.tobytes()
    with pytest.raises(ValueError):
        first[0] = 1


def test_table_key_and_name():
    assert table_key(Activation.SIGMOID, 3.0, 4.0) == (Activation.SIGMOID, 0.0, 0.0)
    assert table_name(Activation.SILU) == "lut_silu"
    assert table_name(Activation.HARD_SIGMOID, 0.2, 0.5) == "lut_hard_sigmoid_3e4ccccd_3f000000"
    assert table_key(Activation.POW, 3.0, 4.0) == (Activation.POW, 3.0, 0.0)
    assert table_name(Activation.POW, 0.5) == "lut_pow_3f000000_00000000"
    with pytest.raises(ValueError, match="RELU is not a table activation"):
        table_key(Activation.RELU, 0.0, 0.0)
    parametric = {Activation.HARD_SIGMOID, Activation.POW, Activation.LEAKY_FLOOR}
    assert set(REFERENCES) | parametric == TABLE_ACTIVATIONS
