"""The exceptions mrvl raises on purpose.

Every failure a user can cause (a bad model, an operator the MLIP cannot run, a region the
compiler rejects) is one of these, so callers catch `MrvlError` instead of whatever TVM,
onnx or xDSL happened to raise deep inside.
"""

from __future__ import annotations


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
