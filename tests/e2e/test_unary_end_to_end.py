"""The unary layers of modern models on the MLIP (issue 21), end to end against onnxruntime with
the fp16 rule: GELU in its Erf and tanh forms (written out, and ONNX Gelu of opset 20), Erf,
Exp, Log, Sqrt, Neg, Pow by a constant, Reciprocal, Abs, Max / Min by a constant as a clip, and
Max(LeakyRelu(x), c) as one LEAKY_FLOOR table.

Each op runs alone (a scale_shift layer) and after a conv and an fc, where it must be the
layer's fused activation (one table lookup, no layer of its own); every network runs in one
region with nothing left on the CPU."""

from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest
import tvm
from helpers import float_model, onnxruntime_outputs
from onnx import TensorProto, helper, numpy_helper
from tvm import relax

import mrvl
from mrvl.compiler import compile_region
from mrvl.fp16_emulation import fp16_emulation_outputs, judge
from mrvl.partition import partition_reasons
from mrvl.placement import node_targets

node = helper.make_node
SQRT2 = float(np.sqrt(2.0))
TANH_SCALE = float(np.sqrt(2.0 / np.pi))


def scalar(name, value):
    return numpy_helper.from_array(np.array(value, np.float32), name)


def model(nodes, inits, in_shape, out_shape, opset=18) -> onnx.ModelProto:
    return float_model(
        nodes, inits, [("x", in_shape)], [("y", out_shape)], name="unary", opset=opset
    )


def gelu_erf_nodes(x, y, prefix, order):
    """GELU as exporters write it: PyTorch `x * (1 + erf(x / sqrt2)) * 0.5` ("torch"), or
    `(x * 0.5) * (1 + erf(x * (1 / sqrt2)))` ("half_first")."""
    p = prefix
    if order == "torch":
        return [
            node("Div", [x, "sqrt2"], [p + "d"], name=p + "div"),
            node("Erf", [p + "d"], [p + "e"], name=p + "erf"),
            node("Add", [p + "e", "one"], [p + "a"], name=p + "add"),
            node("Mul", [x, p + "a"], [p + "m"], name=p + "mul"),
            node("Mul", [p + "m", "half"], [y], name=p + "half"),
        ]
    return [
        node("Mul", [x, "half"], [p + "h"], name=p + "half"),
        node("Mul", ["inv_sqrt2", x], [p + "d"], name=p + "scale"),
        node("Erf", [p + "d"], [p + "e"], name=p + "erf"),
        node("Add", ["one", p + "e"], [p + "a"], name=p + "add"),
        node("Mul", [p + "h", p + "a"], [y], name=p + "mul"),
    ]


def gelu_tanh_nodes(x, y, prefix, cube):
    """GELU's tanh form as PyTorch writes it (x^3 by Pow) or with x * x * x."""
    p = prefix
    if cube == "pow":
        cube_nodes = [node("Pow", [x, "three"], [p + "c"], name=p + "pow")]
    else:
        cube_nodes = [
            node("Mul", [x, x], [p + "sq"], name=p + "sq"),
            node("Mul", [p + "sq", x], [p + "c"], name=p + "cube"),
        ]
    return [
        *cube_nodes,
        node("Mul", ["kappa", p + "c"], [p + "k"], name=p + "kappa"),
        node("Add", [x, p + "k"], [p + "i"], name=p + "inner"),
        node("Mul", [p + "i", "beta"], [p + "b"], name=p + "beta"),
        node("Tanh", [p + "b"], [p + "t"], name=p + "tanh"),
        node("Add", [p + "t", "one"], [p + "a"], name=p + "add"),
        node("Mul", ["half", x], [p + "h"], name=p + "half"),
        node("Mul", [p + "h", p + "a"], [y], name=p + "mul"),
    ]


