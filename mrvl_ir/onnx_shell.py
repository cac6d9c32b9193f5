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
from onnx import helper, numpy_helper

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


def last_quantized(model: onnx.ModelProto) -> dict[str, tuple[str, float]]:
    """For each graph output of a QDQ model, the dequantized tensor it comes from and its
    scale: the output itself when a DequantizeLinear with one scale writes it, else the
    DequantizeLinear output that the one-input float ops after it (a CPU Softmax) read.
    Outputs with none are left out. What the int8 zoo and the int8 fuzzer judge, to the
    tensor's own quantization step."""
    producer = {out: node for node in model.graph.node for out in node.output}
    constants = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    found = {}
    for output in model.graph.output:
        name, seen = output.name, set()
        while name in producer and name not in seen:
            seen.add(name)
            node = producer[name]
            if node.op_type == "DequantizeLinear":
                scale = constants.get(node.input[1])
                if scale is not None and scale.size == 1:
                    found[output.name] = (name, float(scale.reshape(())))
                break
            data = [i for i in node.input if i and i not in constants]
            if len(data) != 1:
                break
            name = data[0]
    return found
