"""`plan_rows`, the tiling of softmax and layernorm: its pieces cover every row exactly once,
each piece fits a tile's OCM with every buffer aligned, at least half the tiles get a piece
when the OCM does not limit it, and a row that cannot fit is refused with the bytes it needs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrvl.passes.sched.lowering.normalization import plan_rows
from mrvl.passes.sched.tiling import DoesNotFit

ALIGN = 64


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGN) * ALIGN


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    outer=st.integers(1, 40),
    length=st.integers(1, 3000),
    inner=st.integers(1, 300),
    ocm=st.sampled_from([8192, 65536, 131072, 262144]),
    tiles=st.sampled_from([1, 2, 4, 8]),
    params=st.sampled_from([0, 8]),
)
def test_pieces_cover_every_row_once_and_fit(outer, length, inner, ocm, tiles, params):
    try:
        pieces = plan_rows(outer, length, inner, ocm, tiles, ALIGN, "layer", row_param_bytes=params)
    except DoesNotFit as err:
        assert 4 * length + params * length + 4 * ALIGN > ocm  # a row with its result cannot
        assert err.needed > err.available == ocm
        return
    covered = np.zeros((outer, inner), np.int64)
    for p in pieces:
        assert p.oc >= 1 and p.ic >= 1 and (p.oc == 1 or p.ic == inner)
        covered[p.o0 : p.o0 + p.oc, p.i0 : p.i0 + p.ic] += 1
        block = p.oc * length * p.ic * 2
        used = 2 * _aligned(block) + 2 * _aligned(params // 2 * length)
        assert used <= ocm, (p, used)
    assert (covered == 1).all()
    # not held back by the OCM: pieces for at least half the tiles (rounded-up shares)
    if (4 * length * inner + params * length) * outer + 4 * ALIGN <= ocm:
        assert 2 * len(pieces) >= min(tiles, outer * (inner if outer < tiles else 1))


def test_a_row_that_cannot_fit_names_its_bytes():
    with pytest.raises(DoesNotFit, match="one row of 40000 elements needs 160256 bytes"):
        plan_rows(1, 40000, 1, 131072, 4, ALIGN, "layer /big")
