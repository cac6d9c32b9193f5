#!/usr/bin/env python3
"""How far onnxruntime's int8 reference is from itself, and mrvl from each of its forms.

    .venv/bin/python scripts/int8_reference_spread.py bert_mini yolov8n
    .venv/bin/python scripts/int8_reference_spread.py --no-mrvl --kernels lraspp_mbv3

Issue 20's goal (DESIGN §9) judges mrvl's int8 outputs against onnxruntime running the same
QDQ model with its default session options. Those options fuse each DequantizeLinear →
op → QuantizeLinear group it has an integer kernel for (QLinearConv, QLinearMatMul,
QLinearAdd, QGemm, QLinearSigmoid, ...) and requantize its int32 accumulator with one fp32
factor (`MlasRequantizeOutput`: fp32(acc) · fp32(s_x·s_w/s_y), rounded half to even); with
graph optimizations off (`ORT_DISABLE_ALL`) the same model runs as the ONNX spec writes it,
DequantizeLinear → fp32 op → QuantizeLinear. Both are onnxruntime's result for the model.
Per zoo model (`scripts/zoo_int8.py`'s QDQ form and judged tensors, one seeded input), this
prints in quantization steps of each judged tensor (exact / within 1 / within 3 / max):

- `ort-off vs ort-on`: the reference's own spread;
- `mrvl vs ort-on`: what docs/zoo.md's int8 table reports;
- `mrvl vs ort-off`: mrvl against the spec's float arithmetic;
- with `--all-tensors`, `ort-on-all` against both: onnxruntime's default optimizations on the
  same model with every quantized tensor also a graph output, which computes the judged
  tensors by the same QDQ model but fuses otherwise (a Q with another reader is not moved
  to uint8, `QDQS8ToU8Transformer`), so it rounds other near-ties than `ort-on`;

and with `--kernels`, the optimized graph's node counts by kind: the integer kernels
onnxruntime fused, and the float ops it runs between a DequantizeLinear and a QuantizeLinear.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]

PAIRS = (
    ("ort-off", "ort-on"),
    ("mrvl", "ort-on"),
    ("mrvl", "ort-off"),
    ("ort-on-all", "ort-off"),
    ("ort-on-all", "ort-on"),
)
"""The comparisons printed per model, (first, second), in this order (those whose both
sides were run)."""

QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})


def ort_session(model: onnx.ModelProto, optimized: bool, save_to: Path | None = None):
    """An onnxruntime CPU session of `model`: default graph optimizations (`ORT_ENABLE_ALL`,
    what the int8 goal compares with) or none (`ORT_DISABLE_ALL`: DQ → fp32 op → Q as
    written); `save_to` receives the optimized graph."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if optimized
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    if save_to is not None:
        options.optimized_model_filepath = str(save_to)
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def optimized_graph(model: onnx.ModelProto) -> onnx.ModelProto:
    """The graph onnxruntime runs for `model` with its default optimizations."""
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "optimized.onnx"
        ort_session(model, optimized=True, save_to=path)
        return onnx.load(path)


def is_integer_kernel(node: onnx.NodeProto) -> bool:
    """Whether an optimized graph's node computes on int8 / uint8 values itself (a fused
    QLinear* or QGemm, an int8 MaxPool or move), as opposed to a float op or a Q / DQ."""
    return node.op_type.startswith("QLinear") or node.op_type in (
        "QGemm",
        "QAttention",
        "MatMulIntegerToFloat",
        "DynamicQuantizeMatMul",
    )


