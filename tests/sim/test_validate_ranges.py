"""The legal ranges of the ISA table (`isa.FieldSpec.legal`), as the validator, the encoder and
the `mlip` verifier read them (issue 19): what each engine used to get wrong is now refused
before any engine runs, in memory that does not grow with a field's value."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from sim_builders import Staging, conv, layer_program, pool
from xdsl.utils.exceptions import VerifyException

from mrvl import binary
from mrvl.dialects.mlip import INSTRUCTION_OPS
from mrvl.isa import OPCODES, PoolMode
from mrvl.isa_rules import broken_rule, legal_rules
from mrvl.sim import SimulatorError, validate


def _conv_program(**fields):
    staging = Staging()
    x_addr = staging.add(np.ones((1, 4, 8, 2), np.float16))
    w_addr = staging.add(np.ones((2, 3, 3, 2), np.float16))
    out_addr = staging.reserve(2 * 4 * 8 * 2)
    ins = conv(
        x_addr, (1, 4, 8, 2), out_addr, (1, 4, 8, 2), w_addr, kernel=(3, 3), pad=(1, 1), loc=0
    )
    ins.fields.update(fields)
    return layer_program(staging, [ins], out_addr, (1, 4, 8, 2), srcmap=["/c/Conv"])


def _pool_program(**fields):
    staging = Staging()
    x_addr = staging.add(np.ones((1, 4, 4, 3), np.float16))
    out_addr = staging.reserve(2 * 2 * 2 * 3)
    ins = pool(
        x_addr, (1, 4, 4, 3), out_addr, (1, 2, 2, 3), kernel=(3, 3), mode=PoolMode.AVG,
        in_hw=(4, 4), stride=(2, 2), pad=(1, 1), pad_end=(0, 0), count_include_pad=1,
    )  # fmt: skip
    ins.fields.update(fields)
    return layer_program(staging, [ins], out_addr, (1, 2, 2, 3))


def test_the_unmutated_programs_are_valid():
    validate(_conv_program())
    validate(_pool_program())


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"pad": (1, -1)}, r"pad=\[1, -1\] breaks `pad\[d\] >= 0` \(d = 1\)"),
        ({"pad": (-1, -1)}, r"pad=\[-1, -1\] breaks `pad\[d\] >= 0` \(d = 0\)"),
        ({"pad": (1, 2 * 10**7)}, r"pad=\[1, 20000000\] breaks"),
        ({"stride": (1, 10**6)}, r"out_shape=\[1, 4, 8, 2\] breaks `\(out_shape\[2\] - 1\)"),
        ({"stride": (2**31 - 1, 1)}, None),  # rows: every tap outside the window, still safe
        ({"dilation": (1, 0)}, r"dilation=\[1, 0\] breaks `dilation\[d\] >= 1` \(d = 1\)"),
        ({"groups": 0}, r"groups=0 breaks `groups >= 1`"),
    ],
)
def test_conv_fields_outside_their_range_are_refused(fields, message):
    program = _conv_program(**fields)
    if message is None:
        validate(program)
        return
    with pytest.raises(SimulatorError, match=r"instruction 1 \(conv, ONNX node '/c/Conv'\): "):
        validate(program)
    with pytest.raises(SimulatorError, match=message):
        validate(program)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"in_hw": (1, 16)}, r"in_hw=\[1, 16\] breaks `in_hw\[1\] == in_shape\[2\]`"),
        ({"in_hw": (16, 1)}, r"in_hw=\[16, 1\] breaks `in_hw\[1\] == in_shape\[2\]`"),
        ({"pad_end": (-1, 0)}, r"pad_end=\[-1, 0\] breaks `0 <= pad_end\[d\] < kernel\[d\]`"),
        ({"pad": (3, 1)}, r"pad=\[3, 1\] breaks `0 <= pad\[d\] < kernel\[d\]` \(d = 0\)"),
        ({"kernel": (2**31 - 1, 2**31 - 1)}, r"breaks `kernel\[d\] <= in_hw\[d\] \+ pad\[d\] \+ pad_end\[d\]`"),
        ({"kernel": (40_000, 40_000), "pad": (39_999, 39_999)}, r"breaks"),
        ({"row0": 2}, r"in_hw=\[4, 4\] breaks `row0 <= max\(0, orow0 \* stride\[0\] - pad\[0\]\)`"),
    ],
)
def test_pool_fields_outside_their_range_are_refused(fields, message):
    with pytest.raises(SimulatorError, match=message):
        validate(_pool_program(**fields))


def test_validation_memory_does_not_grow_with_a_kernel():
    """pool_valid_taps used to allocate by the kernel (16 GiB for 2**31 - 1) before it was
    bounded; now a huge kernel that the ranges let through costs nothing more."""
    program = _pool_program(kernel=(3, 3))
    tracemalloc.start()
    validate(program)
    small = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    tracemalloc.start()
    with pytest.raises(SimulatorError):
        validate(_pool_program(kernel=(2**31 - 1, 2**31 - 1), pad=(2**31 - 2, 2**31 - 2)))
    big = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert big < small + (1 << 20)


def test_the_encoder_and_the_mlip_verifier_read_the_same_ranges():
    program = _conv_program(pad=(1, -1))
    binary.encode(program)  # the format carries any i32: only `legal` refuses
    with pytest.raises(binary.BinaryFormatError, match=r"pad=\[1, -1\] breaks `pad\[d\] >= 0`"):
        binary.encode(program, legal=True)
    fields = program.code[1].fields
    op = INSTRUCTION_OPS["conv"].build(tile=0, fields=fields)
    with pytest.raises(VerifyException, match=r"mlip.conv: pad=\[1, -1\] breaks"):
        op.verify()
    assert broken_rule(OPCODES[3], fields) == broken_rule(OPCODES[3], fields, {"ocm": 1})


def test_every_legal_range_is_in_the_isa_doc():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "isa.md").read_text()
    for spec in OPCODES:
        for rule in legal_rules(spec):
            assert f"`{rule.text}`" in text, (spec.name, rule.text)


def test_a_rule_that_divides_by_a_field_runs_after_that_field_is_bounded():
    conv_rules = [r.text for r in legal_rules(next(s for s in OPCODES if s.name == "conv"))]
    assert conv_rules.index("groups >= 1") < conv_rules.index("in_shape[3] % groups == 0")
    assert conv_rules.index("groups >= 1") < conv_rules.index("oc_total % groups == 0")


def test_an_unnested_destination_box_is_bounded_before_its_offsets_are_listed():
    from mrvl.sim.validate import MAX_UNNESTED_ELEMENTS, overlapping

    assert not overlapping((2, 8), (1, 2), 1)  # interleaved, yet nested once sorted
    assert overlapping((3, 4), (3, 2), 2)
    assert not overlapping((1, 1, 3, 5), (0, 0, 5, 3), 1)  # unnested: listed, and apart
    with pytest.raises(Exception, match="unnested strides"):
        overlapping((1, 1, 1 << 11, 1 << 11), (0, 0, (1 << 11) + 1, 3), 1)
    assert (1 << 11) ** 2 > MAX_UNNESTED_ELEMENTS
