"""mrvl: an open toolchain for the Marvell MLIP ML accelerator.

The public API: `from_onnx` (ONNX → Relax, keeping node names), `partition_for_mrvl`
(MLIP regions), `build` (regions compiled for the MLIP, the rest by TVM), `compile_region`
(one region → model binary), `profile` (modelled cycles per ONNX node), `evaluate` (a data
set through the compiled model, on Ray workers) and `sweep` (design points on the cycle model).

Importing mrvl registers TVM's codegen hook `relax.ext.mrvl` and the runtime function
`mrvl.runtime.run_region` that exported models call. Those two modules need only `tvm_ffi`;
TVM, xDSL and the simulator load when first used, so `import mrvl` stays cheap for tools
that never touch TVM.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from . import byoc as _byoc  # noqa: F401 - registers relax.ext.mrvl
from . import runtime as _runtime  # noqa: F401 - registers mrvl.runtime.run_region
from .byoc import build
from .errors import CompileError, ModelImportError, MrvlError, UnsupportedOpError

if TYPE_CHECKING:
    from .compiler import compile_region
    from .distributed.evaluate import evaluate
    from .distributed.sweep import sweep
    from .frontend import from_onnx, node_name_of
    from .partition import partition_for_mrvl
    from .profiling import profile
    from .quantization import quantize
    from .report import partition_report

__all__ = [
    "CompileError",
    "ModelImportError",
    "MrvlError",
    "UnsupportedOpError",
    "build",
    "compile_region",
    "evaluate",
    "from_onnx",
    "node_name_of",
    "partition_for_mrvl",
    "partition_report",
    "profile",
    "quantize",
    "sweep",
]

_LAZY = {
    "compile_region": "compiler",
    "evaluate": "distributed.evaluate",
    "sweep": "distributed.sweep",
    "from_onnx": "frontend",
    "node_name_of": "frontend",
    "partition_for_mrvl": "partition",
    "partition_report": "report",
    "profile": "profiling",
    "quantize": "quantization",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'mrvl' has no attribute {name!r}")
