#!/usr/bin/env python3
"""Where mrvl's int8 results and onnxruntime's part, layer by layer, and which rounding rule
each one's fused integer layers follow.

    .venv/bin/python scripts/int8_layer_rules.py bert_mini
    .venv/bin/python scripts/int8_layer_rules.py mobilefacenet --no-mrvl

Every int8 tensor of a zoo model's QDQ form (each QuantizeLinear's output, `scripts/zoo_int8.py`'s
model and seeded input) is read from three runs: onnxruntime with its default optimizations
(`on`: fused integer kernels), without (`off`: DequantizeLinear → fp32 op → QuantizeLinear) and
mrvl (its dequantized tensors as further outputs, snapped back to int8). Per layer (the op
that the QuantizeLinear reads), in graph order, it prints how many elements each pair
disagrees on, by how many steps, and whether the layer's int8 inputs were equal in that pair
(`local`: the layer's own rounding; else carried from earlier layers).

For each Conv, MatMul and Gemm layer whose int8 inputs are equal in `on` and `mrvl`, it
recomputes the exact int32 accumulator in numpy and rounds it three ways, counting the
elements where each rule differs from `on` and from `mrvl`:

- `q31`: mrvl's rule (docs/isa.md §4b): the Q31 pair of s_x·s_w/s_y in float64, ties toward
  +inf (`mrvl.int8.requantize`);
- `mlas`: onnxruntime's `MlasRequantizeOutput`: fp32(acc) · fp32(fp32(s_x·s_w) / s_y),
  rounded half to even, then the zero point and the int8 saturation;
- `exact`: acc · s_x·s_w/s_y in float64, rounded half to even (the correctly rounded value).

On a CPU without VNNI (AVX2, or AVX-512 without VNNI), onnxruntime's fused uint8 × int8 kernel
adds each two neighbouring products in int16 with saturation (VPMADDUBSW) before it sums in
int32, so its accumulator is not the exact one where a pair overflows. There the `mlas` rule is
applied to that accumulator (`ORT_SATURATES_PAIRS`, from `mrvl.accuracy.int8_pairs_saturate`;
`conv_pair_saturated`, int8 activations taken as uint8 with 128 added) for a group-1 Conv, the
form this was checked on; other layers keep the exact accumulator.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from int8_reference_spread import ort_session  # noqa: E402

from mrvl.accuracy import int8_pairs_saturate  # noqa: E402

RULES = ("q31", "mlas", "exact")


@dataclass(frozen=True)
class QuantizedTensor:
    """One QuantizeLinear output of a QDQ model: its name, scale and zero point (per tensor),
    element type, and the layer that writes the quantized value."""

    name: str
    scale: float
    zero_point: int
    elem_type: int
    layer: onnx.NodeProto


@dataclass
class LayerDiff:
    """One layer run alone on mrvl's int8 inputs: how mrvl's result differs from
    onnxruntime's optimized session (`on`: the fused kernel if the whole model's optimized
    graph fuses the layer, else DQ → fp32 op → Q) and unoptimized one (`off`), and, for a
    recomputed Conv / MatMul / Gemm, how many elements each rule of `RULES` gives otherwise
    than each of `mrvl`, `on` and `off`."""

    tensor: str
    op_type: str
    node: str
    kind: str  # "integer" or "float": how the whole model's optimized session runs it
    size: int
    differ: dict[str, int]  # "on" / "off" -> elements where mrvl differs
    max_steps: dict[str, int]
    rules: dict[str, dict[str, int]] = field(default_factory=dict)  # rule -> side -> differ


def _constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    found = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute:
            found[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return found


def quantized_tensors(model: onnx.ModelProto) -> list[QuantizedTensor]:
    """The per-tensor QuantizeLinear outputs of `model` whose input an op (not a Q / DQ)
    writes, in graph order."""
    consts = _constants(model)
    producer = {out: node for node in model.graph.node for out in node.output}
    found = []
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or node.input[0] not in producer:
            continue
        layer = producer[node.input[0]]
        scale = consts.get(node.input[1])
        if layer.op_type in ("QuantizeLinear", "DequantizeLinear") or scale is None:
            continue
        if scale.size != 1:
            continue
        zp = consts.get(node.input[2]) if len(node.input) > 2 else None
        elem = onnx.TensorProto.UINT8 if zp is not None and zp.dtype == np.uint8 else (
            onnx.TensorProto.INT8
        )
        found.append(
            QuantizedTensor(
                node.output[0], float(scale.reshape(())),
                0 if zp is None else int(zp.reshape(())), elem, layer,
            )  # fmt: skip
        )
    return found


def _as_signed(q: np.ndarray, zero_point: int, elem_type: int) -> tuple[np.ndarray, int]:
    """int64 values and zero point, uint8 moved to int8 (q - 128, z - 128)."""
    q = np.asarray(q, np.int64)
    if elem_type == onnx.TensorProto.UINT8:
        return q - 128, zero_point - 128
    return q, zero_point


def with_int8_outputs(
    model: onnx.ModelProto, tensors: list[QuantizedTensor] | None = None
) -> onnx.ModelProto:
    """A copy of `model` with `tensors` (by default every one of `quantized_tensors`) as
    further graph outputs of their own int8 / uint8 type."""
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    have = {o.name for o in exposed.graph.output}
    for t in quantized_tensors(model) if tensors is None else tensors:
        if t.name not in have:
            exposed.graph.output.append(helper.make_tensor_value_info(t.name, t.elem_type, None))
    return exposed


def ort_int8(
    model: onnx.ModelProto, feeds: dict, tensors: list[QuantizedTensor]
) -> dict[str, np.ndarray]:
    """onnxruntime's int8 values of `tensors` with graph optimizations off (DQ → fp32 op → Q
    as written), the tensors made graph outputs. (With optimizations on, a quantized tensor
    made an output would change the graph onnxruntime fuses: `QDQS8ToU8Transformer` turns an
    int8 Q → DQ pair into uint8 only when the Q has one reader, and on x86 only uint8
    activations fuse; so the fused kernels are run one layer at a time, `fused_alone`.)"""
    exposed = with_int8_outputs(model, tensors)
    names = [o.name for o in exposed.graph.output]
    values = ort_session(exposed, optimized=False).run(None, feeds)
    return {n: v for n, v in zip(names, values) if n in {t.name for t in tensors}}


def fused_layers(model: onnx.ModelProto) -> dict[str, str]:
    """Layer node name -> how onnxruntime's optimized session runs it: `integer` (its node
    is gone from the optimized graph: fused into a QLinear* / QGemm kernel, or dropped) or
    `float` (still there, between a DequantizeLinear and a QuantizeLinear)."""
    from int8_reference_spread import optimized_graph

    kept = {(n.name, n.op_type) for n in optimized_graph(model).graph.node}
    return {
        n.name: "float" if (n.name, n.op_type) in kept else "integer"
        for n in model.graph.node
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear", "Constant")
    }


def layer_group(model: onnx.ModelProto, t: QuantizedTensor) -> list[onnx.NodeProto] | None:
    """The nodes from `t`'s layer's DequantizeLinears (its weights' too) to `t`'s
    QuantizeLinear, or None when the layer reads a float tensor no DequantizeLinear writes
    (it is not a layer alone)."""
    consts = _constants(model)
    producer = {out: node for node in model.graph.node for out in node.output}
    q = producer[t.name]
    group, frontier = [q], [t.layer]
    while frontier:
        node = frontier.pop()
        group.append(node)
        for name in node.input:
            if not name or name in consts or name not in producer:
                continue
            source = producer[name]
            if source.op_type == "DequantizeLinear":
                if source not in group:
                    group.append(source)
            elif source.op_type in ("Relu", "Clip") or node.op_type in ("Relu", "Clip"):
                frontier.append(source)  # a fused activation's op before it
            else:
                return None
    order = {id(n): i for i, n in enumerate(model.graph.node)}
    return sorted(group, key=lambda n: order[id(n)])


def run_alone(
    model: onnx.ModelProto,
    t: QuantizedTensor,
    int8: dict[str, np.ndarray],
    optimized: bool,
) -> np.ndarray | None:
    """`t`'s layer run alone in onnxruntime on the int8 inputs `int8` (tensor -> signed
    values, one run's), its activations moved to uint8 (q + 128, z + 128: the same reals) so that the
    optimized session fuses it as it does in the whole model on x86; its int8 result (None
    when it is not a layer alone)."""
    group = layer_group(model, t)
    if group is None:
        return None
    consts = _constants(model)
    produced = {out for node in group for out in node.output}
    nodes, feeds, needed = [], {}, set()
    for node in group:
        node = onnx.NodeProto.FromString(node.SerializeToString())
        if node.op_type == "DequantizeLinear" and node.input[0] not in consts:
            source = node.input[0]
            if source not in int8 or len(node.input) < 3:
                return None
            feeds[source] = np.asarray(np.asarray(int8[source], np.int16) + 128, np.uint8)
            zp = consts[node.input[2]]
            if zp.dtype == np.int8:
                node.input[2] = _u8_zero_point(zp, consts, needed, node.input[2])
        if node.op_type == "QuantizeLinear" and len(node.input) > 2:
            zp = consts[node.input[2]]
            if zp.dtype == np.int8:
                node.input[2] = _u8_zero_point(zp, consts, needed, node.input[2])
        needed |= {i for i in node.input if i in consts and i not in produced}
        nodes.append(node)
    extra = [numpy_helper.from_array(consts[k], k) for k in sorted(needed) if k in consts]
    graph = helper.make_graph(
        nodes, "alone",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in feeds.items()],
        [helper.make_tensor_value_info(t.name, onnx.TensorProto.UINT8, None)], extra,
    )  # fmt: skip
    alone = helper.make_model(graph, opset_imports=list(model.opset_import))
    alone.ir_version = model.ir_version
    (result,) = ort_session(alone, optimized).run(None, feeds)
    return np.asarray(result, np.int64) - 128  # signed, as every run's values here


def _u8_zero_point(zp: np.ndarray, consts: dict, needed: set, name: str) -> str:
    """The uint8 zero point z + 128 of int8 zero point `zp`, added to `consts` under a new
    name (returned) and to the initializers `needed`."""
    u8 = f"{name}__u8"
    consts[u8] = (zp.astype(np.int16) + 128).astype(np.uint8)
    needed.add(u8)
    return u8


def mrvl_int8(
    model: onnx.ModelProto, feeds: dict, tensors: list[QuantizedTensor]
) -> dict[str, np.ndarray]:
    """mrvl's int8 values of `tensors`: for each, a DequantizeLinear of it (the model's own
    or a new one) made a graph output, built and run as `scripts/zoo_int8.py` does, snapped
    back to the int8 value its f32 stands for."""
    from int8_reference_spread import mrvl_outputs

    from mrvl.onnx_shell import with_outputs

    readers = {}
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] not in readers:
            readers[node.input[0]] = node.output[0]
    wanted = {t.name: readers[t.name] for t in tensors if t.name in readers}
    exposed = with_outputs(model, list(wanted.values()))
    names = [o.name for o in exposed.graph.output]
    got = dict(zip(names, mrvl_outputs(exposed, feeds)))
    found = {}
    for t in tensors:
        if t.name in wanted:
            q = np.rint(got[wanted[t.name]].astype(np.float64) / t.scale) + t.zero_point
            found[t.name] = q.astype(np.int64)
    return found


# ------------------------------------------------------------------- requantization rules


def requantize_rule(
    rule: str, acc: np.ndarray, s_x: float, s_w: np.ndarray, s_y: float, z_y: int
) -> np.ndarray:
    """int8 (as int64) of the exact int32 accumulator `acc` (output channel on the last
    axis, `s_w` per channel or one) by `rule` (`RULES`), zero point `z_y` added, saturated."""
    from mrvl.int8 import conv_requant_pairs, requantize, saturate

    s_w = np.broadcast_to(np.atleast_1d(np.asarray(s_w, np.float32)), (acc.shape[-1],))
    if rule == "q31":
        pairs = conv_requant_pairs(s_x, s_w, s_y).astype(np.int64)
        q = requantize(acc, pairs[:, 0], pairs[:, 1])
    elif rule == "mlas":
        factor = (np.float32(s_x) * s_w) / np.float32(s_y)  # two fp32 roundings, as in C++
        q = np.rint(acc.astype(np.float32) * factor.astype(np.float32)).astype(np.int64)
    elif rule == "exact":
        factor = float(s_x) * s_w.astype(np.float64) / float(s_y)
        q = np.rint(acc.astype(np.float64) * factor).astype(np.int64)
    else:
        raise ValueError(f"rule {rule!r}: one of {', '.join(RULES)}")
    return saturate(q + z_y)


ORT_SATURATES_PAIRS = int8_pairs_saturate()



def _conv_windows(
    x: np.ndarray, kernel: tuple[int, int], node: onnx.NodeProto, pad_value: int = 0
) -> np.ndarray:
    """Each output position's input window of a 2-D Conv `node` (kernel `kernel`) of
    x [N, C, H, W] padded with `pad_value`: a view [N, C, OH, OW, kh, kw]."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    strides = attrs.get("strides", [1, 1])
    dilations = attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET") or x.ndim != 4:
        raise ValueError(f"{node.name}: only explicit pads of a 2-D conv are recomputed")
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
               constant_values=pad_value)  # fmt: skip
    kh, kw = kernel
    span_h, span_w = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    windows = np.lib.stride_tricks.sliding_window_view(x, (span_h, span_w), axis=(2, 3))
    return windows[:, :, :: strides[0], :: strides[1], :: dilations[0], :: dilations[1]]


