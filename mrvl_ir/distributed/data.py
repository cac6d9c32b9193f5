"""The samples of a data set, found eagerly and read lazily.

A data set is a `.npy` file or a `.npz` file with a leading batch axis, a folder of them, or a
folder of PNG/JPEG images with a `Preprocess` spec. `samples(path, ...)` lists one `SampleRef`
per sample (file headers only: `.npy` files are memory-mapped, never read whole); `read`
loads one sample as the model's feeds, raising `SampleError` with a one-line reason that the
evaluation records as the sample's error row.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from mrvl.errors import MrvlError

ARRAY_SUFFIXES = (".npy", ".npz")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


class DataSetError(MrvlError, ValueError):
    """The data set as a whole cannot be used (no such path, no samples, a bad spec)."""


class SampleError(MrvlError):
    """One sample cannot be read or does not fit the model: recorded, and the run goes on."""


@dataclass(frozen=True)
class InputSpec:
    """One model input: its name, fixed shape (batch axis first) and numpy dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"


@dataclass(frozen=True)
class SampleRef:
    """Where one sample lives: `path`, the array `key` in a `.npz` (None: the file's own
    array, or every input by name), and the `index` along the batch axis (None: an image)."""

    id: str
    path: str
    key: str | None = None
    index: int | None = None


@dataclass(frozen=True)
class Preprocess:
    """How an image becomes a model input: resize the shorter side to `resize` (default: to
    the input's size) and centre-crop to the input's height and width, scale (x * `scale`),
    normalize ((x - mean) / std, per channel), in the input's layout ("NCHW" or "NHWC")."""

    resize: int | None = None
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    scale: float = 1 / 255
    layout: str = "NCHW"

    @classmethod
    def from_dict(cls, document: dict[str, Any], source: str = "preprocessing spec") -> Preprocess:
        known = {"resize", "mean", "std", "scale", "layout"}
        unknown = sorted(set(document) - known)
        if unknown:
            raise DataSetError(
                f"{source}: unknown field(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(known))}"
            )
        spec = dict(document)
        for name in ("mean", "std"):
            if name in spec:
                value = spec[name]
                spec[name] = tuple(
                    float(v) for v in (value if isinstance(value, list) else [value])
                )
        if spec.get("layout", "NCHW") not in ("NCHW", "NHWC"):
            raise DataSetError(f"{source}: layout must be NCHW or NHWC, not {spec['layout']!r}")
        if any(s == 0 for s in spec.get("std", (1.0,))):
            raise DataSetError(f"{source}: std must not be 0")
        return cls(**spec)

    @classmethod
    def load(cls, path: str | Path) -> Preprocess:
        try:
            document = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise DataSetError(f"preprocessing spec {path}: {err}") from None
        if not isinstance(document, dict):
            raise DataSetError(f"preprocessing spec {path}: must be a JSON object")
        return cls.from_dict(document, f"preprocessing spec {path}")

    def apply(self, path: str, spec: InputSpec) -> np.ndarray:
        """The image at `path` as one batch of `spec`'s shape."""
        from PIL import Image, UnidentifiedImageError

        if len(spec.shape) != 4:
            raise SampleError(f"{path}: images need a 4-D input, '{spec.name}' is {spec.shape}")
        nchw = self.layout == "NCHW"
        channels, height, width = (
            spec.shape[1:] if nchw else (spec.shape[3], spec.shape[1], spec.shape[2])
        )
        try:
            with Image.open(path) as image:
                image = image.convert("L" if channels == 1 else "RGB")
                if self.resize is not None:
                    ratio = self.resize / min(image.size)
                    size = (
                        max(width, round(image.width * ratio)),
                        max(height, round(image.height * ratio)),
                    )
                    image = image.resize(size, Image.Resampling.BILINEAR)
                    left, top = (image.width - width) // 2, (image.height - height) // 2
                    image = image.crop((left, top, left + width, top + height))
                else:
                    image = image.resize((width, height), Image.Resampling.BILINEAR)
                pixels = np.asarray(image, dtype=np.float32)
        except (OSError, UnidentifiedImageError) as err:
            raise SampleError(f"{path}: not a readable image ({err})") from None
        if pixels.ndim == 2:
            pixels = pixels[:, :, None]
        if pixels.shape[2] != channels:
            raise SampleError(f"{path}: {pixels.shape[2]} channels, '{spec.name}' wants {channels}")
        mean = np.asarray(self.mean, np.float32)
        std = np.asarray(self.std, np.float32)
        pixels = (pixels * np.float32(self.scale) - mean) / std
        if nchw:
            pixels = pixels.transpose(2, 0, 1)
        return pixels[None].astype(spec.dtype)