GELU_CONSTANTS = [
    scalar("sqrt2", SQRT2), scalar("inv_sqrt2", 1 / SQRT2), scalar("one", 1.0),
    scalar("half", 0.5), scalar("three", 3.0), scalar("kappa", 0.044715),
    scalar("beta", TANH_SCALE),
]  # fmt: skip


def op_nodes(op: str, x: str, y: str) -> tuple[list, list, int]:
    """The nodes computing `op` from x into y, their constants, and the opset they need."""
    if op == "gelu_erf":
        return gelu_erf_nodes(x, y, "g_", "torch"), GELU_CONSTANTS, 18
    if op == "gelu_erf_half_first":
        return gelu_erf_nodes(x, y, "g_", "half_first"), GELU_CONSTANTS, 18
    if op == "gelu_tanh":
        return gelu_tanh_nodes(x, y, "g_", "pow"), GELU_CONSTANTS, 18
    if op == "gelu_tanh_products":
        return gelu_tanh_nodes(x, y, "g_", "products"), GELU_CONSTANTS, 18
    if op == "onnx_gelu":
        return [node("Gelu", [x], [y], name="gelu")], [], 20
    if op == "onnx_gelu_tanh":
        return [node("Gelu", [x], [y], name="gelu", approximate="tanh")], [], 20
    if op.startswith("pow"):
        exponent = float(op[3:].replace("_", "."))
        return [node("Pow", [x, "p"], [y], name="pow")], [scalar("p", exponent)], 18
    if op == "leaky_floor":
        nodes = [
            node("LeakyRelu", [x], ["leaky"], name="leaky", alpha=0.1),
            node("Max", ["leaky", "floor"], [y], name="floor"),
        ]
        return nodes, [scalar("floor", -0.1)], 18
    if op in ("max", "min"):
        bound = -0.4 if op == "max" else 0.7
        nodes = [node(op.capitalize(), ["bound", x], [y], name=op)]
        return nodes, [scalar("bound", bound)], 18
    onnx_op = {"erf": "Erf", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "neg": "Neg",
               "reciprocal": "Reciprocal", "abs": "Abs"}[op]  # fmt: skip
    return [node(onnx_op, [x], [y], name=op)], [], 18


POSITIVE_DOMAIN = {"log", "sqrt", "reciprocal", "pow0_5"}
"""Ops defined (or well conditioned) only on positive inputs: their layer's output is made
positive (positive weights and bias, inputs in [0.5, 2))."""

OPS = [
    "gelu_erf", "gelu_erf_half_first", "gelu_tanh", "gelu_tanh_products", "onnx_gelu",
    "onnx_gelu_tanh", "erf", "exp", "log", "sqrt", "neg", "pow3", "pow0_5", "reciprocal",
    "abs", "max", "min", "leaky_floor",
]  # fmt: skip

EXPECTED_ACTIVATION = {
    "gelu_erf": "gelu", "gelu_erf_half_first": "gelu", "gelu_tanh": "gelu_tanh",
    "gelu_tanh_products": "gelu_tanh", "onnx_gelu": "gelu", "onnx_gelu_tanh": "gelu_tanh",
    "erf": "erf", "exp": "exp", "log": "log", "sqrt": "sqrt", "neg": "none", "pow3": "pow",
    "pow0_5": "pow", "reciprocal": "reciprocal", "abs": "abs", "max": "clip", "min": "clip",
    "leaky_floor": "leaky_floor",
}  # fmt: skip
"""The fused activation each op becomes (Neg is a scale of -1, folded into the weights)."""