def conv_accumulator(x: np.ndarray, w: np.ndarray, node: onnx.NodeProto) -> np.ndarray:
    """The exact int64 sums of a 2-D Conv `node` of x [N, C, H, W] (zero point removed, so
    padding adds 0) and w [O, C/g, kh, kw]: [N, OH, OW, O] (channel last)."""
    group = int(next((a.i for a in node.attribute if a.name == "group"), 1))
    windows = _conv_windows(x, w.shape[2:], node)
    o, cg = w.shape[:2]
    og = o // group
    parts = []
    for g in range(group):
        xs = windows[:, g * cg : (g + 1) * cg]  # [N, cg, OH, OW, kh, kw]
        ws = w[g * og : (g + 1) * og]  # [og, cg, kh, kw]
        parts.append(np.einsum("ncyxij,ocij->nyxo", xs, ws, dtype=np.int64))
    return np.concatenate(parts, axis=-1)


def conv_pair_saturated(
    x_u8: np.ndarray, zero_point: int, w: np.ndarray, node: onnx.NodeProto
) -> np.ndarray:
    """The sums of a group-1 Conv as onnxruntime's uint8 × int8 kernel forms them on a CPU
    without VNNI: the uint8 inputs x_u8 (padding at `zero_point`) in (kh, kw, channel) order,
    channel fastest, multiplied by the int8 weights, each two neighbouring products added and
    saturated to int16, then summed in int32 and the zero point's term taken off:
    [N, OH, OW, O], to compare with `conv_accumulator` of x_u8 - zero_point."""
    if int(next((a.i for a in node.attribute if a.name == "group"), 1)) != 1:
        raise ValueError(f"{node.name}: only a group-1 conv's pairs are modelled")
    windows = _conv_windows(x_u8.astype(np.int64), w.shape[2:], node, zero_point)
    n, _, oh, ow = windows.shape[:4]
    inputs = windows.transpose(0, 2, 3, 4, 5, 1).reshape(n, oh, ow, -1)
    weights = w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1).astype(np.int64)
    if inputs.shape[-1] % 2:  # an odd depth: the last product pairs with a zero
        inputs = np.concatenate([inputs, np.zeros((n, oh, ow, 1), np.int64)], axis=-1)
        weights = np.concatenate([weights, np.zeros((weights.shape[0], 1), np.int64)], axis=-1)
    acc = np.zeros((n, oh, ow, weights.shape[0]), np.int64)
    for k in range(0, inputs.shape[-1], 2):
        pair = inputs[..., k, None] * weights[:, k] + inputs[..., k + 1, None] * weights[:, k + 1]
        acc += np.clip(pair, -(2**15), 2**15 - 1)
    return acc - zero_point * weights.sum(axis=-1)


