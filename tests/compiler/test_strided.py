"""strided.py: the strided form of an index map is exact whenever it is found, and found for
every transpose, slice and integer repeat at rank <= 4, and for every transpose and slice at
ranks 5 and 6 whose form has at most 6 dimensions (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mrvl.strided import (
    MAX_PIECES,
    StridedForm,
    interpolation_table,
    nearest_indices,
    piecewise_forms,
    strided_form,
)


def expand(form: StridedForm) -> np.ndarray:
    """The positions a form copies, in C order of its box."""
    positions = np.full(form.box, form.offset, dtype=np.int64)
    for axis, (extent, stride) in enumerate(zip(form.box, form.strides)):
        shape = [1] * len(form.box)
        shape[axis] = extent
        positions = positions + (np.arange(extent) * stride).reshape(shape)
    return positions.reshape(-1)


@st.composite
def _transposed_slices(draw, rank: int, largest: int):
    """The element positions of a dense tensor of `rank` dimensions of 1 to `largest`,
    transposed, then sliced in every dimension."""
    shape = draw(st.lists(st.integers(1, largest), min_size=rank, max_size=rank))
    positions = np.arange(int(np.prod(shape))).reshape(shape)
    positions = positions.transpose(draw(st.permutations(range(rank))))
    index = []
    for size in positions.shape:
        lo = draw(st.integers(0, size - 1))
        index.append(slice(lo, draw(st.integers(lo + 1, size))))
    return positions[tuple(index)]


@st.composite
def moves(draw):
    """A dense tensor of rank 2 to 4, transposed, sliced and repeated (nearest upsampling)."""
    rank = draw(st.integers(2, 4))
    positions = draw(_transposed_slices(rank, 5))
    for axis in draw(st.lists(st.integers(0, rank - 1), max_size=2, unique=True)):
        positions = np.repeat(positions, draw(st.integers(2, 3)), axis=axis)
    return positions


@settings(max_examples=300, deadline=None)
@given(moves())
def test_moves_have_an_exact_strided_form(positions):
    form = strided_form(positions)
    assert form is not None
    assert len(form.box) <= 6 and min(form.strides) >= 0
    np.testing.assert_array_equal(expand(form), positions.reshape(-1))


@st.composite
def high_rank_moves(draw):
    """A dense tensor of rank 5 or 6 (attention heads, window partitions), transposed and
    sliced: a form of at most 6 dimensions always exists."""
    return draw(_transposed_slices(draw(st.integers(5, 6)), 4))


@settings(max_examples=300, deadline=None)
@given(high_rank_moves())
def test_rank_5_and_6_moves_have_an_exact_strided_form(positions):
    form = strided_form(positions)
    assert form is not None
    assert len(form.box) <= 6 and min(form.strides) >= 0
    np.testing.assert_array_equal(expand(form), positions.reshape(-1))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=1, max_size=40))
def test_any_map_gets_an_exact_form_or_none(values):
    form = strided_form(np.array(values))
    if form is not None:
        np.testing.assert_array_equal(expand(form), values)


def test_an_irregular_gather_has_no_form():
    assert strided_form(np.array([0, 0, 1, 2, 2, 3])) is None
    assert strided_form(np.array([4, 0, 2])) is None


def test_a_reversal_walks_backwards():
    form = strided_form(np.arange(5)[::-1])
    assert form == StridedForm(4, (-1,), (5,))


@st.composite
def reversed_moves(draw):
    """A dense tensor of rank 2 to 6, sliced along some axes with negative or positive steps
    (a reverse-direction LSTM's time axis) and transposed."""
    rank = draw(st.integers(2, 6))
    shape = draw(st.lists(st.integers(1, 5 if rank <= 4 else 3), min_size=rank, max_size=rank))
    positions = np.arange(int(np.prod(shape))).reshape(shape)
    index = []
    for size in shape:
        step = draw(st.sampled_from([1, -1, 2, -2]))
        lo = draw(st.integers(0, size - 1))
        index.append(slice(lo, None, step))
    positions = positions[tuple(index)]
    return positions.transpose(draw(st.permutations(range(rank))))


@settings(max_examples=300, deadline=None)
@given(reversed_moves())
def test_slices_with_any_step_have_an_exact_strided_form(positions):
    form = strided_form(positions)
    assert form is not None and len(form.box) <= 6
    np.testing.assert_array_equal(expand(form), positions.reshape(-1))


def test_nearest_by_integer_factors_repeats_each_index():
    for mode, rounding in (
        ("half_pixel", "round_prefer_floor"),
        ("pytorch_half_pixel", "round_prefer_ceil"),
        ("asymmetric", "floor"),  # PyTorch's nearest export
    ):
        np.testing.assert_array_equal(
            nearest_indices(4, 12, mode, rounding), np.repeat(np.arange(4), 3)
        )
    # asymmetric coordinates rounded to nearest are no repeat: o / 3 = 0.67 rounds to 1
    assert nearest_indices(4, 12, "asymmetric", "round_prefer_floor")[2] == 1


def test_bilinear_tables_follow_onnx_half_pixel():
    table = interpolation_table(2, 4, "linear", "half_pixel")
    # x = (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25, clamped to [0, 1]
    np.testing.assert_array_equal(
        table,
        np.array([[0, 1, 1, 0], [0, 1, 0.75, 0.25], [0, 1, 0.25, 0.75], [1, 1, 1, 0]], np.float32),
    )


@st.composite
def gathers(draw):
    """A dense tensor of rank 2 to 4, gathered along one axis by any constant indices
    (repeats, any order), then maybe transposed."""
    rank = draw(st.integers(2, 4))
    shape = draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))
    axis = draw(st.integers(0, rank - 1))
    indices = draw(st.lists(st.integers(0, shape[axis] - 1), min_size=1, max_size=8))
    positions = np.take(np.arange(int(np.prod(shape))).reshape(shape), indices, axis=axis)
    return positions.transpose(draw(st.permutations(range(rank))))


