"""The real architectures of ONNX's `light` model tests, with usable weights.

`onnx/backend/test/data/light/` ships nine ImageNet CNNs (ResNet-50, SqueezeNet, ShuffleNet,
Inception v1/v2, DenseNet-121, AlexNet, ZFNet-512, VGG-19) whose weights are all
`ConstantOfShape(0.02)` (a few are small initializers). Every output of such a model is
degenerate: every channel of a layer computes the same number. `load_light_model` replaces
every weight by seeded random values of a sane scale, keeping the graph itself unchanged:

- Conv / Gemm / MatMul weights: He-style, normal with std sqrt(2 / fan_in);
- their biases: normal, std 0.01;
- BatchNormalization: scale 1 ± 0.1, bias normal std 0.05, mean normal std 0.05,
  variance uniform in [0.8, 1.25] (positive, about 1);
- the caffe2-style scale layer some exporters emit after a batch norm (`Unsqueeze` → `Mul`,
  `Unsqueeze` → `Add`): multiplier 1 ± 0.1, shift normal std 0.05.

Each `ConstantOfShape` that makes a weight becomes an initializer of the same name, the
`*__SHAPE` initializers it read disappear, and initializers are removed from the graph
inputs, so that importers treat them as constants. Integer initializers (reshape targets)
and float tensors with no recognised role are kept as they are.

He weights alone do not keep residual networks at a usable scale (ResNet-50's logits come out
with a standard deviation near 1600, ShuffleNet's activations near fp16's limit, and the
softmax is one-hot), so by default each Conv/Gemm/MatMul is then rescaled, weight and bias
together, to give unit-RMS outputs on a seeded calibration input (`calibrate_scales`,
LSUV-style). Measured after that with the default seed: every weight layer's output RMS is
within [0.99, 1.4], activations stay below 15, and the logits have a standard deviation of
about 1, on all nine models.

    python -m mrvl.models.light            # MACs, parameters and op counts of every model
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from ..onnx_shell import weightless_shell

__all__ = [
    "LIGHT_MODELS",
    "ONNX_IR_VERSION",
    "calibrate_scales",
    "light_model_path",
    "load_light_model",
    "model_macs",
    "node_macs",
    "random_inputs",
    "randomize_weights",
    "reweight",
]

LIGHT_MODELS = (
    "resnet50",
    "squeezenet",
    "shufflenet",
    "inception_v1",
    "inception_v2",
    "densenet121",
    "bvlc_alexnet",
    "zfnet512",
    "vgg19",
)

ONNX_IR_VERSION = 10
"""The files are IR version 3 (initializers must also be graph inputs there); onnxruntime 1.31
reads up to 13 and TVM any. 10 is what mrvl's own models use."""

CONV_BIAS_STD = 0.01
BN_SCALE_SPREAD = 0.1
BN_SHIFT_STD = 0.05
BN_VAR_RANGE = (0.8, 1.25)

_MAC_OPS = ("Conv", "Gemm", "MatMul")
# Ops a weight passes through unchanged on its way to the op that gives it its role.
_PASS_THROUGH = ("Unsqueeze", "Reshape", "Identity", "Cast", "Flatten", "Squeeze")


