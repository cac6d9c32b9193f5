"""Partition a Relax module into MLIP regions (functions with `Codegen="mrvl"`).

`partition_for_mrvl` fuses the `mrvl.*` patterns (`patterns.py`, each with its check in
`pattern_checks.py`) into composite functions, merges neighbouring ones into regions, names
the regions, and applies the user's `deny_nodes` / `deny_ops` and `require_mac_layer`.

While it runs, every check that rejects a match records why, keyed by the ONNX node it blames
(from the span `mrvl.from_onnx` put on each call). The reasons of the nodes left on the CPU
are stored on the result as the module attribute `mrvl.partition_reasons` (node name →
reason), which `mrvl.partition_report` reads.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx
import tvm
from tvm import relax

from .frontend import fold_constants, node_name_of, onnx_nodes_of
from .pattern_checks import MAX_BATCH, Collector, bound_values, collecting, users_of
from .patterns import CODEGEN, LAYER_OPS, mrvl_patterns
from .placement import CPU, node_targets
from .qdq import quantized_constants
from .qdq_moves import drop_move_qdq_pairs
from .qdq_unit_axis import drop_unit_axis
from .target import TILE_COUNTS, Target, get_target, valid_tile_count

__all__ = [
    "LAYER_OPS",
    "MAC_COMPOSITES",
    "MAX_BATCH",
    "REASONS_ATTR",
    "REGION_PREFIX",
    "TILE_COUNTS",
    "partition_for_mrvl",
    "partition_reasons",
    "validate_target_options",
]


REGION_PREFIX = "mrvl_region_"
"""Regions are named mrvl_region_0, _1, ... in the order `main` calls them."""

REASONS_ATTR = "mrvl.partition_reasons"
"""Module attribute: ONNX node name → why that node stayed on the CPU."""

INT8_ATTR = "mrvl.int8_nodes"
"""Module attribute: the ONNX nodes that run in int8 on the MLIP (set only when some do); on a
region, those in it (`mrvl-verify-int8` checks that its fold computes them in int8)."""

MAC_COMPOSITES = ("mrvl.conv2d", "mrvl.conv_transpose", "mrvl.fc")
"""The layers that use the MAC arrays; `require_mac_layer` wants one in every region."""

DENIED_NODE = "denied by user (deny_nodes)"
DENIED_OP = "denied by user (deny_ops)"
NO_MAC_LAYER = "region without conv/fc (require_mac_layer)"
EDGES_ONLY = "a quantize / dequantize with no layer on the MLIP to convert for (runs on the CPU)"
EDGES_ELSEWHERE = (
    "a quantized layer whose dequantize or quantize runs in another region or on the CPU "
    "(it would compute in fp16 on a float tensor)"
)
FORCED_REASONS = (DENIED_NODE, DENIED_OP, NO_MAC_LAYER, EDGES_ONLY, EDGES_ELSEWHERE)

EDGE_COMPOSITES = ("mrvl.quantize", "mrvl.dequantize")
"""The edges of int8 code: a region of nothing else would only round-trip a tensor."""


def validate_target_options(mcpu: str, num_tiles: int) -> Target:
    """Check an (mcpu, num_tiles) pair and return the target; ValueError with the reason."""
    target = get_target(mcpu)  # UnknownTargetError (a ValueError) lists the known ones
    if isinstance(num_tiles, bool) or not isinstance(num_tiles, int):
        raise ValueError(f"num_tiles must be an int, got {num_tiles!r}")
    if num_tiles not in TILE_COUNTS:
        raise ValueError(f"num_tiles must be one of {TILE_COUNTS}, got {num_tiles}")
    if not valid_tile_count(target, num_tiles):
        raise ValueError(
            f"num_tiles={num_tiles} exceeds the {target.max_tiles} tiles of mcpu '{mcpu}'"
        )
    return target


def partition_for_mrvl(
    mod: tvm.IRModule,
    *,
    mcpu: str = "cn10ka",
    num_tiles: int = 8,
    deny_nodes: Iterable[str] = (),
    deny_ops: Iterable[str] = (),
    require_mac_layer: bool = False,
) -> tvm.IRModule:
    """Group the MLIP-supported parts of `mod` into region functions for `relax.ext.mrvl`.

    Each region gets `Codegen="mrvl"`, a `global_symbol` `mrvl_region_<i>`, and the attrs
    `mrvl.mcpu` and `mrvl.num_tiles` that the codegen hook compiles it for.

    - `deny_nodes`: ONNX node names, `deny_ops`: ONNX op types ("Conv", "MaxPool") to keep
      on the CPU, each node whole: no layer that contains any call of theirs is formed, so a
      denied Conv's bias add is not offloaded on its own either. `deny_ops` needs the op types
      `mrvl.from_onnx` records on the module.
    - `require_mac_layer`: a region without a conv or fc layer goes back to the CPU (the
      upstream backend's behaviour): its nodes are denied and the module partitioned again,
      until every region has one.

    Why each node stayed on the CPU is stored as the module attribute `mrvl.partition_reasons`.
    """
    validate_target_options(mcpu, num_tiles)
    forced = _denied_nodes(mod, deny_nodes, deny_ops)
    # The patterns want folded constants (TVM's importer leaves reshape(bias), permute_dims(W)
    # on them). A module from mrvl.from_onnx is folded already. A QDQ pair on a chain of
    # moves (a channel shuffle) is dropped where that is exact, so the chain is one copy; a
    # QDQ model's other rank-5 tensors of one batch are computed on their rank-4 views.
    mod = drop_unit_axis(drop_move_qdq_pairs(fold_constants(mod)))
    bound = bound_values(mod)
    op_types = onnx_nodes_of(mod) or {}
    quantized = quantized_constants(mod)
    while True:
        collector = Collector(
            forced,
            bound,
            op_types=op_types,
            users=users_of(bound),
            target=get_target(mcpu),
            num_tiles=num_tiles,
            quantized=quantized,
        )
        with collecting(collector):
            partitioned = _fuse(mod)
        without_mac = _nodes_of_regions_without_mac(partitioned) if require_mac_layer else []
        edges_only = _nodes_of_regions_of_only(partitioned, EDGE_COMPOSITES)
        float_moves, split = _int8_layers_with_edges_elsewhere(partitioned, collector)
        if not without_mac and not edges_only and not split:
            break
        forced = {**forced, **{name: NO_MAC_LAYER for name in without_mac}}
        forced = {**forced, **{name: EDGES_ONLY for name in edges_only}}
        forced = {**forced, **{name: EDGES_ELSEWHERE for name in split}}
    collector.int8_nodes.difference_update(float_moves)

    for index, gvar in enumerate(_regions_in_call_order(partitioned)):
        region = (
            partitioned[gvar]
            .with_attr("global_symbol", f"{REGION_PREFIX}{index}")
            .with_attr("mrvl.mcpu", mcpu)
            .with_attr("mrvl.num_tiles", num_tiles)
        )
        int8_here = sorted(collector.int8_nodes.intersection(_span_names(region)))
        if int8_here:  # what mrvl-verify-int8 checks the region's fold against
            region = region.with_attr(INT8_ATTR, int8_here)
        partitioned[gvar] = region
    # TVM names a merged region after every op in it (hundreds of characters on VGG-19);
    # NormalizeGlobalVar renames each region to its short global_symbol, calls included.
    partitioned = relax.transform.NormalizeGlobalVar()(partitioned)
    targets = node_targets(partitioned)
    reasons = {
        name: reason
        for name, reason in collector.reasons().items()
        if targets.get(name, CPU) == CPU
    }
    partitioned = partitioned.with_attr(REASONS_ATTR, reasons)
    int8 = sorted(n for n in collector.int8_nodes if targets.get(n, CPU) != CPU)
    return partitioned.with_attr(INT8_ATTR, int8) if int8 else partitioned


def int8_nodes(mod: tvm.IRModule) -> frozenset[str]:
    """The ONNX nodes of a partitioned module that run in int8 on the MLIP."""
    if mod.attrs is None or INT8_ATTR not in mod.attrs:
        return frozenset()
    return frozenset(str(n) for n in mod.attrs[INT8_ATTR])


def partition_reasons(mod: tvm.IRModule) -> dict[str, str]:
    """The `mrvl.partition_reasons` of a partitioned module (empty if it has none)."""
    if mod.attrs is None or REASONS_ATTR not in mod.attrs:
        return {}
    return {str(k): str(v) for k, v in mod.attrs[REASONS_ATTR].items()}


def _fuse(mod: tvm.IRModule) -> tvm.IRModule:
    """Fuse the patterns and merge neighbouring layers into regions.

    TVM 0.27's MergeCompositeFunctions rejects a module holding a MatchCast binding (the
    ONNX importer emits one for shapes computed at run time, e.g. Squeeze with run-time
    axes). Such a module gets one region per layer instead: FuseOpsByPattern's own
    codegen annotation.
    """
    patterns = mrvl_patterns()
    if _has_match_cast(mod):
        return relax.transform.FuseOpsByPattern(
            patterns, bind_constants=True, annotate_codegen=True
        )(mod)
    seq = tvm.transform.Sequential(
        [
            relax.transform.FuseOpsByPattern(patterns, bind_constants=True, annotate_codegen=False),
            relax.transform.MergeCompositeFunctions(),
        ]
    )
    return seq(mod)


def _has_match_cast(mod: tvm.IRModule) -> bool:
    return any(
        isinstance(binding, relax.MatchCast)
        for func in mod.functions.values()
        if isinstance(func, relax.Function)
        for block in func.body.blocks
        for binding in block.bindings
    )


def _names(values: Iterable[str] | str, what: str) -> list[str]:
    if isinstance(values, str):
        return [values]
    names = list(values)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"{what} must be strings, got {names!r}")
    return names


def _denied_nodes(mod: tvm.IRModule, deny_nodes, deny_ops) -> dict[str, str]:
    """Node name → reason for every node the user keeps on the CPU."""
    nodes, ops = _names(deny_nodes, "deny_nodes"), _names(deny_ops, "deny_ops")
    if not nodes and not ops:
        return {}
    op_types = onnx_nodes_of(mod)
    known = set(op_types) if op_types is not None else set(_span_names(mod))
    unknown = [n for n in nodes if n not in known]
    if unknown:
        raise ValueError(f"deny_nodes: no ONNX node named {', '.join(map(repr, unknown))}")
    forced = dict.fromkeys(nodes, DENIED_NODE)
    if ops:
        if op_types is None:
            raise ValueError(
                "deny_ops needs the op type of every node: import the model with mrvl.from_onnx"
            )
        present = set(op_types.values())
        bad = [op for op in ops if op not in present and not onnx.defs.has(op)]
        if bad:
            raise ValueError(f"deny_ops: {', '.join(map(repr, bad))} is not an ONNX operator")
        for name, op_type in op_types.items():
            if op_type in ops:
                forced.setdefault(name, DENIED_OP)
    return forced


def _span_names(mod_or_func: tvm.IRModule | relax.Function) -> list[str]:
    """The ONNX node names on the calls of a module or function, in visiting order."""
    names: list[str] = []

    def visit(expr) -> None:
        if isinstance(expr, relax.Call) and (name := node_name_of(expr)):
            names.append(name)

    if isinstance(mod_or_func, tvm.IRModule):
        funcs = list(mod_or_func.functions.values())
    else:
        funcs = [mod_or_func]
    for func in funcs:
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return names


def _is_region(func) -> bool:
    return (
        isinstance(func, relax.Function)
        and func.attrs is not None
        and func.attrs.get("Codegen") == CODEGEN
    )


def _regions_in_call_order(mod: tvm.IRModule) -> list[tvm.ir.GlobalVar]:
    regions = {gv for gv, func in mod.functions_items() if _is_region(func)}
    ordered: list[tvm.ir.GlobalVar] = []

    def visit(expr) -> None:
        if isinstance(expr, relax.Call) and expr.op in regions and expr.op not in ordered:
            ordered.append(expr.op)

    relax.analysis.post_order_visit(mod["main"], visit)
    return ordered + sorted(regions - set(ordered), key=lambda gv: gv.name_hint)


def _int8_layers_with_edges_elsewhere(
    mod: tvm.IRModule, collector: Collector
) -> tuple[list[str], list[str]]:
    """The int8 layers placed apart from a dequantize or quantize of theirs (a tensor the
    partition judged int8 crosses a region's edge in float): (the moves, the others).

    A move copies the floats exactly, so it stays where it is, reported in fp16; any other
    layer would compute in fp16 in place of int8, so it goes to the CPU with its edges."""
    targets = node_targets(mod)
    moves, others = [], []
    for name, (is_move, edges) in collector.int8_edges.items():
        here = targets.get(name, CPU)
        if here == CPU or all(targets.get(e, CPU) == here for e in edges):
            continue
        (moves if is_move else others).append(name)
    return moves, others


def _composites(region: relax.Function) -> list[relax.Function]:
    return [
        b.value
        for block in region.body.blocks
        for b in block.bindings
        if isinstance(b.value, relax.Function)
    ]


def _nodes_of_regions_of_only(mod: tvm.IRModule, kinds: Iterable[str]) -> list[str]:
    """The ONNX nodes of the regions whose every layer is of `kinds`."""
    names: list[str] = []
    for _, func in mod.functions_items():
        if not _is_region(func):
            continue
        found = {str(c.attrs["Composite"]) for c in _composites(func) if c.attrs is not None}
        if found and found <= set(kinds):
            names += _span_names(func)
    return list(dict.fromkeys(names))


def _nodes_of_regions_without_mac(mod: tvm.IRModule) -> list[str]:
    names: list[str] = []
    for _, func in mod.functions_items():
        if not _is_region(func):
            continue
        kinds = {str(c.attrs["Composite"]) for c in _composites(func) if c.attrs is not None}
        if kinds.isdisjoint(MAC_COMPOSITES):
            names += _span_names(func)
    return list(dict.fromkeys(names))
