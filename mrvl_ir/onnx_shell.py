"""A model's graph without the bytes of its large initializers, for ONNX's own analyses.

ONNX shape inference and the checker serialize the whole model before their C++ code reads
it: for VGG-19 (548 MB of weights) each call copies half a gigabyte and costs seconds, and
the fp16 emulation, the MAC count and the light-model loader each made such a call. What they
need of a weight is its element type and dims, never its values, so `weightless_shell`
declares each large initializer as a graph input of the same type and shape instead. Small
initializers (shape tensors, scalars, the axes of a Squeeze) keep their values, because shape
inference reads those: a Reshape's target shape is a constant it propagates.
"""

from __future__ import annotations

import math

import onnx
from onnx import helper

LARGE_INITIALIZER = 1024
"""Elements above which an initializer is declared by type and shape only."""


def weightless_shell(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every initializer of more than `LARGE_INITIALIZER` elements declared as a
    graph input of its type and dims instead (see the module docstring). Nodes, values and
    element types are those of `model`; the values of large initializers are not there."""
    graph = model.graph
    shell = onnx.ModelProto(
        ir_version=model.ir_version,
        producer_name=model.producer_name,
        producer_version=model.producer_version,
        domain=model.domain,
        model_version=model.model_version,
    )
    shell.opset_import.extend(model.opset_import)
    shell.functions.extend(model.functions)
    out = shell.graph
    out.name = graph.name
    out.node.extend(graph.node)
    out.input.extend(graph.input)
    out.output.extend(graph.output)
    out.value_info.extend(graph.value_info)
    declared = {value.name for value in graph.input}
    for init in graph.initializer:
        if math.prod(init.dims) <= LARGE_INITIALIZER:
            out.initializer.append(init)
        elif init.name not in declared:
            out.input.append(helper.make_tensor_value_info(init.name, init.data_type, init.dims))
    return shell


def with_outputs(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """A copy of `model` with the tensors `names` as further float graph outputs, shapes
    inferred: what onnxruntime needs to return intermediate tensors (the int8 zoo's and
    fuzzer's judging of the last quantized tensor before a float op)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    have = {o.name for o in out.graph.output}
    for name in names:
        if name not in have:
            out.graph.output.append(
                helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
            )
    return onnx.shape_inference.infer_shapes(out)
