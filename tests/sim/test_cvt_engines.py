"""The Numba engine's `cvt` (dma.py: rounded or widened densely, then permuted by gathering
or scattering, whichever has the longer runs; f16 -> f32 into a destination apart from the
source widened a slab at a time straight into place) gives the interpreter's bytes, counts and all:
every f16 class (NaN payloads, subnormals, infinities) and f32 values beyond the f16 range,
destinations that overlap the source, and addresses off the element alignment (the
engine's byte path)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_builders import ENGINE_SETTINGS, cvt_program, run_both

from mrvl.isa import DType

pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


def source_values(rng: np.random.Generator, dtype: DType, count: int) -> np.ndarray:
    """f16: any bit pattern (NaN payloads and subnormals included); f32: wide normal values
    (many beyond +-65504), some NaNs and f16 subnormals."""
    if dtype == DType.F16:
        return rng.integers(0, 1 << 16, count, dtype=np.uint16).view(np.float16)
    values = (rng.standard_normal(count) * 3e4).astype(np.float32)
    values[::7] = np.nan
    values[1::11] = np.float32(3e-6)
    return values


@ENGINE_SETTINGS
@given(
    shape=st.tuples(st.integers(1, 2), st.integers(1, 4), st.integers(1, 5), st.integers(1, 40)),
    perm=st.permutations(range(4)),
    dtypes=st.sampled_from([(DType.F32, DType.F16), (DType.F16, DType.F32)]),
    place=st.sampled_from(["apart", "same", "overlap"]),
    misalign=st.sampled_from([0, 0, 1, 2]),
    seed=st.integers(0, 2**16),
)
def test_cvt_engines_agree_on_every_layout_and_placement(
    shape, perm, dtypes, place, misalign, seed
):
    """`place`: the destination apart from the source, at its address, or starting inside
    it; `misalign` bytes added to both addresses."""
    src, dst = dtypes
    count = int(np.prod(shape))
    src_bytes = count * (4 if src == DType.F32 else 2)
    dst_bytes = count * (4 if dst == DType.F32 else 2)
    src_addr = 64 + misalign
    dst_addr = {
        "apart": 64 + ((src_bytes + 63) // 64) * 64 + misalign,
        "same": src_addr,
        "overlap": src_addr + 2 * (count // 3),
    }[place]
    ddr_size = max(src_addr + src_bytes, dst_addr + dst_bytes) + 64
    x = source_values(np.random.default_rng(seed), src, count).reshape(shape)
    program = cvt_program(
        shape, perm, src, dst, src_addr=src_addr, dst_addr=dst_addr, ddr_size=ddr_size
    )
    run_both(program, [x])
