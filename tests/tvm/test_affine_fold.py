"""Affine steps with constants on either side fold into a scale_shift exactly as ONNX computes
them: random chains of Mul / Add / Sub / Div by scalars or per-channel constants, each
constant first or second, against a float64 evaluation of the same chain."""

from __future__ import annotations

import numpy as np
import onnx
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from mrvl.dialects import mrvl
from mrvl.frontend import from_onnx
from mrvl.partition import partition_for_mrvl
from mrvl.relax_import import import_region

CHANNELS = 3
OPS = {
    "Mul": lambda x, c: x * c,
    "Add": lambda x, c: x + c,
    "Sub": lambda x, c: x - c,
    "Div": lambda x, c: x / c,
}
STEP = st.tuples(
    st.sampled_from(sorted(OPS)),
    st.booleans(),  # constant first
    st.booleans(),  # per channel (else scalar)
    st.integers(0, 2**32 - 1),  # seed of the constant
)


def _chain_model(steps) -> tuple[onnx.ModelProto, list]:
    nodes, inits, constants, value = [], [], [], "x"
    for i, (op, const_first, per_channel, seed) in enumerate(steps):
        if op == "Div" and const_first:
            const_first = False  # c / x is not affine
        rng = np.random.default_rng(seed)
        shape = (1, CHANNELS, 1, 1) if per_channel else ()
        c = (rng.uniform(0.5, 2.0, shape) * rng.choice([-1, 1], shape)).astype(np.float32)
        inits.append(numpy_helper.from_array(c, f"c{i}"))
        inputs = [f"c{i}", value] if const_first else [value, f"c{i}"]
        nodes.append(helper.make_node(op, inputs, [f"v{i}"], name=f"/step{i}"))
        constants.append((op, const_first, c.astype(np.float64)))
        value = f"v{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CHANNELS, 2, 2])],
        [helper.make_tensor_value_info(value, TensorProto.FLOAT, [1, CHANNELS, 2, 2])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model, constants


@settings(max_examples=25, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=3))
def test_affine_chains_fold_into_one_scale_shift(steps):
    model, constants = _chain_model(steps)
    mod = partition_for_mrvl(from_onnx(model))
    regions = [f for _, f in mod.functions_items() if f.attrs and f.attrs.get("Codegen")]
    assert len(regions) == 1
    (func,) = import_region(regions[0]).body.block.ops
    (layer,) = [op for op in func.body.block.ops if isinstance(op, mrvl.ScaleShiftOp)]
    scale, shift = (v.owner.numpy().astype(np.float64) for v in (layer.scale, layer.shift))

    x = np.random.default_rng(0).standard_normal((1, CHANNELS, 2, 2))
    expected = x
    for op, const_first, c in constants:
        if op == "Sub" and const_first:
            expected = c - expected
        elif const_first:
            expected = OPS[op](c, expected)
        else:
            expected = OPS[op](expected, c)
    folded = x * scale[None, :, None, None] + shift[None, :, None, None]
    # scale and shift are stored as f32: agreement to a few f32 ulps of the values involved
    np.testing.assert_allclose(folded, expected, rtol=1e-5, atol=1e-5)
