"""sched-cascade never changes the numbers and keeps every dependency: each region of the
small nets (1 and 8 tiles), of the zoo's MobileNetV2 and of random conv chains gives the same
output bytes with and without cascading, the cycle model finds no hazard in either program,
and cascading moves fewer DDR bytes."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers import ENGINE_CORPUS_MODELS, assert_same_bytes, corpus_model, region_functions
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.parser import Parser

import mrvl
from mrvl.assembler import assemble
from mrvl.compiler import compile_region, run_pipeline
from mrvl.dialects import mrvl_context
from mrvl.passes import DEFAULT_PIPELINE
from mrvl.sim import prepare, run
from mrvl.sim.cycles import model_cycles
from mrvl.sim.profile import profile_regions


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


def _conv(name: str, x: str, shape, oc: int, k: int, s: int, rng) -> tuple[str, tuple]:
    """The text of a conv `name` (pad k // 2, stride s, relu) of `x` (NHWC f16), and its
    output shape."""
    n, h, w, c = shape
    pad = k // 2
    out = (n, (h + 2 * pad - k) // s + 1, (w + 2 * pad - k) // s + 1, oc)
    # scaled by the fan-in, so a chain keeps its values in f16's range
    weights = (rng.standard_normal((oc, k, k, c)) / np.sqrt(k * k * c)).astype(np.float16)
    bias = rng.standard_normal(oc).astype(np.float32)
    wt, bt = _t(weights.shape, "f16", "OHWI"), _t((oc,), "f32", "O")
    text = (
        f'%w{name} = mrvl.constant "w{name}" = dense<{_hex(weights)}> : '
        f"tensor<{oc}x{k}x{k}x{c}xf16> -> {wt}\n"
        f'%b{name} = mrvl.constant "b{name}" = dense<{_hex(bias)}> : tensor<{oc}xf32> -> {bt}\n'
        f"%{name} = mrvl.conv2d {x}, %w{name} bias %b{name} strides [{s}, {s}] pads [{pad}, "
        f"{pad}, {pad}, {pad}] act relu : ({_t(shape, 'f16', 'NHWC')}, {wt}, {bt}) -> "
        f"{_t(out, 'f16', 'NHWC')}\n"
    )
    return text, out


def _hex(array: np.ndarray) -> str:
    return '"0x' + array.tobytes().hex().upper() + '"'


def _t(shape, dtype, layout) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}, #mrvl.layout<{layout}>>"


def _chain(shape, layers, rng) -> str:
    """A region of convs one after another: `layers` is a list of (oc, k, s)."""
    x16 = _t(shape, "f16", "NHWC")
    body = f"%c0 = mrvl.cast %x : {_t(shape, 'f32', 'NHWC')} -> {x16}\n"
    current, value = shape, "%c0"
    for index, (oc, k, s) in enumerate(layers, 1):
        text, current = _conv(f"c{index}", value, current, oc, k, s, rng)
        body += text
        value = f"%c{index}"
    out = _t(current, "f32", "NHWC")
    return (
        f"builtin.module {{\n func.func @r(%x: {_t(shape, 'f32', 'NHWC')}) -> {out} {{\n"
        f"{body}%y = mrvl.cast {value} : {_t(current, 'f16', 'NHWC')} -> {out}\n"
        f"func.return %y : {out}\n }}\n}}"
    )


@settings(max_examples=10, deadline=None)
@given(
    h=st.integers(4, 64),
    w=st.integers(4, 48),
    c=st.integers(1, 64),
    layers=st.lists(
        st.tuples(st.integers(1, 160), st.sampled_from((1, 3)), st.sampled_from((1, 2))),
        min_size=2,
        max_size=4,
    ),
    tiles=st.sampled_from((1, 2)),
    seed=st.integers(0, 2**16),
)
def test_cascading_keeps_the_bits_of_random_conv_chains(h, w, c, layers, tiles, seed):
    rng = np.random.default_rng(seed)
    text = _chain((1, h, w, c), layers, rng)
    x = rng.standard_normal((1, h, w, c)).astype(np.float32)
    results = []
    for cascade in (False, True):
        module = Parser(mrvl_context(), text).parse_module()
        options = {"mcpu": "cn10ka", "num_tiles": tiles, "cascade": cascade}
        run_pipeline(module, DEFAULT_PIPELINE, options={"convert-mrvl-to-sched": options})
        valid = prepare(assemble(module))
        model_cycles(valid)  # raises HazardError on a missing token
        results.append(run(valid, [x]))
    assert_same_bytes(*results)
