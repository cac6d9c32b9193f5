#!/usr/bin/env python3
"""How far one int8 step at one tensor moves a QDQ model's outputs, in onnxruntime alone.

    .venv/bin/python scripts/int8_one_step.py yolov8n --seed 1
    .venv/bin/python scripts/int8_one_step.py lraspp_mbv3 --no-mrvl --tensor T --moves 5

An int8 miss whose layers are each within one step alone (`tests/fuzz/int8_triage.py`,
`scripts/int8_layer_rules.py`) is either the model amplifying a near-tie rounded the other
way, or a bug that a layer run alone cannot see (a region boundary, a layout, a tensor
reused). This tells the two apart with mrvl out of the loop after the first difference: the
zoo model's QDQ form (`scripts/zoo_int8.py`'s model, judged tensors and seeded input) is run
by onnxruntime with graph optimizations off (DQ → fp32 op → Q as written), cut at one
quantized tensor (its QuantizeLinear replaced by a graph input) and fed there

- mrvl's values (`mrvl`; by default at the first quantized tensor, in graph order, where
  mrvl's whole-model run and onnxruntime's differ), everything after it onnxruntime's own;
- onnxruntime's own values with one random element moved by one step (`--moves` of them).

Per case it prints the judged outputs' steps from onnxruntime's uncut run (exact / within 1 /
within 3 / max). If onnxruntime fed mrvl's values at the first difference ends as far from
itself as mrvl is, the rest of the model amplifies that difference by itself.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from int8_layer_rules import _as_signed, mrvl_int8, ort_int8, quantized_tensors  # noqa: E402
from int8_reference_spread import (  # noqa: E402
    _cell,
    judged_model,
    ort_session,
    step_summary,
    steps_between,
)


def cut_at(model: onnx.ModelProto, tensor: str, elem_type: int) -> onnx.ModelProto:
    """A copy of `model` whose quantized `tensor` is a graph input of `elem_type` instead of
    its QuantizeLinear's result (the nodes before it stay, unread by it)."""
    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    (writer,) = [n for n in cut.graph.node if tensor in n.output]
    cut.graph.node.remove(writer)
    cut.graph.input.append(helper.make_tensor_value_info(tensor, elem_type, None))
    return cut


def stored(values: np.ndarray, zero_point: int, elem_type: int) -> np.ndarray:
    """Signed int64 values (`_as_signed`'s) back in the tensor's own element type."""
    if elem_type == onnx.TensorProto.UINT8:
        return (np.asarray(values) + 128).astype(np.uint8)
    return np.asarray(values).astype(np.int8)


def first_difference(tensors, mine: dict, theirs: dict):
    """The first of `tensors` (graph order) whose int8 values differ in `mine` and `theirs`."""
    for t in tensors:
        if t.name in mine and t.name in theirs and np.any(mine[t.name] != theirs[t.name]):
            return t
    return None


def one_step_moves(values: np.ndarray, count: int, seed: int = 0):
    """`count` copies of signed int8 `values`, each with one random element one step up (down
    at 127): (flat index, moved copy)."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        moved = values.copy().ravel()
        i = int(rng.integers(moved.size))
        moved[i] += 1 if moved[i] < 127 else -1
        yield i, moved.reshape(values.shape)


def mrvl_judged_steps(qdq: onnx.ModelProto, judged, mine: dict, off: dict) -> str:
    """mrvl's whole-model steps from onnxruntime's unoptimized run on the judged tensors,
    from the int8 values of the quantized tensors they dequantize (`n/a` if one is not)."""
    producer = {out: node for node in qdq.graph.node for out in node.output}
    sources = [producer[n].input[0] if n in producer else None for n, _ in judged]
    if not all(s in mine and s in off for s in sources):
        return "n/a"
    return _cell(step_summary(np.concatenate(
        [np.abs(mine[s] - off[s]).ravel() for s in sources]
    )))  # fmt: skip


def main(argv=None) -> int:
    from mrvl.models.zoo import ZOO_MODELS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="a zoo model (mrvl.models.zoo.ZOO_MODELS)")
    parser.add_argument("--seed", type=int, default=0, help="weights and input seed")
    parser.add_argument("--tensor", help="the quantized tensor to cut at (a Q's output)")
    parser.add_argument("--moves", type=int, default=3, help="random one-step moves tried")
    parser.add_argument("--no-mrvl", action="store_true", help="only the one-step moves")
    args = parser.parse_args(argv)
    if args.name not in ZOO_MODELS:
        parser.error(f"not a zoo model: {args.name} (see mrvl.models.zoo.ZOO_MODELS)")
    if args.no_mrvl and not args.tensor:
        parser.error("--no-mrvl needs --tensor (the first difference is found by running mrvl)")
    qdq, judged, feeds = judged_model(args.name, args.seed)
    tensors = quantized_tensors(qdq)
    by_name = {t.name: t for t in tensors}
    if args.tensor and args.tensor not in by_name:
        parser.error(f"{args.tensor} is not a per-tensor QuantizeLinear output of the model")

    def signed(values):
        return {k: _as_signed(v, by_name[k].zero_point, by_name[k].elem_type)[0]
                for k, v in values.items()}  # fmt: skip

    off = signed(ort_int8(qdq, feeds, tensors))
    mine = None if args.no_mrvl else signed(mrvl_int8(qdq, feeds, tensors))
    t = by_name[args.tensor] if args.tensor else first_difference(tensors, mine, off)
    if t is None:
        print("mrvl and onnxruntime agree on every quantized tensor")
        return 0
    names = [o.name for o in qdq.graph.output]
    uncut = dict(zip(names, ort_session(qdq, optimized=False).run(None, feeds)))
    session = ort_session(cut_at(qdq, t.name, t.elem_type), optimized=False)

    def judged_steps(values) -> str:
        fed = {**feeds, t.name: stored(values, t.zero_point, t.elem_type)}
        outputs = dict(zip(names, session.run(None, fed)))
        return _cell(step_summary(np.concatenate(
            [steps_between(outputs[n], uncut[n], s) for n, s in judged]
        )))  # fmt: skip

    print(f"{args.name}, seed {args.seed}: cut at {t.name} ({t.layer.op_type} "
          f"{t.layer.name}, {off[t.name].size} elements)")  # fmt: skip
    print("| onnxruntime fed there | judged outputs' steps from its uncut run "
          "(exact / ≤1 / ≤3 / max) |\n| --- | --- |")  # fmt: skip
    print(f"| its own values (check) | {judged_steps(off[t.name])} |")
    if mine is not None:
        print(f"| (mrvl's whole-model run) | {mrvl_judged_steps(qdq, judged, mine, off)} |")
        differ = int(np.count_nonzero(mine[t.name] != off[t.name]))
        worst = int(np.abs(mine[t.name] - off[t.name]).max())
        print(f"| mrvl's values ({differ} elements differ, up to {worst} steps) | "
              f"{judged_steps(mine[t.name])} |")  # fmt: skip
    for i, moved in one_step_moves(off[t.name], args.moves, args.seed):
        print(f"| its own, element {i} one step moved | {judged_steps(moved)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
