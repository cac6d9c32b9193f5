"""The `mrvl` graph dialect: one op per MLIP layer, on tensors with an explicit layout.

Tensor types are builtin tensors whose encoding is a `#mrvl.layout<...>` attribute naming the
dimension order (`NHWC` activations, `OHWI` weights, `NC` for 2-D activations, ...). Layers carry
their fused pieces (padding, bias, activation) as attributes, as the MLIP executes them.
Constants keep the names TVM gave them (`<symbol>_mrvl_const_<i>`), which the Constants-JSON uses.
"""

# ruff: noqa: F403, F405 - the package re-exports its modules' names, as the one module did
from __future__ import annotations

from xdsl.ir import Dialect

from mrvl.dialects import defined_ops_and_attributes
from mrvl.dialects.mrvl import (
    attributes,
    data_movement,
    int8_bmm,
    int8_tables,
    layers,
    normalization,
    padding,
    quantized,
    reductions,
)
from mrvl.dialects.mrvl.attributes import *
from mrvl.dialects.mrvl.data_movement import *
from mrvl.dialects.mrvl.int8_bmm import *
from mrvl.dialects.mrvl.int8_tables import *
from mrvl.dialects.mrvl.layers import *
from mrvl.dialects.mrvl.normalization import *
from mrvl.dialects.mrvl.padding import *
from mrvl.dialects.mrvl.quantized import *
from mrvl.dialects.mrvl.reductions import *

Mrvl = Dialect(
    "mrvl",
    *defined_ops_and_attributes(
        attributes, data_movement, layers, normalization, quantized, reductions, padding,
        int8_tables, int8_bmm,
    ),
)
"""Every op and attribute that the package's modules define."""
