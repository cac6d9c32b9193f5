"""A bounded mutation-fuzz run over a compiled MNIST binary (tests/fuzz/mutate.py): the
mutants the issue found by hand, then random one- and two-field boundary mutants, each on both
engines in a forked child with an address-space limit and a timeout. The property: one clean
error line on both, or the same bytes on both, in memory within 2x the unmutated program's.
The long campaign is scripts/mutate_binaries.py."""

from __future__ import annotations

import functools
import random

import mutate
import pytest

from mrvl import binary
from mrvl.models.mnist import make_mnist_model

pytestmark = pytest.mark.filterwarnings("ignore")


@functools.cache
def seed() -> tuple[bytes, list, dict]:
    ((_, data),) = mutate.compiled_regions(make_mnist_model(seed=0), 1)
    inputs = mutate.program_inputs(data)
    mutate.warm(data)
    return data, inputs, mutate.baseline_growth(data, inputs)


def _first(program, opcode: str) -> int:
    return next(i for i, ins in enumerate(program.code) if ins.opcode == opcode)


def _by_hand() -> list[tuple[str, list[tuple[str, str, object]]]]:
    """(name, [(opcode, field, value)]) of the issue's mutants."""
    big = 2**31 - 1
    avg = [("pool", "mode", 1), ("pool", "count_include_pad", 1)]
    return [
        ("conv pad [1, -1]", [("conv", "pad", (1, -1))]),
        ("conv pad [-1, -1]", [("conv", "pad", (-1, -1))]),
        ("conv pad 2**31-1", [("conv", "pad", (big, big))]),
        ("conv stride 2**31-1", [("conv", "stride", (big, big))]),
        ("conv left pad 2e7", [("conv", "pad", (0, 2 * 10**7))]),
        ("conv column stride 1e6", [("conv", "stride", (1, 10**6))]),
        ("avg pool in_hw [1, 16]", [*avg, ("pool", "in_hw", (1, 16))]),
        ("avg pool in_hw [16, 1]", [*avg, ("pool", "in_hw", (16, 1))]),
        ("avg pool pad_end -1", [*avg, ("pool", "pad_end", (-1, -1))]),
        ("max pool kernel 2**31-1", [("pool", "kernel", (big, big))]),
        ("pool kernel 40000", [("pool", "kernel", (40_000, 40_000))]),
        ("pool kernel and pad 40000", [("pool", "kernel", (40_000,) * 2), ("pool", "pad", (39_999,) * 2)]),
    ]  # fmt: skip


@pytest.mark.parametrize("name, changes", _by_hand(), ids=[n for n, _ in _by_hand()])
def test_the_issues_mutants_are_safe(name, changes):
    data, inputs, baseline = seed()
    program = binary.decode(data)
    mutations = []
    for opcode, field, value in changes:
        index = _first(program, opcode)
        if isinstance(value, tuple):
            mutations += [mutate.Mutation(index, field, e, v) for e, v in enumerate(value)]
        else:
            mutations.append(mutate.Mutation(index, field, None, value))
    mutant = binary.encode(mutate.apply(program, mutations))
    verdict = mutate.judge(name, mutate.judged_runs(mutant, inputs, 30.0), baseline)
    assert verdict.problem is None, verdict.problem


def test_random_mutants_are_safe():
    data, inputs, baseline = seed()
    rng = random.Random(19)
    problems = []
    for description, mutant in mutate.mutants(data, rng, 24):
        verdict = mutate.judge(description, mutate.judged_runs(mutant, inputs, 30.0), baseline)
        if verdict.problem is not None:
            problems.append(f"{description}: {verdict.problem}")
    assert not problems