def light_model_path(name: str) -> Path:
    """Path of `light_<name>.onnx` inside the installed onnx package."""
    if name not in LIGHT_MODELS:
        raise ValueError(f"unknown light model {name!r}; known: {', '.join(LIGHT_MODELS)}")
    data = Path(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    return data / f"light_{name}.onnx"


def load_light_model(name: str, seed: int = 0, *, calibrate: bool = True) -> onnx.ModelProto:
    """`light_<name>.onnx` with seeded random weights (see the module docstring); checked.

    With `calibrate` (the default) each Conv/Gemm/MatMul is then rescaled so that its output
    has unit RMS on a seeded calibration input (see `calibrate_scales`).
    """
    return reweight(onnx.load(light_model_path(name)), seed, calibrate=calibrate)


def reweight(
    model: onnx.ModelProto,
    seed: int = 0,
    *,
    calibrate: bool = True,
    initializers: bool = True,
    scales: dict[str, float] | None = None,
) -> onnx.ModelProto:
    """`model` with seeded random weights (see the module docstring), checked.

    The weights are the float `ConstantOfShape` outputs and, with `initializers` (the light
    models' case), the float initializers too. Without it, initializers are kept as they
    are: a weight-free export stores only its fixed constants (HardSwish's 3 and 6, a
    detector's anchors) as initializers. With `calibrate`, each Conv/Gemm/MatMul is then
    rescaled to unit output RMS on a seeded input (see `calibrate_scales`), by `scales` when
    given (`calibrate_scales`'s factors, recorded: they are the same on every CPU).
    """
    skeleton, weights = _random_weights(model, seed, initializers=initializers)
    if calibrate:
        if scales is None:
            scales = calibrate_scales(skeleton, weights, seed=seed)
        elif set(scales) - set(weights):
            unknown = sorted(set(scales) - set(weights))
            raise ValueError(f"calibration factors for weights the model lacks: {unknown[:3]}")
        for weight, scale in scales.items():
            weights[weight] *= np.float32(scale)
    model = _with_weights(skeleton, weights)
    onnx.checker.check_model(weightless_shell(model))  # the graph; the weights are ours
    return model


def randomize_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy of `model` whose weights are seeded random initializers; the graph is unchanged."""
    return _with_weights(*_random_weights(model, seed))


def _random_weights(
    model: onnx.ModelProto, seed: int, *, initializers: bool = True
) -> tuple[onnx.ModelProto, dict]:
    """(the model without its float weights, weight name → seeded random array).

    The weight-making `ConstantOfShape` nodes and the shape tensors they read are gone from
    the skeleton; `_with_weights` puts the arrays back as initializers. Float initializers
    are weights too unless `initializers` is false.
    """
    rng = np.random.default_rng(seed)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {i.name: i for i in graph.initializer}

    # The float tensors that are weights: ConstantOfShape outputs and float initializers.
    shapes: dict[str, tuple[int, ...]] = {}
    originals: dict[str, np.ndarray] = {}
    generator_nodes = []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in inits:
            value = _constant_of_shape_value(node)
            if value.dtype == np.float32:
                shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]))
                shapes[node.output[0]] = shape
                originals[node.output[0]] = np.full(shape, value.item(), np.float32)
                generator_nodes.append(node)
    for init in graph.initializer if initializers else ():
        if init.data_type == TensorProto.FLOAT:
            shapes[init.name] = tuple(init.dims)
            originals[init.name] = numpy_helper.to_array(init)

    roles = _weight_roles(graph, set(shapes))
    weights = {
        name: _random_weight(rng, roles.get(name), shapes[name], originals[name])
        for name in sorted(shapes)  # sorted: the values do not depend on graph order
    }

    for node in generator_nodes:
        graph.node.remove(node)
    kept = [i for i in graph.initializer if i.name not in weights]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    del graph.value_info[:]
    return out, weights


def _with_weights(skeleton: onnx.ModelProto, weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The skeleton with `weights` as initializers, unused tensors dropped, initializers no
    longer listed as graph inputs (so importers take them as constants), IR version set."""
    out = onnx.ModelProto()
    out.CopyFrom(skeleton)
    graph = out.graph
    for name in sorted(weights):
        # filled in place: extend() with from_array() would copy every tensor once more
        array = np.ascontiguousarray(weights[name], dtype=np.float32)
        tensor = graph.initializer.add()
        tensor.name = name
        tensor.data_type = TensorProto.FLOAT
        tensor.dims.extend(array.shape)
        tensor.raw_data = array.tobytes()
    used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    unused = [i for i in graph.initializer if i.name not in used]
    for init in unused:
        graph.initializer.remove(init)
    init_names = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in init_names and i.name in used]
    del graph.input[:]
    graph.input.extend(inputs)
    out.ir_version = ONNX_IR_VERSION
    return out


def _constant_of_shape_value(node: onnx.NodeProto) -> np.ndarray:
    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
    return np.zeros(1, np.float32)  # the op's default: float 0


def _weight_roles(graph: onnx.GraphProto, weights: set[str]) -> dict[str, tuple[str, int, tuple]]:
    """weight name → (op type, input index, op attributes) of the op that consumes it."""
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, index))
    roles = {}
    for weight in weights:
        name, seen = weight, 0
        while seen < 8:  # follow Unsqueeze/Reshape chains to the consumer that matters
            uses = consumers.get(name, [])
            if len(uses) == 1 and uses[0][0].op_type in _PASS_THROUGH and uses[0][1] == 0:
                name, seen = uses[0][0].output[0], seen + 1
                continue
            break
        uses = consumers.get(name, [])
        if uses:
            node, index = uses[0]
            attrs = tuple((a.name, onnx.helper.get_attribute_value(a)) for a in node.attribute)
            roles[weight] = (node.op_type, index, attrs)
    return roles


