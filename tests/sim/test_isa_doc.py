"""docs/isa.md must carry the current tables of mrvl.isa and the target files.

The tables in the document are the output of this module; after changing isa.py or a target,
run `python tests/sim/test_isa_doc.py` and paste the tables it prints.
"""

from __future__ import annotations

from pathlib import Path

from mrvl.isa import (
    OPCODES,
    Activation,
    BinaryMode,
    DType,
    MemSpace,
    OpcodeSpec,
    PoolMode,
    ReduceMode,
)
from mrvl.target import available_targets, get_target

ISA_DOC = Path(__file__).resolve().parents[2] / "docs" / "isa.md"


def field_table(spec: OpcodeSpec) -> str:
    words = sum(f.length for f in spec.fields)
    rows = [f"Opcode `{spec.opcode:#04x}`, engine `{spec.engine}`, {words} field words.", ""]
    if not spec.fields:
        return rows[0]
    rows += ["| field | kind | legal range | meaning |", "| --- | --- | --- | --- |"]
    for f in spec.fields:
        legal = "; ".join(f"`{rule}`" for rule in f.legal) or (
            "an enumeration value" if f.enum else "any"
        )
        rows.append(f"| `{f.name}` | {f.kind} | {legal} | {f.doc} |")
    return "\n".join(rows)


def enum_table() -> str:
    rows = ["| enumeration | values |", "| --- | --- |"]
    for kind in (MemSpace, DType, Activation, PoolMode, ReduceMode, BinaryMode):
        rows.append(
            f"| `{kind.__name__}` | " + ", ".join(f"{m.name} = {m.value}" for m in kind) + " |"
        )
    return "\n".join(rows)


def target_table() -> str:
    targets = [get_target(name) for name in available_targets()]
    rows = [
        "| | " + " | ".join(f"`{t.name}`" for t in targets) + " |",
        "| --- |" + " --- |" * len(targets),
    ]
    for field in (
        "max_tiles",
        "ocm_bytes_per_tile",
        "act_table_bytes_per_tile",
        "ddr_bytes",
        "clock_mhz",
        "fp16_macs_per_cycle_per_tile",
        "int8_macs_per_cycle_per_tile",
        "vector_elems_per_cycle_per_tile",
        "mac_setup_cycles",
        "vector_setup_cycles",
        "dma_bytes_per_cycle",
        "dma_setup_cycles",
        "ddr_bytes_per_cycle",
        "ddr_burst_bytes",
        "ddr_alignment",
        "ocm_alignment",
    ):
        rows.append(f"| {field} | " + " | ".join(str(getattr(t, field)) for t in targets) + " |")
    return "\n".join(rows)


def tables() -> list[str]:
    return [target_table(), enum_table(), *(field_table(spec) for spec in OPCODES)]


def test_isa_doc_has_current_tables():
    text = ISA_DOC.read_text()
    stale = [table.splitlines()[0] for table in tables() if table not in text]
    assert not stale, f"docs/isa.md is out of date for: {stale}; regenerate with python {__file__}"


def test_isa_doc_describes_every_opcode():
    text = ISA_DOC.read_text()
    for spec in OPCODES:
        assert f"### `{spec.name}`" in text


if __name__ == "__main__":
    print("\n\n".join(tables()))
