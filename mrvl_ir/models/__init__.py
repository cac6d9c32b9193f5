"""Models that ship with mrvl: built in code, saved as ONNX files next to this module."""

from __future__ import annotations

from pathlib import Path

MODELS_DIR = Path(__file__).parent


def bundled_model_path(name: str = "mnist") -> Path:
    """Path of a bundled ONNX model (`mnist`: the network of the Marvell BYOC RFC)."""
    return MODELS_DIR / f"{name}.onnx"