def layer_accumulator(
    model: onnx.ModelProto,
    layer: onnx.NodeProto,
    int8: dict[str, np.ndarray],
    ort_pairs: bool = False,
) -> tuple[np.ndarray, float, np.ndarray] | None:
    """(exact accumulator with the output channel last, s_x, s_w) of a Conv, MatMul or Gemm
    `layer` of a QDQ model from its input's int8 values in `int8` (signed), its int8
    weights and its int32 bias; None for another layer or form. With `ort_pairs`, a group-1
    Conv sums as onnxruntime's kernel does without VNNI (`conv_pair_saturated`)."""
    consts = _constants(model)
    producer = {out: node for node in model.graph.node for out in node.output}
    dqs = [producer.get(i) for i in layer.input if i]
    if layer.op_type not in ("Conv", "MatMul", "Gemm") or any(
        d is None or d.op_type != "DequantizeLinear" for d in dqs
    ):
        return None
    x_dq, w_dq = dqs[0], dqs[1]
    if x_dq.input[0] not in int8 or w_dq.input[0] not in consts or len(x_dq.input) < 3:
        return None
    s_x = float(consts[x_dq.input[1]].reshape(()))
    zp = consts[x_dq.input[2]]
    z_x = int(zp.reshape(())) - (128 if zp.dtype == np.uint8 else 0)
    x = np.asarray(int8[x_dq.input[0]], np.int64) - z_x
    w = consts[w_dq.input[0]].astype(np.int64)
    if len(w_dq.input) > 2 and np.any(consts[w_dq.input[2]] != 0):
        return None  # asymmetric weights: not mrvl's int8 contract
    s_w = consts[w_dq.input[1]].astype(np.float32)
    attrs = {a.name: helper.get_attribute_value(a) for a in layer.attribute}
    if layer.op_type == "Conv" and ort_pairs and attrs.get("group", 1) == 1:
        # int8 activations too: the kernel takes them as uint8, 128 added to value and zero point
        x_u8 = np.asarray(int8[x_dq.input[0]], np.int64) + 128
        acc = conv_pair_saturated(x_u8, z_x + 128, w, layer)
    elif layer.op_type == "Conv":
        acc = conv_accumulator(x, w, layer)
    elif layer.op_type == "Gemm":
        if attrs.get("transA", 0):
            return None
        acc = x @ (w.T if attrs.get("transB", 0) else w)
    else:
        acc = np.matmul(x, w)
    if len(dqs) > 2:
        if dqs[2].input[0] not in consts:
            return None
        acc = acc + consts[dqs[2].input[0]].astype(np.int64)
    return acc, s_x, s_w


