"""int8 end to end (issue 20): a QDQ model from onnxruntime's `quantize_static` (per channel)
and one from `mrvl.quantize` go through `from_onnx` -> `partition_for_mrvl` -> `build` with no
extra flag, in one region whose every layer runs in int8, at 1 and 8 tiles; every output is
within 3 quantization steps of onnxruntime running the same QDQ model."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from int8_builders import QdqBuilds, assert_region_engines_agree, output_scale, qdq_build
from onnx import numpy_helper
from tvm import relax

import mrvl
from mrvl.accuracy import reference_session

sys.path.insert(0, str(Path(__file__).parents[1] / "quantization"))
from qdq_models import (  # noqa: E402
    INPUT_SHAPE,
    calibration,
    concat_cnn,
    quantize_static_qdq,
    shuffle_cnn,
    small_cnn,
)

LAYERS = ("/conv1/Conv", "/conv2/Conv", "/add/Add", "/pool/GlobalAveragePool", "/fc/Gemm")


def steps(model, got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.rint(np.abs(got.astype(np.float64) - want) / output_scale(model))


def built(model, num_tiles: int):
    report, lib = qdq_build(model, num_tiles)
    return report, relax.VirtualMachine(lib, tvm.cpu())


@pytest.fixture(scope="module")
def static_qdq():
    """onnxruntime's QDQ form of `small_cnn`, with its builds (shared by the tests here)."""
    return QdqBuilds(quantize_static_qdq(small_cnn()))


@pytest.fixture(scope="module")
def mrvl_qdq():
    feeds = calibration(16, seed=2)
    return QdqBuilds(mrvl.quantize(small_cnn(), feeds))


def built_in_one_int8_region(builds: QdqBuilds, num_tiles: int, layers):
    """The built VM of a QDQ model that must be one region with `layers` and all its MACs in
    int8."""
    report, lib = builds(num_tiles)
    assert len(report.regions) == 1, report
    rows = {r.node: r for r in report.rows}
    for node in layers:
        assert rows[node].dtype == "int8", (node, rows[node])
    assert report.int8_mac_fraction == 1.0
    return relax.VirtualMachine(lib, tvm.cpu())


def steps_on_calibration(model, vm) -> list[np.ndarray]:
    """How many quantization steps the build is off onnxruntime running the same QDQ model,
    per element, on each of 8 seeded inputs."""
    session = reference_session(model)
    offs = []
    for x in calibration(8, seed=11):
        want = session.run(None, x)[0]
        got = vm["main"](tvm.runtime.tensor(x["x"])).numpy()
        offs.append(steps(model, got, want))
    return offs


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize("source", ["static_qdq", "mrvl_qdq"])
def test_qdq_model_runs_in_int8_within_3_steps(source, num_tiles, request):
    builds = request.getfixturevalue(source)
    vm = built_in_one_int8_region(builds, num_tiles, LAYERS)
    counts = np.zeros(3)
    total = 0
    for off in steps_on_calibration(builds.model, vm):
        assert off.max() <= 3, off.max()
        counts += [(off == 0).sum(), (off <= 1).sum(), (off <= 3).sum()]
        total += off.size
    share = counts / total
    print(f"{source} {num_tiles} tiles: exact {share[0]:.3f}, <=1 {share[1]:.3f}, <=3 {share[2]:.3f}")


def test_float_layers_of_a_qdq_model_are_not_fp16_in_disguise(static_qdq):
    """Nothing in the report is float16: every offloaded node of the QDQ model is int8."""
    report, _ = static_qdq(1)
    assert {r.dtype for r in report.rows if r.offloaded} == {"int8"}
    assert INPUT_SHAPE == (1, 3, 16, 16)


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_int8_region_is_bit_identical_on_both_engines(static_qdq, num_tiles):
    """The interpreter and the Numba engine give the same bytes on the compiled int8 region
    (every int8 instruction the compiler selects: quant, qconv, qadd, qfc, dequant)."""
    _, lib = static_qdq(num_tiles)
    (region,) = lib.mrvl_regions
    opcodes = {ins.opcode for ins in region.program.code}
    assert {"quant", "qconv", "qadd", "qfc", "dequant"} <= opcodes, opcodes
    for feed in calibration(2, seed=5):
        assert_region_engines_agree(lib, [feed["x"]])


@pytest.fixture(scope="module")
def concat_qdq():
    return quantize_static_qdq(concat_cnn())


def test_int8_concat_and_copies_in_one_region(concat_qdq):
    """A concat of inputs at their own scales (`requant` rescales them) and a slice run in int8 in the one region, within 1 step of onnxruntime on the same QDQ model,
    and both engines give the same bytes."""
    report, lib = qdq_build(concat_qdq, 8)
    vm = relax.VirtualMachine(lib, tvm.cpu())
    assert len(report.regions) == 1, report
    kinds = {r.op_type for r in report.rows if r.dtype == "int8"}
    assert {"Concat", "Slice", "Conv"} <= kinds, kinds
    assert {r.dtype for r in report.rows if r.offloaded} == {"int8"}
    session = reference_session(concat_qdq)
    off = np.concatenate(
        [
            steps(
                concat_qdq, vm["main"](tvm.runtime.tensor(v["x"])).numpy(), session.run(None, v)[0]
            )
            for v in calibration(8, seed=11)
        ]
    )
    assert off.max() <= 1, off.max()
    print(f"concat: exact {(off == 0).mean():.3f}")
    (region,) = lib.mrvl_regions
    assert "requant" in {ins.opcode for ins in region.program.code}
    assert_region_engines_agree(lib, [calibration(1, seed=5)[0]["x"]])


