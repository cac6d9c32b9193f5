"""scripts/int8_one_step.py: a QDQ model cut at one quantized tensor runs on from the values
fed there, the first tensor where two runs differ, and one-step moves of an int8 tensor."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from helpers import load_module  # noqa: E402
from qdq_models import calibration, quantize_static_qdq, small_cnn  # noqa: E402

one_step = load_module("mrvl_int8_one_step", ROOT / "scripts" / "int8_one_step.py")
rules = load_module("mrvl_int8_layer_rules", ROOT / "scripts" / "int8_layer_rules.py")
spread = load_module("mrvl_int8_reference_spread", ROOT / "scripts" / "int8_reference_spread.py")


@pytest.fixture(scope="module")
def qdq():
    return quantize_static_qdq(small_cnn())


@pytest.fixture(scope="module")
def feeds():
    return calibration(1, seed=7)[0]


def test_a_model_cut_at_a_quantized_tensor_runs_on_from_the_values_fed_there(qdq, feeds):
    """small_cnn's QDQ form cut at its first conv's quantized result: fed onnxruntime's own
    values there, it gives the uncut model's output bit for bit; fed other values, another
    output."""
    tensors = rules.quantized_tensors(qdq)
    first = tensors[0]
    assert first.layer.op_type in ("Conv", "Relu"), first
    off = rules.ort_int8(qdq, feeds, tensors)
    cut = one_step.cut_at(qdq, first.name, first.elem_type)
    assert first.name in [i.name for i in cut.graph.input]
    assert not any(first.name in n.output for n in cut.graph.node)
    (uncut,) = spread.ort_session(qdq, False).run(None, feeds)
    session = spread.ort_session(cut, False)
    (same,) = session.run(None, {**feeds, first.name: off[first.name]})
    assert np.array_equal(same, uncut)
    signed, _ = rules._as_signed(off[first.name], first.zero_point, first.elem_type)
    assert np.array_equal(one_step.stored(signed, first.zero_point, first.elem_type),
                          off[first.name])  # fmt: skip
    shifted = one_step.stored(np.clip(signed + 20, -128, 127), first.zero_point, first.elem_type)
    (other,) = session.run(None, {**feeds, first.name: shifted})
    assert not np.array_equal(other, uncut)


def test_the_first_difference_is_found_in_graph_order(qdq, feeds):
    tensors = rules.quantized_tensors(qdq)
    off = rules.ort_int8(qdq, feeds, tensors)
    mine = {t.name: rules._as_signed(off[t.name], t.zero_point, t.elem_type)[0] for t in tensors}
    assert one_step.first_difference(tensors, mine, dict(mine)) is None
    second, last = tensors[1], tensors[-1]
    moved = {**mine, last.name: mine[last.name] + 1, second.name: mine[second.name] - 1}
    assert one_step.first_difference(tensors, moved, mine) is second


def test_one_step_moves_change_one_element_by_one_step():
    values = np.array([[127, 0], [5, -128]], np.int64)
    moves = list(one_step.one_step_moves(values, 20, seed=3))
    assert len(moves) == 20
    for i, moved in moves:
        assert moved.shape == values.shape
        diff = (moved - values).ravel()
        assert np.count_nonzero(diff) == 1 and abs(diff[i]) == 1
        assert moved.max() <= 127 and moved.min() >= -128


def test_the_reference_spread_with_every_quantized_tensor_an_output(qdq):
    """`--all-tensors`: the same model with each quantized tensor also an output of its own
    int8 type, the original outputs first."""
    exposed = rules.with_int8_outputs(qdq)
    names = [o.name for o in exposed.graph.output]
    assert names[: len(qdq.graph.output)] == [o.name for o in qdq.graph.output]
    assert set(names) >= {t.name for t in rules.quantized_tensors(qdq)}
    assert ("ort-on-all", "ort-off") in spread.PAIRS
