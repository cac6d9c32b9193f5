#!/usr/bin/env python3
"""How discriminating each second look of the fp16 rule is (DESIGN §9), on synthetic bugs.

    .venv/bin/python scripts/second_look_bugs.py                   # the default models
    .venv/bin/python scripts/second_look_bugs.py yolov8n --factors 1.1 1.03

A compiler bug confined to one layer is modelled as that layer's weights scaled by a factor
(1.1: the synthetic 10 % error DESIGN §9 says must fail), and the compiled result as the
fp16-storage emulation of the bugged model: fp16 noise plus the bug. For the first, a middle
and the last Conv/Gemm of each zoo model, it prints the first comparison and both second
looks (`mrvl.fp16_emulation`: the distribution on the same run, and the median over re-drawn
roundings). A look that passes a bug is less discriminating. Only onnxruntime runs; no
build.
"""

from __future__ import annotations

import argparse

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from mrvl.fp16_emulation import REDRAWS, _emulation_session, judge, redrawn_errors
from mrvl.models.light import random_inputs
from mrvl.models.zoo import load_zoo_model

DEFAULT_MODELS = (
    "squeezenet1_1",
    "mobilenet_v2",
    "resnet18",
    "lraspp_mobilenet_v3_large",
    "yolov8n",
)


def _session(model: onnx.ModelProto):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def with_bug(model: onnx.ModelProto, layer: onnx.NodeProto, factor: float) -> onnx.ModelProto:
    """`model` with the weights of `layer` (a Conv or Gemm) scaled by `factor`."""
    bugged = onnx.ModelProto()
    bugged.CopyFrom(model)
    for init in bugged.graph.initializer:
        if init.name == layer.input[1]:
            weight = numpy_helper.to_array(init) * np.float32(factor)
            init.CopyFrom(numpy_helper.from_array(weight.astype(np.float32), init.name))
    return bugged


def _word(passed: bool) -> str:
    return "pass" if passed else "fail"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(DEFAULT_MODELS))
    parser.add_argument("--factors", nargs="+", type=float, default=[1.1, 1.03])
    args = parser.parse_args(argv)
    print(
        "| model | layer | bug | output | first | beyond 3 %: bug / emulation "
        "| p99: bug / emulation | distribution | re-drawn |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    caught = {"distribution": 0, "redraw": 0}
    total = 0
    for name in args.names:
        model = load_zoo_model(name, seed=0)
        feeds = random_inputs(model, seed=0)
        references = _session(model).run(None, feeds)
        emulation = _emulation_session(model)
        emulated = emulation.run(None, feeds)
        layers = [n for n in model.graph.node if n.op_type in ("Conv", "Gemm")]
        names = [o.name for o in model.graph.output]
        for layer in (layers[0], layers[len(layers) // 2], layers[-1]):
            for factor in args.factors:
                bugged = _emulation_session(with_bug(model, layer, factor))
                results = bugged.run(None, feeds)
                verdict = judge(results, references, emulated, names)
                looks = redrawn_errors(
                    lambda inputs, s=bugged: s.run(None, inputs),
                    model,
                    feeds,
                    references,
                    REDRAWS,
                    at_feeds=(results, emulated),
                    session=emulation,
                )
                for output, look in zip(verdict.outputs, looks, strict=True):
                    d = output.distribution
                    total += 1
                    caught["distribution"] += not (output.within_limit or d.passed)
                    caught["redraw"] += not (output.within_limit or look.passed)
                    print(
                        f"| {name} | {layer.name} | ×{factor} | {output.name} "
                        f"| {'pass' if output.within_limit else 'miss'} "
                        f"| {d.beyond} / {d.emulation_beyond} "
                        f"| {100 * d.p99:.2f} % / {100 * d.emulation_p99:.2f} % "
                        f"| {_word(d.passed)} | {_word(look.passed)} |",
                        flush=True,
                    )
    print(
        f"\nbugged outputs failed by the rule: {caught['distribution']} of {total} with the "
        f"distribution look, {caught['redraw']} of {total} with the re-drawn look"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
