"""The profile (per ONNX node: cycles, MACs, roofline, OCM, DDR, saturation) and the Chrome trace
of hand-built programs."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import numpy as np
import pytest
from sim_builders import conv_region_program

from mrvl import cost
from mrvl.isa import NO_LOC
from mrvl.sim import prepare
from mrvl.sim.profile import NO_NODE, check_profile, layer_dtype, profile_regions
from mrvl.sim.stats import RunStats
from mrvl.sim.trace import chrome_trace

NODES = ["/in/Cast", "/conv/Conv", "/out/Cast"]


def region():
    """The conv region of sim_builders with its instructions attributed to three ONNX nodes:
    input conversion and its DMA, the conv with its weight and output DMAs, the output
    conversion; `end` has no node."""
    program = conv_region_program(np.ones((4, 3, 3, 3), np.float16), np.zeros(4, np.float32))
    locs = [0, 1, 0, 1, 1, 2, NO_LOC]
    program.code = [dataclasses.replace(i, loc=loc) for i, loc in zip(program.code, locs)]
    program.srcmap = list(NODES)
    return prepare(program)


def test_layers_are_keyed_by_onnx_node_and_add_up():
    valid = region()
    profile = profile_regions([("r0", valid, None)])
    layers = {layer.onnx_node: layer for layer in profile.layers}
    assert list(layers) == NODES  # `end` takes no time and is no layer
    conv = layers["/conv/Conv"]
    assert conv.macs == 1 * 6 * 6 * 4 * 3 * 3 * 3
    assert conv.instructions == 3 and conv.tiles == 1 and conv.region == "r0"
    assert 0 < conv.utilization <= 1
    timeline = profile.regions[0].timeline
    assert profile.total_cycles == timeline.total_cycles
    assert sum(layer.ddr_read_bytes for layer in profile.layers) == profile.ddr_read_bytes
    assert profile.ddr_read_bytes == timeline.ddr_read.sum() > 0
    assert profile.roofline_cycles == sum(layer.roofline_cycles for layer in profile.layers)
    # the layers here run one after another: their busy times add up to the total
    assert sum(layer.cycles for layer in profile.layers) == profile.total_cycles


def test_roofline_counts_each_compulsory_ddr_byte_once():
    valid = region()
    (conv,) = [x for x in profile_regions([("r", valid, None)]).layers if x.macs]
    # the conv's DMAs read its weights+bias (one run) and write its output; the input's DMA
    # belongs to /in/Cast here
    consts = len(valid.program.consts)
    compulsory = consts + 2 * 4 * 6 * 6
    assert conv.compulsory_ddr_bytes == compulsory
    assert conv.roofline_cycles == cost.roofline_cycles(valid.target, 1, conv.macs, compulsory)
    assert conv.cycles >= conv.roofline_cycles


def test_ocm_peak_counts_the_values_live_while_the_layer_runs():
    valid = region()
    layers = {x.onnx_node: x for x in profile_regions([("r", valid, None)]).layers}
    consts = len(valid.program.consts)
    # weights+bias, the input window and the output tile are all live around the conv
    assert layers["/conv/Conv"].ocm_peak_bytes == consts + 2 * 3 * 36 + 2 * 4 * 36
    assert layers["/out/Cast"].ocm_peak_bytes == 0  # DDR to DDR, after every OCM value died


def test_saturation_counts_reach_their_layer_and_the_summary():
    valid = region()
    stats = RunStats()
    stats.reset(len(valid.code))
    stats.saturated[3], stats.nans[3] = 5, 2  # the conv
    stats.nans[5] = 1  # the output conversion
    profile = profile_regions([("r", valid, stats)])
    saturated = {x.onnx_node: x.saturated for x in profile.layers}
    assert saturated == {
        "/in/Cast": {"values": 0, "nans": 0},
        "/conv/Conv": {"values": 5, "nans": 2},
        "/out/Cast": {"values": 0, "nans": 1},
    }
    text = profile.summary()
    assert "layer '/conv/Conv' saturated 5 values" in text and "'/out/Cast'" in text
    assert "warning" not in profile_regions([("r", valid, RunStats())]).summary()


def test_profile_json_follows_its_schema():
    valid = region()
    document = profile_regions([("r0", valid, None), ("r1", valid, None)]).to_json()
    check_profile(json.loads(json.dumps(document)))
    assert document["total_cycles"] == sum(r["total_cycles"] for r in document["regions"])
    assert {x["region"] for x in document["layers"]} == {"r0", "r1"}
    broken = dict(
        document, layers=[{k: v for k, v in document["layers"][0].items() if k != "macs"}]
    )
    with pytest.raises(jsonschema.ValidationError, match="macs"):
        check_profile(broken)


def test_fp16_layers_are_float16_and_int8_moves_are_int8():
    """`dtype`: an fp16 program's layers are float16; a layer that only moves 1-byte elements
    is int8."""
    valid = region()
    assert {x.dtype for x in profile_regions([("r", valid, None)]).layers} == {"float16"}
    program = valid.program
    moves = [i for i in program.code if i.opcode == "dma"]
    int8_move = dataclasses.replace(moves[0], fields={**moves[0].fields, "elem_bytes": 1})
    f16_move = dataclasses.replace(moves[0], fields={**moves[0].fields, "elem_bytes": 2})
    assert layer_dtype([int8_move], [0]) == "int8"
    assert layer_dtype([f16_move, int8_move], [0, 1]) == "float16"


def test_instructions_without_a_node_form_their_own_layer():
    valid = region()
    program = valid.program
    program.code = [dataclasses.replace(i, loc=NO_LOC) for i in program.code]
    layers = profile_regions([("r", prepare(program), None)]).layers
    assert [x.onnx_node for x in layers] == [NO_NODE]


def test_chrome_trace_has_processes_threads_slices_and_counters():
    valid = region()
    profile = profile_regions([("r0", valid, None)])
    trace = json.loads(json.dumps(chrome_trace(profile)))
    events = trace["traceEvents"]
    meta = [e for e in events if e["ph"] == "M"]
    assert {(e["pid"], e["args"]["name"]) for e in meta if e["name"] == "process_name"} == {
        (0, "tile 0")
    }
    threads = {(e["pid"], e["tid"], e["args"]["name"]) for e in meta if e["name"] == "thread_name"}
    assert threads == {(0, 0, "dma"), (0, 1, "mac"), (0, 2, "vector")}
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == len(valid.code) - 1  # every instruction but `end`
    conv = next(e for e in slices if e["args"]["opcode"] == "conv")
    assert conv["name"] == "/conv/Conv" and conv["tid"] == 1 and conv["args"]["index"] == 3
    assert conv["args"]["fields"]["kernel"] == [3, 3]
    timeline = profile.regions[0].timeline
    assert conv["ts"] * profile.clock_mhz == timeline.start[3]
    assert conv["dur"] * profile.clock_mhz == timeline.end[3] - timeline.start[3]
    counters = [e for e in events if e["ph"] == "C"]
    assert counters and all(e["name"] == "OCM bytes" for e in counters)
    assert max(e["args"]["bytes"] for e in counters) > 0 and counters[-1]["args"]["bytes"] == 0


def test_a_second_region_follows_the_first_in_the_trace():
    valid = region()
    profile = profile_regions([("a", valid, None), ("b", valid, None)])
    events = chrome_trace(profile)["traceEvents"]
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {"a tile 0", "b tile 0"}
    second = [e for e in events if e["ph"] == "X" and e["pid"] == 1]
    assert min(e["args"]["start_cycle"] for e in second) >= profile.regions[0].total_cycles


def test_a_tile_that_holds_nothing_has_an_empty_counter_track():
    valid = region()
    program = dataclasses.replace(valid.program, num_tiles=2)
    profile = profile_regions([("r", prepare(program), None)])
    events = chrome_trace(profile)["traceEvents"]
    assert {e["pid"] for e in events if e["ph"] == "C"} == {0}
    assert {e["pid"] for e in events if e.get("name") == "process_name"} == {0, 1}