def _random_weight(rng, role, shape: tuple[int, ...], original: np.ndarray) -> np.ndarray:
    op, index, attrs = role if role is not None else (None, None, ())
    attrs = dict(attrs)
    if op == "Conv" and index == 1:
        fan_in = int(np.prod(shape[1:]))
        data = _normal(rng, shape, np.sqrt(2.0 / fan_in))
    elif op == "Gemm" and index == 1:
        fan_in = shape[1] if attrs.get("transB", 0) else shape[0]
        data = _normal(rng, shape, np.sqrt(2.0 / fan_in))
    elif op == "MatMul" and index == 1 and len(shape) >= 2:
        data = _normal(rng, shape, np.sqrt(2.0 / shape[-2]))
    elif op in ("Conv", "Gemm") and index == 2:
        data = rng.standard_normal(shape) * CONV_BIAS_STD
    elif op == "BatchNormalization" and index == 1:
        data = 1.0 + rng.uniform(-BN_SCALE_SPREAD, BN_SCALE_SPREAD, shape)
    elif op == "BatchNormalization" and index in (2, 3):
        data = rng.standard_normal(shape) * BN_SHIFT_STD
    elif op == "BatchNormalization" and index == 4:
        data = rng.uniform(*BN_VAR_RANGE, shape)
    elif op == "LayerNormalization" and index == 1:  # the scale, as a batch norm's
        data = 1.0 + rng.uniform(-BN_SCALE_SPREAD, BN_SCALE_SPREAD, shape)
    elif op == "LayerNormalization" and index == 2:
        data = rng.standard_normal(shape) * BN_SHIFT_STD
    elif op == "Mul":
        data = 1.0 + rng.uniform(-BN_SCALE_SPREAD, BN_SCALE_SPREAD, shape)
    elif op in ("Add", "Sum"):
        data = rng.standard_normal(shape) * BN_SHIFT_STD
    else:
        return original  # not a weight we know how to draw: keep it
    return data.astype(np.float32)


def _normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> np.ndarray:
    """float32 normal samples, drawn in float32 (VGG-19 has 144 M weights)."""
    data = rng.standard_normal(shape, dtype=np.float32)
    data *= np.float32(std)
    return data


# ---------------------------------------------------------------------------------------------
# Calibration

CALIBRATION_PASSES = 3


