"""The shared cost functions: DDR bursts, set-up cycles, and the roofline bound."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mrvl import cost
from mrvl.target import get_target

CN10KA = get_target("cn10ka")


def test_a_strided_transfer_pays_whole_bursts_per_run():
    burst = CN10KA.ddr_burst_bytes
    assert cost.ddr_bytes(CN10KA, 10 * burst) == 10 * burst
    # ten runs of 2 bytes move ten bursts, not 20 bytes
    assert cost.ddr_bytes(CN10KA, 20, runs=10) == 10 * burst
    assert cost.dma(CN10KA, 20, runs=10, reads_ddr=True).ddr_read == 10 * burst
    assert cost.dma(CN10KA, 20, runs=10).ddr_bytes == 0  # OCM to OCM never touches DDR


def test_engine_time_is_set_up_plus_rate():
    t = CN10KA
    assert cost.mac(t, 0).cycles == t.mac_setup_cycles
    assert cost.mac(t, 10 * t.fp16_macs_per_cycle_per_tile).cycles == t.mac_setup_cycles + 10
    assert cost.mac(t, 10 * t.int8_macs_per_cycle_per_tile, int8=True).cycles == (
        t.mac_setup_cycles + 10
    )
    assert cost.vector(t, 3 * t.vector_elems_per_cycle_per_tile).cycles == (
        t.vector_setup_cycles + 3
    )
    assert cost.dma(t, t.dma_bytes_per_cycle).cycles == t.dma_setup_cycles + 1


@given(st.integers(0, 10**10), st.integers(0, 10**9), st.integers(1, 8))
def test_roofline_is_the_larger_bound_and_scales_with_tiles(macs, nbytes, tiles):
    bound = cost.roofline_cycles(CN10KA, tiles, macs, nbytes)
    assert bound >= cost.ddr_port_cycles(CN10KA, nbytes)
    assert bound * CN10KA.fp16_macs_per_cycle_per_tile * tiles >= macs
    assert bound <= cost.roofline_cycles(CN10KA, 1, macs, nbytes)
