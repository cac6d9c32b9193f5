"""Split each `Sum` of more than two inputs into a chain of two-input Sums before
`mrvl.quantize` calibrates, so that each partial sum gets its own calibrated quantization.

The MLIP's int8 add (`qadd`) adds two int8 tensors and requantizes once. A QDQ Sum of three
inputs is one float sum between three dequantizes and one quantize, which TVM imports as two
Adds of one ONNX node with a float tensor between them: no int8 layer. Split first, each Sum
of two is a quantized Add like any other, and the QDQ model says what the MLIP computes
(the partial sum quantized at its own calibrated scale). In float the split is exact up to
fp32 addition order (ONNX's Sum adds left to right, as the chain does).

The chain's first Sum keeps the node's name with "/0", ..., the last one the node's own name
(and output); a Sum named in `keep` (to stay in float) is left whole.
"""

from __future__ import annotations


def split_sums(model, keep: set[str] = frozenset()):
    """A copy of `model` (an `onnx.ModelProto`) with every Sum of more than two inputs a
    chain of two-input Sums; `model` itself when there is none."""
    import onnx
    from onnx import helper

    wide = [
        n
        for n in model.graph.node
        if n.op_type == "Sum" and len(n.input) > 2 and n.name not in keep
    ]
    if not wide:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes = []
    for node in out.graph.node:
        if node.op_type != "Sum" or len(node.input) <= 2 or node.name in keep:
            nodes.append(node)
            continue
        base = node.name or node.output[0]
        partial = node.input[0]
        for k, term in enumerate(node.input[1:-1]):
            name = f"{base}/{k}"
            nodes.append(helper.make_node("Sum", [partial, term], [f"{name}_output"], name=name))
            partial = f"{name}_output"
        nodes.append(
            helper.make_node("Sum", [partial, node.input[-1]], list(node.output), name=node.name)
        )
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out
