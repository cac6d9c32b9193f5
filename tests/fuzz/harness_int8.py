"""The differential property for a generated graph quantized to int8 (issue 20).

`check_quantized(spec, mixed)` builds the float graph of `spec` (`grammar.build_model`),
quantizes it with `mrvl.quantize` on seeded calibration data (`calibration_feeds`), and with
`mixed` leaves a seeded choice of its layers in fp16 (`kept_fp16`, its `keep_fp16=`). The QDQ
model then goes the way of `harness.check`: `from_onnx` → `partition_for_mrvl` → `build` → a
VM run on the Numba engine and on the reference interpreter, which must give the same bytes.
It is judged against onnxruntime running the same QDQ model:

- an output a DequantizeLinear writes: every element within 3 quantization steps of its
  scale (DESIGN §9's int8 rule); a miss is triaged by `int8_triage` (its signature says
  whether a layer is off on its own inputs, or one step was carried and amplified);
- a float output (a layer kept in fp16, or float ops on the CPU after the last dequantize):
  the dequantized tensor it is computed from (`mrvl.onnx_shell.last_quantized`, as
  `scripts/zoo_int8.py` judges a CPU Softmax's input), added as an output, within 3 steps,
  and the float ops after it by the fp16 rule with its second look, run alone on mrvl's own
  dequantized tensor
  (`_float_tail`: a step allowed there is no fp16 error after it; a difference of two
  near-equal values turns one step into any relative error). A float output with no such
  source is judged on the whole QDQ model (`judge_model`).

Outcomes are `harness`'s: a `QuantizeError` from `mrvl.quantize` (an `MrvlError`: a clear
refusal) is a rejection at the stage "quantize"; anything else raised there is a failure.
"""

from __future__ import annotations

import numpy as np
import onnx
from grammar import Spec, build_model, input_array
from harness import (
    FAILED,
    PASSED,
    REJECTED,
    Outcome,
    _failure,
    _kind,
    _where,
    build_and_run,
)
from harness import reference as float_reference
from onnx import helper, numpy_helper

from mrvl.onnx_shell import last_quantized, with_outputs

INT8_STEPS = 3
"""DESIGN §9: an int8 output within 3 quantization steps of onnxruntime on the same model."""
CALIBRATION_FEEDS = 8
KEEP_CHANCE = 0.3
"""In a mixed graph, the chance that each quantizable layer stays in fp16."""
_KEEPABLE = frozenset(
    {"Conv", "Gemm", "MatMul", "Add", "Mul", "Concat", "AveragePool", "GlobalAveragePool"}
)


def calibration_feeds(spec: Spec) -> list[dict[str, np.ndarray]]:
    """Seeded draws like the judged input (`input_array`), but not it."""
    rng = np.random.default_rng([spec.seed, 1])
    return [
        {"x": rng.standard_normal(spec.input_shape).astype(np.float32)}
        for _ in range(CALIBRATION_FEEDS)
    ]


def kept_fp16(model: onnx.ModelProto, spec: Spec) -> list[str]:
    """A seeded choice of the model's layers to keep in fp16: each with `KEEP_CHANCE`."""
    rng = np.random.default_rng([spec.seed, 2])
    return [
        n.name for n in model.graph.node if n.op_type in _KEEPABLE and rng.random() < KEEP_CHANCE
    ]


def _triage(qdq: onnx.ModelProto, x: np.ndarray, spec: Spec) -> str:
    """`int8_triage.triage`: where the miss starts (`local:<op>`) or `carried`."""
    from int8_triage import triage

    try:
        return triage(qdq, x, spec)
    except Exception as exc:  # noqa: BLE001 - the triage is a second build; the miss stands
        return f"untriaged ({type(exc).__name__})"