def calibrate_scales(
    skeleton: onnx.ModelProto,
    weights: dict[str, np.ndarray],
    seed: int = 0,
    *,
    passes: int = CALIBRATION_PASSES,
    target_rms: float = 1.0,
) -> dict[str, float]:
    """Weight name → factor that gives each Conv/Gemm/MatMul output an RMS of `target_rms`.

    `skeleton` and `weights` are a model without its weights and the weights (as
    `_random_weights` returns them). A layer's weight and bias get the same factor.

    He initialisation keeps a plain conv chain at a stable scale, but not residual sums or
    max pools: with He weights alone, ResNet-50's logits have a standard deviation of about
    1600 and ShuffleNet's activations reach 6e4 (fp16 saturates at 65504), so the softmax is
    one-hot. This is LSUV-style data-dependent initialisation (Mishkin & Matas, 2016), done
    with onnxruntime on a seeded standard-normal input: one session in which each weight
    layer's output is multiplied by a scalar graph input. Each pass runs it once and, walking
    the graph in order, predicts how every tensor scales when the layers before it are
    rescaled (exact through the positively homogeneous ops of these networks, rms-weighted
    at sums and concatenations), so a few passes converge. Through the ops that are not
    homogeneous (Clip, Sigmoid, Tanh, HardSigmoid, HardSwish: the zoo's activations), the
    prediction evaluates the function on the rescaled measured input, and a product of two
    tensors (squeeze-excitation, SiLU) scales by the product of their factors.
    """
    import onnxruntime as ort

    graph = skeleton.graph
    producers = {out: node for node in graph.node for out in node.output}

    def source(name: str) -> str | None:
        """The weight `name` is made from through reshapes and the like, if any."""
        for _ in range(8):
            if name in weights:
                return name
            node = producers.get(name)
            if node is None or node.op_type not in _PASS_THROUGH or not node.input:
                return None
            name = node.input[0]
        return None

    layers = {
        node.output[0]: node
        for node in graph.node
        if node.op_type in _MAC_OPS and len(node.input) > 1 and source(node.input[1])
    }
    if not layers:
        return {}

    calib = onnx.ModelProto()
    calib.CopyFrom(skeleton)
    raw = {out: f"{out}__mrvl_raw" for out in layers}
    scale_input = {out: f"{out}__mrvl_scale" for out in layers}
    nodes = []
    for node in calib.graph.node:
        nodes.append(node)
        out = node.output[0] if node.output else None
        if out in layers:
            node.output[0] = raw[out]
            nodes.append(onnx.helper.make_node("Mul", [raw[out], scale_input[out]], [out]))
            calib.graph.input.append(
                onnx.helper.make_tensor_value_info(scale_input[out], TensorProto.FLOAT, [])
            )
    del calib.graph.node[:]
    calib.graph.node.extend(nodes)
    calib = _with_weights(calib, weights)
    fetch = [o for node in calib.graph.node for o in node.output if o]
    del calib.graph.output[:]
    calib.graph.output.extend(onnx.helper.make_empty_tensor_value_info(o) for o in fetch)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        calib.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )

    constants = set(weights) | {i.name for i in graph.initializer}
    constants |= {
        out
        for node in graph.node
        for out in node.output
        if node.op_type in _PASS_THROUGH and node.input and source(node.input[0])
    }
    graph_constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute:
            graph_constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    feeds = random_inputs(skeleton, seed=seed + 1_000_003, exclude=constants)
    scales = {out: 1.0 for out in layers}
    for _ in range(passes):
        run_feeds = dict(feeds)
        run_feeds.update({scale_input[o]: np.array(s, np.float32) for o, s in scales.items()})
        tensors = dict(zip(fetch, session.run(fetch, run_feeds)))
        tensors.update(feeds)
        # how much each tensor of the rescaled network is larger than in this run
        mult: dict[str, float] = {name: 1.0 for name in feeds}
        for node in graph.node:
            if node.output and node.output[0] in layers:
                out = node.output[0]
                m_in = mult.get(node.input[0], 1.0)
                measured = _rms(tensors[raw[out]])
                old = scales[out]
                new = target_rms / (measured * m_in) if measured > 0 else old
                scales[out] = new
                mult[out] = new * m_in / old
                continue
            ins = [i for i in node.input if i and i not in constants and i in mult]
            if not ins:
                continue
            predicted = _predicted_scale(node, ins, mult, tensors, graph_constants)
            if predicted is not None:
                m = predicted
            else:
                energy = [_mean_square(tensors.get(i)) for i in ins]
                total = sum(energy)
                m = 1.0
                if total:
                    m = np.sqrt(sum(mult[i] ** 2 * e for i, e in zip(ins, energy)) / total)
            for out in node.output:
                if out:
                    mult[out] = float(m)

    factors: dict[str, float] = {}
    for out, layer in layers.items():
        for name in layer.input[1:3]:
            name = source(name) if name else None
            if name:
                factors[name] = factors.get(name, 1.0) * scales[out]
    return factors


def _clip_bounds(node: onnx.NodeProto, constants: dict[str, np.ndarray]):
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    bounds = [attrs.get("min", -np.inf), attrs.get("max", np.inf)]
    for index in (1, 2):
        if len(node.input) > index and node.input[index]:
            bounds[index - 1] = constants[node.input[index]]
    return bounds


def _hard_sigmoid(x: np.ndarray, node: onnx.NodeProto) -> np.ndarray:
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return np.clip(attrs.get("alpha", 0.2) * x + attrs.get("beta", 0.5), 0.0, 1.0)


# Elementwise functions that are not positively homogeneous: a rescaled input x·m does not
# rescale the output by m, so the output's scale is predicted by evaluating f(x·m) on the
# measured input. (The light models use none of them.)
_NONHOMOGENEOUS = {
    "Clip": lambda x, node, c: np.clip(x, *_clip_bounds(node, c)),
    "Sigmoid": lambda x, node, c: 1.0 / (1.0 + np.exp(-x)),
    "Tanh": lambda x, node, c: np.tanh(x),
    "HardSigmoid": lambda x, node, c: _hard_sigmoid(x, node),
    "HardSwish": lambda x, node, c: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0),
}


