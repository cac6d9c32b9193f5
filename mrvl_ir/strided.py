"""Data movement as strided copies: which Relax ops only move elements, and how.

Reshape, squeeze, expand_dims, flatten, permute_dims, strided_slice (any step) and
nearest-neighbour resize2d compute nothing: every result element is one input element.
`source_positions` applies a chain of them to an array of storage positions, so the result
says, for each element, which input element it copies. `strided_form` then asks whether that
map is a strided walk: an offset plus at most 6 (extent, stride) dimensions, strides in
elements (0 repeats an element, as nearest-neighbour upsampling does; a negative one walks
backwards, as a slice with a negative step does).

The partition check and the Relax importer both use these two functions, so a chain the
check accepts is exactly a chain the importer can lower.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tvm import relax

from mrvl.dialects.mrvl import ResizeCoordinates

MOVE_OPS = (
    "relax.reshape",
    "relax.squeeze",
    "relax.expand_dims",
    "relax.flatten",
    "relax.permute_dims",
    "relax.strided_slice",
    "relax.image.resize2d",
    "relax.take",
    "relax.broadcast_to",
)
"""Relax ops that only move elements (resize2d only with method nearest_neighbor, take only
with constant indices: ONNX Gather; broadcast_to is ONNX Expand, a stride of 0)."""

MAX_DIMS = 6
"""Dimensions of a strided copy. One DMA descriptor has 4; the lowering issues one descriptor
per index of the dimensions beyond 4 (an NHWC nearest upsample has 5: rows, repeated rows,
columns, repeated columns, channels)."""


class NotACopy(Exception):
    """The op (or chain) is not a strided copy; `reason` says why, `call` which op."""

    def __init__(self, reason: str, call: relax.Call | None = None):
        super().__init__(reason)
        self.reason = reason
        self.call = call


@dataclass(frozen=True)
class StridedForm:
    """Result element i (a multi-index over `box`) = input element offset + Σ i[d]·strides[d]."""

    offset: int
    strides: tuple[int, ...]
    box: tuple[int, ...]

    @property
    def is_identity(self) -> bool:
        """The result's storage is the input's storage, element for element."""
        return self.offset == 0 and len(self.box) == 1 and self.strides == (1,)


def _shape(expr: relax.Expr) -> tuple[int, ...]:
    return tuple(int(d) for d in expr.ty.shape)


def _ints(values) -> list[int]:
    return [int(getattr(v, "value", v)) for v in values]


def _op_name(call: relax.Call) -> str:
    return getattr(call.op, "name", "")


def source_positions(calls: Sequence[relax.Call], positions: np.ndarray) -> np.ndarray:
    """Apply the chain `calls` (innermost first) to `positions` (shaped as the first call's
    input): the result has the last call's shape and holds, per element, the position it
    copies. Raises `NotACopy` for an op or attribute that is not pure data movement."""
    for call in calls:
        name = _op_name(call)
        try:
            out_shape = _shape(call)
            if name in ("relax.reshape", "relax.squeeze", "relax.expand_dims", "relax.flatten"):
                positions = positions.reshape(out_shape)
            elif name == "relax.permute_dims":
                axes = call.attrs.axes
                positions = positions.transpose(None if axes is None else _ints(axes))
            elif name == "relax.strided_slice":
                positions = _strided_slice(call, positions)
            elif name == "relax.image.resize2d":
                positions = _resize_nearest(call, positions)
            elif name == "relax.take":
                positions = _take(call, positions)
            elif name == "relax.broadcast_to":
                positions = np.broadcast_to(positions, out_shape)
            else:
                raise NotACopy(f"{name} is not data movement", call)
        except (TypeError, ValueError, AttributeError, IndexError) as err:
            # a shape or bound known only at run time, or one numpy cannot apply
            raise NotACopy(f"{name}: {type(err).__name__}: {err}", call) from None
        if positions.shape != out_shape:
            raise NotACopy(f"{name}: result shape {positions.shape} != {out_shape}", call)
    return positions


def _strided_slice(call: relax.Call, positions: np.ndarray) -> np.ndarray:
    args = call.args
    if not all(isinstance(a, relax.Tuple) for a in args[1:4]):
        raise NotACopy("slice bounds computed at run time", call)
    axes, begin, end = (_ints(a.fields) for a in args[1:4])
    given = args[4] if len(args) > 4 else None
    if given is not None and not isinstance(given, relax.Tuple):
        raise NotACopy("slice steps computed at run time", call)
    steps = _ints(given.fields) if given is not None else [1] * len(axes)
    if 0 in steps:
        raise NotACopy(f"slice steps {steps}", call)
    index = [slice(None)] * positions.ndim
    for axis, lo, hi, step in zip(axes, begin, end, steps):
        index[axis % positions.ndim] = slice(lo, hi, step)
    return positions[tuple(index)]


def _take(call: relax.Call, positions: np.ndarray) -> np.ndarray:
    """ONNX Gather with constant indices (negative ones count from the end)."""
    from tvm.ir.expr import GenericConst

    indices = call.args[1]
    if not isinstance(indices, GenericConst):
        raise NotACopy("gather indices computed at run time", call)
    index = np.asarray(indices.value.numpy())
    if index.dtype.kind not in "iu":
        raise NotACopy(f"gather indices of type {index.dtype}", call)
    axis = int(call.attrs.axis) if call.attrs.axis is not None else None
    if axis is None:
        raise NotACopy("gather over the flattened tensor", call)
    size = positions.shape[axis]
    if index.size and (index.min() < -size or index.max() >= size):
        raise NotACopy(f"gather index outside [-{size}, {size})", call)
    return np.take(positions, np.where(index < 0, index + size, index), axis=axis)


RESIZE_MODES = tuple(ResizeCoordinates)
"""ONNX coordinate transformation modes supported (those PyTorch and Paddle exports use)."""

ROUNDINGS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
"""ONNX nearest_mode values supported."""


def nearest_indices(
    in_size: int, out_size: int, mode: str, rounding: str, call: relax.Call | None = None
) -> np.ndarray:
    """The input index each output index of one axis copies (ONNX Resize, mode nearest)."""
    o = np.arange(out_size, dtype=np.float64)
    x = source_coordinates(in_size, out_size, mode, call, o)
    if rounding == "round_prefer_floor":
        index = np.where(x - np.floor(x) == 0.5, np.floor(x), np.round(x))
    elif rounding == "round_prefer_ceil":
        index = np.where(x - np.floor(x) == 0.5, np.ceil(x), np.round(x))
    elif rounding == "floor":
        index = np.floor(x)
    elif rounding == "ceil":
        index = np.ceil(x)
    else:
        raise NotACopy(f"nearest rounding mode '{rounding}'", call)
    return np.clip(index, 0, in_size - 1).astype(np.int64)


def source_coordinates(
    in_size: int, out_size: int, mode: str, call: relax.Call | None, o: np.ndarray | None = None
) -> np.ndarray:
    """ONNX Resize's coordinate transformation (float64): the input coordinate of each output
    index `o` of one axis, for the modes PyTorch and Paddle exports use."""
    if o is None:
        o = np.arange(out_size, dtype=np.float64)
    scale = in_size / out_size  # 1 / (the ONNX scale)
    if mode == "half_pixel":
        return (o + 0.5) * scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) * scale - 0.5 if out_size > 1 else np.zeros_like(o)
    if mode == "align_corners":
        return o * (in_size - 1) / (out_size - 1) if out_size > 1 else np.zeros_like(o)
    if mode == "asymmetric":
        return o * scale
    raise NotACopy(f"coordinate_transformation_mode '{mode}'", call)


def _resize_nearest(call: relax.Call, positions: np.ndarray) -> np.ndarray:
    attrs = call.attrs
    if str(attrs.method) != "nearest_neighbor":
        raise NotACopy(f"resize method '{attrs.method}' computes new values", call)
    if str(attrs.layout) != "NCHW" or positions.ndim != 4:
        raise NotACopy(f"resize layout {attrs.layout}", call)
    mode, rounding = str(attrs.coordinate_transformation_mode), str(attrs.rounding_method)
    _, _, oh, ow = _shape(call)
    _, _, h, w = positions.shape
    rows = nearest_indices(h, oh, mode, rounding, call)
    cols = nearest_indices(w, ow, mode, rounding, call)
    return positions[:, :, rows[:, None], cols[None, :]]


def strided_form(positions: np.ndarray, max_dims: int = MAX_DIMS) -> StridedForm | None:
    """The descriptor that copies `positions` (flattened in C order), or None if it needs
    more than `max_dims` dimensions.

    Greedy from the innermost dimension: the first run of equal steps is the extent of the
    innermost (merged) dimension; every other block must repeat it; the blocks' first
    elements are what the outer dimensions must describe.
    """
    flat = np.asarray(positions, dtype=np.int64).reshape(-1)
    if flat.size == 0:
        return None
    offset = int(flat[0])
    current = flat - offset
    dims: list[tuple[int, int]] = []  # (extent, stride), innermost first
    while current.size > 1:
        step = int(current[1] - current[0])
        breaks = np.flatnonzero(np.diff(current) != step)
        run = int(breaks[0]) + 1 if breaks.size else current.size
        if current.size % run:
            return None
        blocks = current.reshape(-1, run)
        if not np.array_equal(blocks, blocks[:, :1] + step * np.arange(run, dtype=np.int64)):
            return None
        dims.append((run, step))
        current = blocks[:, 0]
        if len(dims) > max_dims:
            return None
    if not dims:
        dims = [(1, 1)]
    dims.reverse()
    return StridedForm(offset, tuple(s for _, s in dims), tuple(n for n, _ in dims))


def chain_form(calls: Sequence[relax.Call], in_shape: Sequence[int]) -> StridedForm | None:
    """The strided form of `calls` on a dense row-major input of `in_shape`; None if the copy
    has none but gathers and is a few strided pieces (`piecewise_forms`); else `NotACopy`.
    (A nearest resize that is no repeat is a table-driven `resize` layer instead.)"""
    for call in calls:  # reject cheaply, before building an index map of the whole tensor
        name = _op_name(call)
        if name not in MOVE_OPS:
            raise NotACopy(f"{name} is not data movement", call)
        if name == "relax.image.resize2d" and str(call.attrs.method) != "nearest_neighbor":
            raise NotACopy(f"resize method '{call.attrs.method}' computes new values", call)
    count = math.prod(in_shape)
    positions = source_positions(calls, np.arange(count, dtype=np.int64).reshape(in_shape))
    form = strided_form(positions)
    if form is not None:
        return form
    gathers = any(_op_name(call) == "relax.take" for call in calls)
    if not gathers or piecewise_forms(positions) is None:
        raise NotACopy(
            f"not a strided copy of at most {MAX_DIMS} dimensions"
            + (f", nor of {MAX_PIECES} pieces" if gathers else ""),
            calls[-1] if calls else None,
        )
    return None


MAX_PIECES = 64
"""Most pieces a copy without one strided form is cut into (`piecewise_forms`)."""


@dataclass(frozen=True)
class Piece:
    """Result elements [start, stop) along `axis` are the strided copy `form`."""

    start: int
    stop: int
    form: StridedForm


def piecewise_forms(
    positions: np.ndarray, max_pieces: int = MAX_PIECES
) -> tuple[int, list[Piece]] | None:
    """The map `positions` cut along one axis into the fewest runs (at most `max_pieces`) that
    each have a strided form, as (axis, pieces); None if no axis allows it. A Gather with
    constant indices that are no arithmetic progression is such a copy: each run of indices
    that is one (any two are) is one piece. Each run is grown while it keeps a form."""
    best: tuple[int, list[Piece]] | None = None
    for axis in range(positions.ndim):
        size = positions.shape[axis]
        pieces: list[Piece] = []
        start = 0
        while start < size and len(pieces) < max_pieces:
            form = strided_form(np.take(positions, [start], axis=axis))
            if form is None:
                break
            stop = start + 1
            while stop < size:
                longer = strided_form(np.take(positions, range(start, stop + 1), axis=axis))
                if longer is None:
                    break
                form, stop = longer, stop + 1
            pieces.append(Piece(start, stop, form))
            start = stop
        if start == size and (best is None or len(pieces) < len(best[1])):
            best = (axis, pieces)
    return best


def interpolation_table(
    in_size: int, out_size: int, method: str, mode: str, rounding: str = "round_prefer_floor"
) -> np.ndarray:
    """The `resize` instruction's table for one axis: [out_size, 4] f32 rows (i0, i1, w0, w1).

    Computed one way, in float64, then stored as f32 (docs/isa.md, `resize`):
    - linear: x = the ONNX source coordinate of the output index, clamped to [0, in - 1];
      i0 = floor(x), i1 = min(i0 + 1, in - 1), w1 = x - i0, w0 = 1 - w1. For an integer
      factor every weight is a fraction k / (2·factor) or k / factor, exact in f32.
    - nearest: i0 = i1 = the nearest index (`nearest_indices`), w0 = 1, w1 = 0.
    """
    if method == "nearest_neighbor":
        index = nearest_indices(in_size, out_size, mode, rounding).astype(np.float64)
        table = np.stack([index, index, np.ones(out_size), np.zeros(out_size)], axis=1)
        return table.astype(np.float32)
    if method != "linear":
        raise NotACopy(f"resize method '{method}'")
    x = np.clip(source_coordinates(in_size, out_size, mode, None), 0.0, in_size - 1.0)
    i0 = np.floor(x)
    i1 = np.minimum(i0 + 1.0, in_size - 1.0)
    w1 = x - i0
    return np.stack([i0, i1, 1.0 - w1, w1], axis=1).astype(np.float32)