def net(op: str, layer: str) -> onnx.ModelProto:
    """`op` alone on x ("alone"), after a 3x3 conv ("conv") or after a Gemm ("fc")."""
    rng = np.random.default_rng(zlib.crc32(f"{op}/{layer}".encode()))
    positive = op in POSITIVE_DOMAIN
    scale = 0.15 if op == "exp" else 0.3

    def weights(name, shape):
        w = rng.random(shape) if positive else rng.standard_normal(shape)
        return numpy_helper.from_array((w * scale).astype(np.float32), name)

    if layer == "alone":
        core, inits, in_shape, out_shape, src = [], [], [2, 3, 5, 6], [2, 3, 5, 6], "x"
    elif layer == "conv":
        core = [node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1])]
        inits = [weights("w", (6, 3, 3, 3)), weights("b", (6,))]
        in_shape, out_shape, src = [1, 3, 7, 5], [1, 6, 7, 5], "c"
    else:
        core = [node("Gemm", ["x", "w", "b"], ["c"], name="fc", transB=1)]
        inits = [weights("w", (10, 12)), weights("b", (10,))]
        in_shape, out_shape, src = [4, 12], [4, 10], "c"
    nodes, consts, opset = op_nodes(op, src, "y")
    return model(core + nodes, inits + consts, in_shape, out_shape, opset)


def inputs_for(op: str, onnx_model: onnx.ModelProto) -> dict[str, np.ndarray]:
    shape = [d.dim_value for d in onnx_model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(zlib.crc32(op.encode()))
    if op in POSITIVE_DOMAIN:
        return {"x": rng.uniform(0.5, 2.0, shape).astype(np.float32)}
    return {"x": (rng.standard_normal(shape) * 1.5).astype(np.float32)}


def partitioned(onnx_model, **options):
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model), **options)
    targets = node_targets(mod)
    on_cpu = [n.name for n in onnx_model.graph.node if targets.get(n.name, "cpu") == "cpu"]
    assert on_cpu == [], f"kept on the CPU: {on_cpu} ({partition_reasons(mod)})"
    regions = [
        f for _, f in mod.functions_items() if f.attrs is not None and f.attrs.get("Codegen")
    ]
    assert len(regions) == 1
    return mod, regions[0]


def run_and_judge(onnx_model, mod, feeds):
    """Within max(3 %, the fp16-storage emulation's own error) (DESIGN section 9): Log near 1
    and Reciprocal are ill-conditioned, so the f16 rounding of their input alone can move
    their result by more than 3 %."""
    lib = mrvl.build(mod)
    vm = relax.VirtualMachine(lib, tvm.cpu())
    result = vm["main"](*[tvm.runtime.tensor(v) for v in feeds.values()]).numpy()
    references = onnxruntime_outputs(onnx_model, feeds)
    verdict = judge([result], references, fp16_emulation_outputs(onnx_model, feeds))
    assert verdict.passed, str(verdict)


@pytest.mark.parametrize("layer", ["alone", "conv", "fc"])
@pytest.mark.parametrize("op", OPS)
def test_unary_op_runs_in_one_region_as_one_layer(op, layer):
    """The op is one layer's activation: the conv's or fc's own, or a scale_shift's alone."""
    onnx_model = net(op, layer)
    mod, region = partitioned(onnx_model, num_tiles=2)
    layers = [n.get("attrs", {}) for n in compile_region(region).nodes_json["nodes"]]
    computes = [a for a in layers if a["layer_name"][0] in ("Conv2D", "FC", "ScaleShift")]
    assert len(computes) == 1, [a["layer_name"] for a in layers]
    expected = EXPECTED_ACTIVATION[op]
    if layer == "alone" and op == "neg":
        assert computes[0]["gamma_const"]  # a ScaleShift by -1
    assert computes[0]["activation_type"] == [expected]
    run_and_judge(onnx_model, mod, inputs_for(op, onnx_model))