def _predicted_scale(node, ins, mult, tensors, constants) -> float | None:
    """How much `node`'s output grows when its inputs grow by `mult`, for the ops where the
    rms-weighted rule is wrong: the functions above, the product of two tensors (the
    squeeze-excitation gate, SiLU written as x·sigmoid(x)), which scales by the product, and
    LayerNormalization, which does not scale. None for every other op."""
    if node.op_type == "Mul" and len(ins) == 2:
        return mult[ins[0]] * mult[ins[1]]
    if node.op_type == "LayerNormalization":
        return 1.0  # normalizes its input: its output does not scale with it
    function = _NONHOMOGENEOUS.get(node.op_type)
    if function is None or node.input[0] != ins[0] or tensors.get(ins[0]) is None:
        return None
    x = np.asarray(tensors[ins[0]], np.float64)
    before = _rms(function(x, node, constants))
    return _rms(function(x * mult[ins[0]], node, constants)) / before if before > 0 else 1.0


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(_mean_square(x)))


def _mean_square(x) -> float:
    if x is None:
        return 0.0
    x = np.asarray(x)
    if x.dtype.kind != "f" or x.size == 0:
        return 0.0
    return float(np.mean(np.square(x, dtype=np.float64)))


# ---------------------------------------------------------------------------------------------
# MACs


def node_macs(model: onnx.ModelProto) -> dict[str, int]:
    """ONNX node name → multiply-accumulates of one inference, for Conv, Gemm and MatMul.

    Shapes come from onnx shape inference. Nodes without a name are keyed as
    `mrvl.frontend.onnx_node_name` keys them (`<op_type>:<first output>`).
    """
    inferred = onnx.shape_inference.infer_shapes(weightless_shell(model))
    graph = inferred.graph
    shapes: dict[str, tuple[int, ...]] = {}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        dims = info.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[info.name] = tuple(d.dim_value for d in dims)
    for init in model.graph.initializer:
        shapes[init.name] = tuple(init.dims)

    macs: dict[str, int] = {}
    for node in graph.node:
        if node.op_type not in _MAC_OPS:
            continue
        out = shapes.get(node.output[0])
        weight = shapes.get(node.input[1])
        if out is None or weight is None:
            raise ValueError(f"no static shape for node {_name(node)} ({node.op_type})")
        if node.op_type == "Conv":
            per_output = int(np.prod(weight[1:]))  # C_in / groups × kernel
        elif node.op_type == "Gemm":
            trans_a = next((a.i for a in node.attribute if a.name == "transA"), 0)
            a_shape = shapes[node.input[0]]
            per_output = a_shape[0] if trans_a else a_shape[1]
        else:  # MatMul
            per_output = weight[-2] if len(weight) >= 2 else weight[0]
        macs[_name(node)] = int(np.prod(out)) * per_output
    return macs


def model_macs(model: onnx.ModelProto) -> int:
    """Total multiply-accumulates of Conv, Gemm and MatMul in one inference."""
    return sum(node_macs(model).values())


def _name(node: onnx.NodeProto) -> str:
    return node.name or f"{node.op_type}:{node.output[0] if node.output else ''}"


# ---------------------------------------------------------------------------------------------
# Inputs


def random_inputs(
    model: onnx.ModelProto, seed: int = 0, *, exclude: Iterable[str] = ()
) -> dict[str, np.ndarray]:
    """A seeded standard-normal float32 tensor for each graph input that is not an initializer
    (nor in `exclude`)."""
    rng = np.random.default_rng(seed)
    skip = {i.name for i in model.graph.initializer} | set(exclude)
    feeds = {}
    for value in model.graph.input:
        if value.name in skip:
            continue
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def _summary(names: Iterable[str]) -> None:
    for name in names:
        model = load_light_model(name)
        params = sum(int(np.prod(i.dims)) for i in model.graph.initializer)
        ops = Counter(n.op_type for n in model.graph.node)
        print(
            f"{name:14s} {model_macs(model) / 1e9:7.3f} GMAC {params / 1e6:7.2f} M params  "
            + ", ".join(f"{op} {k}" for op, k in sorted(ops.items()))
        )


if __name__ == "__main__":
    _summary(LIGHT_MODELS)
