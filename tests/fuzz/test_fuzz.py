"""The differential property over random CNN graphs (tests/fuzz/grammar.py), a small bounded
budget for the default suite. The long run is `scripts/fuzz.py --examples 2000`.

For every graph TVM can import: `from_onnx` → `partition_for_mrvl` → `build` → a VM run
raises nothing but an `MrvlError` naming an ONNX node, and the output agrees with
onnxruntime under the fp16 acceptance rule. See `harness.check`.

Bugs already found and not yet fixed each have a strict-xfail regression test in
`test_regressions.py`; `KNOWN` maps their signature to it, and only those signatures are let
through here (as discards) so that this test fails on any new bug. When a fix lands, the
regression XPASSes, and its entry here goes with its xfail marker.
"""

from __future__ import annotations

import grammar
import harness
import pytest
from hypothesis import HealthCheck, assume, given, settings

KNOWN: dict[str, str] = {}

pytestmark = pytest.mark.filterwarnings("ignore")


@settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(spec=grammar.specs(max_layers=6))
def test_mrvl_agrees_with_onnxruntime(spec):
    outcome = harness.check(spec)
    assume(outcome.status != harness.DISCARDED)
    assume(outcome.signature not in KNOWN)
    assert outcome.status != harness.FAILED, f"{spec.describe()}\n{outcome}\n{spec!r}"


def test_the_grammar_makes_valid_models_that_onnxruntime_runs():
    """The generator itself: 120 seeded graphs pass the ONNX checker, onnxruntime runs them,
    and their declared output shape is what onnxruntime computes."""
    for seed in range(120):
        spec = grammar.random_spec(seed)
        model = grammar.build_model(spec)
        outs = harness.reference(model, grammar.input_array(spec))
        for out, info in zip(outs, model.graph.output, strict=True):
            declared = tuple(d.dim_value for d in info.type.tensor_type.shape.dim)
            assert out.shape == declared, spec.describe()


def test_deleting_any_layer_leaves_a_valid_graph():
    """What the shrinker relies on: a layer that no longer fits is skipped, never broken."""
    for seed in range(40):
        spec = grammar.random_spec(seed)
        for index in range(len(spec.layers)):
            smaller = grammar.without(spec, index)
            model = grammar.build_model(smaller)
            harness.reference(model, grammar.input_array(smaller))