def _channel_last(q: np.ndarray, op_type: str) -> np.ndarray:
    return np.moveaxis(q, 1, -1) if op_type == "Conv" else q


def rule_counts(
    model: onnx.ModelProto, t: QuantizedTensor, int8: dict, results: dict[str, np.ndarray]
) -> dict[str, dict[str, int]]:
    """For the Conv / MatMul / Gemm writing `t` (directly or through a ReLU), each
    rule's count of elements differing from each of `results` (side -> signed int8 result),
    the accumulator recomputed from `int8`; {} for another layer."""
    layer, relu = t.layer, False
    if layer.op_type == "Relu":  # a fused ReLU: the clamp at the zero point
        producer = {out: node for node in model.graph.node for out in node.output}
        layer, relu = producer.get(layer.input[0]), True
    if layer is None or layer.op_type not in ("Conv", "MatMul", "Gemm"):
        return {}
    found = layer_accumulator(model, layer, int8)
    if found is None:
        return {}
    acc, s_x, s_w = found
    ort_acc = acc
    if ORT_SATURATES_PAIRS:  # onnxruntime's own sums on this host
        ort_acc = layer_accumulator(model, layer, int8, ort_pairs=True)[0]
    z_y = t.zero_point - (128 if t.elem_type == onnx.TensorProto.UINT8 else 0)
    counts = {}
    for rule in RULES:
        mine = requantize_rule(rule, ort_acc if rule == "mlas" else acc, s_x, s_w, t.scale, z_y)
        mine = np.maximum(mine, z_y) if relu else mine
        counts[rule] = {
            side: int(np.count_nonzero(mine != _channel_last(theirs, layer.op_type)))
            for side, theirs in results.items()
        }
    return counts


