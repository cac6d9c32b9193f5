"""scripts/int8_local_steps.py's summary of a zoo model's per-layer int8 triage: the layers
by steps alone (more than 1 is a compiler bug), and where in graph order the carried steps
first pass 1 and 3."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from helpers import load_module  # noqa: E402

local_steps = load_module("mrvl_int8_local_steps", ROOT / "scripts" / "int8_local_steps.py")


def test_the_summary_counts_layers_alone_and_finds_where_steps_are_carried():
    from int8_triage import LayerSteps

    layers = [
        LayerSteps("c", "Conv", "/conv", 0, 0),
        LayerSteps("s", "Sigmoid", "/sigmoid", 1, 2),
        LayerSteps("m", "Mul", "/mul", 0, 5),
        LayerSteps("a", "Add", "/add", 2, 9),
    ]
    assert local_steps.summary(layers) == (
        "4 layers alone: 2 exact, 1 within 1 step, 1 beyond: /add (Add) 2; carried up to 9 "
        "steps, first beyond 1: /sigmoid (2), first beyond 3: /mul (5)"
    )


def test_a_model_carrying_nothing_says_so():
    from int8_triage import LayerSteps

    text = local_steps.summary([LayerSteps("c", "Conv", "/conv", 0, 1)])
    assert text.endswith("carried up to 1 steps, first beyond 1: none, first beyond 3: none")