def samples(path: str | Path, inputs: Sequence[InputSpec]) -> Iterator[SampleRef]:
    """Every sample under `path`, in a stable order (sorted file names, then batch index).

    A file whose header cannot be read yields one SampleRef with `index` None, so that reading
    it names the file as an error row instead of stopping the run."""
    root = Path(path)
    if root.is_dir():
        files = sorted(
            p
            for p in root.rglob("*")
            if p.is_file() and p.suffix.lower() in ARRAY_SUFFIXES + IMAGE_SUFFIXES
        )
        if not files:
            raise DataSetError(f"{path}: no .npy, .npz, .png or .jpg files in the folder")
        base = root
    elif root.is_file():
        if root.suffix.lower() not in ARRAY_SUFFIXES:
            raise DataSetError(f"{path}: a data set is a .npy or .npz file, or a folder")
        files, base = [root], root.parent
    else:
        raise DataSetError(f"{path}: no such file or folder")
    for file in files:
        name = file.relative_to(base).as_posix()
        suffix = file.suffix.lower()
        if suffix in IMAGE_SUFFIXES:
            yield SampleRef(name, str(file))
            continue
        try:
            counts = _batch_counts(str(file), suffix, tuple(s.name for s in inputs))
        except SampleError:
            yield SampleRef(name, str(file), key="?")  # read() reports it
            continue
        for key, count in counts:
            prefix = name if key is None or len(counts) == 1 else f"{name}:{key}"
            for index in range(count):
                yield SampleRef(f"{prefix}[{index}]", str(file), key, index)


def _batch_counts(path: str, suffix: str, names: tuple[str, ...]) -> list[tuple[str | None, int]]:
    """(key, batch size) of each array of the file: key None for a .npy, or for a .npz whose
    keys are the model's input names (one sample feeds every input)."""
    try:
        if suffix == ".npy":
            return [(None, _leading(np.load(path, mmap_mode="r"), path))]
        with np.load(path) as archive:
            keys = list(archive.files)
            if set(names) <= set(keys) and len(names) > 1:
                counts = {_leading_npz(archive, key, path) for key in names}
                if len(counts) != 1:
                    raise SampleError(f"{path}: the inputs' arrays differ in batch size")
                return [(None, counts.pop())]
            if len(names) > 1:
                raise SampleError(f"{path}: the model's inputs {list(names)} are not its keys")
            return [(key, _leading_npz(archive, key, path)) for key in keys]
    except SampleError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise SampleError(f"{path}: not a readable numpy file ({err})") from None


def _leading(array: np.ndarray, path: str) -> int:
    if array.ndim == 0:
        raise SampleError(f"{path}: a scalar has no batch axis")
    return int(array.shape[0])


def _leading_npz(archive, key: str, path: str) -> int:
    """The batch size of one .npz member, from its header only."""
    with archive.zip.open(f"{key}.npy") as member:
        version = np.lib.format.read_magic(member)
        header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, _ = header(member)
    if not shape:
        raise SampleError(f"{path}: '{key}' is a scalar: no batch axis")
    return int(shape[0])


@lru_cache(maxsize=2)
def _npz_member(path: str, key: str) -> np.ndarray:
    """One .npz member (a compressed member cannot be memory-mapped); kept while its samples
    are read one by one."""
    with np.load(path) as archive:
        return archive[key]


def read(
    ref: SampleRef, inputs: Sequence[InputSpec], preprocess: Preprocess | None = None
) -> dict[str, np.ndarray]:
    """The model's feeds for one sample; SampleError names the file and what is wrong."""
    suffix = Path(ref.path).suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        if len(inputs) != 1:
            raise SampleError(f"{ref.path}: an image feeds one input, the model has {len(inputs)}")
        return {inputs[0].name: (preprocess or Preprocess()).apply(ref.path, inputs[0])}
    if ref.key == "?":
        _batch_counts(ref.path, suffix, tuple(s.name for s in inputs))  # raises the reason
        raise SampleError(f"{ref.path}: unreadable")
    try:
        if suffix == ".npy":
            arrays = {inputs[0].name: np.load(ref.path, mmap_mode="r")} if len(inputs) == 1 else {}
            if not arrays:
                raise SampleError(
                    f"{ref.path}: a .npy feeds one input, the model has "
                    f"{len(inputs)}: use a .npz keyed by input name"
                )
        elif ref.key is None:
            arrays = {spec.name: _npz_member(ref.path, spec.name) for spec in inputs}
        else:
            arrays = {inputs[0].name: _npz_member(ref.path, ref.key)}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as err:
        raise SampleError(f"{ref.path}: not a readable numpy file ({err})") from None
    feeds = {}
    for spec in inputs:
        try:
            sample = np.asarray(arrays[spec.name][ref.index])[None]
        except (IndexError, ValueError, OSError) as err:
            raise SampleError(f"{ref.id}: cannot be read ({err})") from None
        if sample.shape != spec.shape:
            raise SampleError(
                f"{ref.id}: sample of shape {sample.shape[1:]}, input '{spec.name}' wants "
                f"{spec.shape[1:]} (after the batch axis)"
            )
        if not np.can_cast(sample.dtype, spec.dtype, casting="same_kind"):
            raise SampleError(
                f"{ref.id}: dtype {sample.dtype}, input '{spec.name}' is {spec.dtype}"
            )
        feeds[spec.name] = np.ascontiguousarray(sample, dtype=spec.dtype)
    return feeds


def input_specs(model) -> list[InputSpec]:
    """The fixed-shape inputs of an ONNX model (its initializers are not inputs)."""
    import onnx

    initializers = {i.name for i in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = value.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") for d in dims):
            raise DataSetError(
                f"input '{value.name}' has a dynamic shape: evaluation needs fixed shapes"
            )
        dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        specs.append(InputSpec(value.name, tuple(d.dim_value for d in dims), np.dtype(dtype).name))
    return specs
