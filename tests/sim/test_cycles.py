"""The cycle model (`mrvl.sim.cycles`): queue, token and DDR-port timing priced by `mrvl.cost`,
and the dependency check that catches a missing wait."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_builders import conv, conv_region_program, copy_bytes, end, lut

from mrvl import cost
from mrvl.isa import Activation, DType, IOEntry, MemSpace, Program
from mrvl.sim import prepare
from mrvl.sim.cycles import HazardError, instruction_cost, model_cycles
from mrvl.target import get_target

T = get_target("cn10ka")
DDR, OCM = MemSpace.DDR, MemSpace.OCM
N = 4096  # bytes of one test transfer: a multiple of the burst and of both rates


def program(code, num_tiles=2, ddr_size=1 << 20, srcmap=("a", "b", "c")) -> Program:
    return Program(
        target="cn10ka",
        num_tiles=num_tiles,
        ddr_size=ddr_size,
        io=[IOEntry("y", False, (1,), DType.F16, 0)],
        code=[*code, end()],
        const_base=0,
        consts=b"",
        srcmap=list(srcmap),
    )


def timeline(code, **kwargs):
    return model_cycles(prepare(program(code, **kwargs)))


def small_conv(tile=0, **header):
    """A 1x1 conv of [1, 8, 8, 16] at OCM 0 into [1, 8, 8, 16] at OCM 0x1000 (weights 0x2000)."""
    return conv(0, (1, 8, 8, 16), 0x1000, (1, 8, 8, 16), 0x2000, kernel=(1, 1), tile=tile, **header)


CONV_MACS = 8 * 8 * 16 * 16


def test_a_single_dma_costs_what_mrvl_cost_says():
    t = timeline([copy_bytes(DDR, 0, OCM, 0, N)])
    expected = cost.dma(T, N, reads_ddr=True)
    assert (t.start[0], t.end[0]) == (0, expected.cycles)
    assert t.ddr_read[0] == expected.ddr_read == N and t.ddr_write[0] == 0
    assert t.total_cycles == expected.cycles


def test_a_strided_dma_pays_bursts_per_run_on_the_port():
    # 64 runs of 2 bytes: the engine moves 128 bytes, the port 64 bursts
    strided = copy_bytes(DDR, 0, OCM, 0, 1)
    strided.fields.update(src_strides=(0, 0, 0, 128), dst_strides=(0, 0, 0, 2))
    strided.fields.update(box=(1, 1, 1, 64), elem_bytes=2)
    t = timeline([strided])
    assert t.ddr_read[0] == 64 * T.ddr_burst_bytes
    port = cost.ddr_port_cycles(T, 64 * T.ddr_burst_bytes)
    assert t.end[0] == T.dma_setup_cycles + port  # the port, not the engine, is the bound


def test_compute_costs_what_mrvl_cost_says():
    t = timeline([small_conv()])
    assert t.macs[0] == CONV_MACS
    assert t.end[0] - t.start[0] == cost.mac(T, CONV_MACS).cycles


def test_two_tiles_overlap_and_one_queue_serializes():
    one = cost.mac(T, CONV_MACS).cycles
    t = timeline([small_conv(tile=0), small_conv(tile=1)])
    assert list(t.start[:2]) == [0, 0] and t.total_cycles == one
    t = timeline([small_conv(tile=0), small_conv(tile=0)])
    assert t.start[1] == one and t.total_cycles == 2 * one


def test_engines_of_one_tile_overlap():
    t = timeline([copy_bytes(OCM, 0x8000, OCM, 0x9000, N), small_conv()])
    assert list(t.start[:2]) == [0, 0]


def test_a_token_serializes_across_tiles():
    one = cost.mac(T, CONV_MACS).cycles
    t = timeline([small_conv(tile=0, signal=1), small_conv(tile=1, waits=(1,))])
    assert t.start[1] == one and t.total_cycles == 2 * one


def test_a_wait_needs_every_earlier_signaller_of_the_token():
    long = conv(0, (1, 8, 8, 16), 0x1000, (1, 8, 8, 64), 0x2000, kernel=(1, 1), tile=1, signal=7)
    t = timeline([small_conv(tile=0, signal=7), long, small_conv(tile=0, waits=(7,))])
    assert t.start[2] == t.end[1] > t.end[0]


def test_the_ddr_port_is_shared_by_the_tiles():
    t = timeline([copy_bytes(DDR, 0, OCM, 0, N, tile=0), copy_bytes(DDR, N, OCM, 0, N, tile=1)])
    port = cost.ddr_port_cycles(T, N)
    assert t.start[0] == 0
    # the second transfer waits for the port, its set-up overlapping the first transfer
    assert t.start[1] + T.dma_setup_cycles == T.dma_setup_cycles + port
    assert t.total_cycles == T.dma_setup_cycles + 2 * port
    # OCM-to-OCM copies never touch the port
    t = timeline([copy_bytes(OCM, 0, OCM, N, N, tile=0), copy_bytes(OCM, 0, OCM, N, N, tile=1)])
    assert list(t.start[:2]) == [0, 0]


def test_a_later_dma_uses_an_idle_port_gap():
    big = conv(0, (1, 16, 16, 64), 0x10000, (1, 16, 16, 64), 0x20000, kernel=(3, 3), pad=(1, 1))
    code = [
        dataclasses.replace(big, signal=1),
        copy_bytes(DDR, 0, OCM, 0x30000, N, tile=0, waits=(1,)),  # ready late
        copy_bytes(DDR, N, OCM, 0x30000, N, tile=1),  # ready at once: goes first
    ]
    t = timeline(code)
    assert t.start[2] == 0 and t.start[1] == t.end[0]


def test_a_transfer_too_long_for_an_idle_gap_fills_it_and_goes_on_after():
    # the port interleaves bursts: tile 1's long load, later in program order than tile 0's
    # late one, moves in the gap before it and in the cycles after it
    code = [
        small_conv(tile=0, signal=1),
        copy_bytes(DDR, 0, OCM, 0x30000, N, tile=0, waits=(1,)),  # ready late
        copy_bytes(DDR, N, OCM, 0x30000, 16 * N, tile=1),  # ready at once, longer than the gap
    ]
    t = timeline(code)
    gap = t.port_first[1] - T.dma_setup_cycles  # the port cycles before tile 0's transfer
    port = cost.ddr_port_cycles(T, N)
    assert 0 < gap < 16 * port  # the long load does not fit in the gap
    assert t.start[2] == 0 and t.port_first[2] == T.dma_setup_cycles
    assert t.port_last[2] == T.dma_setup_cycles + 16 * port + port  # it waited out tile 0's
    assert t.port_last[1] == t.port_first[1] + port  # the earlier transfer is not slowed


def test_ocm_in_use_lasts_from_the_write_to_the_last_read():
    code = [
        copy_bytes(DDR, 0, OCM, 0, 2048, signal=1),  # the conv's input, 2 KiB
        small_conv(waits=(1,), signal=2),  # reads it (and uninitialised weights)
        copy_bytes(OCM, 0x1000, DDR, 0x10000, 2048, waits=(2,)),  # reads the conv output
    ]
    t = timeline(code)
    assert t.ocm_free[0, 0] == t.end[1] and t.ocm_free[1, 0] == t.end[2]
    _, level = t.ocm_in_use(0)
    assert level.max() == 4096 and level[-1] == 0


def test_a_multicast_is_one_transfer_that_fills_each_destination_tiles_ocm():
    """dst_tiles 0b111 from tile 1: the time, queue and port bytes of the same dma to one tile
    (its source once), and its N bytes in use on each of tiles 0, 1 and 2, each until the end
    of its last reader there (tile 2's conv)."""
    from mrvl.sim.profile import profile_timeline

    single = timeline([copy_bytes(DDR, 0, OCM, 0, N, tile=1, loc=0)], num_tiles=3)
    code = [
        copy_bytes(DDR, 0, OCM, 0, N, tile=1, dst_tiles=0b111, signal=1, loc=0),
        small_conv(tile=2, waits=(1,), loc=1),
    ]
    t = timeline(code, num_tiles=3)
    assert (t.queue[0], t.start[0], t.end[0]) == (single.queue[0], 0, single.end[0])
    assert t.ddr_read[0] == single.ddr_read[0] == N and t.ddr_write[0] == 0
    assert t.port_last[0] - t.port_first[0] == cost.ddr_port_cycles(T, N)
    assert t.ocm_bytes[0].tolist() == [N, N, N]
    assert t.ocm_free[0].tolist() == [t.end[0], t.end[0], t.end[1]]
    for tile in (0, 1):
        times, level = t.ocm_in_use(tile)
        assert times.tolist() == [0, t.end[0]] and level.tolist() == [N, 0]
    _, level = t.ocm_in_use(2)
    assert level.max() == N + 8 * 8 * 16 * 2  # the multicast's bytes and the conv's output
    assert t.ocm_in_use()[1].max() == 3 * N
    _, layers = profile_timeline(t, "r")
    load = next(layer for layer in layers if layer.onnx_node == "a")
    assert load.ddr_read_bytes == load.compulsory_ddr_bytes == N


def test_a_reader_or_writer_on_another_tile_must_wait_for_a_multicast():
    """The multicast's bytes on tile 2 are its write: tile 2's conv must wait on its token to
    read them, and tile 2's next dma to write over them."""
    load = copy_bytes(DDR, 0, OCM, 0, 2048, tile=1, dst_tiles=0b110, loc=0)
    with pytest.raises(
        HazardError,
        match=r"instruction 1 \(conv, ONNX node 'b'\) reads tile 2's OCM bytes in "
        r"\[0x0, 0x800\) that instruction 0 \(dma, ONNX node 'a'\) wrote them",
    ):
        timeline([load, small_conv(tile=2, loc=1)], num_tiles=3)
    with pytest.raises(
        HazardError,
        match=r"instruction 1 \(dma, ONNX node 'b'\) writes tile 2's OCM .* "
        r"instruction 0 \(dma, ONNX node 'a'\) wrote them",
    ):
        timeline([load, copy_bytes(DDR, 0, OCM, 0, 64, tile=2, loc=1)], num_tiles=3)
    ordered = dataclasses.replace(load, signal=1)
    timeline([ordered, small_conv(tile=2, waits=(1,), loc=1)], num_tiles=3)
    timeline([ordered, copy_bytes(DDR, 0, OCM, 0, 64, tile=2, waits=(1,), loc=1)], num_tiles=3)
    timeline([load, small_conv(tile=0, loc=1)], num_tiles=3)  # tile 0's OCM is not written


# ------------------------------------------------------------------------------- hazards


def test_a_read_before_its_write_is_ordered_is_caught():
    code = [copy_bytes(DDR, 0, OCM, 0, 2048, loc=0), small_conv(loc=1)]
    with pytest.raises(
        HazardError,
        match=r"instruction 1 \(conv, ONNX node 'b'\) reads.*"
        r"instruction 0 \(dma, ONNX node 'a'\) wrote them",
    ):
        timeline(code)
    code[1] = small_conv(loc=1, waits=(1,))
    code[0] = copy_bytes(DDR, 0, OCM, 0, 2048, loc=0, signal=1)
    timeline(code)


def test_a_write_over_bytes_still_being_read_is_caught():
    code = [small_conv(loc=0), copy_bytes(DDR, 0, OCM, 0, 64, loc=1)]
    with pytest.raises(
        HazardError,
        match=r"instruction 1 \(dma, ONNX node 'b'\) writes tile "
        r"0's OCM.*instruction 0 \(conv, ONNX node 'a'\) reads them",
    ):
        timeline(code)


def test_two_tiles_writing_the_same_ddr_bytes_is_caught():
    code = [copy_bytes(OCM, 0, DDR, 0x100, 64, tile=0), copy_bytes(OCM, 0, DDR, 0x120, 64, tile=1)]
    with pytest.raises(HazardError, match="writes DDR bytes.*wrote them"):
        timeline(code)
    timeline(
        [copy_bytes(OCM, 0, DDR, 0x100, 64, tile=0), copy_bytes(OCM, 0, DDR, 0x140, 64, tile=1)]
    )


def test_a_token_chain_orders_transitively():
    code = [
        copy_bytes(DDR, 0, OCM, 0, 2048, tile=0, signal=1),
        copy_bytes(OCM, 0x4000, OCM, 0x5000, 64, tile=1, waits=(1,), signal=2),
        small_conv(tile=0, waits=(2,)),  # after the write through tile 1's queue
    ]
    timeline(code)


def test_queue_order_orders():
    code = [copy_bytes(DDR, 0, OCM, 0, 2048), copy_bytes(OCM, 0, DDR, 0x1000, 2048)]
    timeline(code)


def test_a_lut_under_a_table_activation_reader_is_caught():
    table = 0x10000
    sigmoid = {"act": Activation.SIGMOID}
    code = [
        lut(table, Activation.SIGMOID, signal=1),
        small_conv(waits=(1,), **sigmoid),
        lut(table, Activation.SIGMOID),  # replaces the table the conv may still read
    ]
    with pytest.raises(HazardError, match="activation-table memory"):
        timeline(code)
    code[1] = small_conv(waits=(1,), signal=2, **sigmoid)
    code[2] = lut(table, Activation.SIGMOID, waits=(2,))
    timeline(code)


def test_a_deliberately_missing_token_in_a_region_is_caught():
    w = np.zeros((4, 3, 3, 3), np.float16)
    b = np.zeros(4, np.float32)
    region = conv_region_program(w, b)
    model_cycles(prepare(region))  # the builder's tokens are complete
    conv_index = next(i for i, ins in enumerate(region.code) if ins.opcode == "conv")
    ins = region.code[conv_index]
    region.code[conv_index] = dataclasses.replace(ins, waits=(2,))  # forgets the input (3)
    with pytest.raises(HazardError, match=f"instruction {conv_index} \\(conv"):
        model_cycles(prepare(region))


def test_a_compiled_model_has_no_hazard_and_every_instruction_is_timed(mnist_partitioned):
    from helpers import region_functions

    from mrvl.compiler import compile_region

    for _, func in region_functions(mnist_partitioned):
        valid = prepare(compile_region(func).binary)
        t = model_cycles(valid)
        code = valid.code[:-1]
        assert np.all(t.end[:-1] > t.start[:-1])
        assert t.total_cycles == t.end.max() > 0
        assert t.macs.sum() > 0
        # a program's queues run in order
        for q in set(t.queue[:-1]):
            mine = np.flatnonzero(t.queue == q)
            assert np.all(t.start[mine[1:]] >= t.end[mine[:-1]])
        assert len(code) == len(t.start) - 1
        # the same program with the waits of a conv forgotten: nothing orders it after the
        # DMAs that load its operands (dropping one of them alone may be harmless: the DMA
        # queue runs in order, so waiting for its last load implies the earlier ones)
        index = next(i for i, ins in enumerate(code) if ins.opcode == "conv" and ins.waits)
        program = dataclasses.replace(valid.program, code=list(valid.program.code))
        program.code[index] = dataclasses.replace(code[index], waits=())
        with pytest.raises(HazardError, match=f"instruction {index} \\(conv"):
            model_cycles(prepare(program))


@pytest.mark.slow
@pytest.mark.parametrize("num_tiles", [1])
@pytest.mark.parametrize(
    "name",
    [
        "resnet50",
        "squeezenet",
        "shufflenet",
        "inception_v1",
        "densenet121",
        "zoo:mobilenet_v2",
        "zoo:efficientnet_b0",
        "zoo:deeplabv3_mobilenet_v3_large",  # had a hazard, fixed by sched-insert-sync
    ],
)
def test_compiled_models_have_no_hazard(name, num_tiles):
    """Real models' 1-tile builds replay without a hazard. Their 8-tile builds are checked
    where the suite makes them anyway: the light models in tests/models/test_light_models.py
    (`test_build_has_no_hazard`), the zoo in tests/zoo/test_zoo.py (the pinned cycles of
    `test_zoo_model_outputs_unchanged` are a replay on the cycle model)."""
    from helpers import region_functions

    import mrvl
    from mrvl.compiler import compile_region
    from mrvl.models.light import load_light_model
    from mrvl.models.zoo import load_zoo_model

    if name.startswith("zoo:"):
        model = load_zoo_model(name[4:], calibrate=False)
    else:
        model = load_light_model(name, calibrate=False)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), mcpu="cn10ka", num_tiles=num_tiles)
    for _, func in region_functions(mod):
        assert model_cycles(prepare(compile_region(func).binary)).total_cycles > 0