def test_int8_channel_shuffle_is_one_copy():
    """A channel shuffle with a QDQ pair after each move (reshape, transpose, reshape) is one
    int8 copy in the region: the pairs between the moves are exact no-ops and are dropped."""
    model = quantize_static_qdq(shuffle_cnn())
    report, vm = built(model, 8)
    assert len(report.regions) == 1, report
    rows = {r.node: r for r in report.rows}
    assert rows["/shuffle/Transpose"].dtype == "int8"
    assert rows["gt_QuantizeLinear"].target == "folded"
    session = reference_session(model)
    for v in calibration(4, seed=11):
        got = vm["main"](tvm.runtime.tensor(v["x"])).numpy()
        assert steps(model, got, session.run(None, v)[0]).max() <= 1


def test_profile_and_trace_give_each_layer_its_dtype():
    """profile.json and the trace say which layers compute in int8 and which in float16: a
    QDQ model with one conv kept in float (`keep_fp16`) has both in one region."""
    from mrvl.sim import prepare
    from mrvl.sim.profile import check_profile, profile_regions
    from mrvl.sim.trace import chrome_trace

    model = mrvl.quantize(small_cnn(), calibration(8, seed=2), keep_fp16=["/conv2/Conv"])
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=1)
    regions = mrvl.build(mod, target="llvm").mrvl_regions
    profile = profile_regions([(r.symbol, prepare(r.binary), None) for r in regions])
    document = profile.to_json()
    check_profile(document)
    dtypes = {layer["onnx_node"]: layer["dtype"] for layer in document["layers"]}
    assert dtypes["/conv1/Conv"] == "int8" and dtypes["/conv2/Conv"] == "float16", dtypes
    assert dtypes["/fc/Gemm"] == "int8", dtypes
    slices = [e for e in chrome_trace(profile)["traceEvents"] if e["ph"] == "X"]
    assert {e["args"]["dtype"] for e in slices if e["name"] == "/conv1/Conv"} == {"int8"}
    assert {e["args"]["dtype"] for e in slices if e["name"] == "/conv2/Conv"} == {"float16"}


# ------------------------------------------- table activations and Mul (MobileNetV3, SE, SiLU)

ACTIVATION_LAYERS = (
    "/act1/HardSwish", "/se/gate/HardSigmoid", "/se/Mul", "/act2/Sigmoid", "/act2/Mul",
    "/act3/Tanh",
)  # fmt: skip


@pytest.fixture(scope="module")
def activation_qdq():
    from qdq_models import activation_cnn

    return QdqBuilds(mrvl.quantize(activation_cnn(), calibration(16, seed=2)))


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_int8_tables_and_products_in_one_region_within_one_step(activation_qdq, num_tiles):
    """HardSwish, HardSigmoid, Sigmoid and Tanh as int8 tables, x * sigmoid(x) as one table
    too, the squeeze-excitation gate as qmul: one region, every layer int8, each output within one step of
    onnxruntime running the same QDQ model (the tables are exact; each qmul is within one)."""
    vm = built_in_one_int8_region(activation_qdq, num_tiles, ACTIVATION_LAYERS)
    off = np.concatenate([o.ravel() for o in steps_on_calibration(activation_qdq.model, vm)])
    assert off.max() <= 1, off.max()
    print(f"{num_tiles} tiles: exact {np.mean(off == 0):.3f}, <=1 {np.mean(off <= 1):.3f}")


def test_int8_tables_and_products_are_bit_identical_on_both_engines(activation_qdq):
    _, lib = activation_qdq(8)
    (region,) = lib.mrvl_regions
    code = region.program.code
    assert any(i.opcode == "qmul" and i.fields["channels"] > 0 for i in code)  # the SE gate
    # x * sigmoid x is one table (fold_qdq_gated_tables.py), no same-shape qmul
    assert not any(i.opcode == "qmul" and i.fields["channels"] == 0 for i in code)
    assert any(i.opcode == "requant" and i.fields["lut_addr"] != -1 for i in code)  # tables
    for feed in calibration(2, seed=5):
        assert_region_engines_agree(lib, [feed["x"]])


def test_per_channel_int8_prelu_stays_on_the_cpu_with_its_reason():
    """A quantized PRelu with a slope per channel (between a dequantize and a quantize) is no
    function of one value, so no table, and no affine map that a depthwise conv runs (as
    x * c[C] is, tests/e2e/test_int8_more_layers.py): it stays on the CPU and says why,
    never in fp16."""
    from onnx import TensorProto
    from onnx import helper as oh

    inits = [
        numpy_helper.from_array(np.array([0.5, 0.1, 0.2], np.float32).reshape(3, 1, 1), "c"),
        oh.make_tensor("s", TensorProto.FLOAT, [], [0.05]),
        oh.make_tensor("z", TensorProto.INT8, [], [0]),
    ]
    nodes = [
        oh.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="/q"),
        oh.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="/dq"),
        oh.make_node("PRelu", ["d", "c"], ["m"], name="/scale"),
        oh.make_node("QuantizeLinear", ["m", "s", "z"], ["mq"], name="/mq"),
        oh.make_node("DequantizeLinear", ["mq", "s", "z"], ["y"], name="/mdq"),
    ]
    graph = oh.make_graph(
        nodes, "per_channel",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, list(INPUT_SHAPE))], inits,
    )  # fmt: skip
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(model)), model)
    row = {r.node: r for r in report.rows}["/scale"]
    assert not row.offloaded and "per-channel" in row.reason, row
