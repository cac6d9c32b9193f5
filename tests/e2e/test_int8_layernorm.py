"""A quantized LayerNormalization on the MLIP (issue 20, for issue 21's transformers): no
int8 instruction computes a layernorm, so the region dequantizes its int8 input on chip
(`dequant`), runs the fp16 `layernorm` and quantizes the result (`quant`), as int8 Softmax
does (`qdq.FP16_BETWEEN_EDGES`, whose docstring states the error bound in steps of the
output scale). The partition reports it as fp16, never int8."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tvm
from helpers import float_model
from int8_builders import assert_region_engines_agree, qdq_build
from onnx import helper as oh
from onnx import numpy_helper
from tvm import relax

import mrvl
from mrvl.accuracy import reference_session
from mrvl.onnx_shell import with_outputs

TOKENS, WIDTH = 16, 48


def layernorm_block(seed: int = 0) -> onnx.ModelProto:
    """x [1, TOKENS, WIDTH] -> MatMul (constant weights) + x (a residual) -> LayerNormalization
    over the last axis (seeded scale and shift) -> y (opset 17)."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(
            (rng.standard_normal((WIDTH, WIDTH)) * WIDTH**-0.5).astype(np.float32), "w"
        ),
        numpy_helper.from_array((1 + 0.3 * rng.standard_normal(WIDTH)).astype(np.float32), "g"),
        numpy_helper.from_array((0.2 * rng.standard_normal(WIDTH)).astype(np.float32), "b"),
    ]
    nodes = [
        oh.make_node("MatMul", ["x", "w"], ["h"], name="/fc/MatMul"),
        oh.make_node("Add", ["h", "x"], ["r"], name="/residual/Add"),
        oh.make_node("LayerNormalization", ["r", "g", "b"], ["y"], name="/norm/LayerNorm", axis=-1),
    ]
    x, y = ("x", [1, TOKENS, WIDTH]), ("y", [1, TOKENS, WIDTH])
    return float_model(nodes, inits, [x], [y], name="layernorm", opset=17, ir_version=8)


def feeds(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        {"x": (rng.standard_normal((1, TOKENS, WIDTH)) + 0.5).astype(np.float32)}
        for _ in range(count)
    ]


@pytest.fixture(scope="module")
def layernorm_build():
    qdq = mrvl.quantize(layernorm_block(), feeds(16, seed=1))
    return (qdq, *qdq_build(qdq, num_tiles=2))


def test_the_layernorm_runs_in_fp16_between_dequant_and_quant_in_the_one_region(
    layernorm_build,
):
    _, report, lib = layernorm_build
    assert len(report.regions) == 1 and not report.on_cpu(), report.summary()
    (norm,) = [r for r in report.rows if r.op_type == "LayerNormalization"]
    assert norm.target != "cpu" and norm.dtype == "float16", norm
    assert report.int8_mac_fraction == 1.0, report.summary()
    (region,) = lib.mrvl_regions
    opcodes = [ins.opcode for ins in region.program.code]
    at = opcodes.index("layernorm")
    assert "dequant" in opcodes[:at] and "quant" in opcodes[at:], opcodes


def _quantize_of(qdq, tensor: str) -> tuple[float, int]:
    inits = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    q = next(n for n in qdq.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == tensor)
    return float(inits[q.input[1]]), int(inits[q.input[2]])


def test_the_layernorm_is_within_one_step_of_the_exact_one(layernorm_build):
    """Against the exact layernorm (float64) of onnxruntime's own dequantized input, rounded
    at the output's scale (the bound of `qdq.FP16_BETWEEN_EDGES`); and within one step of
    onnxruntime running the same QDQ model."""
    qdq, _, lib = layernorm_build
    norm = next(n for n in qdq.graph.node if n.op_type == "LayerNormalization")
    inits = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    dequantized = {n.output[0]: n for n in qdq.graph.node if n.op_type == "DequantizeLinear"}

    def value(name):  # a DequantizeLinear of an initializer, as onnxruntime computes it
        dq = dequantized[name]
        q, s = inits[dq.input[0]].astype(np.float32), inits[dq.input[1]].astype(np.float32)
        z = inits[dq.input[2]].astype(np.float32) if len(dq.input) > 2 else 0
        return ((q - z) * s).astype(np.float64)

    gamma, beta = value(norm.input[1]), value(norm.input[2])
    scale, zero = _quantize_of(qdq, norm.output[0])
    session = reference_session(with_outputs(qdq, ["y", norm.input[0]]))
    vm = relax.VirtualMachine(lib, tvm.cpu())
    to_exact, to_onnxruntime = [], []
    for f in feeds(4, seed=9):
        theirs, x = session.run(None, f)
        x = x.astype(np.float64)
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        exact = (x - mean) / np.sqrt(var + 1e-5) * gamma + beta
        exact_q = np.clip(np.rint(exact / scale) + zero, -128, 127)
        got = vm["main"](tvm.runtime.tensor(f["x"])).numpy().astype(np.float64)
        got_q = np.rint(got / scale) + zero
        to_exact.append(np.abs(got_q - exact_q).ravel())
        to_onnxruntime.append(np.rint(np.abs(got - theirs) / scale).ravel())
    to_exact, to_onnxruntime = np.concatenate(to_exact), np.concatenate(to_onnxruntime)
    print(
        f"layernorm: exact rounding {(to_exact == 0).mean():.4f} (max {to_exact.max():.0f}); "
        f"onnxruntime {(to_onnxruntime == 0).mean():.4f} (max {to_onnxruntime.max():.0f})"
    )
    assert to_exact.max() <= 1 and (to_exact == 0).mean() >= 0.9, to_exact.max()
    assert to_onnxruntime.max() <= 1, to_onnxruntime.max()


def test_the_layernorm_region_is_bit_identical_on_both_engines(layernorm_build):
    _, _, lib = layernorm_build
    assert_region_engines_agree(lib, [feeds(1, seed=5)[0]["x"]])