# ----------------------------------------------------------------- timing invariants, random


@st.composite
def random_programs(draw):
    """Copies and convs on random tiles, each waiting on random earlier signals; the memory
    each touches is its own (no hazards), so only the timing rules order them."""
    count = draw(st.integers(1, 14))
    code, signals = [], []
    for i in range(count):
        tile = draw(st.integers(0, 3))
        waits = (
            tuple(sorted(set(draw(st.lists(st.sampled_from(signals), max_size=3)))))
            if signals
            else ()
        )
        signal = draw(st.sampled_from([0, i + 1, 1 + i % 3]))  # tokens may repeat
        header = {"tile": tile, "waits": waits, "signal": signal}
        kind = draw(st.sampled_from(["load", "store", "local", "conv"]))
        nbytes = 64 * draw(st.integers(1, 64))
        slot = 0x4000 * i  # 16 KiB of OCM and of DDR per instruction
        if kind == "load":
            code.append(copy_bytes(DDR, slot, OCM, slot, nbytes, **header))
        elif kind == "store":
            code.append(copy_bytes(OCM, slot, DDR, slot, nbytes, **header))
        elif kind == "local":
            code.append(copy_bytes(OCM, slot, OCM, slot + 0x800, nbytes, **header))
        else:
            code.append(
                conv(
                    slot,
                    (1, 4, 4, 16),
                    slot + 0x400,
                    (1, 4, 4, 16),
                    slot + 0x800,
                    kernel=(1, 1),
                    **header,
                )
            )
        if signal:
            signals.append(signal)
    return code


