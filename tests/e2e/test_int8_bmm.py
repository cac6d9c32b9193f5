"""int8 MatMul of two activations (issue 20, for issue 21's transformers): attention's Q·Kᵀ
and A·V in a QDQ model (by `mrvl.quantize`) are `qbmm` instructions in the one int8 region
(`passes/graph/fold_qdq_bmm.py`), its Softmax in fp16 between the region's own dequant and
quant, within 3 steps of onnxruntime running the same QDQ model; both engines give the same
bytes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tvm
from helpers import float_model
from int8_builders import assert_region_engines_agree, qdq_build, steps_off_onnxruntime
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from tvm import relax

import mrvl
from mrvl.accuracy import reference_session

TOKENS, WIDTH, HEADS = 16, 32, 2
HEAD = WIDTH // HEADS


def attention_block(seed: int = 0) -> onnx.ModelProto:
    """x [1, TOKENS, WIDTH] -> Q, K, V by MatMuls with constant weights, split into heads
    ([1, HEADS, TOKENS, HEAD], K transposed to [.., HEAD, TOKENS]), softmax(Q·Kᵀ / 4)·V, the
    heads merged back: the attention of a ViT or BERT layer (opset 17)."""
    rng = np.random.default_rng(seed)

    def weight(name, shape, scale):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name
        )

    inits = [weight(f"w{p}", (WIDTH, WIDTH), WIDTH**-0.5) for p in "qkv"]
    inits += [
        numpy_helper.from_array(np.array([1, TOKENS, HEADS, HEAD], np.int64), "heads"),
        numpy_helper.from_array(np.array([1, TOKENS, WIDTH], np.int64), "merged"),
        numpy_helper.from_array(np.array(0.25, np.float32), "quarter"),
    ]
    nodes = []
    for p, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [
            oh.make_node("MatMul", ["x", f"w{p}"], [f"{p}0"], name=f"/{p}/MatMul"),
            oh.make_node("Reshape", [f"{p}0", "heads"], [f"{p}1"], name=f"/{p}/Reshape"),
            oh.make_node("Transpose", [f"{p}1"], [p], name=f"/{p}/Transpose", perm=perm),
        ]
    nodes += [
        oh.make_node("MatMul", ["q", "k"], ["s"], name="/attn/MatMul"),
        oh.make_node("Mul", ["s", "quarter"], ["s4"], name="/attn/Mul"),
        oh.make_node("Softmax", ["s4"], ["a"], name="/attn/Softmax", axis=-1),
        oh.make_node("MatMul", ["a", "v"], ["o"], name="/attn/MatMul_1"),
        oh.make_node("Transpose", ["o"], ["o1"], name="/out/Transpose", perm=[0, 2, 1, 3]),
        oh.make_node("Reshape", ["o1", "merged"], ["y"], name="/out/Reshape"),
    ]
    x, y = ("x", [1, TOKENS, WIDTH]), ("y", [1, TOKENS, WIDTH])
    return float_model(nodes, inits, [x], [y], name="attention", opset=17, ir_version=8)


def feeds(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, TOKENS, WIDTH)).astype(np.float32)} for _ in range(count)]


@pytest.fixture(scope="module")
def attention_build():
    qdq = mrvl.quantize(attention_block(), feeds(16, seed=1))
    return (qdq, *qdq_build(qdq, num_tiles=2))


def test_attention_products_are_qbmm_in_the_one_region(attention_build):
    _, report, lib = attention_build
    assert len(report.regions) == 1, report.summary()
    products = {r.node: r for r in report.rows if r.node.startswith("/attn/MatMul")}
    assert set(products) == {"/attn/MatMul", "/attn/MatMul_1"}
    assert all(r.dtype == "int8" for r in products.values()), products
    assert report.int8_mac_fraction == 1.0, report.summary()
    (region,) = lib.mrvl_regions
    opcodes = [ins.opcode for ins in region.program.code]
    assert opcodes.count("qbmm") >= 2 and "bmm" not in opcodes, sorted(set(opcodes))


def _output_scale(qdq) -> float:
    inits = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    last_q = next(n for n in qdq.graph.node if n.op_type == "QuantizeLinear" and "o" in n.input)
    return float(inits[last_q.input[1]])


def test_attention_is_within_three_steps_of_onnxruntime(attention_build):
    qdq, _, lib = attention_build
    steps = steps_off_onnxruntime(qdq, lib, feeds(4, seed=7), _output_scale(qdq))
    print(
        f"attention: exact {(steps == 0).mean():.4f}, <=1 {(steps <= 1).mean():.4f}, max {steps.max():.0f}"
    )
    assert steps.max() <= 3, steps.max()


def test_attention_region_is_bit_identical_on_both_engines(attention_build):
    _, _, lib = attention_build
    assert_region_engines_agree(lib, [feeds(1, seed=5)[0]["x"]])


def vit_qkv_block(seed: int = 0, pick: str = "split") -> onnx.ModelProto:
    """ViT's attention input: one MatMul to q, k and v together, reshaped to rank 5 [1, T, 3,
    H, D], transposed to [3, 1, H, T, D], then q, k, v picked out of it (`pick`: split and
    squeezed, as ViT exports; or three Gathers of one index each, as Swin-T and PP-OCRv3
    export); then Q·Kᵀ, Softmax, A·V. A quantizer writes a QDQ pair after each of those moves
    (`qdq_moves` drops the rank-5 ones; the moves around them are float copies of int8
    values, `qdq_match`)."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(
            (rng.standard_normal((WIDTH, 3 * WIDTH)) * WIDTH**-0.5).astype(np.float32), "wqkv"
        ),
        numpy_helper.from_array(np.array([1, TOKENS, 3, HEADS, HEAD], np.int64), "shape5"),
        numpy_helper.from_array(np.array([1, 1, 1], np.int64), "thirds"),
        numpy_helper.from_array(np.array([0], np.int64), "axis0"),
        *[numpy_helper.from_array(np.array(i, np.int64), f"index{i}") for i in range(3)],
    ]
    nodes = [
        oh.make_node("MatMul", ["x", "wqkv"], ["qkv"], name="/qkv/MatMul"),
        oh.make_node("Reshape", ["qkv", "shape5"], ["qkv5"], name="/attn/Reshape"),
        oh.make_node("Transpose", ["qkv5"], ["qkvt"], name="/attn/Transpose", perm=[2, 0, 3, 1, 4]),
    ]
    if pick == "split":
        nodes += [
            oh.make_node(
                "Split", ["qkvt", "thirds"], ["q5", "k5", "v5"], name="/attn/Split", axis=0
            ),
            *[
                oh.make_node("Squeeze", [f"{p}5", "axis0"], [p], name=f"/attn/Squeeze_{p}")
                for p in "qkv"
            ],
        ]
    else:
        nodes += [
            oh.make_node("Gather", ["qkvt", f"index{i}"], [p], name=f"/attn/Gather_{p}", axis=0)
            for i, p in enumerate("qkv")
        ]
    nodes += [
        oh.make_node("Transpose", ["k"], ["kt"], name="/attn/Transpose_1", perm=[0, 1, 3, 2]),
        oh.make_node("MatMul", ["q", "kt"], ["s"], name="/attn/MatMul"),
        oh.make_node("Softmax", ["s"], ["a"], name="/attn/Softmax", axis=-1),
        oh.make_node("MatMul", ["a", "v"], ["y"], name="/attn/MatMul_1"),
    ]
    graph = oh.make_graph(
        nodes,
        "vit_qkv",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, TOKENS, WIDTH])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [1, HEADS, TOKENS, HEAD])],
        inits,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("pick", ["split", "gather"])
def test_vit_qkv_through_rank_5_is_one_int8_region_within_one_step(pick):
    qdq = mrvl.quantize(vit_qkv_block(pick=pick), feeds(8, seed=1))
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(qdq), num_tiles=1)
    report = mrvl.partition_report(mod, qdq)
    assert len(report.regions) == 1 and not report.on_cpu(), report.summary()
    assert report.int8_mac_fraction == 1.0, report.summary()
    vm = relax.VirtualMachine(mrvl.build(mod, target="llvm", num_tiles=1), tvm.cpu())
    session = reference_session(qdq)
    inits = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    scale = float(inits[next(n for n in qdq.graph.node if "y" in n.output).input[1]])
    for f in feeds(2, seed=3):
        got = vm["main"](tvm.runtime.tensor(f["x"])).numpy()
        steps = np.rint(np.abs(got - session.run(None, f)[0]) / scale)
        assert steps.max() <= 1, steps.max()
