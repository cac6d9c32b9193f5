"""`reduce` and `binary` on both engines: against numpy / float64 references, the documented
order written out by hand, a row cut into bands with fp32 partials giving the bits of one
instruction, bit identity of the engines on hypothesis-generated tensors with special values,
and the validation of their fields and operands."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_builders import ENGINE_SETTINGS, Staging, f16_data, instruction, layer_program, run_both

from mrvl.isa import BinaryMode, ReduceMode
from mrvl.sim import SimulatorError, prepare

pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


def reduce_program(x: np.ndarray, axis: int, mode: ReduceMode, *, bands: int = 1):
    """x (f16) staged in OCM, reduced over `axis` by one instruction, or by `bands` chained
    instructions over bands of the axis (fp32 partials between them); out as 'y' (an f32
    result is exposed as pairs of f16)."""
    outer, length = int(np.prod(x.shape[:axis])), x.shape[axis]
    inner = int(np.prod(x.shape[axis + 1 :]))
    view = x.reshape(outer, length, inner)
    cuts = np.linspace(0, length, bands + 1).astype(int)
    staging = Staging()
    parts = [staging.add(np.ascontiguousarray(view[:, a:b])) for a, b in zip(cuts, cuts[1:])]
    f32_out = mode == ReduceMode.ARGMAX
    out_addr = staging.reserve(outer * inner * 4)
    partials = [staging.reserve(outer * inner * 4) for _ in range(2)]
    code = []
    for k, (addr, a, b) in enumerate(zip(parts, cuts, cuts[1:])):
        last = k == bands - 1
        code.append(
            instruction(
                "reduce", in_addr=addr, out_addr=out_addr if last else partials[k % 2],
                outer=outer, length=int(b - a), inner=inner, mode=int(mode), divisor=length,
                acc_addr=partials[(k - 1) % 2] if k else -1, acc_out=int(not last),
            )
        )  # fmt: skip
    shape = (outer, inner * 2) if f32_out else (outer, inner)
    return layer_program(staging, code, out_addr, shape)


def run_reduce(x, axis, mode, **kwargs) -> np.ndarray:
    (y,) = run_both(reduce_program(x, axis, mode, **kwargs), [])
    out_shape = x.shape[:axis] + x.shape[axis + 1 :]
    return (y.view(np.float32) if mode == ReduceMode.ARGMAX else y).reshape(out_shape)


REFERENCES = {
    ReduceMode.SUM: lambda x, axis: x.astype(np.float64).sum(axis),
    ReduceMode.MEAN: lambda x, axis: x.astype(np.float64).mean(axis),
    ReduceMode.MAX: lambda x, axis: x.max(axis),
    ReduceMode.MIN: lambda x, axis: x.min(axis),
    ReduceMode.ARGMAX: lambda x, axis: x.argmax(axis),
    ReduceMode.L2: lambda x, axis: np.sqrt(np.square(x.astype(np.float64)).sum(axis)),
}


@pytest.mark.parametrize("mode", list(ReduceMode))
@pytest.mark.parametrize("shape, axis", [((4, 10), 1), ((2, 3, 5, 7), 1), ((2, 9, 6), 2), ((33,), 0)])
def test_reduce_matches_numpy_on_both_engines(mode, shape, axis):
    """Sums within the fp32 rounding of `length` adds plus one f16 rounding; max, min and
    argmax exact."""
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float16)
    y = run_reduce(x, axis, mode)
    want = REFERENCES[mode](x, axis)
    if mode in (ReduceMode.SUM, ReduceMode.MEAN):
        scale = np.abs(x.astype(np.float64)).sum(axis) / (shape[axis] if mode else 1)
        assert np.all(np.abs(y - want) <= np.abs(want) * 2**-11 + scale * 2**-20)
    elif mode == ReduceMode.L2:  # a sum of positive terms: fp32 adds, a root, an f16 rounding
        assert np.all(np.abs(y - want) <= want * (2**-11 + 2**-20))
    else:
        np.testing.assert_array_equal(y.astype(np.float64), want.astype(np.float64))


def test_reduce_l2_spec_by_hand():
    """L2 written out in fp32 for one row: the exact squares added in order, one square root,
    one f16 rounding."""
    row = np.array([300.0, 0.125, -299.0, 0.375, 1e-3], np.float16)
    total = np.float32(0.0)
    for v in row.astype(np.float32):
        total = np.float32(total + v * v)
    assert run_reduce(row, 0, ReduceMode.L2) == np.float16(np.sqrt(total))


def test_reduce_spec_order_by_hand():
    """SUM and MEAN written out in fp32 for one row: the adds in order, one division."""
    row = np.array([3000.0, 0.125, -2999.0, 0.375, 1e-3], np.float16)
    total = np.float32(0.0)
    for v in row.astype(np.float32):
        total = np.float32(total + v)
    assert run_reduce(row, 0, ReduceMode.SUM) == np.float16(total)
    assert run_reduce(row, 0, ReduceMode.MEAN) == np.float16(total / np.float32(5))


@pytest.mark.parametrize(
    "mode", [ReduceMode.SUM, ReduceMode.MEAN, ReduceMode.MAX, ReduceMode.MIN, ReduceMode.L2]
)
@pytest.mark.parametrize("bands", [2, 3, 7])
def test_a_row_cut_into_bands_gives_the_bits_of_one_instruction(mode, bands):
    """The fp32 partials carried through acc_out / acc_addr continue the sum in order: a
    global pool over a plane larger than a tile is split with the same bits."""
    x = f16_data(bands, (2, 29, 3), special=True)
    np.testing.assert_array_equal(
        run_reduce(x, 1, mode, bands=bands).view(np.uint16),
        run_reduce(x, 1, mode).view(np.uint16),
    )


def test_argmax_takes_the_first_maximum_and_the_first_nan():
    x = np.array([[1, 3, 3, 2], [np.nan, 5, np.nan, 1], [-np.inf] * 4, [0.0, -0.0, 0, 0]], np.float16)
    np.testing.assert_array_equal(run_reduce(x, 1, ReduceMode.ARGMAX), [1, 0, 0, 0])


@ENGINE_SETTINGS
@given(
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=4),
    data=st.data(),
    mode=st.sampled_from(list(ReduceMode)),
    seed=st.integers(0, 2**16),
)
def test_reduce_engines_agree(shape, data, mode, seed):
    axis = data.draw(st.integers(0, len(shape) - 1))
    bands = 1 if mode == ReduceMode.ARGMAX else data.draw(st.integers(1, min(3, shape[axis])))
    run_reduce(f16_data(seed, shape, special=True), axis, mode, bands=bands)


def binary_program(a: np.ndarray, b: np.ndarray, mode: BinaryMode):
    """a and b (f16, rank 4, broadcasting) staged dense; one binary with stride 0 along
    their unit dimensions; the result out as 'y'."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    staging = Staging()
    addrs = [staging.add(a), staging.add(b)]
    out_addr = staging.reserve(int(np.prod(shape)) * 2)

    def strides(x):
        dense = np.array(x.strides) // 2
        return [int(s) if n == m else 0 for s, n, m in zip(dense, x.shape, shape)]

    ins = instruction(
        "binary", a_addr=addrs[0], b_addr=addrs[1], out_addr=out_addr, shape=list(shape),
        a_strides=strides(a), b_strides=strides(b), mode=int(mode),
    )  # fmt: skip
    return layer_program(staging, [ins], out_addr, shape)


