"""Helpers the pytest suites share (importable as `helpers`: tests/ is on pytest's path)."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]


def region_functions(mod):
    """(symbol, function) of every mrvl region, with its global_symbol set as RunCodegen does."""
    from tvm import relax

    for gv, func in mod.functions.items():
        attrs = func.attrs if isinstance(func, relax.Function) and func.attrs else {}
        if "Codegen" in attrs and str(attrs["Codegen"]) == "mrvl":
            yield gv.name_hint, func.with_attr("global_symbol", gv.name_hint)


def onnxruntime_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray], outputs=None):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(outputs, feeds)


def truncated_at(model: onnx.ModelProto, tensor_name: str) -> onnx.ModelProto:
    """A copy of `model` whose only output is the intermediate tensor `tensor_name`."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.output[:]
    copy.graph.output.append(onnx.helper.make_empty_tensor_value_info(tensor_name))
    return copy


def float_model(nodes, inits, inputs, outputs, *, name: str, opset: int, ir_version: int = 10):
    """A checked ONNX model `name` of `nodes` and initializers `inits`, its float32 graph
    `inputs` and `outputs` given as (name, shape) pairs, at `opset` of the default domain."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version
    onnx.checker.check_model(m)
    return m


def offloaded_partition(
    onnx_model: onnx.ModelProto, *, num_tiles: int, regions: int = 1, **options
):
    """`onnx_model` partitioned for the MLIP (`options`: mcpu...), every node offloaded, into
    `regions` MLIP regions (asserted)."""
    import mrvl

    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model), num_tiles=num_tiles, **options)
    report = mrvl.partition_report(mod)
    on_cpu = [(r.node, r.reason) for r in report.rows if r.target == "cpu"]
    assert on_cpu == [], f"kept on the CPU: {on_cpu}"
    used = {r.target for r in report.rows if r.offloaded}
    assert len(used) == regions, f"regions {sorted(used)}"
    return mod


def assert_same_bytes(expected: list[np.ndarray], actual: list[np.ndarray]) -> None:
    """The two lists of outputs are identical, byte for byte (no tolerance)."""
    assert len(expected) == len(actual), f"{len(expected)} outputs against {len(actual)}"
    for index, (a, b) in enumerate(zip(expected, actual)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"output {index}"
        if a.tobytes() != b.tobytes():
            diff = np.flatnonzero(a.reshape(-1).view(np.uint8) != b.reshape(-1).view(np.uint8))
            raise AssertionError(
                f"output {index}: engines differ in {diff.size} bytes, first at byte {diff[0]}"
            )


def run_on_both_engines(lib, x: np.ndarray) -> list[np.ndarray]:
    """`main` of a built library on input `x`, on the reference interpreter and on the Numba
    engine: the outputs must be the same bytes. Returns the interpreter's."""
    import tvm
    from tvm import relax

    from mrvl.sim import use_engine

    vm = relax.VirtualMachine(lib, tvm.cpu())
    outputs = []
    for engine in ("interp", "numba"):
        with use_engine(engine):
            outputs.append([vm["main"](tvm.runtime.tensor(x)).numpy()])
    assert_same_bytes(outputs[0], outputs[1])
    return outputs[0]


def flatten_outputs(value) -> list[np.ndarray]:
    """The arrays of a Relax VM result (a tensor, or nested tuples of them), in order."""
    import tvm

    if isinstance(value, tvm.runtime.Tensor):
        return [value.numpy()]
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        return [array for item in value for array in flatten_outputs(item)]
    return [np.asarray(value)]


def run_model_on_both_engines(lib, inputs, cold=None) -> int:
    """Run the VM on `inputs` on the interpreter, then twice on the Numba engine (the second
    run is warm: its weight cache packed, the DMAs only constant weights read skipped),
    require the same output bytes; returns the number of simulator runs per engine run.
    `cold`: the outputs and simulator runs (`engine_run`) of the Numba engine's first run
    of `lib` on `inputs` if the caller made it already, compared in its place."""
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(lib, tvm.cpu())
    args = [tvm.runtime.tensor(np.asarray(x)) for x in inputs]
    outputs, calls = [], []
    for engine, done in (("interp", None), ("numba", cold), ("numba", None)):
        if done is None:
            done = engine_run(engine, lambda: flatten_outputs(vm["main"](*args)))
        outputs.append(done[0])
        calls.append(done[1])
    assert calls[0] == calls[1] == calls[2] > 0, "nothing ran on the simulator"
    assert_same_bytes(outputs[0], outputs[1])
    assert_same_bytes(outputs[0], outputs[2])
    return calls[1]


