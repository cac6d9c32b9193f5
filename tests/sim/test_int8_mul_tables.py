"""int8 Mul and table activations against onnxruntime running the QDQ form they stand for:

- `int8.int8_table` for Sigmoid, HardSigmoid, HardSwish, Tanh, SiLU and GELU: every one of
  the 256 entries equal to onnxruntime's DequantizeLinear -> op -> QuantizeLinear;
- `qmul` (same shape and broadcast per channel) as the documented integer arithmetic, and
  within one step of onnxruntime's DequantizeLinear -> Mul -> QuantizeLinear (docs/isa.md
  `qmul`: one rounding of the exact product against fp32 roundings, so at most one step).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from sim_builders import Staging, instruction, layer_program, run_both

from mrvl import int8
from mrvl.act_tables import reference
from mrvl.isa import Activation, DType

SCALES = [  # (s_in, z_in, s_out, z_out): typical, coarse, fine, and uint8-like zero points
    (0.05, 3, 1 / 255, -128),
    (0.2, -20, 0.01, 0),
    (0.013, 100, 0.02, -7),
]


def _qdq_session(op: str, attrs: dict, s_in, z_in, s_out, z_out, extra=()) -> ort.InferenceSession:
    inits = [
        helper.make_tensor("si", TensorProto.FLOAT, [], [s_in]),
        helper.make_tensor("zi", TensorProto.INT8, [], [z_in]),
        helper.make_tensor("so", TensorProto.FLOAT, [], [s_out]),
        helper.make_tensor("zo", TensorProto.INT8, [], [z_out]),
    ]
    nodes = [
        helper.make_node("DequantizeLinear", ["q", "si", "zi"], ["x"]),
        *extra,
        helper.make_node(op, ["x"], ["y"], **attrs) if op else None,
        helper.make_node("QuantizeLinear", ["y", "so", "zo"], ["out"]),
    ]
    graph = helper.make_graph(
        [n for n in nodes if n is not None],
        "table",
        [helper.make_tensor_value_info("q", TensorProto.INT8, [256])],
        [helper.make_tensor_value_info("out", TensorProto.INT8, [256])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _silu_nodes():
    return [
        helper.make_node("Sigmoid", ["x"], ["sg"]),
        helper.make_node("Mul", ["x", "sg"], ["y"]),
    ]


ACTIVATIONS = {
    "Sigmoid": ({}, Activation.SIGMOID, 0.0, 0.0, None),
    "Tanh": ({}, Activation.TANH, 0.0, 0.0, None),
    "HardSigmoid": ({"alpha": 1 / 6, "beta": 0.5}, Activation.HARD_SIGMOID, 1 / 6, 0.5, None),
    "HardSwish": ({}, Activation.HARD_SWISH, 0.0, 0.0, None),
    "Gelu": ({}, Activation.GELU, 0.0, 0.0, None),
    "SiLU": ({}, Activation.SILU, 0.0, 0.0, _silu_nodes),
}


@pytest.mark.parametrize("scales", SCALES)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_int8_table_is_onnxruntime_qdq_on_every_input(name, scales):
    attrs, act, a, b, nodes = ACTIVATIONS[name]
    a, b = float(np.float32(a)), float(np.float32(b))
    if nodes is None:
        session = _qdq_session(name, attrs, *scales)
    else:
        session = _qdq_session(None, {}, *scales, extra=nodes())
    q = np.arange(-128, 128, dtype=np.int8)
    (want,) = session.run(None, {"q": q})
    table = int8.int8_table(lambda x: reference(act, np.array([x]), a, b)[0], *scales)
    np.testing.assert_array_equal(table, want)


# ---------------------------------------------------------------------------------- qmul


def _mul_session(shape_a, shape_b, s_a, z_a, s_b, z_b, s_y, z_y) -> ort.InferenceSession:
    inits = [
        helper.make_tensor(n, t, [], [v])
        for n, t, v in [
            ("sa", TensorProto.FLOAT, s_a), ("za", TensorProto.INT8, z_a),
            ("sb", TensorProto.FLOAT, s_b), ("zb", TensorProto.INT8, z_b),
            ("sy", TensorProto.FLOAT, s_y), ("zy", TensorProto.INT8, z_y),
        ]
    ]  # fmt: skip
    nodes = [
        helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["fa"]),
        helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["fb"]),
        helper.make_node("Mul", ["fa", "fb"], ["y"]),
        helper.make_node("QuantizeLinear", ["y", "sy", "zy"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mul",
        [
            helper.make_tensor_value_info("a", TensorProto.INT8, list(shape_a)),
            helper.make_tensor_value_info("b", TensorProto.INT8, list(shape_b)),
        ],
        [helper.make_tensor_value_info("out", TensorProto.INT8, list(shape_a))],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


MUL_CASES = [  # s_a, z_a, s_b, z_b, s_y, z_y
    (0.05, 3, 1 / 255, -128, 0.04, -5),  # x * hard-sigmoid gate (SE, HardSwish's product)
    (0.1, -10, 0.0039, -128, 0.05, 0),  # x * sigmoid x (SiLU)
    (0.02, 0, 0.03, 7, 0.001, 12),  # a fine output scale: products saturate
]


@pytest.mark.parametrize("broadcast", [False, True], ids=["same_shape", "per_channel"])
@pytest.mark.parametrize("case", MUL_CASES)
def test_qmul_is_the_integer_product_and_within_one_step_of_onnxruntime(
    case, broadcast, record_property
):
    s_a, z_a, s_b, z_b, s_y, z_y = case
    rng = np.random.default_rng(7)
    n, h, w, c = 2, 5, 6, 16
    a = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
    b = rng.integers(-128, 128, (n, 1, 1, c) if broadcast else (n, h, w, c)).astype(np.int8)
    rq = int8.qmul_params(s_a, s_b, s_y)
    got = []
    for image in range(n):  # the compiler cuts a broadcast product per image
        staging = Staging()
        count = h * w * c
        aa, ba = staging.add(a[image].reshape(-1)), staging.add(b[image].reshape(-1))
        out = staging.reserve(count)
        ins = instruction(
            "qmul", a_addr=aa, b_addr=ba, out_addr=out, count=count,
            channels=c if broadcast else 0, a_zp=z_a, b_zp=z_b, out_zp=z_y, rq=rq,
            clamp=(-128, 127), lut_addr=-1,
        )  # fmt: skip
        (y,) = run_both(layer_program(staging, [ins], out, (count,), dtype=DType.I8), [])
        got.append(y.reshape(h, w, c))
    got = np.stack(got)
    product = (a.astype(np.int64) - z_a) * (b.astype(np.int64) - z_b)
    documented = np.clip(z_y + int8.requantize(product, *rq), -128, 127)
    np.testing.assert_array_equal(got, documented)
    # onnxruntime in NCHW, as the QDQ model computes it
    to_nchw = (0, 3, 1, 2)
    session = _mul_session(
        a.transpose(to_nchw).shape, b.transpose(to_nchw).shape, s_a, z_a, s_b, z_b, s_y, z_y
    )
    (want,) = session.run(
        None, {"a": a.transpose(to_nchw).copy(), "b": b.transpose(to_nchw).copy()}
    )
    off = np.abs(got.transpose(to_nchw).astype(np.int64) - want)
    assert off.max() <= 1, off.max()
    record_property("exact", float(np.mean(off == 0)))
