"""ONNX backend node tests through the whole flow (scripts/conformance.py runs them too).

Every case of the ops issue 3 lists goes ONNX → `mrvl.from_onnx` → `partition_for_mrvl` →
`mrvl.build` → the Relax VM, and its outputs are checked against the case's expected outputs:
a case whose node ran on the MLIP must meet the fp16 acceptance rule (DESIGN §9), a case that
fell back to TVM's CPU build must be exact within float32 tolerance. A case may fail only if
`KNOWN_FAILURES` names it, with the reason.

When the `slow` test of the engines is selected, every case's build with an MLIP region also
runs on both simulator engines after its conformance run (the build `run_case` returns, its
conformance run the Numba engine's first, cold, run), and that test collects the outcomes:
one import, partition and build per case for both checks.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    CONFORMANCE_ENGINE_CASES,
    conformance_partitioned,
    engine_run,
    run_model_on_both_engines,
)

import mrvl
from mrvl.accuracy import fp16_agreement
from mrvl.placement import is_region

ROOT = Path(__file__).resolve().parents[2]


def _load_harness():
    """scripts/conformance.py, the harness that also writes docs/conformance.md."""
    name = "mrvl_conformance_harness"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "conformance.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


conformance = _load_harness()

# Case id (regular expression, full match) -> why it fails. `+const` is the variant with the
# parameter operands as initializers; a pattern names it explicitly when it means it.
KNOWN_FAILURES: dict[str, str] = {
    # TVM's ONNX frontend: nothing mrvl can change.
    r"test_maxpool_with_argmax_\w+": (
        "TVM: the MaxPool importer does not produce the Indices output"
    ),
    r"test_(constant|edge|reflect|wrap)_pad(_axes|_negative_axes)?": (
        "TVM: Pad with pads given at run time (a graph input) is not supported"
    ),
    r"test_reshape_\w+": (
        "TVM: Reshape with the shape given at run time (a graph input) is not supported"
    ),
    r"test_batchnorm_\w+_training_mode(\+const)?": (
        "TVM: BatchNormalization(training_mode=1) returns the input running mean/var, "
        "not the updated ones (outputs 1 and 2)"
    ),
    r"test_resize_\w+": (
        "TVM: Resize with scales or sizes given at run time (a graph input) is not supported"
    ),
    r"test_resize_(up|down)sample_(scales|sizes)_nearest_(axes_2_3|axes_3_2|not_larger|"
    r"not_smaller)\+const|test_resize_tf_crop_and_resize_axes_(2_3|3_2)\+const": (
        "TVM: Resize with axes or keep_aspect_ratio_policy fails to import"
    ),
    r"test_split_variable_parts_\w+|test_split_zero_size_splits_opset1[38]": (
        "TVM: Split with the sizes given at run time (a graph input) is not supported"
    ),
    r"test_upsample_nearest": (
        "TVM: Upsample with the scales given at run time (a graph input) is not supported"
    ),
    r"test_resize_downsample_scales_(linear|cubic)(_align_corners|_A_n0p5_exclude_outside)?"
    r"(\+const)?": (
        "TVM: resize2d keeps only the output size, so a scale whose product with the input "
        "size is no integer (0.6 of 2 and 4) maps coordinates by out/in, not by the scale"
    ),
    r"test_resize_downsample_(scales|sizes)_(linear|cubic)_antialias(\+const)?": (
        "TVM: the Resize importer drops antialias=1"
    ),
    r"test_resize_(downsample|upsample)_scales_linear_half_pixel_symmetric(\+const)?": (
        "TVM: coordinate_transformation_mode half_pixel_symmetric is not supported"
    ),
    r"test_convtranspose_output_shape(\+const)?": (
        "TVM: the ConvTranspose importer ignores output_shape (result 9x7, expected 10x8)"
    ),
    r"test_split_zero_size_splits_opset1[38](\+const)?": (
        "TVM: relax.split rejects a zero-size part (split_indices must be sorted)"
    ),
    r"test_slice_default_axes": (
        "TVM: Slice with starts/ends as graph inputs and no axes fails to build (shape_func)"
    ),
    r"test_pow_types_(float32_u?int(32|64)|u?int(32|64)_float32)(\+const)?": (
        "TVM: the Pow importer rejects a float base with an integer exponent and the reverse "
        "(TypeError: Binary operators must have the same datatype)"
    ),
    r"test_pow_types_int(32|64)_int(32|64)(\+const)?": (
        "TVM: the CPU build of an integer Pow fails (InternalError in the host build)"
    ),
    # mrvl bugs, reported; remove each line when it is fixed (the case then XPASSes).
}


def known_failure(case_id: str) -> str | None:
    for pattern, reason in KNOWN_FAILURES.items():
        if re.fullmatch(pattern, case_id):
            return reason
    return None


CASES = conformance.node_cases()


def _param(case):
    reason = known_failure(case.id)
    marks = [pytest.mark.xfail(reason=reason, strict=False)] if reason else []
    return pytest.param(case, id=case.id, marks=marks)


ENGINES_TEST = "test_every_offloaded_conformance_case_engines_agree"

ENGINE_OUTCOMES: dict[str, str | None] = {}
"""Per case `test_node_case` built with the engines test selected: None if both engines gave
the same bytes, "cpu only" if the partition has no region (nothing to compare), else what
differed. Read by the engines test, which builds and compares itself the cases missing
here."""


def engines_outcome(case, result, runs: int) -> str | None:
    """What `ENGINE_OUTCOMES` keeps for a case `run_case` built (`result.lib`): its build run
    on the interpreter and warm on the Numba engine, compared with its conformance run
    (`runs` simulator runs, on the Numba engine, cold) and each other. Errors are kept, not
    raised: the case's own test must not fail for them, nor an xfail hide them."""
    lib = result.lib
    if not lib.mrvl_regions and not result.offloaded:
        return "cpu only"
    cold = (result.actual, runs) if result.actual is not None else None
    try:
        assert lib.mrvl_regions, "a region in the partition, none in the build"
        run_model_on_both_engines(lib, case.inputs, cold=cold)
    except Exception as err:  # noqa: BLE001 - reported by the engines test
        return f"{type(err).__name__}: {err}"
    return None


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_node_case(case, request):
    compare = case.id not in CONFORMANCE_ENGINE_CASES  # those have tests of their own
    if compare and any(item.name == ENGINES_TEST for item in request.session.items):
        result, runs = engine_run("numba", lambda: conformance.run_case(case))
        if result.lib is not None:
            ENGINE_OUTCOMES[case.id] = engines_outcome(case, result, runs)
    else:
        result = conformance.run_case(case)
    if result.error:
        pytest.fail(result.error)
    expected = [np.asarray(x) for x in case.outputs]
    assert len(result.actual) == len(expected), f"{len(result.actual)} outputs"
    for index, (got, want) in enumerate(zip(result.actual, expected)):
        assert got.shape == want.shape, f"output {index}: shape {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"output {index}: dtype {got.dtype} != {want.dtype}"
        if want.dtype.kind != "f":
            np.testing.assert_array_equal(got, want, err_msg=f"output {index}")
        elif result.offloaded:
            agreement = fp16_agreement(got, want)
            assert agreement.passed, f"output {index} (offloaded): {agreement}"
        else:
            np.testing.assert_allclose(
                got, want, rtol=conformance.EXACT_RTOL, atol=conformance.EXACT_ATOL,
                err_msg=f"output {index} (CPU fallback)",
            )  # fmt: skip


