"""The `mrvl` graph dialect: one op per MLIP layer, on tensors with an explicit layout.

Tensor types are builtin tensors whose encoding is a `#mrvl.layout<...>` attribute naming the
dimension order (`NHWC` activations, `OHWI` weights, `NC` for 2-D activations, ...). Layers carry
their fused pieces (padding, bias, activation) as attributes, as the MLIP executes them.
Constants keep the names TVM gave them (`<symbol>_mrvl_const_<i>`), which the Constants-JSON uses.
"""

from __future__ import annotations

from xdsl.dialects.builtin import f16, f32, i8
from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation

from mrvl.dialects.mrvl.attributes import (
    ACTIVATION_FORMAT,
    KNOWN_LAYOUTS,
    NUMPY_DTYPES,
    RESIZE_MODES,
    ActivationAttr,
    ActivationKind,
    FusedActivation,
    LayoutAttr,
    ResizeCoordinates,
    ResizeCoordinatesAttr,
    activation,
    element_type_for,
    element_type_of,
    layout_of,
    numpy_dtype,
    shape_of,
    tensor,
)
from mrvl.dialects.mrvl.data_movement import (
    MAX_COPY_DIMS,
    CastOp,
    ConcatOp,
    ConstantOp,
    DilateOp,
    LayoutConvertOp,
    ReshapeOp,
    ResizeOp,
    StridedCopyOp,
    layout_permutation,
)
from mrvl.dialects.mrvl.layers import (
    AddOp,
    AvgPool2DOp,
    Conv2DOp,
    FullyConnectedOp,
    MaxPool2DOp,
    MulOp,
    Pool2DBase,
    ScaleShiftOp,
    pooled_size,
)

LAYER_OPS: tuple[type[IRDLOperation], ...] = (
    Conv2DOp,
    MaxPool2DOp,
    AvgPool2DOp,
    FullyConnectedOp,
    AddOp,
    MulOp,
    ConcatOp,
    ScaleShiftOp,
)
"""Ops that are MLIP layers (each becomes a node of the Nodes-JSON)."""


Mrvl = Dialect(
    "mrvl",
    [
        ConstantOp,
        Conv2DOp,
        MaxPool2DOp,
        AvgPool2DOp,
        FullyConnectedOp,
        AddOp,
        MulOp,
        ConcatOp,
        ScaleShiftOp,
        StridedCopyOp,
        DilateOp,
        ResizeOp,
        ReshapeOp,
        LayoutConvertOp,
        CastOp,
    ],
    [LayoutAttr, ActivationAttr, ResizeCoordinatesAttr],
)

__all__ = [
    "f16",
    "f32",
    "i8",
    "LAYER_OPS",
    "Mrvl",
    "ACTIVATION_FORMAT",
    "KNOWN_LAYOUTS",
    "NUMPY_DTYPES",
    "RESIZE_MODES",
    "ActivationAttr",
    "ActivationKind",
    "FusedActivation",
    "LayoutAttr",
    "ResizeCoordinates",
    "ResizeCoordinatesAttr",
    "activation",
    "element_type_for",
    "element_type_of",
    "layout_of",
    "numpy_dtype",
    "shape_of",
    "tensor",
    "MAX_COPY_DIMS",
    "CastOp",
    "ConcatOp",
    "ConstantOp",
    "DilateOp",
    "LayoutConvertOp",
    "ReshapeOp",
    "ResizeOp",
    "StridedCopyOp",
    "layout_permutation",
    "AddOp",
    "AvgPool2DOp",
    "Conv2DOp",
    "FullyConnectedOp",
    "MaxPool2DOp",
    "MulOp",
    "Pool2DBase",
    "ScaleShiftOp",
    "pooled_size",
]