def layer_diffs(
    model: onnx.ModelProto, tensors: list[QuantizedTensor], mrvl: dict[str, np.ndarray]
) -> list[LayerDiff]:
    """Each layer of `tensors` run alone on mrvl's int8 inputs (`mrvl`: tensor -> signed
    int8), in graph order: `LayerDiff`s, layers that are not alone left out."""
    kinds = fused_layers(model)
    found = []
    for t in tensors:
        if t.name not in mrvl:
            continue
        kind = kinds.get(t.layer.name, "float")
        off = run_alone(model, t, mrvl, optimized=False)
        if off is None:
            continue
        on = run_alone(model, t, mrvl, optimized=True) if kind == "integer" else off
        mine = mrvl[t.name]
        results = {"on": on, "off": off}
        steps = {side: np.abs(mine - r) for side, r in results.items()}
        found.append(
            LayerDiff(
                t.name, t.layer.op_type, t.layer.name, kind, int(mine.size),
                {k: int(np.count_nonzero(v)) for k, v in steps.items()},
                {k: int(v.max(initial=0)) for k, v in steps.items()},
                rule_counts(model, t, mrvl, {"mrvl": mine, **results}),
            )  # fmt: skip
        )
    return found


def model_runs(name: str, seed: int = 0, with_mrvl: bool = True):
    """(QDQ model, its quantized tensors, mrvl's signed int8 values of them (None without
    `with_mrvl`), onnxruntime's unoptimized ones) for zoo model `name` on its seed-`seed`
    input."""
    from int8_reference_spread import judged_model

    qdq, _, feeds = judged_model(name, seed)
    tensors = quantized_tensors(qdq)
    signed = {t.name: t for t in tensors}

    def as_signed(values):
        return {
            k: _as_signed(v, signed[k].zero_point, signed[k].elem_type)[0]
            for k, v in values.items()
        }

    inputs = input_quantizes(qdq, feeds)
    mrvl = {**inputs, **as_signed(mrvl_int8(qdq, feeds, tensors))} if with_mrvl else None
    return qdq, tensors, mrvl, {**inputs, **as_signed(ort_int8(qdq, feeds, tensors))}


