"""Fold each inference BatchNormalization that follows a Conv into the Conv's weights and bias,
before `mrvl.quantize` calibrates: as onnxruntime's quantization pre-processing does (its
basic graph optimizations), so that the conv and its normalization are one int8 layer with
one requantization, not a conv, a quantize/dequantize pair and a float normalization.

The fold is the normalization's own arithmetic, y = (conv(x) + b - mean) * s + beta with
s = scale / sqrt(var + epsilon), moved into W' = W * s (per output channel) and
b' = (b - mean) * s + beta; it is computed in float64 and rounded once to the weights' type.
Only a Conv whose weights (and bias) and the normalization's parameters are initializers, and
whose output feeds that normalization alone, is folded; everything else is left as it is.
"""

from __future__ import annotations

import numpy as np


def fold_batch_norms(model, keep: set[str] = frozenset()):
    """A copy of `model` (an `onnx.ModelProto`) with every foldable Conv -> BatchNormalization
    pair made one Conv (named as the Conv was); `model` itself when there is none. A pair
    with a node named in `keep` (to stay in float, as the user named it) is left apart."""
    import onnx
    from onnx import numpy_helper

    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in graph.output}
    position = {id(node): k for k, node in enumerate(graph.node)}
    pairs = []
    for bn in graph.node:
        conv = producers.get(bn.input[0]) if bn.op_type == "BatchNormalization" else None
        if (
            conv is None
            or conv.op_type != "Conv"
            or len(bn.output) != 1
            or readers.get(conv.output[0]) != 1
            or conv.output[0] in outputs
            or {conv.name, bn.name} & keep
            or not all(name in inits for name in (*conv.input[1:], *bn.input[1:5]))
        ):
            continue
        pairs.append((position[id(conv)], position[id(bn)]))
    if not pairs:
        return model
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    graph = folded.graph
    added = []
    for index, (conv_at, bn_at) in enumerate(pairs):
        conv, bn = graph.node[conv_at], graph.node[bn_at]
        weight = numpy_helper.to_array(inits[conv.input[1]])
        scale, beta, mean, var = (
            numpy_helper.to_array(inits[name]).astype(np.float64) for name in bn.input[1:5]
        )
        epsilon = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        s = scale / np.sqrt(var + epsilon)
        bias = (
            numpy_helper.to_array(inits[conv.input[2]]).astype(np.float64)
            if len(conv.input) > 2 and conv.input[2]
            else np.zeros(weight.shape[0])
        )
        shape = (-1,) + (1,) * (weight.ndim - 1)
        new_w = (weight.astype(np.float64) * s.reshape(shape)).astype(weight.dtype)
        new_b = ((bias - mean) * s + beta).astype(weight.dtype)
        w_name, b_name = f"{conv.input[1]}_bn_folded_{index}", f"{bn.output[0]}_bn_bias_{index}"
        added += [numpy_helper.from_array(new_w, w_name), numpy_helper.from_array(new_b, b_name)]
        del conv.input[1:]
        conv.input.extend([w_name, b_name])
        conv.output[0] = bn.output[0]
    dropped = {bn_at for _, bn_at in pairs}
    kept = [node for k, node in enumerate(graph.node) if k not in dropped]
    del graph.node[:]
    graph.node.extend(kept)
    graph.initializer.extend(added)
    used = {name for node in graph.node for name in node.input}
    unused = {i.name for i in graph.initializer if i.name not in used}
    kept_inits = [i for i in graph.initializer if i.name not in unused]
    del graph.initializer[:]
    graph.initializer.extend(kept_inits)
    # a model of IR version < 4 lists its initializers as graph inputs too
    kept_inputs = [v for v in graph.input if v.name not in unused]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    return folded
