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
and onnxruntime accumulate in different orders) draw different values of it, so one draw of
each loses against the other about half the time even when both are as good as fp16 allows.
The rule therefore takes a second look at an output that misses the first comparison
(`judge_model`): the input and `REDRAWS` copies of it moved by at most 2^-22 relative (two
fp32 ulps, invisible in the reference; `redrawn_feeds`) re-draw every fp16 rounding of both the
compiled model and the emulation. The output passes when its median error over them is within
max(3 %, the emulation's largest error over the same inputs): a typical draw of the compiler
against what fp16 storage can cost on this input. A compiler bug moves every draw; a draw
does not move the median.

    verdict = judge_model(results, run, model, feeds, references)  # both looks; run(x) -> outputs
    verdict = judge(results, references, emulated)         # the first comparison alone
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .accuracy import FP16_MAX_RELATIVE_ERROR, Agreement, fp16_agreement

__all__ = [
    "OutputVerdict",
    "Redrawn",
    "Verdict",
    "fp16_emulation_outputs",
    "fp16_storage_model",
    "judge",
    "judge_model",
    "layernorm_f32_tensors",
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
    fp32 stays fp32 (`layernorm_f32_tensors`): a layer normalization's scale and shift, and
    the intermediate tensors of its decomposed form. (Softmax and LayerNormalization nodes
    keep their sums in fp32 inside onnxruntime already.) Types come from ONNX
    shape inference; a node output whose type it cannot tell raises `ValueError`, so no
    tensor silently escapes the rounding.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    on_chip_f32 = layernorm_f32_tensors(graph)
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT and init.name not in on_chip_f32:
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
            if name in on_chip_f32:  # a layernorm's accumulator: fp32 on the MLIP too
                continue
            if elem == TensorProto.FLOAT:  # the node writes fp32; readers see it rounded
                node.output[index] = name + _UNROUNDED
                nodes.extend(_round_trip(name + _UNROUNDED, name))
    del graph.node[:]
    graph.node.extend(nodes)
    return out


_DECOMPOSED_LAYERNORM = ("ReduceMean", "Sub", "Pow", "ReduceMean", "Add", "Sqrt", "Div")


def layernorm_f32_tensors(graph: onnx.GraphProto) -> set[str]:
    """Tensors of `graph` the MLIP keeps in fp32 around a layer normalization: the scale and
    shift initializers of each LayerNormalization node, and in the decomposed form (ReduceMean,
    Sub, Pow, ReduceMean, Add, Sqrt, Div, then an optional Mul and Add by constants, matched
    by their data flow) every tensor but the last one's output, and the Mul/Add constants."""
    initializers = {i.name for i in graph.initializer}
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


@dataclass(frozen=True)
class OutputVerdict:
    name: str
    error: Agreement  # the result against the fp32 reference
    emulation: Agreement  # the fp16-storage emulation against the same reference
    redrawn: Redrawn | None = None  # the second look, taken when the first comparison misses

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
    def passed(self) -> bool:
        return self.within_limit or (self.redrawn is not None and self.redrawn.passed)


@dataclass(frozen=True)
class Verdict:
    outputs: list[OutputVerdict]

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)

    @property
    def on_redraws(self) -> bool:
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
                verdict = "PASS on re-drawn roundings"
            line = (
                f"{o.name}: {verdict}: max relative error {o.error.max_relative_error:.3e} "
                f"(limit {o.limit:.3e} = max(3 %, fp16-storage emulation's "
                f"{o.emulation.max_relative_error:.3e})) over {o.error.checked} elements"
            )
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
    ignored). `judge_model` adds the second look."""
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


def judge_model(
    results: Sequence[np.ndarray],
    run: Callable[[dict[str, np.ndarray]], Sequence[np.ndarray]],
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    references: Sequence[np.ndarray],
    *,
    redraw: str = "on-miss",
    draws: int = REDRAWS,
    seed: int = 0,
) -> Verdict:
    """The whole rule for a compiled model whose outputs at `feeds` are `results`: `judge`
    there, and for each output that misses it the second look over re-drawn roundings
    (`redrawn_errors`, running `run` on the re-drawn inputs): it passes when its median error
    is within max(3 %, the largest error of the emulation over the same inputs).
    `redraw="always"` takes the second look for every output (for reports), "never" skips it."""
    results = [np.asarray(r) for r in results]
    names = [o.name for o in model.graph.output]
    session = _emulation_session(model)
    emulated = session.run(None, dict(feeds))
    verdict = judge(results, references, emulated, names)
    if redraw == "never" or (redraw == "on-miss" and verdict.passed):
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