def clip_chains() -> onnx.ModelProto:
    """Max / Min by constants after layers: the audio net's `Max(LeakyRelu(x), -0.4)` (one
    LEAKY_FLOOR table), `Min(Relu(x), 0.6)` and `Min(Max(x, 0), 0.6)` (each folded into the
    conv's CLIP bounds), and a lone `Min(1.5, x)` with the constant first."""
    rng = np.random.default_rng(21)

    def w(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.4).astype(np.float32), name)

    nodes = [
        node("Min", ["x", "c15"], ["m0"], name="lone_min"),
        node("Conv", ["m0", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        node("LeakyRelu", ["c1"], ["l1"], name="leaky", alpha=0.2),
        node("Max", ["l1", "floor"], ["f1"], name="leaky_floor"),
        node("Conv", ["f1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        node("Relu", ["c2"], ["r2"], name="relu"),
        node("Min", ["r2", "six"], ["f2"], name="relu_min"),
        node("Conv", ["f2", "w3"], ["c3"], name="conv3", pads=[1, 1, 1, 1]),
        node("Max", ["c3", "zero"], ["m3"], name="max0"),
        node("Min", ["six", "m3"], ["y"], name="min6"),
    ]
    inits = [
        w("w1", (4, 3, 3, 3)), w("w2", (4, 4, 3, 3)), w("w3", (4, 4, 3, 3)),
        scalar("c15", 1.5), scalar("floor", -0.4), scalar("six", 0.6), scalar("zero", 0.0),
    ]  # fmt: skip
    return model(nodes, inits, [1, 3, 6, 6], [1, 4, 6, 6])


def test_max_and_min_by_constants_are_clips_in_one_region():
    onnx_model = clip_chains()
    mod, region = partitioned(onnx_model, num_tiles=2)
    layers = [n.get("attrs", {}) for n in compile_region(region).nodes_json["nodes"]]
    computes = [
        (a["layer_name"][0], a["activation_type"][0],
         *(a.get(f"activation_{k}") for k in ("min", "max", "alpha", "beta")))
        for a in layers
        if "activation_type" in a
    ]  # fmt: skip
    f = lambda v: [format(float(np.float32(v)), ".17g")]  # noqa: E731
    assert computes == [
        ("ScaleShift", "clip", ["-inf"], f(1.5), None, None),  # the lone Min
        ("Conv2D", "leaky_floor", None, None, f(0.2), f(-0.4)),  # Max after LeakyRelu
        ("Conv2D", "clip", ["0"], f(0.6), None, None),  # Relu then Min: one clip
        ("Conv2D", "clip", ["0"], f(0.6), None, None),  # Max then Min: one clip
    ]
    rng = np.random.default_rng(5)
    run_and_judge(onnx_model, mod, {"x": (rng.standard_normal([1, 3, 6, 6]) * 2).astype(np.float32)})


def transformer_mlp() -> onnx.ModelProto:
    """A ViT block's MLP over a sequence [N, T, K]: MatMul + bias, GELU (PyTorch's Erf form),
    MatMul + bias, and the residual Add: one region, GELU fused into the first fc."""
    rng = np.random.default_rng(7)

    def w(name, shape, scale=0.25):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    nodes = [
        node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        node("Add", ["h", "b1"], ["hb"], name="fc1_bias"),
        *gelu_erf_nodes("hb", "g", "mlp_", "torch"),
        node("MatMul", ["g", "w2"], ["o"], name="fc2"),
        node("Add", ["o", "b2"], ["ob"], name="fc2_bias"),
        node("Add", ["x", "ob"], ["y"], name="residual"),
    ]
    inits = [w("w1", (16, 32)), w("b1", (32,)), w("w2", (32, 16)), w("b2", (16,)), *GELU_CONSTANTS]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 16])],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 10
    onnx.checker.check_model(m)
    return m


def test_gelu_of_a_transformer_mlp_is_fused_into_its_fc():
    onnx_model = transformer_mlp()
    mod, region = partitioned(onnx_model, num_tiles=4)
    layers = [n.get("attrs", {}) for n in compile_region(region).nodes_json["nodes"]]
    fcs = [a["activation_type"][0] for a in layers if a["layer_name"] == ["FC"]]
    assert fcs == ["gelu", "none"]
    assert not any(a["layer_name"] == ["ScaleShift"] for a in layers)
    rng = np.random.default_rng(3)
    run_and_judge(onnx_model, mod, {"x": rng.standard_normal([2, 8, 16]).astype(np.float32)})


def test_what_the_mlip_cannot_take_stays_on_the_cpu_with_a_reason():
    """Pow by a tensor exponent: on the CPU, named, the build intact. (Max of two tensors,
    once on the CPU here too, is `mrvl.binary` since issue 21.)"""
    nodes = [
        node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        node("Pow", ["c", "x"], ["p"], name="pow_by_tensor"),
        node("Max", ["p", "c"], ["y"], name="max_of_tensors"),
    ]
    w = numpy_helper.from_array(np.full((3, 3, 3, 3), 0.1, np.float32), "w")
    onnx_model = model(nodes, [w], [1, 3, 4, 4], [1, 3, 4, 4])
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model))
    targets = node_targets(mod)
    assert targets["conv"] != "cpu"
    assert targets["pow_by_tensor"] == "cpu" and targets["max_of_tensors"] != "cpu"
    report = {row.node: row for row in mrvl.partition_report(mod).rows}
    assert report["pow_by_tensor"].reason
    feeds = {"x": np.random.default_rng(1).uniform(0.5, 1.5, [1, 3, 4, 4]).astype(np.float32)}
    run_and_judge(onnx_model, mod, feeds)


