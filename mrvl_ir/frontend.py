"""ONNX → Relax import that keeps every ONNX node name.

TVM's ONNX frontend drops node names, yet they are the only link from a region, an
instruction or a simulated cycle back to the user's model. We run TVM's own importer, ask it
which Relax value each ONNX node produced, and put the node name on each binding's Call as a
`tvm.ir.Span` whose source name is the node name. Spans survive FoldConstant, FuseOpsByPattern
and MergeCompositeFunctions, so the compiler reads them back with `node_name_of`.

The importer also normalizes a few ONNX operators whose TVM conversion the MLIP patterns
cannot see through (each only when its inputs are what the rewrite needs; otherwise TVM's own
conversion is kept):

- `Clip` with constant bounds → `relax.clip(x, min, max)` (TVM: `call_tir` maximum + minimum);
- `Pad` in constant mode with constant pads and value → `relax.nn.pad` (TVM: `call_tir` pad);
  in reflect or edge mode → one `relax.take` of constant indices per padded axis; with
  all pads zero → its input;
- `Sum` of same-shape tensors → a chain of `relax.add` (TVM: broadcast_to + stack + sum);
- `BatchNormalization` in inference mode with constant parameters → `relax.multiply` by the
  per-channel scale and `relax.add` of the shift (TVM: `batch_norm` + `TupleGetItem`, and a
  pattern cannot end at a TupleGetItem, so a trailing batch norm could never fuse);
- `Split` with constant sizes → one `relax.strided_slice` per output (TVM: `relax.split`
  + `TupleGetItem`, which a pattern cannot end at);
- `Upsample` (opsets 7-9) and `Resize` of opset 10 with constant scales →
  `relax.image.resize2d` (TVM's converter fails on opset 9, and reads Resize-10's scales as
  its roi);
- `Dropout` in inference mode without its mask output → its input (TVM: `relax.nn.dropout`,
  an op no region can hold, which splits VGG's and AlexNet's classifiers off their regions);
- `Max` / `Min` by a scalar constant → `relax.clip`, `Neg` → `x * -1`, and the empty-`scales`
  Resize that TVM rejects (`onnx_forms.py`).
- `Tile` with constant repeats → reshape, `broadcast_to`, reshape (`frontend_moves.py`).
- `Einsum` that is a transpose or a (batched) matmul → permute_dims / matmul (`einsum.py`).

Before TVM sees a model that has `Shape` nodes, shape arithmetic on statically known shapes
(Shape -> Gather -> Div -> Slice, as torchvision's `chunk` exports) is folded into constants,
so such slices import as static ones.

The module records each ONNX node's op type in the attribute `mrvl.onnx_nodes` (node name →
op type, in graph order), which `partition_for_mrvl(deny_ops=...)` and the partition report
read.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import tvm
from onnx import numpy_helper
from tvm import relax
from tvm.ir.expr import GenericConst
from tvm.relax.frontend.onnx.onnx_frontend import ONNXGraphImporter

from . import frontend_moves, qdq
from .errors import ModelImportError
from .frontend_moves import static_shape
from .onnx_forms import INPUT_FIXES, NORMALIZATIONS

__all__ = ["ONNX_NODES_ATTR", "from_onnx", "node_name_of", "onnx_node_name", "onnx_nodes_of"]

ONNX_NODES_ATTR = "mrvl.onnx_nodes"
"""Module attribute set by `from_onnx`: ONNX node name → op type, in graph order."""


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


def onnx_nodes_of(mod: tvm.IRModule) -> dict[str, str] | None:
    """The `mrvl.onnx_nodes` record of a module (node name → op type), or None without one."""
    attrs = mod.attrs
    if attrs is None or ONNX_NODES_ATTR not in attrs:
        return None
    return {str(name): str(op) for name, op in attrs[ONNX_NODES_ATTR].items()}


def from_onnx(
    model_or_path: onnx.ModelProto | str | os.PathLike,
    shape_dict: Mapping[str, Sequence[int]] | None = None,
) -> tvm.IRModule:
    """Import an ONNX model into Relax with weights as constants and node names as spans.

    Raises `ModelImportError` for a file that cannot be read or parsed, a model that fails the
    ONNX checker, or one TVM's frontend cannot import.
    """
    original = model = _load(model_or_path)
    if any(node.op_type == "Shape" for node in model.graph.node):
        model = _fold_shape_computations(model, shape_dict or {})
    importer = _NodeTrackingImporter(dict(shape_dict) if shape_dict else {}, _used_tensors(model))
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
    op_types = {onnx_node_name(node): node.op_type for node in original.graph.node}
    del importer, model, original  # their copies of the weights, before folding makes more
    try:
        mod = fold_constants(mod)
    except Exception as err:  # noqa: BLE001 - TVM's FoldConstant failing is an import failure
        raise ModelImportError(
            f"TVM cannot fold the imported model's constants: {type(err).__name__}: "
            f"{str(err).strip().splitlines()[-1] if str(err).strip() else ''}"
        ) from err
    return mod.with_attr(ONNX_NODES_ATTR, op_types)


class _NodeTrackingImporter(ONNXGraphImporter):
    """TVM's importer, remembering the node it is converting (so that errors can name it) and
    normalizing the operators in `_NORMALIZATIONS`."""

    def __init__(self, shape_dict: dict, used_tensors: set[str]):
        super().__init__(shape_dict, "float32")
        self.converting: tuple[str, str] | None = None
        self.used_tensors = used_tensors
        self._node: onnx.NodeProto | None = None

    def _parse_value_proto(self, value_proto):
        # TVM's node loop calls this with each NodeProto just before converting it: the only
        # hook that sees the node itself (its outputs) rather than its parsed attributes.
        if isinstance(value_proto, onnx.NodeProto):
            self._node = value_proto
        return super()._parse_value_proto(value_proto)

    def _convert_operator(self, op_name, inputs, attrs, opset):
        node = self._node if self._node is not None and self._node.op_type == op_name else None
        name = onnx_node_name(node) if node is not None else attrs["tvm_custom"]["name"]
        self.converting = (name, op_name)
        fix = INPUT_FIXES.get(op_name)
        fixed = fix(list(inputs), opset) if fix is not None else None
        inputs = inputs if fixed is None else fixed
        normalize = _NORMALIZATIONS.get(op_name)
        if normalize is not None:
            outputs = list(node.output) if node is not None else None
            used = None if outputs is None else [o in self.used_tensors for o in outputs]
            result = normalize(self.bb, list(inputs), {**attrs, "mrvl_used_outputs": used}, opset)
            if result is not None:
                return self.bb.normalize(result)
        return super()._convert_operator(op_name, inputs, attrs, opset)

    @property
    def nodes_by_output(self) -> Mapping[str, relax.Expr]:
        """ONNX tensor name → the Relax value the importer made for it."""
        return self._nodes


# ---------------------------------------------------------------------------------------------
# Normalizations. Each returns the Relax value of the node, or None to keep TVM's conversion.

_FLOAT_DTYPES = ("float16", "float32", "float64")


def _float_tensor(expr) -> relax.TensorType | None:
    ty = getattr(expr, "ty", None)
    if isinstance(ty, relax.TensorType) and str(ty.dtype) in _FLOAT_DTYPES and ty.ndim >= 0:
        return ty
    return None


def constant_view(const: GenericConst) -> np.ndarray:
    """The data of a Relax constant as a read-only numpy array, without copying it (DLPack);
    `.value.numpy()` would copy a 400 MB weight matrix each time it is looked at."""
    try:
        array = np.from_dlpack(const.value)
    except (BufferError, TypeError, ValueError, RuntimeError):  # a dtype DLPack cannot share
        return const.value.numpy()
    array.flags.writeable = False
    return array


def _const_array(expr) -> np.ndarray | None:
    return constant_view(expr) if isinstance(expr, GenericConst) else None


def _input(inputs: list, index: int):
    return inputs[index] if index < len(inputs) else None


def _clip(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Clip(x, min, max) with constant bounds → relax.clip; a missing or NaN bound is ±inf."""
    x = inputs[0]
    if _float_tensor(x) is None:
        return None
    bounds = []
    for index, attr, unbounded in ((1, "min", -math.inf), (2, "max", math.inf)):
        if opset < 11:
            value = float(attrs.get(attr, unbounded))
        elif _input(inputs, index) is None:
            value = unbounded
        else:
            array = _const_array(inputs[index])
            if array is None or array.size != 1:
                return None
            value = float(array.reshape(()))
        bounds.append(unbounded if math.isnan(value) else value)
    low, high = bounds
    if low > high:  # ONNX then gives max everywhere; relax.clip's order is not specified
        return None
    return relax.op.clip(x, low, high)