def engine_run(engine: str, call):
    """`call()`, which runs a built library, with its regions on the simulator engine
    `engine`: what it returns and how many simulator runs it made, each one on `engine`."""
    from mrvl.sim import simulator_wall_time, use_engine

    with use_engine(engine), simulator_wall_time() as spent:
        result = call()
    assert set(spent.by_engine) <= {engine}, spent.by_engine
    return result, spent.calls


def assert_fp16_rule(lib, onnx_model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """`main` of a built library on `feeds` agrees with onnxruntime by the fp16 rule."""
    import tvm
    from tvm import relax

    from mrvl.accuracy import fp16_agreement

    vm = relax.VirtualMachine(lib, tvm.cpu())
    result = vm["main"](*[tvm.runtime.tensor(v) for v in feeds.values()]).numpy()
    (reference,) = onnxruntime_outputs(onnx_model, feeds)
    agreement = fp16_agreement(result, reference)
    assert agreement.passed, str(agreement)


def instruction_features(program) -> set[tuple]:
    """What selects a code path in the simulator's engines, per instruction of a
    `mrvl.isa.Program`: the opcode with its activation, pool mode, dtypes, memory spaces,
    element size, and whether a conv is grouped, dilated, strided, padded, narrow (fewer than
    32 output channels), continues or leaves an fp32 accumulator. Two programs with the same
    features run the same engine code, at other sizes."""
    features = set()
    for ins in program.code:
        f, op = ins.fields, ins.opcode
        if op == "dma":
            key = (op, f["src_space"], f["dst_space"], f["elem_bytes"])
        elif op == "cvt":
            key = (op, f["src_dtype"], f["dst_dtype"], tuple(f["perm"]) != tuple(sorted(f["perm"])))
        elif op == "conv":
            key = (
                op, f["act"], f["groups"] > 1, f["out_shape"][3] < 32, f["acc_addr"] != -1,
                f["acc_out"], f["b_addr"] != -1, max(f["dilation"]) > 1, max(f["stride"]) > 1,
                max(f["pad"]) > 0,
            )  # fmt: skip
        elif op == "pool":
            key = (op, f["mode"], f["count_include_pad"], max(f["pad"]) + max(f["pad_end"]) > 0)
        elif "act" in f:
            key = (op, f["act"])
        else:
            key = (op,)
        features.add(key)
    return features


def lib_features(lib) -> set[tuple]:
    """`instruction_features` of every region of a `mrvl.build` result."""
    return set().union(*(instruction_features(r.program) for r in lib.mrvl_regions))


def load_module(name: str, path: Path):
    """The Python file `path` imported as module `name` (once per session)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# ------------------------------------------------------------------- the engine-identity corpus


def paths_net() -> onnx.ModelProto:
    """Engine paths the e2e nets and MNIST leave out and the large light models use (see
    tests/models/test_light_models.py): a BatchNormalization alone (scale, no activation),
    wide convs with no activation, with and without bias, stride and padding, and on a second
    input a strided, unpadded conv with relu over 8192 channels, too wide for one tile's OCM
    with even one output channel, so it is cut into input-channel blocks (fp32 partial sums)
    as ZFNet-512's layers are, and a narrow strided, unpadded conv with relu in one block (as
    ZFNet-512's are when the tiling search keeps a layer's input channels whole). Then paths
    only some zoo models ran: a narrow 1x1 conv with bias and sigmoid (RegNetY's squeeze-
    excitation), a wide strided, padded conv with bias and relu, and on a third input a
    narrow strided, padded depthwise conv with bias and no activation (ShuffleNetV2's) and one
    with relu (MobileNetV3-Small's); MobileNetV2's relu6 (a clip) fused into a wide strided,
    padded conv and into wide depthwise convs, strided and not; and on a fourth input an fc
    with hard-swish (MobileNetV3-Small's classifier); EfficientNet-B0's wide 1x1 conv with bias
    and sigmoid, and its depthwise convs with SiLU (x * sigmoid(x)), strided and not."""
    rng = np.random.default_rng(0)
    c = 64

    def init(name, shape, positive=False):
        a = rng.standard_normal(shape).astype(np.float32) * 0.1
        return numpy_helper.from_array(np.abs(a) + 0.5 if positive else a, name)

    inits = [
        init("s", (c,), True), init("b", (c,)), init("m", (c,)), init("v", (c,), True),
        init("w1", (c, c, 3, 3)), init("b1", (c,)), init("w2", (c, c, 3, 3)), init("b2", (c,)),
        init("w3", (c, c, 1, 1)), init("w4", (c, c, 3, 3)),
        init("w5", (32, 8192, 3, 3)), init("b5", (32,)),
        init("w6", (16, c, 3, 3)), init("b6", (16,)),
        init("w7", (8, c, 1, 1)), init("b7", (8,)), init("w8", (32, c, 3, 3)), init("b8", (32,)),
        init("w9", (16, 1, 3, 3)), init("b9", (16,)),
        init("w10", (32, c, 3, 3)), init("b10", (32,)), init("w11", (c, 1, 3, 3)),
        init("b11", (c,)), init("w12", (c, 1, 3, 3)), init("b12", (c,)),
        init("w13", (16, 1, 3, 3)), init("b13", (16,)), init("w14", (32, c)), init("b14", (32,)),
        init("w15", (32, c, 1, 1)), init("b15", (32,)), init("w16", (c, 1, 3, 3)),
        init("b16", (c,)), init("w17", (c, 1, 3, 3)), init("b17", (c,)),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(6.0, np.float32), "six"),
    ]  # fmt: skip
    node = helper.make_node
    nodes = [
        node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], name="bn"),
        node("Conv", ["bn", "w1", "b1"], ["c1"], name="conv_bias", pads=[1, 1, 1, 1]),
        node("Conv", ["c1", "w2", "b2"], ["c2"], name="conv_stride", pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Conv", ["c2", "w3"], ["c3"], name="conv_1x1"),
        node("Conv", ["c3", "w4"], ["y"], name="conv_pad", pads=[1, 1, 1, 1]),
        node("Conv", ["z", "w5", "b5"], ["c5"], name="conv_blocks", strides=[2, 2]),
        node("Relu", ["c5"], ["y2"], name="conv_blocks_relu"),
        node("Conv", ["x", "w6", "b6"], ["c6"], name="conv_narrow", strides=[2, 2]),
        node("Relu", ["c6"], ["y3"], name="conv_narrow_relu"),
        node("Conv", ["x", "w7", "b7"], ["c7"], name="conv_narrow_sigmoid"),
        node("Sigmoid", ["c7"], ["y4"], name="conv_narrow_sigmoid_sigmoid"),
        node("Conv", ["x", "w8", "b8"], ["c8"], name="conv_stride_relu", pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Relu", ["c8"], ["y5"], name="conv_stride_relu_relu"),
        node("Conv", ["d", "w9", "b9"], ["y6"], name="conv_depthwise_narrow", group=16, pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Conv", ["x", "w10", "b10"], ["c10"], name="conv_stride_clip", pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Clip", ["c10", "zero", "six"], ["y7"], name="conv_stride_clip_clip"),
        node("Conv", ["x", "w11", "b11"], ["c11"], name="conv_depthwise_clip", group=c, pads=[1, 1, 1, 1]),
        node("Clip", ["c11", "zero", "six"], ["y8"], name="conv_depthwise_clip_clip"),
        node("Conv", ["x", "w12", "b12"], ["c12"], name="conv_depthwise_stride_clip", group=c, pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Clip", ["c12", "zero", "six"], ["y9"], name="conv_depthwise_stride_clip_clip"),
        node("Conv", ["d", "w13", "b13"], ["c13"], name="conv_depthwise_narrow_relu", group=16, pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Relu", ["c13"], ["y10"], name="conv_depthwise_narrow_relu_relu"),
        node("Gemm", ["f", "w14", "b14"], ["g14"], name="fc_hardswish", transB=1),
        node("HardSwish", ["g14"], ["y11"], name="fc_hardswish_hardswish"),
        node("Conv", ["x", "w15", "b15"], ["c15"], name="conv_1x1_sigmoid"),
        node("Sigmoid", ["c15"], ["y12"], name="conv_1x1_sigmoid_sigmoid"),
        node("Conv", ["x", "w16", "b16"], ["c16"], name="conv_depthwise_silu", group=c, pads=[1, 1, 1, 1]),
        node("Sigmoid", ["c16"], ["s16"], name="conv_depthwise_silu_sigmoid"),
        node("Mul", ["c16", "s16"], ["y13"], name="conv_depthwise_silu_mul"),
        node("Conv", ["x", "w17", "b17"], ["c17"], name="conv_depthwise_stride_silu", group=c, pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Sigmoid", ["c17"], ["s17"], name="conv_depthwise_stride_silu_sigmoid"),
        node("Mul", ["c17", "s17"], ["y14"], name="conv_depthwise_stride_silu_mul"),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "paths",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 8, 8]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8192, 3, 3]),
            helper.make_tensor_value_info("d", TensorProto.FLOAT, [1, 16, 8, 8]),
            helper.make_tensor_value_info("f", TensorProto.FLOAT, [1, c]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 4, 4]),
            helper.make_tensor_value_info("y2", TensorProto.FLOAT, [1, 32, 1, 1]),
            helper.make_tensor_value_info("y3", TensorProto.FLOAT, [1, 16, 3, 3]),
            helper.make_tensor_value_info("y4", TensorProto.FLOAT, [1, 8, 8, 8]),
            helper.make_tensor_value_info("y5", TensorProto.FLOAT, [1, 32, 4, 4]),
            helper.make_tensor_value_info("y6", TensorProto.FLOAT, [1, 16, 4, 4]),
            helper.make_tensor_value_info("y7", TensorProto.FLOAT, [1, 32, 4, 4]),
            helper.make_tensor_value_info("y8", TensorProto.FLOAT, [1, c, 8, 8]),
            helper.make_tensor_value_info("y9", TensorProto.FLOAT, [1, c, 4, 4]),
            helper.make_tensor_value_info("y10", TensorProto.FLOAT, [1, 16, 4, 4]),
            helper.make_tensor_value_info("y11", TensorProto.FLOAT, [1, 32]),
            helper.make_tensor_value_info("y12", TensorProto.FLOAT, [1, 32, 8, 8]),
            helper.make_tensor_value_info("y13", TensorProto.FLOAT, [1, c, 8, 8]),
            helper.make_tensor_value_info("y14", TensorProto.FLOAT, [1, c, 4, 4]),
        ],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def blocks_net() -> onnx.ModelProto:
    """Convs over 1024 input channels, cut into input-channel blocks (fp32 partial sums) at 1
    tile, in the forms DenseNet-121 and ResNet-50 run and the other corpus models do not: the
    first block of a bias-free 1x1 conv and of a padded 3x3 one, a narrow (16-channel) padded
    one, the last block of a strided, padded conv with relu, and a max of two tensors
    (`binary`); and in the forms only Inception v1 and v2 ran: the last block of a narrow conv
    with relu (padded 3x3 and unpadded 1x1), of a strided, padded conv with no activation
    (wide, and narrow with a bias in its first block); and the forms of zoo models: the last
    block of a 1x1 conv with sigmoid (LR-ASPP's), the blocks of a narrow 1x1 conv with SiLU and
    of one with a bias and no activation (EfficientNet-B0's). With it, those models need no
    interpreter run of their own."""
    rng = np.random.default_rng(0)
    c = 1024

    def init(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.02).astype(np.float32), name)

    node = helper.make_node
    nodes = [
        node("Conv", ["p", "w1"], ["y1"], name="conv_1x1_blocks"),
        node("Conv", ["q", "w2"], ["c2"], name="conv_pad_blocks", pads=[1, 1, 1, 1]),
        node("Relu", ["c2"], ["r2"], name="conv_pad_blocks_relu"),
        node("Max", ["c2", "r2"], ["y2"], name="max_of_two"),
        node("Conv", ["q", "w3"], ["y3"], name="conv_narrow_blocks", pads=[1, 1, 1, 1]),
        node("Conv", ["q", "w4"], ["c4"], name="conv_stride_blocks", pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Relu", ["c4"], ["y4"], name="conv_stride_blocks_relu"),
        node("Conv", ["q", "w5"], ["c5"], name="conv_narrow_relu_blocks", pads=[1, 1, 1, 1]),
        node("Relu", ["c5"], ["y5"], name="conv_narrow_relu_blocks_relu"),
        node("Conv", ["p", "w6"], ["c6"], name="conv_narrow_1x1_relu_blocks"),
        node("Relu", ["c6"], ["y6"], name="conv_narrow_1x1_relu_blocks_relu"),
        node("Conv", ["q", "w7", "b7"], ["y7"], name="conv_narrow_stride_blocks", pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Conv", ["q", "w8"], ["y8"], name="conv_stride_linear_blocks", pads=[1, 1, 1, 1], strides=[2, 2]),
        node("Conv", ["p", "w9"], ["c9"], name="conv_1x1_sigmoid_blocks"),
        node("Sigmoid", ["c9"], ["y9"], name="conv_1x1_sigmoid_blocks_sigmoid"),
        node("Conv", ["p", "w10"], ["c10"], name="conv_narrow_1x1_silu_blocks"),
        node("Sigmoid", ["c10"], ["s10"], name="conv_narrow_1x1_silu_blocks_sigmoid"),
        node("Mul", ["c10", "s10"], ["y10"], name="conv_narrow_1x1_silu_blocks_mul"),
        node("Conv", ["p", "w11", "b11"], ["y11"], name="conv_narrow_1x1_bias_blocks"),
    ]  # fmt: skip
    inits = [
        init("w1", (64, c, 1, 1)), init("w2", (64, c, 3, 3)), init("w3", (16, c, 3, 3)),
        init("w4", (64, c, 3, 3)),
        init("w5", (16, c, 3, 3)), init("w6", (16, c, 1, 1)), init("w7", (16, c, 3, 3)),
        init("b7", (16,)), init("w8", (64, c, 3, 3)), init("w9", (64, c, 1, 1)),
        init("w10", (16, c, 1, 1)), init("w11", (16, c, 1, 1)), init("b11", (16,)),
    ]  # fmt: skip
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "blocks",
        [value("p", TensorProto.FLOAT, [1, c, 2, 16]), value("q", TensorProto.FLOAT, [1, c, 3, 3])],
        [
            value("y1", TensorProto.FLOAT, [1, 64, 2, 16]),
            value("y2", TensorProto.FLOAT, [1, 64, 3, 3]),
            value("y3", TensorProto.FLOAT, [1, 16, 3, 3]),
            value("y4", TensorProto.FLOAT, [1, 64, 2, 2]),
            value("y5", TensorProto.FLOAT, [1, 16, 3, 3]),
            value("y6", TensorProto.FLOAT, [1, 16, 2, 16]),
            value("y7", TensorProto.FLOAT, [1, 16, 2, 2]),
            value("y8", TensorProto.FLOAT, [1, 64, 2, 2]),
            value("y9", TensorProto.FLOAT, [1, 64, 2, 16]),
            value("y10", TensorProto.FLOAT, [1, 16, 2, 16]),
            value("y11", TensorProto.FLOAT, [1, 16, 2, 16]),
        ],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def _e2e_nets() -> dict:
    return load_module("mrvl_e2e_nets", ROOT / "tests" / "e2e" / "test_layers_end_to_end.py").NETS


ENGINE_CORPUS_MODELS = (
    "residual", "activations", "batch8", "shapes", "preactivation", "paths", "blocks", "mnist",
)  # fmt: skip
"""The small models every run compares on both engines, each built for 1 and for 8 tiles
(tests/sim/test_engines_models.py): the e2e nets, `paths_net` and MNIST."""
ENGINE_CORPUS = tuple((name, tiles) for name in ENGINE_CORPUS_MODELS for tiles in (1, 8))


@functools.cache
def corpus_model(name: str) -> onnx.ModelProto:
    if name == "paths":
        return paths_net()
    if name == "blocks":
        return blocks_net()
    if name == "mnist":
        from mrvl.models.mnist import make_mnist_model

        return make_mnist_model(seed=0)
    return _e2e_nets()[name]()


@functools.cache
def corpus_build(name: str, num_tiles: int):
    """`mrvl.build` of a corpus model, once per session."""
    import mrvl

    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(corpus_model(name)), num_tiles=num_tiles)
    return mrvl.build(mod)


def corpus_inputs(name: str) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [
        rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in corpus_model(name).graph.input
    ]


def corpus_features() -> set[tuple]:
    """`lib_features` of the whole engine-identity corpus."""
    return set().union(*(lib_features(corpus_build(n, t)) for n, t in ENGINE_CORPUS))


FEATURE_FIXTURE = ROOT / "tests" / "fixtures" / "engine_features.json"
"""The `instruction_features` each engine-identity build runs: "corpus" (the whole
`ENGINE_CORPUS`) and "light:<name>" (the light models that run on both engines, built as
tests/models/test_light_models.py builds them). Each entry is checked, equal, by the test that
runs that build on both engines, so it cannot go stale; a model left off the interpreter is
then checked against the union without building anything. Written by
`scripts/engine_features.py --record`."""


def pinned_features() -> dict[str, set[tuple]]:
    """`FEATURE_FIXTURE`, each entry a set of feature tuples."""
    pinned = json.loads(FEATURE_FIXTURE.read_text())
    return {key: {tuple(f) for f in features} for key, features in pinned.items()}


def assert_features_pinned(key: str, features: set[tuple]) -> None:
    """`features` are exactly the pinned entry `key` of `FEATURE_FIXTURE`."""
    pinned = pinned_features().get(key, set())
    assert pinned == features, (
        f"{key} runs other engine paths than {FEATURE_FIXTURE.name} pins (new: "
        f"{sorted(features - pinned)}, gone: {sorted(pinned - features)}); re-record with "
        f"scripts/engine_features.py --record {key}"
    )


# ---------------------------------------------------------- conformance cases on both engines

CONFORMANCE_ENGINE_CASES = frozenset(
    {
        "test_conv_with_strides_and_asymmetric_padding+const",
        "test_maxpool_2d_ceil",
        "test_averagepool_2d_pads_count_include_pad",
        "test_globalaveragepool",
        "test_gemm_all_attributes+const",
        "test_batchnorm_example+const",
        "test_concat_2d_axis_1",
    }
)
"""Offloaded ONNX node conformance cases of several kinds that run on both engines by
default, one test each (tests/sim/test_engines_models.py); the other offloaded cases are
compared by one `slow` test (tests/conformance/test_node_conformance.py)."""


def conformance_partitioned(case, num_tiles: int = 8):
    """A conformance case imported and partitioned, or None if mrvl rejects it (the
    conformance suite reports those: tests/conformance)."""
    import warnings

    import mrvl

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return mrvl.partition_for_mrvl(mrvl.from_onnx(case.model), num_tiles=num_tiles)
    except mrvl.MrvlError:
        return None


def warm_simulator() -> None:
    """Run MNIST once on the Numba engine, which compiles its kernels into Numba's on-disk
    cache (about a minute of CPU on a cold cache): `scripts/test.sh` does it once, next to lit,
    so that the pytest workers load the kernels instead of each compiling them."""
    import tvm
    from tvm import relax

    from mrvl.sim import use_engine

    vm = relax.VirtualMachine(corpus_build("mnist", 8), tvm.cpu())
    with use_engine("numba"):
        vm["main"](*[tvm.runtime.tensor(x) for x in corpus_inputs("mnist")])
