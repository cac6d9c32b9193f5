"""Every layer has every stage: the checklist of `docs/architecture.md`'s "How to add a layer".

A layer passes through a fixed list of stages (pattern and check, import, `mrvl` op, Nodes-JSON,
lowering to `sched`, instruction selection, validation, the engines, the cycle model and the
ISA document). Each stage keeps a table keyed by op class or opcode; these tests walk the
dialects and the ISA table and name any op and stage without an entry, so that a new layer
that misses a stage fails here instead of at compile or run time.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from mrvl.dialects import mrvl, sched
from mrvl.isa import OPCODES
from mrvl.passes.common import matched_op_types

ROOT = Path(__file__).resolve().parents[2]


def _covered(op_class, pattern_classes) -> list[str]:
    """The patterns among `pattern_classes` that match `op_class` (by subclassing)."""
    return [
        p.__name__
        for p in pattern_classes
        if any(issubclass(op_class, t) for t in matched_op_types(p))
    ]


MRVL_OPS = [op for op in mrvl.Mrvl.operations]
SCHED_OPS = [op for op in sched.Sched.operations if op is not sched.ProgramOp]
OPCODE_NAMES = [spec.name for spec in OPCODES]


@pytest.mark.parametrize("op_class", MRVL_OPS, ids=lambda c: c.name)
def test_every_mrvl_op_has_one_lowering_to_sched(op_class):
    from mrvl.passes.sched.lowering import LAYER_LOWERINGS

    patterns = _covered(op_class, LAYER_LOWERINGS)
    assert len(patterns) == 1, (
        f"{op_class.name}: lowering to sched (passes/sched/lowering/) has "
        f"{patterns or 'no pattern'}; it needs exactly one"
    )


@pytest.mark.parametrize("op_class", MRVL_OPS, ids=lambda c: c.name)
def test_every_mrvl_op_has_a_nodes_json_form(op_class):
    from mrvl.json_emitter import NODE_BUILDERS

    if op_class is mrvl.ConstantOp:  # an entry of the Constants-JSON, not a node
        return
    assert op_class in NODE_BUILDERS, (
        f"{op_class.name}: no Nodes-JSON builder (mrvl_ir/json_emitter.py NODE_BUILDERS)"
    )


@pytest.mark.parametrize("op_class", SCHED_OPS, ids=lambda c: c.name)
def test_every_sched_op_selects_an_instruction_or_is_a_buffer(op_class):
    from mrvl.passes.isa.convert_sched_to_mlip import INSTRUCTION_SELECTIONS, NO_INSTRUCTION

    patterns = _covered(op_class, INSTRUCTION_SELECTIONS)
    if issubclass(op_class, NO_INSTRUCTION):
        assert not patterns, f"{op_class.name} is a buffer op but selects {patterns}"
        return
    assert len(patterns) == 1, (
        f"{op_class.name}: instruction selection (passes/isa/convert_sched_to_mlip.py) has "
        f"{patterns or 'no pattern'}; it needs exactly one"
    )


def test_every_selection_names_an_opcode_of_the_isa():
    from mrvl.passes.isa.convert_sched_to_mlip import INSTRUCTION_SELECTIONS

    for pattern in INSTRUCTION_SELECTIONS:
        assert pattern.opcode in OPCODE_NAMES, f"{pattern.__name__}: opcode {pattern.opcode!r}"


NOT_YET_SELECTED: frozenset[str] = frozenset()
"""Instructions the machine (ISA table, both engines, validation, cycle model) has and the
compiler does not select yet (none: `requant` is selected for an int8 concat's inputs of
another scale since int8 concat). Strict, so an opcode that becomes selected fails here
until it is taken from this set."""


@pytest.mark.parametrize(
    "opcode",
    [
        pytest.param(
            name,
            marks=pytest.mark.xfail(
                strict=True, reason="an int8 instruction the compiler does not select yet"
            ),
        )
        if name in NOT_YET_SELECTED
        else name
        for name in OPCODE_NAMES
    ],
)
def test_every_opcode_is_selected_from_sched(opcode):
    from mrvl.passes.isa.convert_sched_to_mlip import INSTRUCTION_SELECTIONS

    if opcode == "end":  # the pass ends every program with it
        return
    assert any(p.opcode == opcode for p in INSTRUCTION_SELECTIONS), (
        f"opcode {opcode}: no sched op selects it (passes/isa/convert_sched_to_mlip.py)"
    )


@pytest.mark.parametrize("opcode", OPCODE_NAMES)
def test_every_opcode_has_a_reference_kernel_and_a_validation(opcode):
    reference = importlib.import_module("mrvl.sim.engines.reference")
    validate = importlib.import_module("mrvl.sim.validate")  # the module, not mrvl.sim.validate()

    assert opcode in reference.KERNELS, f"opcode {opcode}: no reference kernel (@implements)"
    assert opcode in validate._CHECKS, f"opcode {opcode}: no validation (@checks)"


@pytest.mark.parametrize("opcode", OPCODE_NAMES)
def test_every_opcode_has_a_numba_kernel_operands_and_a_cycle_cost(opcode):
    """The Numba engine, the operand rules (what an instruction reads and writes, for the
    cycle model's hazards and the weight cache) and the cycle cost. Each module also asserts
    its own coverage at import; this names the stage without importing order mattering."""
    numba_dispatch = importlib.import_module("mrvl.sim.engines.numba.dispatch")
    operands = importlib.import_module("mrvl.sim.operands")
    cycles = importlib.import_module("mrvl.sim.cycles")

    assert opcode in numba_dispatch.KERNELS, f"opcode {opcode}: no Numba kernel (@implements)"
    assert opcode in operands.OPERANDS, f"opcode {opcode}: no operand rule (sim/operands.py)"
    assert opcode in cycles.COSTS, f"opcode {opcode}: no cycle cost (sim/cycles.py @costs)"


@pytest.mark.parametrize("opcode", OPCODE_NAMES)
def test_every_opcode_is_specified_in_the_isa_document(opcode):
    text = (ROOT / "docs" / "isa.md").read_text()
    assert re.search(rf"^### `{re.escape(opcode)}`", text, re.M), (
        f"opcode {opcode}: no section '### `{opcode}`' in docs/isa.md"
    )


def test_every_composite_pattern_has_an_importer():
    """Each partition pattern (`mrvl_ir/patterns.py`) names a composite that the Relax
    importer turns into `mrvl` ops, and the importer handles no composite nothing makes."""
    from mrvl.patterns import _pattern_table
    from mrvl.relax_import import _LAYERS

    names = {entry[0] for entry in _pattern_table()}
    assert sorted(names - set(_LAYERS)) == [], "composites without an importer"
    assert sorted(set(_LAYERS) - names) == [], "importers of composites no pattern makes"
