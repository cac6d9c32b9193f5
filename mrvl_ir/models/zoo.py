"""A zoo of architectures people deploy, stored weight-free and re-weighted by seed.

`zoo_onnx/<name>.onnx` next to this module are exported once from PyTorch by
`scripts/export_zoo.py` (torch is not a dependency of mrvl), 28 architectures:
- classifiers at 224x224 ending in a Softmax: thirteen torchvision CNNs, EfficientNetV2-S,
  ConvNeXt-T and Swin-T, and from timm ViT-Ti/16 and the hybrid MobileViT-XXS (256x256);
- segmentation: LRASPP and DeepLabV3 on a MobileNetV3-Large backbone, and a U-Net with
  PixelShuffle upsampling, at 256x256;
- detectors: YOLOv5n- and YOLOv8n-like with their decoding heads at 320x320, and a
  RetinaFace (MobileNet-0.25, FPN) at 640x640;
- encoders: a BERT-Mini text encoder from its summed embeddings (1x128x256) and the
  MobileFaceNet face embedding (112x112);
- a recognizer: PP-OCRv3's text line recognizer (SVTR neck, CTC softmax; 48x320);
- audio: the TC-ResNet8 keyword spotter (conv1d over 40 MFCCs x 98 frames).
All are batch 1, static shapes, opset 17, IR version 10. As in the `onnx` package's light
models, every learned weight is `ConstantOfShape(0.02)`, so the files take about 3.3 MB
together (a third of it Swin's fixed shifted-window attention masks);
`zoo_onnx/manifest.json` records each model's kind, input and output names, source, MACs,
parameter count and op counts.

`load_zoo_model(name, seed)` puts seeded random weights back with the light models'
machinery (`mrvl.models.light.reweight`): He-normal conv and FC weights, batch-norm and
LayerNorm parameters near the identity, small biases, then each Conv/Gemm/MatMul rescaled to
unit output RMS on a seeded input (LSUV-style data-dependent initialisation, one scalar per
layer; deterministic per seed, about a second per model). Weights that none of these roles
fits (ViT's class token, PReLU slopes) keep the stored 0.02. Initializers are fixed
constants here (HardSwish's 3 and 6, YOLO grids, anchors, strides and DFL bins, Swin's
attention masks) and keep their values.

These networks are well conditioned for fp16: with seed 0, the fp16-storage emulation's RMS
error is 0.39 % of the output's RMS on LRASPP, 0.40 % on DeepLabV3 and 0.09 % on YOLOv8n's
scores. Their large max relative errors (27 % on the segmentation logits) come from the
acceptance rule's statistic, not from the weights: outputs that pass through zero have
elements just above the ignore threshold max|ref|/100, where 0.4 % of max|ref| is 40 %
(see `mrvl.fp16_emulation.Distribution`). Normalising every conv per output channel
to zero mean and unit variance instead (batch-norm statistics from one calibration input,
Krähenbühl et al. 2016) made them worse: the emulation's max relative error became 92 % on
LRASPP, 106 % on DeepLabV3 and 71 % on YOLOv8n's scores, its RMS error 3 to 15 times larger,
and an output's scale came to depend on the input (LRASPP: std 1.1 on the calibration input,
5.3 on another), because per-channel centering of random features amplifies the
input-specific part of each channel. So the zoo keeps the scalar calibration.

    python -m mrvl.models.zoo            # MACs, parameters and op counts of every model
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import onnx

from mrvl.models.light import reweight

__all__ = [
    "ZOO_DIR",
    "ZOO_MODELS",
    "ZooModel",
    "load_zoo_model",
    "zoo_model_info",
    "zoo_model_path",
]

ZOO_DIR = Path(__file__).parent / "zoo_onnx"


@dataclass(frozen=True)
class ZooModel:
    name: str
    kind: str  # classifier, segmentation, detector, encoder, recognizer or audio
    input_shape: tuple[int, ...]
    outputs: tuple[str, ...]
    source: str
    macs: int
    params: int


@cache
def _manifest() -> dict[str, dict]:
    return json.loads((ZOO_DIR / "manifest.json").read_text())


ZOO_MODELS: tuple[str, ...] = tuple(_manifest())


def zoo_model_info(name: str) -> ZooModel:
    info = _manifest().get(name)
    if info is None:
        raise ValueError(f"unknown zoo model {name!r}; known: {', '.join(ZOO_MODELS)}")
    return ZooModel(
        name=name,
        kind=info["kind"],
        input_shape=tuple(info["input"]),
        outputs=tuple(info["outputs"]),
        source=info["source"],
        macs=info["macs"],
        params=info["params"],
    )


def zoo_model_path(name: str) -> Path:
    """Path of the weight-free `zoo_onnx/<name>.onnx`."""
    zoo_model_info(name)  # the name check
    return ZOO_DIR / f"{name}.onnx"


def load_zoo_model(name: str, seed: int = 0, *, calibrate: bool = True) -> onnx.ModelProto:
    """`zoo_onnx/<name>.onnx` with seeded random weights; checked.

    With `calibrate` (the default) each Conv/Gemm is rescaled so that its output has unit RMS
    on a seeded calibration input (`mrvl.models.light.calibrate_scales`); for seed 0 by the
    factors recorded in `zoo_onnx/calibration.json` (`calibration_factors`).
    """
    scales = calibration_factors(name) if calibrate and seed == 0 else None
    return reweight(
        onnx.load(zoo_model_path(name)), seed, calibrate=calibrate, initializers=False,
        scales=scales,
    )  # fmt: skip


CALIBRATION_FILE = ZOO_DIR / "calibration.json"
"""Seed 0's calibration factors per model, weight name → float32 factor, as
`calibrate_scales` found them (`python -m mrvl.models.zoo --record-calibration`). They are
recorded because they are not the same bits on every CPU: they come from onnxruntime's fp32
runs, whose last bits differ between CPUs (AVX2 and AVX-512 builds of its kernels), and a
factor one bit off moves fp16 weights, and so the binaries the suite pins (it moved four zoo
models' on an AVX2 host). With them, the zoo's weights are the same bits everywhere."""


def calibration_factors(name: str) -> dict[str, float] | None:
    """Seed 0's recorded factors of zoo model `name`, or None if none are recorded."""
    if not CALIBRATION_FILE.exists():
        return None
    return json.loads(CALIBRATION_FILE.read_text()).get(name)


def record_calibration(names=None) -> None:
    """Compute seed 0's calibration factors of `names` (default: all) and record them."""
    from mrvl.models.light import _random_weights, calibrate_scales

    recorded = json.loads(CALIBRATION_FILE.read_text()) if CALIBRATION_FILE.exists() else {}
    for name in names or ZOO_MODELS:
        skeleton, weights = _random_weights(onnx.load(zoo_model_path(name)), 0, initializers=False)
        factors = calibrate_scales(skeleton, weights, seed=0)
        recorded[name] = {k: float(np.float32(v)) for k, v in sorted(factors.items())}
        CALIBRATION_FILE.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


def _summary() -> None:
    for name in ZOO_MODELS:
        model = load_zoo_model(name)
        params = sum(
            math.prod(i.dims)
            for i in model.graph.initializer
            if i.data_type == onnx.TensorProto.FLOAT
        )
        ops = Counter(n.op_type for n in model.graph.node)
        print(
            f"{name:30s} {zoo_model_info(name).macs / 1e9:6.3f} GMAC {params / 1e6:6.2f} M params  "
            + ", ".join(f"{op} {k}" for op, k in sorted(ops.items()))
        )


def main(argv=None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="The zoo's models, or record their calibration.")
    parser.add_argument(
        "--record-calibration", nargs="*", metavar="NAME",
        help="record seed 0's calibration factors (default: all models') in calibration.json",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.record_calibration is not None:
        record_calibration(args.record_calibration)
    else:
        _summary()


if __name__ == "__main__":
    main()