def kernel_counts(model: onnx.ModelProto) -> dict[str, Counter]:
    """The node counts of onnxruntime's optimized graph of a QDQ `model` by kind:
    `integer` (fused integer kernels), `float` (float ops that read a dequantized tensor or
    whose result is quantized: a QDQ group run as DQ → fp32 op → Q), `other` (ops between
    int8 tensors with no float in them: Reshape, Transpose, MaxPool, ...) and `qdq`."""
    graph = optimized_graph(model).graph
    producer = {out: node for node in graph.node for out in node.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    counts = {kind: Counter() for kind in ("integer", "float", "other", "qdq")}
    for node in graph.node:
        if node.op_type in QDQ_OPS:
            kind = "qdq"
        elif is_integer_kernel(node):
            kind = "integer"
        else:
            reads_dq = any(
                getattr(producer.get(i), "op_type", None) == "DequantizeLinear"
                for i in node.input
            )
            feeds_q = any(
                r.op_type == "QuantizeLinear" for o in node.output for r in readers.get(o, [])
            )
            kind = "float" if reads_dq or feeds_q else "other"
        counts[kind][node.op_type] += 1
    return counts


def steps_between(a: np.ndarray, b: np.ndarray, scale: float) -> np.ndarray:
    """|a - b| in quantization steps of `scale`, rounded to integers (both tensors hold
    dequantized values, multiples of `scale` up to fp32 rounding)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise ValueError(f"tensors of shapes {a.shape} and {b.shape} cannot be compared")
    return np.rint(np.abs(a - b) / scale).ravel()


def step_summary(steps: np.ndarray) -> dict[str, float]:
    """The share exact, within 1 and within 3 steps, and the largest (docs/zoo.md's cells)."""
    steps = np.asarray(steps)
    if steps.size == 0:
        return {"exact": 1.0, "1": 1.0, "3": 1.0, "max": 0.0}
    return {
        "exact": float(np.mean(steps == 0)),
        "1": float(np.mean(steps <= 1)),
        "3": float(np.mean(steps <= 3)),
        "max": float(steps.max()),
    }


def spread(
    results: dict[str, dict[str, np.ndarray]], judged: list[tuple[str, float]]
) -> dict[tuple[str, str], dict[str, float]]:
    """For each pair of `PAIRS` whose both sides are in `results` (side -> output name ->
    tensor), the step summary over every judged tensor (name, scale)."""
    found = {}
    for first, second in PAIRS:
        if first in results and second in results:
            steps = np.concatenate(
                [steps_between(results[first][n], results[second][n], s) for n, s in judged]
            )
            found[(first, second)] = step_summary(steps)
    return found


def judged_model(name: str, seed: int):
    """The zoo model `name`'s QDQ form as `scripts/zoo_int8.py` makes and judges it: (the QDQ
    model with the judged tensors as outputs, [(tensor, scale)], seeded input feeds)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from zoo_int8 import dequantized_operands, quantized_zoo_model

    from mrvl.models.light import random_inputs
    from mrvl.onnx_shell import last_quantized, with_outputs

    _, qdq = quantized_zoo_model(name, seed)
    judged = list(last_quantized(qdq).values()) or dequantized_operands(qdq)
    qdq = with_outputs(qdq, [n for n, _ in judged])
    return qdq, judged, random_inputs(qdq, seed=seed)


def mrvl_outputs(qdq: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """`qdq` partitioned, built and run as `scripts/zoo_int8.py` does (8 tiles, cn10ka)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from zoo_int8 import MCPU, NUM_TILES, _vm_runner

    import mrvl

    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(qdq), mcpu=MCPU, num_tiles=NUM_TILES)
    return _vm_runner(mrvl.build(mod, mcpu=MCPU, num_tiles=NUM_TILES))(feeds)


def model_spread(name: str, seed: int = 0, with_mrvl: bool = True, all_tensors: bool = False):
    """(the `spread` of zoo model `name` on its seed-`seed` input, its QDQ model); with
    `all_tensors`, also the `ort-on-all` session's."""
    qdq, judged, feeds = judged_model(name, seed)
    names = [o.name for o in qdq.graph.output]
    results = {
        "ort-on": dict(zip(names, ort_session(qdq, True).run(None, feeds))),
        "ort-off": dict(zip(names, ort_session(qdq, False).run(None, feeds))),
    }
    if all_tensors:
        from int8_layer_rules import with_int8_outputs

        exposed = with_int8_outputs(qdq)
        outputs = ort_session(exposed, True).run(None, feeds)
        results["ort-on-all"] = dict(zip([o.name for o in exposed.graph.output], outputs))
    if with_mrvl:
        results["mrvl"] = dict(zip(names, mrvl_outputs(qdq, feeds)))
    return spread(results, judged), qdq


def _cell(summary: dict[str, float]) -> str:
    return (
        f"{100 * summary['exact']:.2f} % / {100 * summary['1']:.2f} % / "
        f"{100 * summary['3']:.2f} % / {summary['max']:.0f}"
    )


def main(argv=None) -> int:
    from mrvl.models.zoo import ZOO_MODELS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="+", help="zoo models (mrvl.models.zoo.ZOO_MODELS)")
    parser.add_argument("--seed", type=int, default=0, help="weights and input seed")
    parser.add_argument("--no-mrvl", action="store_true", help="onnxruntime's spread only")
    parser.add_argument(
        "--kernels", action="store_true", help="also count the optimized graph's nodes by kind"
    )
    parser.add_argument(
        "--all-tensors",
        action="store_true",
        help="also onnxruntime optimized with every quantized tensor an output (ort-on-all)",
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in ZOO_MODELS]
    if unknown:
        parser.error(f"not zoo models: {', '.join(unknown)} (see mrvl.models.zoo.ZOO_MODELS)")
    print("| model | pair | exact / ≤1 / ≤3 / max |\n| --- | --- | --- |", flush=True)
    for name in args.names:
        start = time.perf_counter()
        found, qdq = model_spread(name, args.seed, not args.no_mrvl, args.all_tensors)
        for (first, second), summary in found.items():
            print(f"| {name} | {first} vs {second} | {_cell(summary)} |", flush=True)
        if args.kernels:
            for kind, counts in kernel_counts(qdq).items():
                listed = ", ".join(f"{op} {n}" for op, n in counts.most_common())
                print(f"  {kind}: {listed or 'none'}", flush=True)
        print(f"  ({time.perf_counter() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
