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


def assert_same_bytes(expected: list[np.ndarray], actual: list[np.ndarray]) -> None:
    """The two lists of outputs are identical, byte for byte (no tolerance)."""
    assert len(expected) == len(actual), f"{len(expected)} outputs against {len(actual)}"
    for index, (a, b) in enumerate(zip(expected, actual)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"output {index}"
        if a.tobytes() != b.tobytes():
            diff = np.flatnonzero(a.reshape(-1).view(np.uint8) != b.reshape(-1).view(np.uint8))
            raise AssertionError(
                f"output {index}: engines differ in {diff.size} bytes, first at byte {diff[0]}"
            )


def instruction_features(program) -> set[tuple]:
    """What selects a code path in the simulator's engines, per instruction of a
    `mrvl.isa.Program`: the opcode with its activation, pool mode, dtypes, memory spaces,
    element size, and whether a conv is grouped, dilated, strided, padded, narrow (fewer than
    32 output channels), continues or leaves an fp32 accumulator. Two programs with the same
    features run the same engine code, at other sizes."""
    features = set()
    for ins in program.code:
        f, op = ins.fields, ins.opcode
        if op == "dma":
            key = (op, f["src_space"], f["dst_space"], f["elem_bytes"])
        elif op == "cvt":
            key = (op, f["src_dtype"], f["dst_dtype"], tuple(f["perm"]) != tuple(sorted(f["perm"])))
        elif op == "conv":
            key = (
                op, f["act"], f["groups"] > 1, f["out_shape"][3] < 32, f["acc_addr"] != -1,
                f["acc_out"], f["b_addr"] != -1, max(f["dilation"]) > 1, max(f["stride"]) > 1,
                max(f["pad"]) > 0,
            )  # fmt: skip
        elif op == "pool":
            key = (op, f["mode"], f["count_include_pad"], max(f["pad"]) + max(f["pad_end"]) > 0)
        elif "act" in f:
            key = (op, f["act"])
        else:
            key = (op,)
        features.add(key)
    return features


def lib_features(lib) -> set[tuple]:
    """`instruction_features` of every region of a `mrvl.build` result."""
    return set().union(*(instruction_features(r.program) for r in lib.mrvl_regions))
