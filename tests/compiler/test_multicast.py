"""`sched-multicast`: the tiles that load the same DDR bytes get them from one read (a `dma`
with `dst_tiles`), with the same bits, fewer bytes through the port and no hazard."""

from __future__ import annotations

import numpy as np
import pytest
from compiler.test_schedule_invariance import _layer_module
from xdsl.parser import Parser

from mrvl.assembler import assemble
from mrvl.compiler import run_pipeline
from mrvl.dialects import mrvl_context
from mrvl.passes import DEFAULT_PIPELINE
from mrvl.sim import prepare, run
from mrvl.sim.cycles import model_cycles


def _program(text: str, tiles: int, multicast: bool, pin: bool = False):
    module = Parser(mrvl_context(), text).parse_module()
    passes = [p for p in DEFAULT_PIPELINE if multicast or p != "sched-multicast"]
    options = {"mcpu": "cn10ka", "num_tiles": tiles, "wb_pin_ocm": pin, "cascade": False}
    run_pipeline(module, passes, options={"convert-mrvl-to-sched": options})
    return prepare(assemble(module))


def _multicasts(valid) -> list:
    return [ins for ins in valid.code if ins.opcode == "dma" and ins.fields["dst_tiles"]]


@pytest.mark.parametrize(
    "kind, h, w, c, oc, k, s",
    [
        ("conv", 28, 28, 64, 128, 3, 1),  # windows and weights shared between tiles
        ("conv", 14, 14, 256, 64, 1, 1),
        ("fc", 4, 8, 64, 96, 1, 1),
    ],
)
@pytest.mark.parametrize("pin", [False, True])
def test_multicast_reads_shared_bytes_once_with_the_same_bits(kind, h, w, c, oc, k, s, pin):
    rng = np.random.default_rng(7)
    text, x_shape = _layer_module(kind, h, w, c, oc, k, s, rng)
    x = rng.standard_normal(x_shape).astype(np.float32)
    expected = run(_program(text, 1, True), [x])[0]
    apart, merged = _program(text, 8, False, pin), _program(text, 8, True, pin)
    assert not _multicasts(apart)
    if kind == "fc" and not _multicasts(merged):
        pytest.skip("this fc's plan gives no two tiles the same bytes")
    shared = _multicasts(merged)
    assert shared
    for ins in shared:
        mask = ins.fields["dst_tiles"]
        assert mask >> ins.tile & 1 and bin(mask).count("1") >= 2
    read_apart = int(model_cycles(apart).ddr_read.sum())
    read_merged = int(model_cycles(merged).ddr_read.sum())  # raises HazardError if unordered
    assert read_merged < read_apart
    for engine in ("interp", "numba"):
        assert run(merged, [x], engine=engine)[0].tobytes() == expected.tobytes()
    assert run(apart, [x])[0].tobytes() == expected.tobytes()