@settings(max_examples=60, deadline=None)
@given(random_programs())
def test_timing_obeys_queues_tokens_and_the_port(code):
    t = timeline(code, num_tiles=4, ddr_size=1 << 20)
    n = len(code)
    for i, ins in enumerate(code):
        c, _ = instruction_cost(ins, T)
        busy = t.end[i] - t.start[i]
        assert busy >= c.cycles  # never faster than mrvl.cost; slower only waiting on the port
        earlier = [j for j in range(i) if t.queue[j] == t.queue[i]]
        if earlier:
            assert t.start[i] >= t.end[earlier[-1]]
        for token in ins.waits:
            assert all(t.start[i] >= t.end[j] for j in range(i) if code[j].signal == token)
        # it starts as soon as those allow, unless it waits for the port
        ready = max([t.end[earlier[-1]]] if earlier else [0])
        for token in ins.waits:
            ready = max([ready] + [t.end[j] for j in range(i) if code[j].signal == token])
        if not t.ddr_read[i] + t.ddr_write[i]:
            assert t.start[i] == ready and busy == c.cycles
        else:
            assert t.start[i] >= ready
    # the port: each transfer's bursts move after its set-up, within [port_first, port_last),
    # and in any span of cycles the port moves no more cycles' worth than the span is long
    moving = [i for i in range(n) if t.ddr_read[i] + t.ddr_write[i]]
    needs = {i: cost.ddr_port_cycles(T, t.ddr_read[i] + t.ddr_write[i]) for i in moving}
    for i in moving:
        assert t.port_first[i] == t.start[i] + T.dma_setup_cycles
        assert t.port_last[i] - t.port_first[i] >= needs[i] and t.port_last[i] <= t.end[i]
    edges = sorted({int(t.port_first[i]) for i in moving} | {int(t.port_last[i]) for i in moving})
    for a, b in itertools.combinations(edges, 2):
        inside = [i for i in moving if a <= t.port_first[i] and t.port_last[i] <= b]
        assert sum(needs[i] for i in inside) <= b - a
    assert t.total_cycles == t.end.max()