@pytest.mark.parametrize("op", OPS)
def test_both_engines_give_the_same_bytes(op):
    """The interpreter and the Numba engine agree bit for bit (and in saturation counts) on
    each op after a conv, at 1 and 4 tiles (a table loaded on several tiles)."""
    from helpers import assert_same_bytes

    from mrvl.sim import RunStats, run

    onnx_model = net(op, "conv")
    x = inputs_for(op, onnx_model)["x"] * 4  # also beyond the tables' saturation points
    for tiles in (1, 4):
        _, region = partitioned(onnx_model, num_tiles=tiles)
        binary = compile_region(region, num_tiles=tiles).binary
        stats = [RunStats(), RunStats()]
        outputs = [run(binary, [x], engine=e, stats=s) for e, s in zip(("interp", "numba"), stats)]
        assert_same_bytes(outputs[0], outputs[1])
        assert np.array_equal(stats[0].saturated, stats[1].saturated)
        assert np.array_equal(stats[0].nans, stats[1].nans)


@pytest.mark.parametrize("opset", [10, 11])
def test_old_pytorch_resize_forms_run_on_the_mlip(opset):
    """A RetinaFace-style FPN merge as older PyTorch exports it: opset 11 writes
    Resize(x, roi=[], scales=[], sizes), opset 10 Resize(x, scales); TVM's importer rejects
    both, onnxruntime runs them. Nearest 2x upsampling, then the lateral add: one region."""
    rng = np.random.default_rng(opset)
    if opset == 11:
        inputs = ["c", "roi", "scales", "sizes"]
        consts = [scalar("roi", []), scalar("scales", []),
                  numpy_helper.from_array(np.array([1, 4, 8, 10], np.int64), "sizes")]  # fmt: skip
        attrs = dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    else:
        inputs, consts, attrs = ["c", "scales"], [scalar("scales", [1, 1, 2, 2])], {}
    nodes = [
        node("Conv", ["x", "w"], ["c"], name="top", strides=[2, 2], pads=[1, 1, 1, 1]),
        node("Resize", inputs, ["u"], name="upsample", mode="nearest", **attrs),
        node("Conv", ["x", "wl"], ["l"], name="lateral", pads=[1, 1, 1, 1]),
        node("Add", ["u", "l"], ["y"], name="merge"),
    ]
    w = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w")
    wl = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "wl")
    onnx_model = model(nodes, [w, wl, *consts], [1, 3, 8, 10], [1, 4, 8, 10], opset=opset)
    mod, _ = partitioned(onnx_model, num_tiles=2)
    run_and_judge(onnx_model, mod, {"x": rng.standard_normal([1, 3, 8, 10]).astype(np.float32)})