def test_cases_cover_every_op():
    ops = {case.op_type for case in CASES}
    assert ops == set(conformance.OPS)
    assert len(CASES) >= 190  # 144 ONNX cases + 56 `+const` variants with onnx 1.23


def test_known_failures_name_existing_cases():
    ids = [case.id for case in CASES]
    for pattern in KNOWN_FAILURES:
        assert any(re.fullmatch(pattern, i) for i in ids), f"{pattern!r} matches no case"


def test_known_failures_do_not_hide_const_variants_by_accident():
    """A pattern written for the shipped form must not also xfail its `+const` variant."""
    for case in CASES:
        if case.id.endswith(conformance.CONST_SUFFIX):
            for pattern in KNOWN_FAILURES:
                if re.fullmatch(pattern, case.id):
                    assert r"\+const" in pattern, f"{pattern!r} matches {case.id}"


MIN_COMPARED_CASES = 110
"""Floor on the conformance cases with a region (124 with onnx 1.23 when this was written):
guards against the selection silently becoming empty."""


@pytest.mark.slow
def test_every_offloaded_conformance_case_engines_agree(record_property):
    """Every case with a region (by the partition; CPU-only cases are not compared) gives the
    same output bytes on both engines, except `CONFORMANCE_ENGINE_CASES` (tests of their own
    in tests/sim/test_engines_models.py). The outcomes of `test_node_case`'s builds, which
    run before this test in its unit of work; a case not built there is built here."""
    compared, cpu_only, rejected, differ = [], [], [], []
    for case in CASES:
        if case.id in CONFORMANCE_ENGINE_CASES:
            continue  # a test of its own
        if case.id in ENGINE_OUTCOMES:
            outcome = ENGINE_OUTCOMES[case.id]
            if outcome == "cpu only":
                cpu_only.append(case.id)
                continue
            if outcome is not None:
                differ.append(f"{case.id}: {outcome}")
            compared.append(case.id)
            continue
        mod = conformance_partitioned(case)
        if mod is None:
            rejected.append(case.id)
            continue
        if not any(is_region(func) for func in mod.functions.values()):
            cpu_only.append(case.id)
            continue
        try:
            lib = mrvl.build(mod)
        except mrvl.MrvlError:
            rejected.append(case.id)
            continue
        assert lib.mrvl_regions, f"{case.id}: a region in the partition, none in the build"
        try:
            run_model_on_both_engines(lib, case.inputs)
        except AssertionError as err:
            differ.append(f"{case.id}: {err}")
        compared.append(case.id)
    total = len(compared) + len(CONFORMANCE_ENGINE_CASES)
    record_property("compared_cases", total)
    print(
        f"\n{total} conformance cases compared on both engines ({len(ENGINE_OUTCOMES)} on the "
        f"builds of test_node_case); {len(cpu_only)} CPU-only and {len(rejected)} rejected by "
        "mrvl not run"
    )
    assert not differ, "\n".join(differ)
    assert total >= MIN_COMPARED_CASES, f"only {total} conformance cases have a region"