def _pad(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Pad in constant mode, constant non-negative pads and value → relax.nn.pad; in reflect
    or edge mode → one constant-index `take` per padded axis (`frontend_moves.pad_by_takes`)."""
    x = inputs[0]
    ty = _float_tensor(x)
    if ty is None:
        return None
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("constant", "reflect", "edge"):
        return None
    rank = ty.ndim
    if opset < 11:
        pads, value, axes = list(attrs.get("pads", ())), float(attrs.get("value", 0.0)), None
    else:
        pads_array = _const_array(inputs[1]) if _input(inputs, 1) is not None else None
        if pads_array is None:
            return None
        pads = [int(p) for p in pads_array.reshape(-1)]
        value = 0.0
        if _input(inputs, 2) is not None:
            value_array = _const_array(inputs[2])
            if value_array is None or value_array.size != 1:
                return None
            value = float(value_array.reshape(()))
        axes = None
        if _input(inputs, 3) is not None:
            axes_array = _const_array(inputs[3])
            if axes_array is None:
                return None
            axes = [int(a) % rank if rank else int(a) for a in axes_array.reshape(-1)]
    axes = list(range(rank)) if axes is None else axes
    if len(pads) != 2 * len(axes) or len(set(axes)) != len(axes) or any(p < 0 for p in pads):
        return None
    before, after = [0] * rank, [0] * rank
    for i, axis in enumerate(axes):
        before[axis], after[axis] = pads[i], pads[len(axes) + i]
    if not any(pads):
        return x  # nothing to pad (Swin's window pads when the windows tile the plane)
    if mode != "constant":
        return frontend_moves.pad_by_takes(bb, x, before, after, mode)
    pad_width = [p for pair in zip(before, after) for p in pair]
    return relax.op.nn.pad(x, pad_width, "constant", value)


def _sum(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Sum of two or more tensors of one static shape and dtype → a chain of relax.add."""
    if len(inputs) < 2 or any(i is None for i in inputs):
        return None
    if all(isinstance(i, GenericConst) for i in inputs):
        return None  # TVM folds it already
    shapes = {static_shape(i) for i in inputs}
    dtypes = {str(getattr(i.ty, "dtype", None)) for i in inputs}
    if len(shapes) != 1 or None in shapes or len(dtypes) != 1:
        return None
    total = inputs[0]
    for operand in inputs[1:-1]:
        total = bb.emit(relax.op.add(total, operand))
    return relax.op.add(total, inputs[-1])


def _batch_norm(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Inference BatchNormalization with constant parameters → x * scale + shift per channel.

    scale = γ / sqrt(σ² + ε) and shift = β - μ·scale are folded in float64, then stored in the
    data's dtype with shape (1, C, 1, ...).
    """
    x = inputs[0]
    ty = _float_tensor(x)
    if ty is None or ty.ndim < 2 or len(inputs) != 5:
        return None
    if attrs.get("training_mode", 0) or attrs["tvm_custom"]["num_outputs"] != 1:
        return None
    shape = static_shape(x)
    params = [qdq.dequantized_constant(bb, p) for p in inputs[1:]]  # QDQ: an int8 scale
    if shape is None or any(p is None or p.shape != (shape[1],) for p in params):
        return None
    gamma, beta, mean, var = (p.astype(np.float64) for p in params)
    scale = gamma / np.sqrt(var + float(attrs.get("epsilon", 1e-5)))
    shift = beta - mean * scale
    channel, dtype = (1, shape[1]) + (1,) * (ty.ndim - 2), str(ty.dtype)
    scaled = bb.emit(relax.op.multiply(x, relax.const(scale.reshape(channel).astype(dtype))))
    return relax.op.add(scaled, relax.const(shift.reshape(channel).astype(dtype)))


def _dropout(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Dropout at inference (no training_mode, or a constant false one) is the identity.

    Only when nothing reads its mask output (exporters often declare one nobody uses); the
    unused mask slot is filled with the input itself.
    """
    used = attrs["mrvl_used_outputs"]
    if used is None or any(used[1:]) or not attrs.get("is_test", 1):
        return None
    training = _input(inputs, 2)
    if training is not None:
        flag = _const_array(training)
        if flag is None or flag.size != 1 or bool(flag.reshape(())):
            return None
    x = inputs[0]
    return x if len(used) == 1 else relax.Tuple([x] * len(used))


def _split(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Split of a static float tensor with constant sizes → one `relax.strided_slice` per
    output (TVM: `relax.split` + `TupleGetItem`, which no pattern can end at)."""
    x = inputs[0]
    shape = static_shape(x)
    if _float_tensor(x) is None or shape is None or not shape:
        return None
    axis = int(attrs.get("axis", 0)) % len(shape)
    count = attrs["tvm_custom"]["num_outputs"]
    sizes = attrs.get("split")
    if opset >= 13 and _input(inputs, 1) is not None:
        array = _const_array(inputs[1])
        if array is None:
            return None
        sizes = array.reshape(-1)
    if sizes is None or len(sizes) == 0:  # equal parts, the last one smaller (opset 18)
        step = -(-shape[axis] // count)
        sizes = [min(step, shape[axis] - i * step) for i in range(count)]
    sizes = [int(v) for v in sizes]
    if len(sizes) != count or sum(sizes) != shape[axis] or min(sizes) < 0:
        return None
    parts, start = [], 0
    for size in sizes:
        part = relax.op.strided_slice(x, [axis], [start], [start + size])
        parts.append(bb.emit(part))
        start += size
    return relax.Tuple(parts)


def _upsample(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Upsample (opsets 7-9, deprecated) with constant scales on H and W → `resize2d`, which
    is Resize with coordinate mode asymmetric and, for nearest, floor rounding (TVM's own
    converter fails on opset 9, whose scales are an input)."""
    x = inputs[0]
    shape = static_shape(x)
    if _float_tensor(x) is None or shape is None or len(shape) != 4:
        return None
    scales = attrs.get("scales")
    if _input(inputs, 1) is not None:
        scales = _const_array(inputs[1])
    if scales is None:
        return None
    scales = [float(v) for v in np.asarray(scales).reshape(-1)]
    mode = attrs.get("mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if len(scales) != 4 or scales[:2] != [1.0, 1.0] or mode not in ("nearest", "linear"):
        return None
    size = [int(math.floor(shape[2] * scales[2])), int(math.floor(shape[3] * scales[3]))]
    return relax.op.image.resize2d(
        x,
        size,
        layout="NCHW",
        method="nearest_neighbor" if mode == "nearest" else "linear",
        coordinate_transformation_mode="asymmetric",
        rounding_method="floor" if mode == "nearest" else "",
    )


def _resize10(bb, inputs, attrs, opset) -> relax.Expr | None:
    """Resize of opset 10 (X, scales) is Upsample's semantics; TVM reads its scales as roi."""
    return _upsample(bb, inputs, attrs, opset) if opset < 11 else None


_NORMALIZATIONS: dict[str, Callable] = {
    "Upsample": _upsample,
    "Resize": _resize10,
    "Split": _split,
    "Clip": _clip,
    "Dropout": _dropout,
    "Pad": _pad,
    "Sum": _sum,
    "BatchNormalization": _batch_norm,
    **NORMALIZATIONS,
    "Tile": frontend_moves.tile,
}


# ---------------------------------------------------------------------------------------------


_SHAPE_ARITHMETIC = frozenset(
    {"Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Div", "Mul", "Add", "Sub",
     "Cast", "Constant", "Reshape", "Floor", "Ceil", "Identity", "Mod",
     "ConstantOfShape", "Transpose", "Range", "Equal", "Where", "Not", "Expand"}
)  # fmt: skip
"""ONNX ops a shape computation is made of (`_fold_shape_computations` evaluates them)."""

_SHAPE_VALUES_MAX = 64
"""A folded value is a shape or an index: at most this many elements."""


def _fold_shape_computations(
    model: onnx.ModelProto, shape_dict: Mapping[str, Sequence[int]]
) -> onnx.ModelProto:
    """Replace the shape arithmetic of a static model by constants.

    Exporters compute split points from `Shape` (torchvision's ShuffleNetV2 `chunk`, YOLOv8's
    heads): Shape -> Gather -> Div -> Slice. TVM imports such a Slice as a dynamic one, and
    the shapes after it are unknown to every later pass. Where ONNX shape inference knows the
    Shape's input statically, the Shape and everything computed only from it and constants
    (small integer tensors, evaluated by `onnx.reference`) become initializers, so the Slice
    sees constant starts and ends. The model is unchanged otherwise. `shape_dict` fixes the
    inputs' symbolic dimensions first (as `from_onnx` is told them).
    """
    model = _copy(model)
    graph = model.graph
    for value in graph.input:
        if value.name in shape_dict and value.type.HasField("tensor_type"):
            dims = value.type.tensor_type.shape.dim
            if len(dims) == len(shape_dict[value.name]):
                for dim, size in zip(dims, shape_dict[value.name]):
                    dim.Clear()
                    dim.dim_value = int(size)
    while True:
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
        except Exception:  # noqa: BLE001 - inference is best effort; keep what is folded
            return model
        static = {}
        for info in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
            dims = info.type.tensor_type.shape.dim
            if info.type.tensor_type.HasField("shape") and all(
                d.HasField("dim_value") for d in dims
            ):
                static[info.name] = [d.dim_value for d in dims]
        known = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
        folded = []
        for node in graph.node:
            value = _shape_value(node, static, known, model.opset_import)
            if value is not None:
                known[node.output[0]] = value
                folded.append(node)
        if not folded:
            return model
        for node in folded:
            graph.node.remove(node)
            graph.initializer.append(numpy_helper.from_array(known[node.output[0]], node.output[0]))


def _shape_value(node, static: dict, known: dict, opset_import) -> np.ndarray | None:
    """The value of a shape-arithmetic node whose inputs are known, else None."""
    from onnx.reference import ReferenceEvaluator

    if node.op_type not in _SHAPE_ARITHMETIC or len(node.output) != 1:
        return None
    if node.op_type == "Shape":
        if node.input[0] not in static:
            return None
        shape = np.array(static[node.input[0]], np.int64)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        return shape[attrs.get("start", 0) : attrs.get("end", len(shape))]
    if node.op_type != "Constant" and not all(i in known for i in node.input if i):
        return None
    inputs = {i: known[i] for i in node.input if i}
    if any(v.size > _SHAPE_VALUES_MAX for v in inputs.values()):
        return None
    undefined = onnx.TensorProto.UNDEFINED
    sub = onnx.helper.make_graph(
        [node],
        "fold",
        [onnx.helper.make_tensor_value_info(i, undefined, None) for i in inputs],
        [onnx.helper.make_tensor_value_info(node.output[0], undefined, None)],
    )
    try:
        sub_model = onnx.helper.make_model(sub, opset_imports=opset_import)
        (value,) = ReferenceEvaluator(sub_model).run(None, inputs)
    except Exception:  # noqa: BLE001 - not foldable: leave it to TVM
        return None
    value = np.asarray(value)
    if value.size > _SHAPE_VALUES_MAX or value.dtype.kind not in "iu":
        return None
    return value


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


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
    if model.ir_version == 0 and not model.HasField("graph"):
        raise ModelImportError(f"{what} is not an ONNX model: it is empty or has no graph")
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


def _used_tensors(model: onnx.ModelProto) -> set[str]:
    """Tensor names some node reads or the graph outputs (subgraphs included)."""
    used = {o.name for o in model.graph.output}
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            used.update(node.input)
            for attr in node.attribute:
                graphs.extend([attr.g] if attr.HasField("g") else list(attr.graphs))
        used.update(o.name for o in graph.output)
    return used


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

    A node owns the bindings its outputs are computed by that no earlier node owns: walking
    the graph in order, each node claims the binding of each output value and, through their
    arguments, every binding not yet claimed (the bias reshape, the weight transpose, the
    multiply of a folded batch norm). Emission order cannot be used for this: TVM emits a
    converter's result only when a later node uses it, after that node's own helpers.
    Bindings no node output reaches take the name of the next claimed binding.
    """
    func = mod["main"]
    bindings = [b for block in func.body.blocks for b in block.bindings]
    by_var = {b.var: b for b in bindings}
    by_value = {b.value: b for b in bindings if isinstance(b, relax.VarBinding)}
    owner: dict[relax.Var, str] = {}
    for node in graph.node:
        name = onnx_node_name(node)
        todo = [nodes_by_output[o] for o in node.output if o in nodes_by_output]
        while todo:
            expr = todo.pop()
            binding = by_var.get(expr) if isinstance(expr, relax.Var) else by_value.get(expr)
            if binding is None:
                if isinstance(expr, relax.Tuple):
                    todo.extend(expr.fields)
                elif isinstance(expr, relax.TupleGetItem):
                    todo.append(expr.tuple_value)
                continue
            if binding.var in owner:
                continue
            owner[binding.var] = name
            if isinstance(binding, relax.VarBinding):
                todo.extend(relax.analysis.free_vars(binding.value))

    names: dict[relax.Var, str] = {}
    pending: list[relax.Var] = []
    for binding in bindings:
        pending.append(binding.var)
        name = owner.get(binding.var)
        if name is not None:
            names.update((var, owner.get(var, name)) for var in pending)
            pending.clear()

    blocks = [
        type(block)([_with_name(b, names.get(b.var)) for b in block.bindings], block.span)
        for block in func.body.blocks
    ]
    body = relax.SeqExpr(blocks, func.body.body, func.body.span)
    new_func = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
    mod = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    mod["main"] = new_func
    return mod


def fold_constants(mod: tvm.IRModule) -> tvm.IRModule:
    """Fold the calls of `main` that use no variable, keeping the ONNX names of the rest.

    The layout ops TVM's importer puts on weights (the reshape of every conv bias, the
    transpose of a Gemm weight) are folded here in numpy. TVM's FoldConstant compiles each
    folded op with LLVM first (about 15 ms apiece, seconds on a real network), so it runs only
    when something else is left to fold (`ConstantOfShape` weights, say).
    """
    mod = _fold_layout_ops(mod)  # and dequantizes of constants, remembered (qdq.py)
    if not has_foldable_calls(mod["main"]):
        return mod
    unnamed_before = len(_unnamed_calls(mod["main"]))
    mod = relax.transform.FoldConstant()(mod)
    _check_names_survived(mod["main"], unnamed_before)
    return mod


def has_foldable_calls(func: relax.Function) -> bool:
    """Whether some call of `func`'s dataflow uses no variable, so FoldConstant would fold it."""
    for block in func.body.blocks:
        for binding in block.bindings:
            value = binding.value
            if (
                isinstance(value, relax.Call)
                and isinstance(value.op, tvm.ir.Op)
                and not relax.analysis.free_vars(value)
            ):
                return True
    return False


def _numpy_layout_op(call: relax.Call, args: list) -> np.ndarray | None:
    """`call` evaluated in numpy if it is a layout op of constants, else None."""
    op = call.op.name if isinstance(call.op, tvm.ir.Op) else None
    if op not in _LAYOUT_OPS or not args or not isinstance(args[0], GenericConst):
        return None
    data = constant_view(args[0])
    attrs = call.attrs
    if op == "relax.reshape":
        shape = static_shape(call)
        result = None if shape is None else data.reshape(shape)
    elif op == "relax.permute_dims":
        result = _transpose(data, None if attrs.axes is None else [int(a) for a in attrs.axes])
    elif op == "relax.expand_dims":
        rank = data.ndim + len(attrs.axis)
        result = np.expand_dims(data, tuple(int(a) % rank for a in attrs.axis))
    elif op == "relax.squeeze":
        axes = None if attrs.axis is None else tuple(int(a) % data.ndim for a in attrs.axis)
        result = np.squeeze(data, axes)
    else:  # relax.astype
        result = data.astype(str(attrs.dtype))
    ty = call.ty
    if (
        result is None
        or not isinstance(ty, relax.TensorType)
        or str(result.dtype) != str(ty.dtype)
        or tuple(result.shape) != static_shape(call)
    ):
        return None
    return result


def _transpose(data: np.ndarray, axes: list[int] | None) -> np.ndarray:
    """np.transpose, copied to C order; a large matrix is copied in bands of rows, which
    is about three times faster than one strided copy (0.3 s for VGG's 400 MB fc6)."""
    if data.ndim != 2 or data.size < (1 << 20) or axes == [0, 1]:
        return np.ascontiguousarray(np.transpose(data, axes))
    out = np.empty(data.shape[::-1], data.dtype)
    for start in range(0, data.shape[0], 512):
        out[:, start : start + 512] = data[start : start + 512].T
    return out


_LAYOUT_OPS = (
    "relax.reshape",
    "relax.permute_dims",
    "relax.expand_dims",
    "relax.squeeze",
    "relax.astype",
)


def _fold_layout_ops(mod: tvm.IRModule) -> tvm.IRModule:
    """Replace the layout ops of constants in `main` by constants, computed in numpy."""
    func = mod["main"]
    folded: dict[relax.Var, GenericConst] = {}
    quantized = qdq.quantized_constants(mod)
    known = len(quantized)

    def substitute(expr):
        if isinstance(expr, relax.Var):
            return folded.get(expr, expr)
        if isinstance(expr, relax.Tuple):
            fields = [substitute(f) for f in expr.fields]
            if all(a.same_as(b) for a, b in zip(fields, expr.fields)):
                return expr
            return relax.Tuple(fields, expr.span)
        return expr

    blocks = []
    for block in func.body.blocks:
        bindings = []
        for binding in block.bindings:
            value = binding.value
            if isinstance(binding, relax.VarBinding) and isinstance(value, relax.Call):
                args = [substitute(a) for a in value.args]
                result, origin = qdq.fold_constant_call(
                    value, args, _numpy_layout_op(value, args), quantized
                )
                if result is not None:
                    folded[binding.var] = relax.const(result)
                    if origin is not None:
                        quantized[folded[binding.var]] = origin
                    continue
                if any(not a.same_as(b) for a, b in zip(args, value.args)):
                    value = relax.Call(
                        value.op, args, value.attrs, value.ty_args, value.span, value.ty
                    )
                    binding = relax.VarBinding(binding.var, value, binding.span)
            elif isinstance(binding, relax.VarBinding) and isinstance(value, relax.Var):
                if value in folded:
                    folded[binding.var] = folded[value]
                    continue
            elif folded and set(relax.analysis.free_vars(value)) & folded.keys():
                return mod  # a use this substitution does not reach: leave it to FoldConstant
            bindings.append(binding)
        blocks.append(type(block)(bindings, block.span))
    if not folded:
        return mod
    body = relax.SeqExpr(blocks, substitute(func.body.body), func.body.span)
    new_func = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
    mod = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    mod["main"] = new_func
    return qdq.attach(mod, quantized) if len(quantized) > known else mod


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
    """FoldConstant may remove named calls (folded into constants) and, when it folds part of
    a shape computation (Squeeze with run-time axes), makes new calls without spans. Those
    calls run on the CPU whatever their name; say so, since the source map loses them.
    """
    unnamed = _unnamed_calls(func)
    if len(unnamed) > unnamed_before:
        ops = ", ".join(sorted({str(getattr(c.op, "name", c.op)) for c in unnamed}))
        warnings.warn(
            f"FoldConstant made calls to {ops} without ONNX node names; they are reported "
            "without a node",
            stacklevel=3,
        )
