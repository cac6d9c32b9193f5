"""What fp16 storage alone costs a model: an fp16-storage emulation in onnxruntime.

Deep networks can miss the 3 % of the fp16 acceptance rule (`mrvl.accuracy`) from fp16
storage alone, whatever the compiler does. DESIGN §9 therefore also compares with an
emulation of the same model: weights rounded to fp16, and every float tensor (each graph
input and each float output of every node) rounded through fp16, with the arithmetic itself
done in fp32 by onnxruntime. The rounding is a `Cast` to float16 and back after each such
tensor; onnxruntime's graph optimizations are off so that no pass removes the pair.

A result is as good as fp16 allows when its error is within max(3 %, the emulation's own
error against the fp32 reference); beyond that it is a compiler bug (`judge`).

The max relative error is an extreme-value statistic: on an output whose values pass
through zero (segmentation logits, box offsets) it is set by the few elements just above the
ignore threshold max|ref|/100, where an absolute error of a few tenths of a percent of max|ref|
is tens of percent. Two fp16 computations that differ only in where fp32 sums round (the MLIP
and onnxruntime accumulate in different orders) draw different values of it.
`emulation_error_range` shows how much: the emulation's error when the inputs move by at most
2^-22 relative (two fp32 ulps, invisible in the reference), which only re-draws the fp16
rounding. It informs; the verdict stays `judge`'s.

    emulated = fp16_emulation_outputs(model, feeds)        # list, in graph output order
    verdict = judge(results, references, emulated)         # per output, and overall
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .accuracy import FP16_MAX_RELATIVE_ERROR, Agreement, fp16_agreement

__all__ = [
    "OutputVerdict",
    "Verdict",
    "emulation_error_range",
    "fp16_emulation_outputs",
    "fp16_storage_model",
    "judge",
]

_UNROUNDED = "__mrvl_fp32"
_ROUNDED = "__mrvl_rounded"


def fp16_storage_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` that stores every float tensor in fp16 and computes in fp32.

    Float initializers and `Constant` values are rounded to fp16 in place. Every float graph
    input and every float node output is followed by Cast(float16) → Cast(float); consumers
    and graph outputs read the rounded tensor under its original name. Types come from ONNX
    shape inference; a node output whose type it cannot tell raises `ValueError`, so no
    tensor silently escapes the rounding.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(_round(numpy_helper.to_array(init)), init.name))
    types = _element_types(out)

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
        if node.op_type == "Constant":
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
            if elem == TensorProto.FLOAT:  # the node writes fp32; readers see it rounded
                node.output[index] = name + _UNROUNDED
                nodes.extend(_round_trip(name + _UNROUNDED, name))
    del graph.node[:]
    graph.node.extend(nodes)
    return out


def fp16_emulation_outputs(
    model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The outputs of `fp16_storage_model(model)` on `feeds`, in graph output order."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        fp16_storage_model(model).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, dict(feeds))


PERTURBATION = 2.0**-22
"""The relative move of each input element in `emulation_error_range`: two fp32 ulps."""


def emulation_error_range(
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    references: Sequence[np.ndarray],
    draws: int = 4,
    seed: int = 0,
) -> list[tuple[float, float]]:
    """Per output, (min, max) of the emulation's max relative error against `references`
    over the inputs `feeds` and `draws` seeded copies of them with every element multiplied
    by 1 + u, u uniform in ±`PERTURBATION`. The reference moves by about that relative amount
    (nothing the 3 % rule can see); the fp16 roundings of the emulation are re-drawn."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        fp16_storage_model(model).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(seed)
    errors: list[list[float]] = [[] for _ in references]
    for draw in range(draws + 1):
        moved = dict(feeds)
        if draw:
            for name, x in feeds.items():
                if x.dtype == np.float32:
                    u = rng.uniform(-PERTURBATION, PERTURBATION, x.shape)
                    moved[name] = (x * (1.0 + u)).astype(np.float32)
        for index, (e, ref) in enumerate(zip(session.run(None, moved), references, strict=True)):
            errors[index].append(fp16_agreement(e, ref).max_relative_error)
    return [(min(e), max(e)) for e in errors]


@dataclass(frozen=True)
class OutputVerdict:
    name: str
    error: Agreement  # the result against the fp32 reference
    emulation: Agreement  # the fp16-storage emulation against the same reference

    @property
    def limit(self) -> float:
        return max(FP16_MAX_RELATIVE_ERROR, self.emulation.max_relative_error)

    @property
    def passed(self) -> bool:
        error = self.error
        finite = np.isfinite(error.max_relative_error)
        return bool(finite and error.checked > 0 and error.max_relative_error <= self.limit)


@dataclass(frozen=True)
class Verdict:
    outputs: list[OutputVerdict]

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

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
            lines.append(
                f"{o.name}: {verdict}: max relative error {o.error.max_relative_error:.3e} "
                f"(limit {o.limit:.3e} = max(3 %, fp16-storage emulation's "
                f"{o.emulation.max_relative_error:.3e})) over {o.error.checked} elements"
            )
        return "\n".join(lines)


def judge(
    results: Sequence[np.ndarray],
    references: Sequence[np.ndarray],
    emulated: Sequence[np.ndarray],
    names: Sequence[str] | None = None,
) -> Verdict:
    """Each result against its fp32 reference, within max(3 %, the emulation's own error)
    under the fp16 acceptance rule (elements below max|ref|/100 ignored)."""
    if not len(results) == len(references) == len(emulated):
        raise ValueError(
            f"{len(results)} results, {len(references)} references, {len(emulated)} emulated"
        )
    names = list(names) if names is not None else [f"output {i}" for i in range(len(results))]
    return Verdict(
        [
            OutputVerdict(name, fp16_agreement(r, ref), fp16_agreement(e, ref))
            for name, r, ref, e in zip(names, results, references, emulated)
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


def _element_types(model: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    graph = inferred.graph
    types = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            types[value.name] = value.type.tensor_type.elem_type
    for init in graph.initializer:
        types[init.name] = init.data_type
    return types
