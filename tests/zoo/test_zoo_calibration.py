"""The zoo's recorded calibration (mrvl/models/zoo_onnx/calibration.json): seed 0's factors,
recorded so that the zoo's weights, and so the binaries the suite pins, are the same bits on
every CPU."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from mrvl.models.light import _random_weights, calibrate_scales, reweight
from mrvl.models.zoo import ZOO_MODELS, calibration_factors, load_zoo_model, zoo_model_path


def test_every_zoo_model_has_recorded_factors_for_its_own_weights():
    for name in ZOO_MODELS:
        factors = calibration_factors(name)
        assert factors, name
        _, weights = _random_weights(onnx.load(zoo_model_path(name)), 0, initializers=False)
        assert set(factors) <= set(weights), name
        assert all(np.isfinite(f) and f > 0 for f in factors.values()), name


@pytest.mark.parametrize("name", ["tc_resnet8", "squeezenet1_1", "mobilenet_v3_small"])
def test_recorded_factors_are_what_calibration_finds(name):
    """Up to onnxruntime's last bits on another CPU: the record is the calibration's, not
    stale (re-record with `python -m mrvl.models.zoo --record-calibration NAME`)."""
    skeleton, weights = _random_weights(onnx.load(zoo_model_path(name)), 0, initializers=False)
    found = calibrate_scales(skeleton, weights, seed=0)
    recorded = calibration_factors(name)
    assert set(found) == set(recorded)
    for weight, factor in found.items():
        assert recorded[weight] == pytest.approx(factor, rel=1e-4), weight


def test_seed_0_loads_with_the_recorded_factors_and_another_seed_calibrates():
    name = "tc_resnet8"
    model = load_zoo_model(name)
    recorded = calibration_factors(name)
    doubled = {k: 2 * v for k, v in recorded.items()}
    again = reweight(onnx.load(zoo_model_path(name)), 0, initializers=False, scales=doubled)
    weights = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    twice = {i.name: onnx.numpy_helper.to_array(i) for i in again.graph.initializer}
    for weight in recorded:  # the factors given are the factors used
        np.testing.assert_array_equal(twice[weight], 2 * weights[weight])
    other = load_zoo_model(name, seed=1)
    assert other.SerializeToString() != model.SerializeToString()
    with pytest.raises(ValueError, match="lacks"):
        reweight(onnx.load(zoo_model_path(name)), 0, initializers=False, scales={"nope": 1.0})