NUMPY_BINARY = {
    BinaryMode.ADD: np.add,
    BinaryMode.SUB: np.subtract,
    BinaryMode.MUL: np.multiply,
    BinaryMode.DIV: np.divide,
    BinaryMode.MAX: np.maximum,
    BinaryMode.MIN: np.minimum,
}


@pytest.mark.parametrize("mode", list(BinaryMode))
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (1, 3, 1, 1)), ((1, 1, 4, 1), (2, 3, 1, 5))],
)
def test_binary_is_one_fp32_operation_then_f16(mode, a_shape, b_shape):
    """numpy's float32 operations round as the ISA says; maximum and minimum propagate NaN."""
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(a_shape) * 3).astype(np.float16)
    b = (rng.standard_normal(b_shape) * 3).astype(np.float16)
    (y,) = run_both(binary_program(a, b, mode), [])
    with np.errstate(all="ignore"):
        want = NUMPY_BINARY[mode](a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_array_equal(y, np.clip(want, -65504, 65504).astype(np.float16))


@ENGINE_SETTINGS
@given(
    shape=st.lists(st.integers(1, 6), min_size=4, max_size=4),
    masks=st.lists(st.integers(0, 15), min_size=2, max_size=2),
    mode=st.sampled_from(list(BinaryMode)),
    seed=st.integers(0, 2**16),
)
def test_binary_engines_agree(shape, masks, mode, seed):
    """Any broadcast (each operand keeps the dimensions of its mask), special values too."""
    a_shape, b_shape = ([n if m >> d & 1 else 1 for d, n in enumerate(shape)] for m in masks)
    (y,) = run_both(
        binary_program(f16_data(seed, a_shape, True), f16_data(seed + 1, b_shape, True), mode), []
    )
    assert y.shape == np.broadcast_shapes(tuple(a_shape), tuple(b_shape))


def test_argmax_with_partials_and_reads_outside_the_ocm_fail_validation():
    program = reduce_program(np.zeros((4, 8), np.float16), 1, ReduceMode.ARGMAX)
    ins = program.code[1]
    program.code[1] = instruction("reduce", **{**ins.fields, "acc_out": 1})
    with pytest.raises(SimulatorError, match="acc_out=1 breaks"):
        prepare(program)
    program.code[1] = instruction("reduce", **{**ins.fields, "mode": 9})
    with pytest.raises(SimulatorError, match="mode"):
        prepare(program)
    program.code[1] = instruction("reduce", **{**ins.fields, "outer": 1 << 20})
    with pytest.raises(SimulatorError, match="reduce.*outside tile 0's OCM"):
        prepare(program)
    a = np.zeros((1, 2, 3, 4), np.float16)
    program = binary_program(a, a, BinaryMode.SUB)
    ins = program.code[1]
    program.code[1] = instruction("binary", **{**ins.fields, "b_strides": [0, 0, 1 << 20, 1]})
    with pytest.raises(SimulatorError, match="operand b.*outside tile 0's OCM"):
        prepare(program)
    program.code[1] = instruction("binary", **{**ins.fields, "a_strides": [0, 0, -1, 1]})
    with pytest.raises(SimulatorError, match="a_strides"):
        prepare(program)
