"""sched-cascade never changes the numbers and keeps every dependency: each region of the
small nets (1 and 8 tiles) and of the zoo's MobileNetV2 gives the same output bytes with and
without cascading, the cycle model finds no hazard in either program, and cascading moves
fewer DDR bytes."""

from __future__ import annotations

import functools

import mrvl
import numpy as np
import pytest

from mrvl.compiler import compile_region
from mrvl.sim import prepare, run
from mrvl.sim.cycles import model_cycles
from mrvl.sim.profile import profile_regions

from helpers import ENGINE_CORPUS_MODELS, assert_same_bytes, corpus_model, region_functions


@functools.cache
def _regions(name: str, num_tiles: int):
    if name.startswith("zoo:"):
        from mrvl.models.zoo import load_zoo_model

        model = load_zoo_model(name[4:], calibrate=False)
    else:
        model = corpus_model(name)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=num_tiles)
    return list(region_functions(mod))


def _compare(name: str, num_tiles: int) -> tuple[int, int]:
    """Check every region; return the DDR bytes moved (read + written) without and with."""
    moved = {}
    for cascade in (False, True):
        programs, outputs = [], []
        for symbol, func in _regions(name, num_tiles):
            region = compile_region(func, num_tiles=num_tiles, cascade=cascade)
            valid = prepare(region.binary)
            model_cycles(valid)  # raises HazardError on a missing token
            rng = np.random.default_rng(7)
            inputs = [
                rng.standard_normal(e.shape).astype(np.float32) for e in region.program.inputs
            ]
            outputs.append(run(valid, inputs))
            programs.append((symbol, valid, None))
        profile = profile_regions(programs)
        moved[cascade] = profile.ddr_read_bytes + profile.ddr_write_bytes
        if cascade:
            for before, after in zip(without, outputs):
                assert_same_bytes(before, after)
        else:
            without = outputs
    return moved[False], moved[True]


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize("name", ENGINE_CORPUS_MODELS)
def test_cascading_keeps_the_bits_of_the_small_nets(name, num_tiles):
    before, after = _compare(name, num_tiles)
    assert after <= before


def test_cascading_cuts_the_ddr_traffic_of_mobilenet_v2():
    before, after = _compare("zoo:mobilenet_v2", 1)
    assert after < before


def test_a_residual_net_at_one_tile_keeps_a_tensor_on_chip():
    """The residual net's tensors fit a tile: at 1 tile the sched stage holds an OCM buffer
    of a whole intermediate tensor and fewer DDR intermediates than without cascading."""
    ((_, func),) = _regions("residual", 1)
    stages = {
        c: compile_region(func, num_tiles=1, cascade=c, keep_stages=True).stages["sched"]
        for c in (False, True)
    }
    assert " cascade " in stages[True].split("\n", 2)[1] + " "
    ddr_allocs = {c: s.count("sched.alloc offset(") for c, s in stages.items()}
    assert ddr_allocs[True] < ddr_allocs[False]