@settings(max_examples=300, deadline=None)
@given(gathers())
def test_gathers_are_exact_strided_pieces(positions):
    """Every constant gather is one strided form or pieces along one axis, each exact; the
    pieces tile the axis in order."""
    cut = piecewise_forms(positions)
    assert cut is not None
    axis, pieces = cut
    assert 1 <= len(pieces) <= MAX_PIECES
    assert pieces[0].start == 0 and pieces[-1].stop == positions.shape[axis]
    for before, after in zip(pieces, pieces[1:]):
        assert before.stop == after.start
    for piece in pieces:
        part = np.take(positions, range(piece.start, piece.stop), axis=axis)
        np.testing.assert_array_equal(expand(piece.form), part.reshape(-1))
    if strided_form(positions) is not None:
        assert len(pieces) == 1


def test_a_gather_of_any_two_indices_is_one_piece():
    """Any two indices are a progression (a negative step too): [4, 0, 2] is 2 pieces."""
    positions = np.take(np.arange(10).reshape(5, 2), [4, 0, 2], axis=0)
    axis, pieces = piecewise_forms(positions)
    assert axis == 0 and [(p.start, p.stop) for p in pieces] == [(0, 2), (2, 3)]
    assert pieces[0].form == StridedForm(8, (-8, 1), (2, 2))


@st.composite
def tiles(draw):
    """A dense tensor of rank 2 to 4 tiled (numpy.tile: whole copies along an axis) on at
    most two axes, or broadcast along its unit axes (ONNX Expand)."""
    rank = draw(st.integers(2, 4))
    shape = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    positions = np.arange(int(np.prod(shape))).reshape(shape)
    if draw(st.booleans()):
        reps = [1] * rank
        for axis in draw(st.lists(st.integers(0, rank - 1), max_size=2, unique=True)):
            reps[axis] = draw(st.integers(2, 3))
        return np.tile(positions, reps)
    target = [d if d > 1 else draw(st.integers(1, 3)) for d in shape]
    return np.broadcast_to(positions, target)


@settings(max_examples=300, deadline=None)
@given(tiles())
def test_tiles_and_expands_have_an_exact_strided_form(positions):
    form = strided_form(positions)
    assert form is not None and len(form.box) <= 6 and min(form.strides) >= 0
    np.testing.assert_array_equal(expand(form), positions.reshape(-1))
