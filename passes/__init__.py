"""The mrvl passes, one per file, grouped by level: graph (`mrvl`), sched, isa (`mlip`).

`ALL_PASSES` maps each pipeline name to a loader, so `mrvl-opt` imports only what it runs.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def _cast_fp16():
    from mrvl.passes.graph.cast_fp16 import CastFp16Pass

    return CastFp16Pass


def _canonicalize():
    from mrvl.passes.graph.canonicalize import CanonicalizePass

    return CanonicalizePass


def _fold_qdq():
    from mrvl.passes.graph.fold_qdq import FoldQdqPass

    return FoldQdqPass


def _verify_int8():
    from mrvl.passes.graph.verify_int8 import VerifyInt8Pass

    return VerifyInt8Pass


def _fold_flatten():
    from mrvl.passes.graph.fold_flatten_into_fc import FoldFlattenIntoFcPass

    return FoldFlattenIntoFcPass


def _split_batch():
    from mrvl.passes.graph.split_batch import SplitBatchPass

    return SplitBatchPass


def _plan_tiling():
    from mrvl.passes.sched.plan_tiling import PlanTilingPass

    return PlanTilingPass


def _to_sched():
    from mrvl.passes.sched.convert_mrvl_to_sched import ConvertMrvlToSchedPass

    return ConvertMrvlToSchedPass


def _fuse_converts():
    from mrvl.passes.sched.fuse_converts import FuseConvertsPass

    return FuseConvertsPass


def _pin_weights():
    from mrvl.passes.sched.pin_weights import PinWeightsPass

    return PinWeightsPass


def _cascade():
    from mrvl.passes.sched.cascade import CascadePass

    return CascadePass


def _multicast():
    from mrvl.passes.sched.multicast import MulticastPass

    return MulticastPass


def _pipeline():
    from mrvl.passes.sched.pipeline import PipelinePass

    return PipelinePass


def _allocate():
    from mrvl.passes.sched.allocate import AllocatePass

    return AllocatePass


def _verify_allocation():
    from mrvl.passes.sched.verify_allocation import VerifyAllocationPass

    return VerifyAllocationPass


def _insert_sync():
    from mrvl.passes.sched.insert_sync import InsertSyncPass

    return InsertSyncPass


def _to_mlip():
    from mrvl.passes.isa.convert_sched_to_mlip import ConvertSchedToMlipPass

    return ConvertSchedToMlipPass


ALL_PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    "mrvl-cast-fp16": _cast_fp16,
    "mrvl-canonicalize": _canonicalize,
    "mrvl-fold-flatten-into-fc": _fold_flatten,
    "mrvl-fold-qdq": _fold_qdq,
    "mrvl-verify-int8": _verify_int8,
    "mrvl-split-batch": _split_batch,
    "sched-plan-tiling": _plan_tiling,
    "convert-mrvl-to-sched": _to_sched,
    "sched-fuse-converts": _fuse_converts,
    "sched-pin-weights": _pin_weights,
    "sched-cascade": _cascade,
    "sched-pipeline": _pipeline,
    "sched-multicast": _multicast,
    "sched-allocate": _allocate,
    "sched-verify-allocation": _verify_allocation,
    "sched-insert-sync": _insert_sync,
    "convert-sched-to-mlip": _to_mlip,
}

GRAPH_PIPELINE = (
    "mrvl-fold-qdq",
    "mrvl-verify-int8",
    "mrvl-cast-fp16",
    "mrvl-canonicalize",
    "mrvl-fold-flatten-into-fc",
    "mrvl-split-batch",
)
SCHED_PIPELINE = (
    "sched-plan-tiling",
    "convert-mrvl-to-sched",
    "sched-fuse-converts",
    "sched-pin-weights",
    "sched-cascade",
    "sched-pipeline",
    "sched-multicast",
    "sched-allocate",
    "sched-verify-allocation",
    "sched-insert-sync",
)
ISA_PIPELINE = ("convert-sched-to-mlip",)
DEFAULT_PIPELINE = GRAPH_PIPELINE + SCHED_PIPELINE + ISA_PIPELINE
"""The passes `compile_region` runs, in order; each stage ends where its name says."""
