"""ONNX → Relax import that keeps every ONNX node name.

TVM's ONNX frontend drops node names, yet they are the only link from a region, an
instruction or a simulated cycle back to the user's model. We run TVM's own importer, ask it
which Relax value each ONNX node produced, and put the node name on each binding's Call as a
`tvm.ir.Span` whose source name is the node name. Spans survive FoldConstant, FuseOpsByPattern
and MergeCompositeFunctions, so the compiler reads them back with `node_name_of`.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Mapping, Sequence

import onnx
import tvm
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import ONNXGraphImporter

from .errors import ModelImportError, MrvlError

__all__ = ["from_onnx", "node_name_of"]


def node_name_of(expr: relax.Expr) -> str | None:
    """The ONNX node name `from_onnx` attached to `expr` (a Call), or None if it has none."""
    span = getattr(expr, "span", None)
    if span is None:
        return None
    name = span.source_name.name
    return name or None


def onnx_node_name(node: onnx.NodeProto) -> str:
    """The name a node is known by: its own, or `<op_type>:<first output>` when it has none.

    ONNX node names are optional; a node's first output tensor name is unique in the graph, so
    the fallback still identifies the node.
    """
    if node.name:
        return node.name
    return f"{node.op_type}:{node.output[0] if node.output else ''}"


def from_onnx(
    model_or_path: onnx.ModelProto | str | os.PathLike,
    shape_dict: Mapping[str, Sequence[int]] | None = None,
) -> tvm.IRModule:
    """Import an ONNX model into Relax with weights as constants and node names as spans.

    Raises `ModelImportError` for a file that cannot be read or parsed, a model that fails the
    ONNX checker, or one TVM's frontend cannot import.
    """
    model = _load(model_or_path)
    importer = _NodeTrackingImporter(dict(shape_dict) if shape_dict else {})
    try:
        # TVM's importer prints every failing node with all its inputs before re-raising;
        # the error we raise names the node, so that dump is noise.
        with contextlib.redirect_stdout(io.StringIO()):
            mod = importer.from_onnx(model.graph, _opset_of(model))
    except tvm.error.OpNotImplemented as err:
        raise ModelImportError(f"TVM cannot import this model: {err}") from err
    except Exception as err:  # noqa: BLE001 - any frontend failure is an import failure
        where = importer.converting
        node = f" at node '{where[0]}' ({where[1]})" if where else ""
        raise ModelImportError(
            f"TVM cannot import this model{node}: {type(err).__name__}: {err}"
        ) from err

    mod = _attach_node_names(mod, model.graph, importer.nodes_by_output)
    unnamed_before = len(_unnamed_calls(mod["main"]))
    mod = relax.transform.FoldConstant()(mod)
    _check_names_survived(mod["main"], unnamed_before)
    return mod


class _NodeTrackingImporter(ONNXGraphImporter):
    """TVM's importer, remembering the node it is converting so that errors can name it."""

    def __init__(self, shape_dict: dict):
        super().__init__(shape_dict, "float32")
        self.converting: tuple[str, str] | None = None

    def _convert_operator(self, op_name, inputs, attrs, opset):
        self.converting = (attrs["tvm_custom"]["name"], op_name)
        return super()._convert_operator(op_name, inputs, attrs, opset)

    @property
    def nodes_by_output(self) -> Mapping[str, relax.Expr]:
        """ONNX tensor name → the Relax value the importer made for it."""
        return self._nodes


def _load(model_or_path) -> onnx.ModelProto:
    """Read and check the model; onnx's checker is strict where TVM only warns."""
    if isinstance(model_or_path, onnx.ModelProto):
        model, what = model_or_path, "the model"
    else:
        path = os.fspath(model_or_path)
        what = f"'{path}'"
        try:
            model = onnx.load(path)
        except FileNotFoundError as err:
            raise ModelImportError(f"cannot read ONNX model {what}: no such file") from err
        except Exception as err:  # noqa: BLE001 - protobuf raises several unrelated types
            raise ModelImportError(
                f"cannot parse ONNX model {what}: {type(err).__name__}: {err}"
            ) from err
    if model.ir_version < 3:
        raise ModelImportError(
            f"{what} has ONNX IR version {model.ir_version}; TVM needs version 3 or later"
        )
    try:
        # A path lets the checker handle models over 2 GB and external data.
        onnx.checker.check_model(model if isinstance(model_or_path, onnx.ModelProto) else path)
    except Exception as err:  # noqa: BLE001 - checker raises ValidationError and others
        raise ModelImportError(f"{what} fails the ONNX checker: {err}") from err
    return model


def _opset_of(model: onnx.ModelProto) -> int:
    """The default-domain opset, as TVM's `from_onnx` picks it."""
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return opset.version
    return 1


def _attach_node_names(
    mod: tvm.IRModule, graph: onnx.GraphProto, nodes_by_output: Mapping[str, relax.Expr]
) -> tvm.IRModule:
    """Put each ONNX node's name on the Calls of the bindings its conversion emitted.

    A node owns the binding whose value (or var) is one of its outputs. Bindings a converter
    emits before that one (the bias reshape, the weight transpose) belong to the same node,
    so an unowned binding takes the name of the next owned one.
    """
    owner: dict[relax.Expr, str] = {}
    for node in graph.node:
        name = onnx_node_name(node)
        for output in node.output:
            value = nodes_by_output.get(output)
            if value is not None and value not in owner:
                owner[value] = name

    func = mod["main"]
    pending: list[tuple[int, int]] = []
    names: dict[tuple[int, int], str] = {}
    for b, block in enumerate(func.body.blocks):
        for i, binding in enumerate(block.bindings):
            name = owner.get(binding.var) or owner.get(binding.value)
            pending.append((b, i))
            if name is not None:
                names.update((key, name) for key in pending)
                pending.clear()

    blocks = []
    for b, block in enumerate(func.body.blocks):
        bindings = [
            _with_name(binding, names.get((b, i))) for i, binding in enumerate(block.bindings)
        ]
        blocks.append(type(block)(bindings, block.span))
    body = relax.SeqExpr(blocks, func.body.body, func.body.span)
    new_func = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
    mod = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    mod["main"] = new_func
    return mod


def _with_name(binding: relax.Binding, name: str | None) -> relax.Binding:
    """The binding with `name` on its Call; the var stays, so later uses need no remapping."""
    value = binding.value
    if name is None or not isinstance(binding, relax.VarBinding):
        return binding
    if not isinstance(value, relax.Call):
        return binding
    span = tvm.ir.Span(tvm.ir.SourceName(name), 0, 0, 0, 0)
    call = relax.Call(value.op, value.args, value.attrs, value.ty_args, span, value.ty)
    return relax.VarBinding(binding.var, call, binding.span)


def _calls(func: relax.Function):
    for block in func.body.blocks:
        for binding in block.bindings:
            if isinstance(binding, relax.VarBinding) and isinstance(binding.value, relax.Call):
                yield binding.value


def _unnamed_calls(func: relax.Function) -> list[relax.Call]:
    return [call for call in _calls(func) if node_name_of(call) is None]


def _check_names_survived(func: relax.Function, unnamed_before: int) -> None:
    """FoldConstant may remove named calls (folded into constants) but must not strip names.

    Guards against a TVM change silently breaking the source map.
    """
    unnamed = _unnamed_calls(func)
    if len(unnamed) > unnamed_before:
        ops = ", ".join(sorted({str(getattr(c.op, "name", c.op)) for c in unnamed}))
        raise MrvlError(
            f"internal error: FoldConstant dropped ONNX node names from calls to {ops}"
        )
