"""What fp16 storage alone costs a model: an fp16-storage emulation in onnxruntime.

Deep networks can miss the 3 % of the fp16 acceptance rule (`mrvl.accuracy`) from fp16
storage alone, whatever the compiler does. DESIGN §9 therefore also compares with an
emulation of the same model: weights rounded to fp16, and every float tensor (each graph
input and each float output of every node) rounded through fp16, with the arithmetic itself
done in fp32 by onnxruntime. The rounding is a `Cast` to float16 and back after each such
tensor; onnxruntime's graph optimizations are off so that no pass removes the pair. What the
MLIP keeps in f32 the emulation keeps in f32 too (`on_chip_f32_tensors`: biases, scales and
shifts, PRelu slopes, the softmax and layernorm accumulators), and what it never stores it
does not round (what lies inside an activation written out as a formula, such as a SiLU's
sigmoid or a GELU's erf: one table lookup); otherwise it would charge
fp16 for roundings the hardware never makes and flatter itself.

A result is as good as fp16 allows when its error is within max(3 %, the emulation's own
error against the fp32 reference); beyond that it is a compiler bug (`judge`).

The max relative error is an extreme-value statistic: on an output whose values pass
through zero (segmentation logits, box offsets) it is set by the few elements just above the
ignore threshold max|ref|/100, where an absolute error of a few tenths of a percent of max|ref|
is tens of percent. Two fp16 computations that differ only in where fp32 sums round (the MLIP
and onnxruntime accumulate in different orders) draw different values of it, so one draw of
each loses against the other about half the time even when both are as good as fp16 allows.
The rule therefore takes a second look at an output that misses the first comparison: the
distribution of its errors on the same run (`Distribution`): the count of elements beyond
3 % and the 99th percentile, each within 1.1 times the emulation's. A compiler bug moves the
distribution; fp16 noise moves single elements. It costs no further run.

The older second look (`judge_model(second_look="redraw")`) re-draws every fp16 rounding
instead: the input and `REDRAWS` copies of it moved by at most 2^-22 relative
(`redrawn_feeds`) run through both the compiled model and the emulation, and the output
passes when its median error over them is within max(3 %, the emulation's largest). It is
as discriminating on the zoo and on synthetic bugs (docs/zoo.md) and costs nine runs.

    verdict = judge_model(results, run, model, feeds, references)  # both looks; run(x) -> outputs
    verdict = judge(results, references, emulated)         # the first comparison alone
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .accuracy import FP16_MAX_RELATIVE_ERROR, Agreement, fp16_agreement, relative_errors
from .formula_constants import (
    GELU_ERF_DIVISOR,
    GELU_HALF,
    GELU_ONE,
    GELU_TANH_CUBIC,
    GELU_TANH_SCALE,
    near_constant,
)
from .onnx_shell import weightless_shell

__all__ = [
    "DISTRIBUTION_SLACK",
    "Distribution",
    "OutputVerdict",
    "Redrawn",
    "Verdict",
    "fp16_emulation_outputs",
    "fp16_storage_model",
    "fused_activation_f32_tensors",
    "judge",
    "judge_model",
    "layernorm_f32_tensors",
    "on_chip_f32_tensors",
    "redrawn_errors",
    "redrawn_feeds",
]

_UNROUNDED = "__mrvl_fp32"
_ROUNDED = "__mrvl_rounded"


def fp16_storage_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` that stores every float tensor in fp16 and computes in fp32.

    Float initializers and `Constant` values are rounded to fp16 in place. Every float graph
    input and every float node output is followed by Cast(float16) → Cast(float); consumers
    and graph outputs read the rounded tensor under its original name. What the MLIP keeps in
    fp32 stays fp32 (`on_chip_f32_tensors`): biases, scales and shifts, PRelu slopes,
    a layer normalization's parameters and the intermediate tensors of its decomposed form,
    and what lies inside an activation written out as a formula the compiler makes one table
    lookup (`fused_activation_f32_tensors`), which the MLIP never stores.
    (Softmax and LayerNormalization nodes keep their sums in fp32 inside onnxruntime
    already.) Types come from ONNX
    shape inference; a node output whose type it cannot tell raises `ValueError`, so no
    tensor silently escapes the rounding.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inferred = _inferred_graph(out)
    on_chip_f32 = on_chip_f32_tensors(graph, _ranks(inferred))
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT and init.name not in on_chip_f32:
            rounded = _round(numpy_helper.to_array(init))
            del init.float_data[:]  # the values move to raw_data, as from_array writes them
            init.raw_data = rounded.astype("<f4", copy=False).tobytes()
    types = _element_types(out, inferred)

    nodes = []
    initializers = {i.name for i in graph.initializer}
    read = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
    rounded_inputs = {}  # graph input → its rounded copy, which every consumer reads
    for value in graph.input:
        if value.name not in initializers and types.get(value.name) == TensorProto.FLOAT:
            rounded_inputs[value.name] = value.name + _ROUNDED
            nodes.extend(_round_trip(value.name, value.name + _ROUNDED))
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name in rounded_inputs:
                node.input[index] = rounded_inputs[name]
        if node.op_type == "Constant" and node.output[0] not in on_chip_f32:
            _round_constant(node)
        nodes.append(node)
        for index, name in enumerate(node.output):
            if not name or name not in read:  # an output nothing reads (Dropout's mask)
                continue
            elem = types.get(name)
            if elem is None:
                raise ValueError(
                    f"no type for {name!r} (output of node {node.name or node.op_type})"
                )
            if name in on_chip_f32:  # an accumulator the MLIP keeps in fp32 too
                continue
            if elem == TensorProto.FLOAT:  # the node writes fp32; readers see it rounded
                node.output[index] = name + _UNROUNDED
                nodes.extend(_round_trip(name + _UNROUNDED, name))
    del graph.node[:]
    graph.node.extend(nodes)
    return out


_BIAS_INPUT = {"Conv": 2, "ConvTranspose": 2, "Gemm": 2}
"""The input of each op that holds its bias, which the MLIP keeps in f32."""
_F32_PARAMETERS = {
    "BatchNormalization": (1, 2, 3, 4),
    "InstanceNormalization": (1, 2),
    "PRelu": (1,),
}
"""Per-channel parameters the MLIP applies in f32 (`scale`'s S and B, PRELU slopes)."""
_LAYERS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization"})
_AFFINE = frozenset({"Mul", "Add", "Sub", "Div"})


def on_chip_f32_tensors(graph: onnx.GraphProto, ranks: dict[str, int] | None = None) -> set[str]:
    """Tensors of `graph` the MLIP keeps in f32, which the emulation must not round.

    - the biases of Conv, ConvTranspose and Gemm, the parameters of BatchNormalization and
      InstanceNormalization, and PRelu slopes (f32 operands of `conv`, `fc`, `scale`);
    - affine steps by a per-channel or scalar constant (Mul, Add, Sub, Div): the compiler
      folds a chain of them into the layer before it (its f32 bias) or into one `scale`
      (f32 scale and shift), so their constants stay f32, and so does every tensor inside
      such a chain that only the next step reads: the MLIP rounds the chain's result once;
    - a layer normalization's parameters and accumulators (`layernorm_f32_tensors`);
    - the tensors inside an activation written out as a formula that the compiler reads as
      one table lookup: a SiLU's sigmoid, a GELU's erf, ... (`fused_activation_f32_tensors`).
    """
    kept = layernorm_f32_tensors(graph, ranks) | fused_activation_f32_tensors(graph)
    constants = {i.name: tuple(i.dims) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = tuple(node.attribute[0].t.dims)
    producer = {out: node for node in graph.node for out in node.output}
    readers = _reader_counts(graph)
    outputs = {o.name for o in graph.output}
    for node in graph.node:
        bias = _BIAS_INPUT.get(node.op_type)
        if bias is not None and len(node.input) > bias and node.input[bias] in constants:
            kept.add(node.input[bias])
        for index in _F32_PARAMETERS.get(node.op_type, ()):
            if len(node.input) > index and node.input[index] in constants:
                kept.add(node.input[index])
        if node.op_type not in _AFFINE or len(node.input) != 2:
            continue
        const = [n for n in node.input if n in constants]
        data = [n for n in node.input if n not in constants]
        if len(const) != 1 or len(data) != 1 or not _per_channel(constants[const[0]]):
            continue
        if node.op_type in ("Sub", "Div") and node.input[1] != const[0]:
            continue  # c - x and c / x are not affine steps of x
        kept.add(const[0])
        source = producer.get(data[0])
        folds = source is not None and (
            source.op_type in _LAYERS or _is_affine_step(source, constants)
        )
        if source is not None and source.op_type == "MatMul":
            folds = any(n in constants for n in source.input)  # an fc, not a bmm
        if folds and readers.get(data[0]) == 1 and data[0] not in outputs:
            kept.add(data[0])
    return kept


def fused_activation_f32_tensors(graph: onnx.GraphProto) -> set[str]:
    """The tensors strictly inside each activation written out as a formula that the compiler
    reads as one table lookup, which the MLIP never stores.

    `activation_forms.split_activation` reads these ONNX formulas, as TVM imports them, as one
    activation of x: SiLU `x * Sigmoid(x)`; HardSwish `x * HardSigmoid(x)` (alpha 1/6, beta
    0.5), `x * Clip(x * (1/6) + 0.5, 0, 1)`, `x * (Clip(x + 3, 0, 6) / 6)` and
    `(x * Clip(x + 3, 0, 6)) / 6`; Mish `x * Tanh(Log(1 + Exp(x)))`; GELU
    `x * (1 + Erf(x / sqrt 2)) * 0.5` and GELU-tanh `x * (1 + Tanh(sqrt(2/pi) (x + 0.044715
    x^3))) * 0.5` in their orders and groupings (`_activation_formula`). The MLIP computes
    `f16(act(f16 x))`: one rounding. So the emulation rounds x and the formula's result, not
    what lies between. Rounding it as well is no harmless excess: on an ill-conditioned
    network the two forms' errors differ several-fold either way, input by input
    (EfficientNet-B0's SiLUs, docs/architecture.md). A formula the compiler does not read as
    one (ONNX Softplus, which TVM writes as max(x, 0) + log(1 + exp(-|x|)); a Clip written as
    Max and Min) or one with an intermediate read outside it or a graph output (then stored)
    is rounded tensor by tensor."""
    formulas = _Formulas(graph)
    readers = _reader_counts(graph)
    outputs = {o.name for o in graph.output}
    kept: set[str] = set()
    for node in graph.node:
        nodes = formulas.activation(node)
        if nodes is None:
            continue
        inside = [n.output[0] for n in nodes if n is not node]
        reads = {t: sum(list(n.input).count(t) for n in nodes) for t in inside}
        if all(readers.get(t) == reads[t] and t not in outputs for t in inside):
            kept.update(inside)
    return kept


_HALF = ""
"""The factor 0.5 that a GELU divided by 2 stands for (no tensor has the empty name)."""


class _Formulas:
    """`activation_forms`' readings of an activation written out, on an ONNX graph: each
    matcher mirrors the Relax one of the same name and returns the formula's nodes (or the
    reading the Relax one returns), None when it is not that form."""

    def __init__(self, graph: onnx.GraphProto):
        self.producer = {out: node for node in graph.node for out in node.output if out}
        self.scalars: dict[str, float] = {}
        for init in graph.initializer:
            if int(np.prod(init.dims)) == 1:
                self.scalars[init.name] = float(numpy_helper.to_array(init).reshape(-1)[0])
        for node in graph.node:
            for attr in node.attribute if node.op_type == "Constant" else ():
                if attr.name == "value" and int(np.prod(attr.t.dims)) == 1:
                    value = numpy_helper.to_array(attr.t).reshape(-1)[0]
                    self.scalars[node.output[0]] = float(value)
                elif attr.name == "value_float":
                    self.scalars[node.output[0]] = float(attr.f)
        self.scalars[_HALF] = GELU_HALF

    def activation(self, root: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        """The nodes of the activation `root` ends (`split_activation`'s order), else None."""
        if root.op_type in ("Mul", "Div") and len(root.input) == 2:
            gelu = self._gelu(root)
            if gelu is not None:
                return gelu
        if root.op_type == "Mul" and len(root.input) == 2:
            for x, gate in (root.input, root.input[::-1]):
                nodes = self._gate(gate, x)
                if nodes is not None:
                    return [*nodes, root]
        if root.op_type == "Div" and len(root.input) == 2 and self._near(root.input[1], 6.0):
            mul = self._call(root.input[0], "Mul")
            if mul is not None:
                for x, other in (mul.input, mul.input[::-1]):
                    parts = self._relu6_of_x_plus_3(other, x)
                    if parts is not None:
                        return [*parts, mul, root]
        return None

    def _call(self, name: str, op_type: str) -> onnx.NodeProto | None:
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op_type else None

    def _near(self, name: str | None, target: float) -> bool:
        return near_constant(self.scalars.get(name) if name is not None else None, target)

    @staticmethod
    def _other(node: onnx.NodeProto, x: str) -> str | None:
        if len(node.input) != 2:
            return None
        a, b = node.input
        return b if a == x else a if b == x else None

    def _clip_bounds(self, clip: onnx.NodeProto, lo: float, hi: float) -> bool:
        attrs = {a.name: a.f for a in clip.attribute}  # opset < 11
        bounds = [attrs.get("min", -math.inf), attrs.get("max", math.inf)]
        for index in (1, 2):
            if len(clip.input) > index and clip.input[index]:
                bounds[index - 1] = self.scalars.get(clip.input[index])
        return near_constant(bounds[0], lo) and near_constant(bounds[1], hi)

    def _relu6_of_x_plus_3(self, name: str, x: str) -> list | None:
        clip = self._call(name, "Clip")
        if clip is None or not self._clip_bounds(clip, 0.0, 6.0):
            return None
        add = self._call(clip.input[0], "Add")
        if add is None or not self._near(self._other(add, x), 3.0):
            return None
        return [add, clip]

    def _gate(self, gate: str, x: str) -> list | None:
        sigmoid = self._call(gate, "Sigmoid")
        if sigmoid is not None and sigmoid.input[0] == x:
            return [sigmoid]
        hard = self._call(gate, "HardSigmoid")  # TVM: clip(alpha * x + beta, 0, 1)
        if hard is not None and hard.input[0] == x:
            attrs = {a.name: a.f for a in hard.attribute}
            if near_constant(attrs.get("alpha", 0.2), 1 / 6) and near_constant(
                attrs.get("beta", 0.5), 0.5
            ):
                return [hard]
        divide = self._call(gate, "Div")
        if divide is not None and self._near(divide.input[1], 6.0):
            parts = self._relu6_of_x_plus_3(divide.input[0], x)
            if parts is not None:
                return [*parts, divide]
        clip = self._call(gate, "Clip")
        if clip is not None and self._clip_bounds(clip, 0.0, 1.0):
            add = self._call(clip.input[0], "Add")
            for operand in add.input if add is not None else ():
                mul = self._call(operand, "Mul")
                if mul is None:
                    continue
                if self._near(self._other(mul, x), 1 / 6) and self._near(
                    self._other(add, operand), 0.5
                ):
                    return [mul, add, clip]
        tanh = self._call(gate, "Tanh")
        log = self._call(tanh.input[0], "Log") if tanh is not None else None
        add = self._call(log.input[0], "Add") if log is not None else None
        for operand in add.input if add is not None else ():
            exp = self._call(operand, "Exp")
            if exp is not None and exp.input[0] == x and self._near(self._other(add, operand), 1):
                return [exp, add, log, tanh]
        return None

    def _products(self, name: str) -> list[tuple[list, list]]:
        call = self._call(name, "Mul")
        if call is None or len(call.input) != 2:
            return []
        readings = [(list(call.input), [call])]
        for inner_name, third in (call.input, call.input[::-1]):
            inner = self._call(inner_name, "Mul")
            if inner is not None and len(inner.input) == 2:
                readings.append(([*inner.input, third], [inner, call]))
        return readings

    def _cube(self, name: str, x: str) -> list | None:
        power = self._call(name, "Pow")
        if power is not None and power.input[0] == x and self._near(power.input[1], 3.0):
            return [power]
        for factors, muls in self._products(name):
            if len(factors) == 3 and all(f == x for f in factors):
                return muls
        return None

    def _scaled(self, name: str, x: str, factor: float) -> onnx.NodeProto | None:
        mul = self._call(name, "Mul")
        if mul is not None and self._near(self._other(mul, x), factor):
            return mul
        div = self._call(name, "Div")
        if div is not None and div.input[0] == x and self._near(div.input[1], 1 / factor):
            return div
        return None

    def _gelu_inner(self, g: str) -> tuple[str, list] | None:
        """(x, nodes) when g is erf(x / sqrt 2) or tanh(sqrt(2/pi) (x + 0.044715 x^3))."""
        erf = self._call(g, "Erf")
        if erf is not None:
            arg = self.producer.get(erf.input[0])
            for x in list(arg.input)[:2] if arg is not None else ():
                step = self._scaled(erf.input[0], x, 1 / GELU_ERF_DIVISOR)
                if step is not None:
                    return x, [step, erf]
            return None
        tanh = self._call(g, "Tanh")
        arg = self.producer.get(tanh.input[0]) if tanh is not None else None
        if arg is None or len(arg.input) != 2:
            return None
        if arg.op_type == "Mul":  # sqrt(2/pi) * (x + 0.044715 x^3)
            for inner in arg.input:
                add = self._call(inner, "Add")
                if add is None or not self._near(self._other(arg, inner), GELU_TANH_SCALE):
                    continue
                for x, cubic in (add.input, add.input[::-1]):
                    term = self._call(cubic, "Mul")
                    for cube_name in term.input if term is not None else ():
                        cube = self._cube(cube_name, x)
                        if cube is not None and self._near(
                            self._other(term, cube_name), GELU_TANH_CUBIC
                        ):
                            return x, [*cube, term, add, arg, tanh]
        if arg.op_type == "Add":  # sqrt(2/pi) x + 0.044715 sqrt(2/pi) x^3
            for linear_name, cubic in (arg.input, arg.input[::-1]):
                linear, term = self._call(linear_name, "Mul"), self._call(cubic, "Mul")
                if linear is None or term is None:
                    continue
                for x in linear.input:
                    if not self._near(self._other(linear, x), GELU_TANH_SCALE):
                        continue
                    for cube_name in term.input:
                        cube = self._cube(cube_name, x)
                        factor = GELU_TANH_CUBIC * GELU_TANH_SCALE
                        if cube is not None and self._near(self._other(term, cube_name), factor):
                            return x, [linear, *cube, term, arg, tanh]
        return None

    def _gelu(self, root: onnx.NodeProto) -> list | None:
        """GELU written out: the product of x, 0.5 (or a division by 2) and 1 + erf(...) or
        1 + tanh(...), in any order and grouping."""
        if root.op_type == "Div":
            if not self._near(root.input[1], 2.0):
                return None
            readings = [([*f, _HALF], [*m, root]) for f, m in self._products(root.input[0])]
        else:
            readings = self._products(root.output[0])
        for factors, nodes in readings:
            halves = [i for i, f in enumerate(factors) if self._near(f, GELU_HALF)]
            rest = [f for i, f in enumerate(factors) if i not in halves]
            if len(factors) != 3 or len(halves) != 1 or len(rest) != 2:
                continue
            for x_factor, sum_factor in (rest, rest[::-1]):
                add = self._call(sum_factor, "Add")
                for g in add.input if add is not None else ():
                    if not self._near(self._other(add, g), GELU_ONE):
                        continue
                    inner = self._gelu_inner(g)
                    if inner is not None and inner[0] == x_factor:
                        return [*inner[1], add, *nodes]
        return None


def _reader_counts(graph: onnx.GraphProto) -> dict[str, int]:
    """How many node inputs read each tensor."""
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    return readers


def _per_channel(dims: tuple[int, ...]) -> bool:
    """Whether a constant of shape `dims` is a scalar or a vector along one axis."""
    return sum(d != 1 for d in dims) <= 1


def _is_affine_step(node: onnx.NodeProto, constants: dict[str, tuple[int, ...]]) -> bool:
    const = [n for n in node.input if n in constants]
    return (
        node.op_type in _AFFINE
        and len(node.input) == 2
        and len(const) == 1
        and _per_channel(constants[const[0]])
    )


_DECOMPOSED_LAYERNORM = ("ReduceMean", "Sub", "Pow", "ReduceMean", "Add", "Sqrt", "Div")


def _ranks(graph: onnx.GraphProto) -> dict[str, int]:
    """The rank of each tensor whose shape `graph` states (inputs, value_info, outputs)."""
    return {
        v.name: len(v.type.tensor_type.shape.dim)
        for v in [*graph.input, *graph.value_info, *graph.output]
        if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")
    }


def _reduced_axes(node: onnx.NodeProto, graph: onnx.GraphProto) -> list[int] | None:
    """A ReduceMean's axes (its attribute, or its constant second input from opset 18)."""
    for attr in node.attribute:
        if attr.name == "axes":
            return list(attr.ints)
    if len(node.input) > 1 and node.input[1]:
        for init in graph.initializer:
            if init.name == node.input[1]:
                return [int(a) for a in numpy_helper.to_array(init).reshape(-1)]
    return None


def _over_trailing_axes(mean: onnx.NodeProto, var: onnx.NodeProto, graph, ranks) -> bool:
    """Whether both means of a decomposed layernorm reduce over the trailing axes of a rank 2
    to 4 tensor, as `mrvl.layernorm` requires (`normalization.check_layernorm`); True when
    the graph states no rank for the input (shape inference then had nothing to say)."""
    rank = ranks.get(mean.input[0])
    if rank is None:
        return True
    axes = [_reduced_axes(n, graph) for n in (mean, var)]
    if not 2 <= rank <= 4 or axes[0] is None or axes[1] is None:
        return False
    normal = [sorted({a % rank for a in each}) for each in axes]
    return normal[0] == normal[1] == list(range(normal[0][0], rank)) if normal[0] else False


def layernorm_f32_tensors(graph: onnx.GraphProto, ranks: dict[str, int] | None = None) -> set[str]:
    """Tensors of `graph` the MLIP keeps in fp32 around a layer normalization: the scale and
    shift initializers of each LayerNormalization node, and in the decomposed form (ReduceMean,
    Sub, Pow, ReduceMean, Add, Sqrt, Div, then an optional Mul and Add by constants, matched
    by their data flow) every tensor but the last one's output, and the Mul/Add constants:
    when its means reduce over the trailing axes of a rank 2 to 4 tensor, as the compiler
    requires to make it one layer (else it runs as reduce, binary and scale_shift layers,
    each rounding to f16). `ranks` (each tensor's, as `fp16_storage_model` infers them)
    default to those the graph states."""
    initializers = {i.name for i in graph.initializer}
    ranks = _ranks(graph) if ranks is None else ranks
    producer = {out: node for node in graph.node for out in node.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    kept: set[str] = set()
    for node in graph.node:
        if node.op_type == "LayerNormalization":
            kept.update(n for n in node.input[1:] if n in initializers)
        if node.op_type != "Div" or len(node.input) != 2:
            continue
        chain, ok = [node], True
        std = producer.get(node.input[1])
        for op_type in ("Sqrt", "Add", "ReduceMean", "Pow"):
            if std is None or std.op_type != op_type:
                ok = False
                break
            chain.append(std)
            data = [n for n in std.input[:2] if n and n not in initializers]
            std = producer.get(data[0]) if len(data) == 1 else None
        centered = producer.get(node.input[0])
        if not ok or std is not centered or centered is None or centered.op_type != "Sub":
            continue
        mean = producer.get(centered.input[1])
        if mean is None or mean.op_type != "ReduceMean" or mean.input[0] != centered.input[0]:
            continue
        if not _over_trailing_axes(mean, chain[3], graph, ranks):  # chain[3]: the variance
            continue
        chain += [centered, mean]
        last = node
        for op_type in ("Mul", "Add"):
            users = readers.get(last.output[0], [])
            if len(users) == 1 and users[0].op_type == op_type:
                consts = [n for n in users[0].input if n in initializers]
                if len(consts) == 1:
                    kept.update(consts)
                    chain.append(users[0])
                    last = users[0]
        kept.update(n.output[0] for n in chain if n is not last)
    return kept


def _emulation_session(model: onnx.ModelProto):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(
        fp16_storage_model(model).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def fp16_emulation_outputs(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The outputs of `fp16_storage_model(model)` on `feeds`, in graph output order."""
    return _emulation_session(model).run(None, dict(feeds))


PERTURBATION = 2.0**-22
"""The relative move of each input element in `redrawn_feeds`: two fp32 ulps."""

REDRAWS = 8
"""How many re-drawn copies of the input the second look of the rule adds to it."""


def redrawn_feeds(
    feeds: Mapping[str, np.ndarray], draws: int, seed: int = 0
) -> list[dict[str, np.ndarray]]:
    """`feeds`, then `draws` seeded copies of it with every float32 element multiplied by
    1 + u, u uniform in ±`PERTURBATION`: the same inputs to fp32, re-drawn fp16 roundings."""
    rng = np.random.default_rng(seed)
    copies = [dict(feeds)]
    for _ in range(draws):
        moved = dict(feeds)
        for name, x in feeds.items():
            if x.dtype == np.float32:
                u = rng.uniform(-PERTURBATION, PERTURBATION, x.shape)
                moved[name] = (x * (1.0 + u)).astype(np.float32)
        copies.append(moved)
    return copies


@dataclass(frozen=True)
class Redrawn:
    """One output's max relative errors over the input and its re-drawn copies
    (`redrawn_feeds`; entry 0 is the input itself): the result's and the emulation's."""

    errors: tuple[float, ...]
    emulation_errors: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(np.median(self.errors))

    @property
    def limit(self) -> float:
        return max(FP16_MAX_RELATIVE_ERROR, max(self.emulation_errors))

    @property
    def passed(self) -> bool:
        return bool(np.all(np.isfinite(self.errors)) and self.median <= self.limit)

    def __str__(self) -> str:
        return (
            f"re-drawn over {len(self.errors)} inputs: median {self.median:.3e} "
            f"(range {min(self.errors):.3e}-{max(self.errors):.3e}), limit {self.limit:.3e} = "
            f"max(3 %, the emulation's largest; its range {min(self.emulation_errors):.3e}-"
            f"{max(self.emulation_errors):.3e})"
        )


def redrawn_errors(
    run: Callable[[dict[str, np.ndarray]], Sequence[np.ndarray]],
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    references: Sequence[np.ndarray],
    draws: int = REDRAWS,
    seed: int = 0,
    *,
    at_feeds: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None,
    session=None,
) -> list[Redrawn]:
    """Per output, the errors of `run` (the compiled model) and of the emulation against
    `references` over `redrawn_feeds(feeds, draws, seed)`. The reference stays at `feeds`: it
    moves by about 2^-22 relative, nothing the 3 % rule can see. `at_feeds`: the results and
    the emulation's outputs at `feeds` when the caller has them (not run again)."""
    session = session or _emulation_session(model)
    errors: list[list[float]] = [[] for _ in references]
    emulation_errors: list[list[float]] = [[] for _ in references]
    for draw, moved in enumerate(redrawn_feeds(feeds, draws, seed)):
        if draw == 0 and at_feeds is not None:
            results, emulated = at_feeds
        else:
            results, emulated = run(moved), session.run(None, moved)
        for index, (r, e, ref) in enumerate(zip(results, emulated, references, strict=True)):
            errors[index].append(fp16_agreement(r, ref).max_relative_error)
            emulation_errors[index].append(fp16_agreement(e, ref).max_relative_error)
    return [Redrawn(tuple(a), tuple(b)) for a, b in zip(errors, emulation_errors)]


DISTRIBUTION_SLACK = 1.1
"""How far the distribution look lets the result's count of elements beyond 3 % and its
99th percentile exceed the emulation's (DESIGN §9)."""


@dataclass(frozen=True)
class Distribution:
    """One output's relative errors on one run, as distributions rather than their largest
    element: how many judged elements are beyond 3 %, and the 99th percentile, of the result
    and of the emulation against the same reference.

    A compiler bug moves the distribution; fp16 noise moves single elements. So the second
    look passes an output whose count and 99th percentile are each within
    `DISTRIBUTION_SLACK` times the emulation's. It costs no run."""

    checked: int
    beyond: int
    p99: float
    emulation_beyond: int
    emulation_p99: float
    non_finite: int = 0  # result elements that are NaN or infinite, anywhere: never noise
    # nothing judged because the reference is all zeros, and the result is all zeros too
    exact_zeros: bool = False

    @classmethod
    def of(cls, result: np.ndarray, emulated: np.ndarray, reference: np.ndarray):
        error = relative_errors(result, reference)
        emulation_error = relative_errors(emulated, reference)
        return cls(
            checked=int(error.size),
            beyond=int(np.count_nonzero(error > FP16_MAX_RELATIVE_ERROR)),
            p99=_p99(error),
            emulation_beyond=int(np.count_nonzero(emulation_error > FP16_MAX_RELATIVE_ERROR)),
            emulation_p99=_p99(emulation_error),
            non_finite=int(np.count_nonzero(~np.isfinite(np.asarray(result, np.float64)))),
            exact_zeros=bool(
                error.size == 0 and not np.any(reference) and not np.any(np.asarray(result))
            ),
        )

    @property
    def passed(self) -> bool:
        if self.exact_zeros:  # an all-zero output, exactly: no element to judge, no error
            return True
        return bool(
            self.checked > 0
            and self.non_finite == 0
            and self.beyond <= DISTRIBUTION_SLACK * self.emulation_beyond
            and self.p99 <= DISTRIBUTION_SLACK * self.emulation_p99
        )

    def __str__(self) -> str:
        return (
            f"distribution over {self.checked} elements: {self.beyond} beyond 3 % "
            f"(emulation {self.emulation_beyond}), 99th percentile {self.p99:.3e} "
            f"(emulation {self.emulation_p99:.3e}); limits {DISTRIBUTION_SLACK}x the emulation's"
        )


def _p99(error: np.ndarray) -> float:
    if error.size == 0:
        return float("inf")
    return float(np.percentile(error, 99, method="higher"))


@dataclass(frozen=True)
class OutputVerdict:
    name: str
    error: Agreement  # the result against the fp32 reference
    emulation: Agreement  # the fp16-storage emulation against the same reference
    distribution: Distribution | None = None  # the second look, on the same run
    redrawn: Redrawn | None = None  # the older second look, over re-drawn roundings
    second_look: str = "distribution"  # which of the two decides ("distribution", "redraw")

    @property
    def limit(self) -> float:
        return max(FP16_MAX_RELATIVE_ERROR, self.emulation.max_relative_error)

    @property
    def within_limit(self) -> bool:
        """The first comparison: the error at the input within max(3 %, the emulation's)."""
        error = self.error
        finite = np.isfinite(error.max_relative_error)
        return bool(finite and error.checked > 0 and error.max_relative_error <= self.limit)

    @property
    def second_passed(self) -> bool:
        """The second look named by `second_look` (False when it was not taken)."""
        look = self.redrawn if self.second_look == "redraw" else self.distribution
        return look is not None and look.passed

    @property
    def passed(self) -> bool:
        return self.within_limit or self.second_passed


@dataclass(frozen=True)
class Verdict:
    outputs: list[OutputVerdict]

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    @property
    def on_second_look(self) -> bool:
        """Whether some output passed only on the second look."""
        return any(o.passed and not o.within_limit for o in self.outputs)

    @property
    def error(self) -> float:
        """The largest relative error of any output against the fp32 reference."""
        return max(o.error.max_relative_error for o in self.outputs)

    @property
    def emulation_error(self) -> float:
        return max(o.emulation.max_relative_error for o in self.outputs)

    def __str__(self) -> str:
        lines = []
        for o in self.outputs:
            verdict = "PASS" if o.passed else "FAIL"
            if o.passed and not o.within_limit:
                verdict = (
                    "PASS on re-drawn roundings"
                    if o.second_look == "redraw"
                    else "PASS on the distribution"
                )
            line = (
                f"{o.name}: {verdict}: max relative error {o.error.max_relative_error:.3e} "
                f"(limit {o.limit:.3e} = max(3 %, fp16-storage emulation's "
                f"{o.emulation.max_relative_error:.3e})) over {o.error.checked} elements"
            )
            if o.distribution is not None and not o.within_limit:
                line = f"{line}; {o.distribution}"
            lines.append(line if o.redrawn is None else f"{line}; {o.redrawn}")
        return "\n".join(lines)


def judge(
    results: Sequence[np.ndarray],
    references: Sequence[np.ndarray],
    emulated: Sequence[np.ndarray],
    names: Sequence[str] | None = None,
) -> Verdict:
    """The first comparison: each result against its fp32 reference, within max(3 %, the
    emulation's own error) under the fp16 acceptance rule (elements below max|ref|/100
    ignored), with each output's error distribution beside it for the second look
    (`Distribution`). `judge_model` adds the re-drawn one when asked."""
    if not len(results) == len(references) == len(emulated):
        raise ValueError(
            f"{len(results)} results, {len(references)} references, {len(emulated)} emulated"
        )
    names = list(names) if names is not None else [f"output {i}" for i in range(len(results))]
    return Verdict(
        [
            OutputVerdict(
                name,
                fp16_agreement(r, ref),
                fp16_agreement(e, ref),
                distribution=Distribution.of(r, e, ref),
            )
            for name, r, ref, e in zip(names, results, references, emulated)
        ]
    )


def judge_model(
    results: Sequence[np.ndarray],
    run: Callable[[dict[str, np.ndarray]], Sequence[np.ndarray]],
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    references: Sequence[np.ndarray],
    *,
    second_look: str = "distribution",
    redraw: str | None = None,
    draws: int = REDRAWS,
    seed: int = 0,
) -> Verdict:
    """The whole rule for a compiled model whose outputs at `feeds` are `results`: `judge`
    there, and for each output that misses it a second look.

    `second_look="distribution"` (DESIGN §9): on the same run, the count of elements beyond
    3 % and the 99th percentile of the relative error, each within `DISTRIBUTION_SLACK`
    times the emulation's (`Distribution`; no further run). `second_look="redraw"`: over
    re-drawn roundings (`redrawn_errors`, running `run` on `draws` re-drawn inputs), the
    median error within max(3 %, the emulation's largest over the same inputs).
    `redraw` says when the re-drawn look is taken: "on-miss" (the default when it decides),
    "always" (for reports, whichever decides) or "never" (the default otherwise)."""
    if second_look not in ("distribution", "redraw"):
        raise ValueError(f"second_look must be 'distribution' or 'redraw', not {second_look!r}")
    if redraw is None:
        redraw = "on-miss" if second_look == "redraw" else "never"
    if redraw not in ("on-miss", "always", "never"):
        raise ValueError(f"redraw must be 'on-miss', 'always' or 'never', not {redraw!r}")
    results = [np.asarray(r) for r in results]
    names = [o.name for o in model.graph.output]
    session = _emulation_session(model)
    emulated = session.run(None, dict(feeds))
    verdict = judge(results, references, emulated, names)
    verdict = Verdict([replace(o, second_look=second_look) for o in verdict.outputs])
    if redraw == "never" or (redraw == "on-miss" and all(o.within_limit for o in verdict.outputs)):
        return verdict
    looks = redrawn_errors(
        run, model, feeds, references, draws, seed, at_feeds=(results, emulated), session=session
    )
    return Verdict(
        [
            o if redraw == "on-miss" and o.within_limit else replace(o, redrawn=look)
            for o, look in zip(verdict.outputs, looks, strict=True)
        ]
    )


def _round(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).astype(np.float32)


def _round_trip(source: str, target: str) -> list[onnx.NodeProto]:
    half = f"{target}__mrvl_fp16"
    return [
        helper.make_node("Cast", [source], [half], name=f"{target}/fp16", to=TensorProto.FLOAT16),
        helper.make_node("Cast", [half], [target], name=f"{target}/fp32", to=TensorProto.FLOAT),
    ]


def _round_constant(node: onnx.NodeProto) -> None:
    for attr in node.attribute:
        if attr.name == "value" and attr.t.data_type == TensorProto.FLOAT:
            attr.t.CopyFrom(numpy_helper.from_array(_round(numpy_helper.to_array(attr.t))))


def _inferred_graph(model: onnx.ModelProto) -> onnx.GraphProto:
    return onnx.shape_inference.infer_shapes(weightless_shell(model), strict_mode=True).graph


def _element_types(model: onnx.ModelProto, graph: onnx.GraphProto) -> dict[str, int]:
    """Each tensor's element type: `graph` (the model's, shapes inferred) and the model's
    initializers."""
    types = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            types[value.name] = value.type.tensor_type.elem_type
    for init in model.graph.initializer:
        types[init.name] = init.data_type
    return types
