"""compile_region: one Relax region -> `mrvl` -> `sched` -> `mlip` -> model binary + JSONs.

This is what `relax.ext.mrvl` calls for each region, and what `mrvlc` runs stage by stage.
Each pass is verified after it runs, and can be dumped (`dump_dir`) for debugging.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from mrvl import binary, json_emitter, printing
from mrvl.assembler import assemble
from mrvl.dialects import mrvl_context
from mrvl.errors import CompileError, InternalCompilerError, MrvlError, layer_boundary
from mrvl.isa import Program
from mrvl.passes import (
    ALL_PASSES,
    DEFAULT_PIPELINE,
    GRAPH_PIPELINE,
    ISA_PIPELINE,
    SCHED_PIPELINE,
)
from mrvl.passes.graph.verify_int8 import INT8_NODES_ATTR, int8_nodes_attribute
from mrvl.relax_import import import_region
from mrvl.target import region_target


@dataclass
class CompiledRegion:
    """A compiled region: what the runtime module embeds and what the driver writes out."""

    symbol: str
    binary: bytes
    nodes_json: dict
    consts_json: dict | None
    """The Constants-JSON (with every weight in base64), only when asked for
    (`constants_json=True`): the binary holds the constants already."""
    program: Program
    stages: dict[str, str] = field(default_factory=dict, repr=False)
    """Textual IR when asked for: "import" (as imported), "mrvl" (after the graph passes),
    "sched" and "mlip" (after the last pass of those stages)."""


def print_ir(module: ModuleOp, debuginfo: bool = True, elide_larger_than: int | None = None) -> str:
    """The module as text; constants above `elide_larger_than` elements elided (see printing)."""
    return printing.print_ir(module, debuginfo, elide_larger_than)


def run_pipeline(
    module: ModuleOp,
    passes: Sequence[str] = DEFAULT_PIPELINE,
    *,
    after_pass: Callable[[int, str, ModuleOp], None] | None = None,
    stop_after: str | None = None,
    verify_each_pass: bool = False,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> ModuleOp:
    """Run named passes in order; `after_pass` sees every result.

    `options` gives a pass its options by pipeline name (Python names, as the pass's fields:
    `{"convert-mrvl-to-sched": {"mcpu": "cn10ka", "num_tiles": 8}}`). `sched-plan-tiling`
    plans for the same target: it takes `convert-mrvl-to-sched`'s options unless given its own.

    The module is verified once at the end; `verify_each_pass` verifies after every pass
    instead (what the tests and `--dump-dir` do: it finds the pass that broke the IR, at
    about a third more compile time on a ResNet-50).
    """
    ctx = mrvl_context()
    options = dict(options or {})
    if "convert-mrvl-to-sched" in options:
        options.setdefault("sched-plan-tiling", options["convert-mrvl-to-sched"])
    name = "the pipeline"
    try:
        for index, name in enumerate(passes):
            ALL_PASSES[name]()(**options.get(name, {})).apply(ctx, module)
            if verify_each_pass:
                module.verify()
            if after_pass is not None:
                after_pass(index, name, module)
            if name == stop_after:
                break
        if not verify_each_pass:
            name = "the pipeline"
            module.verify()
    except MrvlError:
        raise
    except (VerifyException, DiagnosticException) as err:
        raise CompileError(f"after {name}: the IR does not verify: {err}") from err
    except Exception as err:
        raise InternalCompilerError(
            f"internal error in {name}: {type(err).__name__}: {err}"
        ) from err
    return module


def _region_options(func, mcpu: str | None, num_tiles: int | None) -> tuple[str, int]:
    return region_target(func.attrs, mcpu, num_tiles)


GC_GEN0_THRESHOLD = 50_000
"""The cyclic collector's first threshold while a region compiles. The pipeline allocates
millions of small, short-lived objects (xDSL ops and attributes, freed by reference
counting), and at Python's default of 700 the collector took 18 % of ResNet-50's compile
scanning them; collections still run, 70 times less often."""


@contextmanager
def _fewer_collections():
    thresholds = gc.get_threshold()
    gc.set_threshold(max(GC_GEN0_THRESHOLD, thresholds[0]), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _has_qdq(module: ModuleOp) -> bool:
    """Whether a region holds int8 code (quantize / dequantize, or layers with int8 weights)."""
    from mrvl.dialects import mrvl

    return any(
        isinstance(op, mrvl.QuantizeOp | mrvl.DequantizeOp)
        or getattr(op, "weight_scales", None) is not None
        for op in module.walk()
    )


def compile_region(
    func,
    *,
    mcpu: str | None = None,
    num_tiles: int | None = None,
    constant_names=None,
    dump_dir: str | Path | None = None,
    keep_stages: bool = False,
    verify_each_pass: bool = False,
    elide_constants_larger_than: int | None = None,
    constants_json: bool = False,
    json_dir: str | Path | None = None,
    wb_pin_ocm: bool = False,
    cascade: bool = False,
) -> CompiledRegion:
    """Compile one Relax region function (`Codegen="mrvl"`) to an MLIP binary.

    `mcpu`/`num_tiles` default to the region's `mrvl.mcpu`/`mrvl.num_tiles` attributes (set by
    `partition_for_mrvl`). With `dump_dir`, the IR after import and after every pass is written
    there, one numbered file per step. `elide_constants_larger_than` elides the large constants
    of the dumps and `stages` (for reading; elided text does not parse back). With `json_dir`,
    the Nodes-JSON and Constants-JSON files are written there (the weights streamed, never
    held as base64 text); with `constants_json`, the Constants-JSON is also returned in memory.
    `wb_pin_ocm` (upstream Marvell's option) keeps weights and biases in OCM when they fit.
    `cascade` keeps an intermediate tensor in OCM between the layers of a tile when it fits
    (`sched-cascade`). It is off by default: it saves DDR bytes, but the OCM it reserves
    costs the priced tiling more cycles than the bytes save (docs/architecture.md).
    """
    mcpu, num_tiles = _region_options(func, mcpu, num_tiles)
    with layer_boundary("importing a region"):
        module = import_region(func, constant_names)
    int8_nodes = func.attrs.get(INT8_NODES_ATTR) if func.attrs is not None else None
    if int8_nodes:  # what mrvl-verify-int8 checks the fold against
        module.attributes[INT8_NODES_ATTR] = int8_nodes_attribute(str(n) for n in int8_nodes)
    symbol = next(iter(module.body.block.ops)).sym_name.data

    def print_ir(m: ModuleOp) -> str:
        return printing.print_ir(m, elide_larger_than=elide_constants_larger_than)

    stages: dict[str, str] = {}
    dump = Path(dump_dir) if dump_dir is not None else None
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
        (dump / f"{symbol}.00-import.mlir").write_text(print_ir(module))
    if keep_stages:
        stages["import"] = print_ir(module)
    stage_ends = {GRAPH_PIPELINE[-1]: "mrvl", SCHED_PIPELINE[-1]: "sched", ISA_PIPELINE[-1]: "mlip"}

    def after_pass(index: int, name: str, m: ModuleOp) -> None:
        if dump is not None:
            (dump / f"{symbol}.{index + 1:02d}-{name}.mlir").write_text(print_ir(m))
        if keep_stages and name in stage_ends:
            stages[stage_ends[name]] = print_ir(m)

    # the JSON describes the layers as the MLIP runs them: int8 ones too (mrvl-fold-qdq first)
    # (and mrvl-verify-int8 checks the fold)
    folding, rest = DEFAULT_PIPELINE[:2], DEFAULT_PIPELINE[2:]
    if _has_qdq(module) or int8_nodes:
        run_pipeline(module, folding, after_pass=after_pass, verify_each_pass=dump is not None)
    else:  # nothing to fold (and no second verification of a float region)
        for index, name in enumerate(folding):
            after_pass(index, name, module)
    nodes_json, consts, arrays = json_emitter.emit_json_parts(module, symbol)
    if json_dir is not None:
        json_emitter.write_region_json(json_dir, symbol, nodes_json, consts, arrays)
    consts_json = json_emitter.with_data(consts, arrays) if constants_json else None
    del arrays  # views of the f32 weights, which mrvl-cast-fp16 replaces

    with _fewer_collections():
        run_pipeline(
            module,
            rest,
            after_pass=lambda index, name, m: after_pass(index + len(folding), name, m),
            verify_each_pass=verify_each_pass or dump is not None,
            options={
                "convert-mrvl-to-sched": {
                    "mcpu": mcpu,
                    "num_tiles": num_tiles,
                    "wb_pin_ocm": bool(wb_pin_ocm),
                    "cascade": bool(cascade),
                }
            },
        )
    with layer_boundary(f"assembling region {symbol}"):
        program = assemble(module)
        encoded = binary.encode(program, legal=True)
    return CompiledRegion(
        symbol=symbol,
        binary=encoded,
        nodes_json=nodes_json,
        consts_json=consts_json,
        program=program,
        stages=stages,
    )
