"""The plan of a batched product (`passes/sched/lowering/bmm.py`): over drawn shapes, tile sizes
and tile counts its pieces cover the result exactly once, each fits a tile's OCM, the blocks of
the reduction partition it, and the pieces use the tiles; a product whose smallest piece cannot
fit raises DoesNotFit (at partition time such a product stays on the CPU:
tests/e2e/test_matmul_end_to_end.py)."""

from __future__ import annotations

from math import ceil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrvl.passes.sched.lowering.bmm import BmmShape, piece_bytes, plan_bmm
from mrvl.passes.sched.tiling import DoesNotFit

ALIGN = 64


@st.composite
def shapes(draw):
    batch = draw(st.integers(1, 16))
    return BmmShape(
        batch,
        draw(st.integers(1, 300)),
        draw(st.integers(1, 5000)),
        draw(st.integers(1, 300)),
        draw(st.sampled_from([1, batch])),
        draw(st.sampled_from([1, batch])),
    )


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    shape=shapes(),
    ocm=st.sampled_from([4096, 65536, 131072, 262144]),
    num_tiles=st.sampled_from([1, 2, 4, 8]),
)
def test_the_pieces_cover_the_result_once_and_each_fits_a_tile(shape, ocm, num_tiles):
    pieces = plan_bmm(shape, ocm, num_tiles, ALIGN, "bmm")
    covered = np.zeros((shape.batch, shape.m, shape.n), np.int32)
    for p in pieces:
        covered[p.b0 : p.b0 + p.bs, p.m0 : p.m0 + p.ms, p.n0 : p.n0 + p.ns] += 1
        assert 0 <= p.tile < num_tiles
        starts = [k0 for k0, _ in p.k_blocks]
        assert starts == sorted(starts) and starts[0] == 0
        assert sum(kb for _, kb in p.k_blocks) == shape.k
        assert all(k0 + kb == nxt for (k0, kb), nxt in zip(p.k_blocks, starts[1:]))
        kb = max(kb for _, kb in p.k_blocks)
        need = piece_bytes(shape, p.bs, p.ms, kb, p.ns, len(p.k_blocks), ALIGN)
        assert need <= ocm, (p, need)
    assert covered.min() == 1 and covered.max() == 1
    # each tile has a piece wherever the batch and the rows can be cut that far
    most = ceil(shape.batch * shape.m * ceil(shape.n / max(p.ns for p in pieces)))
    assert len({p.tile for p in pieces}) == min(num_tiles, len(pieces))
    assert len(pieces) >= min(num_tiles, most)


def test_a_tile_too_small_for_one_element_raises_does_not_fit():
    with pytest.raises(DoesNotFit, match="one output element needs 256 bytes of OCM"):
        plan_bmm(BmmShape(1, 2, 3, 4, 1, 1), 200, 1, ALIGN, "bmm")
