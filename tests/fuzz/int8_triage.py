"""Where an int8 miss starts: each quantized layer of a QDQ model judged on its own inputs.

The int8 rule (DESIGN §9) judges a model's outputs: within 3 steps of onnxruntime on the same
QDQ model. In a chain of int8 layers, one step off at one layer (a tie rounded the other
way, a float op on the CPU) is carried to the next, and multiplied there when the next scale
is finer than the input's times the layer's gain. `local_steps` tells the two apart: every
quantized tensor of the model is also made a graph output, the model is built and run once,
and each layer (the float op between DequantizeLinear and QuantizeLinear nodes) is run
alone in onnxruntime on mrvl's own int8 inputs. A layer more than one step off there is
wrong by itself; a miss whose layers are all within one step was carried and amplified.
For triage only, as `harness.check`'s fp16-noise/values split: both are failures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper


@dataclass(frozen=True)
class LayerSteps:
    tensor: str  # the dequantized output of the layer
    op_type: str
    node: str
    local: int  # steps from onnxruntime running the layer alone on mrvl's inputs
    carried: int  # steps from onnxruntime running the whole model


def _per_tensor_dequantizes(model: onnx.ModelProto, inits: dict) -> dict[str, onnx.NodeProto]:
    return {
        n.output[0]: n
        for n in model.graph.node
        if n.op_type == "DequantizeLinear"
        and n.input[0] not in inits
        and inits.get(n.input[1], np.zeros(2)).size == 1
    }


def _snapped(value: np.ndarray, dq: onnx.NodeProto, inits: dict) -> np.ndarray:
    """mrvl's dequantized tensor as the exact multiple of its scale it stands for."""
    scale = np.float32(inits[dq.input[1]])
    zero = np.float32(inits[dq.input[2]]) if len(dq.input) > 2 else np.float32(0)
    q = np.rint(np.asarray(value, np.float64) / scale + zero)
    return np.asarray((q - zero) * scale, np.float32)  # an array even for a 0-d tensor


def local_steps(qdq: onnx.ModelProto, x, spec, optimized: bool = False) -> list[LayerSteps]:
    """Each quantized layer of `qdq` (a float op whose inputs are dequantized or constant and
    whose output one QuantizeLinear reads), in graph order, with its steps off alone and in
    the whole model on input `x` (an array fed to the graph input `x`, or feeds by input
    name), built for `spec`'s target. onnxruntime runs with its graph optimizations off
    (DQ → fp32 op → Q as written), or with `optimized` on (what the int8 zoo compares the
    whole model with). A layer alone keeps its int8 activations, which x86 does not fuse, so
    it runs in fp32 either way; `scripts/int8_layer_rules.py` runs the fused kernels."""
    import tvm
    from tvm import relax

    import mrvl
    from mrvl.onnx_shell import with_outputs

    inits = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    dequantizes = _per_tensor_dequantizes(qdq, inits)
    exposed = with_outputs(qdq, list(dequantizes))
    names = [o.name for o in exposed.graph.output]
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(exposed), mcpu=spec.mcpu, num_tiles=spec.num_tiles)
    inputs = graph_feeds(qdq, x)
    vm = relax.VirtualMachine(mrvl.build(mod), tvm.cpu())
    value = vm["main"](*[tvm.runtime.tensor(v) for v in inputs.values()])
    got = dict(zip(names, [value] if hasattr(value, "numpy") else list(value), strict=True))
    got = {k: v.numpy() for k, v in got.items()}
    want = dict(zip(names, _run(exposed, inputs, optimized), strict=True))
    producer = {out: node for node in qdq.graph.node for out in node.output}
    found = []
    for name, dq in dequantizes.items():
        q = producer.get(dq.input[0])
        layer = (
            producer.get(q.input[0]) if q is not None and q.op_type == "QuantizeLinear" else None
        )
        if layer is None or layer.op_type in ("QuantizeLinear", "DequantizeLinear"):
            continue
        feeds, nodes, needed = {}, [], set(layer.input) | set(q.input[1:]) | set(dq.input[1:])
        for operand in layer.input:
            source = producer.get(operand)
            if not operand or operand in inits:
                continue
            if operand in inputs:
                feeds[operand] = inputs[operand]
            elif operand in dequantizes:
                feeds[operand] = _snapped(got[operand], dequantizes[operand], inits)
            elif source is not None and source.op_type == "DequantizeLinear":
                nodes.append(source)  # a weight's dequantize: its inputs are constants
                needed |= set(source.input)
            else:
                break  # a float input mrvl computed without quantizing it: not a layer alone
        else:
            alone = helper.make_graph(
                [*nodes, layer, q, dq],
                "layer",
                [
                    helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v.shape)
                    for k, v in feeds.items()
                ],  # fmt: skip
                [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)],
                [numpy_helper.from_array(inits[k], k) for k in sorted(needed) if k in inits],
            )
            model = helper.make_model(alone, opset_imports=list(qdq.opset_import))
            model.ir_version = qdq.ir_version
            scale = float(inits[dq.input[1]])
            (expected,) = _run(model, feeds, optimized)
            local = np.rint(np.abs(got[name].astype(np.float64) - expected) / scale)
            carried = np.rint(np.abs(got[name].astype(np.float64) - want[name]) / scale)
            found.append(
                LayerSteps(
                    name,
                    layer.op_type,
                    layer.name,
                    int(local.max(initial=0)),
                    int(carried.max(initial=0)),
                )  # fmt: skip
            )
    return found


def graph_feeds(model: onnx.ModelProto, x) -> dict[str, np.ndarray]:
    """`x` as feeds of `model`'s graph inputs in their order: a dict as it is (every input
    named, no other), an array as the one input `x`; else a ValueError that says what is
    missing."""
    inits = {i.name for i in model.graph.initializer}
    wanted = [i.name for i in model.graph.input if i.name not in inits]
    given = dict(x) if isinstance(x, dict) else {"x": x}
    if sorted(given) != sorted(wanted):
        raise ValueError(
            f"feeds for inputs {sorted(given)}, but the model's inputs are {sorted(wanted)}"
        )
    return {name: np.asarray(given[name]) for name in wanted}


def _run(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], optimized: bool = False
) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if optimized
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    options.log_severity_level = 3
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def triage(qdq: onnx.ModelProto, x, spec) -> str:
    """`local:<op>` for the first layer more than one step off on its own inputs (`x` as
    `local_steps` takes it), else `carried` (every layer within one step alone; the miss was
    carried and amplified)."""
    for layer in local_steps(qdq, x, spec):
        if layer.local > 1:
            return f"local:{layer.op_type}"
    return "carried"