def _float_tail(
    qdq: onnx.ModelProto, output: str, source: str, got: dict[str, np.ndarray]
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The float ops from the dequantized tensor `source` to the graph output `output` (a
    chain of one-input ops, as `last_quantized` walked it) as a model of their own, and
    mrvl's `source` as its feed, snapped to the exact multiple of its scale."""
    from int8_triage import _snapped

    producer = {out: node for node in qdq.graph.node for out in node.output}
    inits = {i.name: i for i in qdq.graph.initializer}
    arrays = {name: numpy_helper.to_array(i) for name, i in inits.items()}
    nodes, name = [], output
    while name != source:
        node = producer[name]
        nodes.insert(0, node)
        name = next(i for i in node.input if i and i not in inits)
    needed = sorted({i for n in nodes for i in n.input if i in inits})
    graph = helper.make_graph(
        nodes,
        "tail",
        [helper.make_tensor_value_info(source, onnx.TensorProto.FLOAT, got[source].shape)],
        [helper.make_tensor_value_info(output, onnx.TensorProto.FLOAT, got[output].shape)],
        [inits[k] for k in needed],
    )
    tail = helper.make_model(graph, opset_imports=list(qdq.opset_import))
    tail.ir_version = qdq.ir_version
    feed = _snapped(got[source], producer[source], arrays)
    return tail, {source: feed}


def _session_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from int8_triage import _run

    return _run(model, feeds)


def quantized_model(spec: Spec, mixed: bool) -> tuple[onnx.ModelProto, list[str]]:
    """The QDQ model `check_quantized` judges, and the layers it kept in fp16."""
    import mrvl

    model = build_model(spec)
    keep = kept_fp16(model, spec) if mixed else []
    return mrvl.quantize(model, calibration_feeds(spec), keep_fp16=keep), keep


def check_quantized(spec: Spec, mixed: bool = False) -> Outcome:
    from mrvl.errors import MrvlError
    from mrvl.fp16_emulation import judge_model

    onnx.checker.check_model(build_model(spec))  # a generator bug, not a finding: let it raise
    x = input_array(spec)
    try:
        qdq, _ = quantized_model(spec, mixed)
    except MrvlError as exc:
        message = str(exc).splitlines()[0][:200]
        signature = f"rejected:quantize:{type(exc).__name__}:{_where(exc)}:{_kind(exc)}"
        return Outcome(REJECTED, f"at quantize: {type(exc).__name__}: {message}", signature)
    except Exception as exc:  # noqa: BLE001 - the property is about exactly this
        return _failure("quantize", exc, "not an MrvlError")
    float_outputs = [o.name for o in qdq.graph.output]
    sources = last_quantized(qdq)
    dequantized = {name: src for name, src in sources.items() if src[0] != name}
    model = with_outputs(qdq, [src for src, _ in dequantized.values()])
    names = [o.name for o in model.graph.output]
    expected = dict(zip(names, float_reference(model, x), strict=True))

    built = build_and_run(model, spec, x)
    if isinstance(built, Outcome):
        return built
    results, _, offloaded, regions = built
    got = dict(zip(names, results, strict=True))
    for name in names:
        if got[name].shape != expected[name].shape:
            return Outcome(
                FAILED,
                f"output {name}: shape {got[name].shape}, onnxruntime's {expected[name].shape}",
                "mismatch:shape",
                offloaded,
                regions,
            )

    # int8: every dequantized output, and the source of every float one, within 3 steps
    for output in float_outputs:
        if output not in sources:
            continue
        tensor, scale = sources[output]
        steps = np.rint(np.abs(got[tensor].astype(np.float64) - expected[tensor]) / scale)
        if steps.size and steps.max() > INT8_STEPS:
            worst = int(np.argmax(steps))
            detail = (
                f"{tensor}: {int(steps.max())} quantization steps of {scale:.3e} from "
                f"onnxruntime (at flat index {worst}: {got[tensor].flat[worst]:.6g} against "
                f"{expected[tensor].flat[worst]:.6g}); {int(np.count_nonzero(steps > INT8_STEPS))}"
                f" of {steps.size} elements beyond {INT8_STEPS}"
            )
            return Outcome(FAILED, detail, f"mismatch:int8-steps:{_triage(qdq, x, spec)}",
                           offloaded, regions)  # fmt: skip

    # fp16: the outputs computed in float after the last dequantize. One with a dequantized
    # source is judged on its float ops alone, fed mrvl's own source (which the int8 rule
    # already judged): a step of the source is no fp16 error of the ops after it.
    judged = [o for o in float_outputs if sources.get(o, ("",))[0] != o]
    for name in judged:
        if name in dequantized:
            tail, feeds = _float_tail(qdq, name, dequantized[name][0], got)
            wanted = _session_run(tail, feeds)
        else:
            tail = with_outputs(qdq, [])
            del tail.graph.output[:]
            tail.graph.output.extend(o for o in model.graph.output if o.name == name)
            feeds, wanted = {"x": x}, [expected[name]]

        def run_again(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
            raise AssertionError("the distribution look runs nothing again")

        output = judge_model([got[name]], run_again, tail, feeds, wanted).outputs[0]
        if not output.passed:
            detail = (
                f"float output {name}: {output.error}; the fp16-storage emulation's error "
                f"is {output.emulation.max_relative_error:.3e}; {output.distribution}"
            )
            return Outcome(FAILED, detail, "mismatch:fp16", offloaded, regions)
    return Outcome(PASSED, "", "", offloaded, regions)