def input_quantizes(model: onnx.ModelProto, feeds: dict) -> dict[str, np.ndarray]:
    """The signed int8 values of each per-tensor QuantizeLinear of a graph input: the
    `quant` rule, which mrvl and onnxruntime share bit for bit (docs/isa.md), so that the
    layers reading them (a CNN's first conv) are run alone too."""
    from mrvl.int8 import quantize_linear

    consts = _constants(model)
    found = {}
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or node.input[0] not in feeds:
            continue
        scale = consts.get(node.input[1])
        zp = consts.get(node.input[2]) if len(node.input) > 2 else np.zeros((), np.int8)
        if scale is None or scale.size != 1 or zp is None:
            continue
        z = int(zp.reshape(())) - (128 if zp.dtype == np.uint8 else 0)
        q = quantize_linear(feeds[node.input[0]], float(scale.reshape(())), z)
        found[node.output[0]] = q.astype(np.int64)
    return found


def report(diffs: list[LayerDiff], carried: dict[str, int], show: int = 12) -> list[str]:
    """Lines: per kind and op type, the layers, those where mrvl differs alone from `on` and
    from `off`, and the largest steps; the first `show` layers that differ from `on`; the
    rule totals over the recomputed layers of each kind. `carried`: tensor -> elements
    where mrvl's whole-model result differs from onnxruntime's unoptimized one."""
    lines = []
    table: dict[tuple[str, str], list[int]] = {}
    for d in diffs:
        row = table.setdefault((d.kind, d.op_type), [0, 0, 0, 0, 0])
        row[0] += 1
        row[1] += d.differ["on"] > 0
        row[2] = max(row[2], d.max_steps["on"])
        row[3] += d.differ["off"] > 0
        row[4] = max(row[4], d.max_steps["off"])
    lines.append("| onnxruntime runs it as | op | layers | mrvl ≠ on (max) | mrvl ≠ off (max) |")
    lines.append("| --- | --- | --- | --- | --- |")
    for (kind, op), (n, on, on_max, off, off_max) in sorted(table.items()):
        lines.append(f"| {kind} | {op} | {n} | {on} ({on_max}) | {off} ({off_max}) |")
    first = [d for d in diffs if d.differ["on"]][:show]
    for d in first:
        lines.append(
            f"- {d.node} ({d.op_type}, {d.kind}): alone {d.differ['on']} of {d.size} ≠ on "
            f"(max {d.max_steps['on']}), {d.differ['off']} ≠ off; whole model "
            f"{carried.get(d.tensor, 0)} ≠ off"
        )
    for kind in ("integer", "float"):
        checked = [d for d in diffs if d.rules and d.kind == kind]
        if not checked:
            continue
        total = {rule: Counter() for rule in RULES}
        for d in checked:
            for rule, sides in d.rules.items():
                total[rule].update(sides)
        lines.append(
            f"rules on {len(checked)} recomputed {kind} layers "
            f"({sum(d.size for d in checked)} elements), elements differing: "
            + "; ".join(
                f"{rule} ≠ " + ", ".join(f"{side} {n}" for side, n in sides.items())
                for rule, sides in total.items()
            )
        )
    return lines


def main(argv=None) -> int:
    from mrvl.models.zoo import ZOO_MODELS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="a zoo model (mrvl.models.zoo.ZOO_MODELS)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=12, help="differing layers listed")
    parser.add_argument(
        "--no-mrvl",
        action="store_true",
        help="run the layers on onnxruntime's unoptimized int8 values instead of mrvl's "
        "(onnxruntime's own local spread, and the rules against its fused kernels)",
    )
    args = parser.parse_args(argv)
    if args.name not in ZOO_MODELS:
        parser.error(f"not a zoo model: {args.name} (see mrvl.models.zoo.ZOO_MODELS)")
    qdq, tensors, mrvl, off = model_runs(args.name, args.seed, with_mrvl=not args.no_mrvl)
    if mrvl is None:
        print("(--no-mrvl: 'mrvl' below is onnxruntime's unoptimized run)")
        mrvl = off
    carried = {k: int(np.count_nonzero(v != off[k])) for k, v in mrvl.items() if k in off}
    print("\n".join(report(layer_diffs(qdq, tensors, mrvl), carried, args.show)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
