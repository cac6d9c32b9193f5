"""The exceptions mrvl raises on purpose.

Every failure a user can cause (a bad model, an operator the MLIP cannot run, a region the
compiler rejects) is one of these, so callers catch `MrvlError` instead of whatever TVM,
onnx or xDSL happened to raise deep inside.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class MrvlError(Exception):
    """Base of every error mrvl raises on purpose."""


class ModelImportError(MrvlError):
    """The ONNX model cannot be read, fails the ONNX checker, or TVM cannot import it."""


class UnsupportedOpError(MrvlError):
    """An operator (or an attribute of it) that the MLIP compiler does not support.

    `node` is the ONNX node name it came from (None when unknown), so the user can find it
    in the model.
    """

    def __init__(self, message: str, node: str | None = None):
        super().__init__(message if node is None else f"{message} (ONNX node '{node}')")
        self.node = node


class CompileError(MrvlError):
    """The MLIP compiler failed on a region it had accepted."""


class InternalCompilerError(CompileError):
    """A bug in mrvl (an exception that is not an `MrvlError`), caught at the boundary of the
    layer or stage it happened in. `node` is that layer's ONNX node (None when unknown); the
    original exception is the `__cause__`."""

    def __init__(self, message: str, node: str | None = None):
        super().__init__(message if node is None else f"{message} (ONNX node '{node}')")
        self.node = node


@contextlib.contextmanager
def layer_boundary(what: str, node: str | None = None) -> Iterator[None]:
    """Turn any exception that is not an `MrvlError` into an `InternalCompilerError` naming
    `what` (the stage and layer) and its ONNX `node`."""
    try:
        yield
    except MrvlError:
        raise
    except Exception as err:
        raise InternalCompilerError(
            f"internal error in {what}: {type(err).__name__}: {err}", node
        ) from err
