"""Helpers the pytest suites share (importable as `helpers`: tests/ is on pytest's path)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort


def region_functions(mod):
    """(symbol, function) of every mrvl region, with its global_symbol set as RunCodegen does."""
    from tvm import relax

    for gv, func in mod.functions.items():
        attrs = func.attrs if isinstance(func, relax.Function) and func.attrs else {}
        if "Codegen" in attrs and str(attrs["Codegen"]) == "mrvl":
            yield gv.name_hint, func.with_attr("global_symbol", gv.name_hint)


def onnxruntime_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray], outputs=None):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(outputs, feeds)


def truncated_at(model: onnx.ModelProto, tensor_name: str) -> onnx.ModelProto:
    """A copy of `model` whose only output is the intermediate tensor `tensor_name`."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.output[:]
    copy.graph.output.append(onnx.helper.make_empty_tensor_value_info(tensor_name))
    return copy
