#!/usr/bin/env python3
"""Export the model zoo (`mrvl_ir/models/zoo_onnx/*.onnx`) from PyTorch, once, weight-free.

Torch is not a dependency of mrvl. Run this in a venv of its own:

    python3.11 -m venv .torchvenv
    .torchvenv/bin/pip install torch==2.14.1 torchvision==0.29.1 onnx==1.23.2 onnxruntime==1.31.1
    .torchvenv/bin/python scripts/export_zoo.py            # every model
    .torchvenv/bin/python scripts/export_zoo.py resnet18   # some of them

What is exported:
- torchvision classifiers at 224x224, each followed by a Softmax over the 1000 classes (the
  form a deployed classifier takes);
- torchvision segmentation models (LRASPP and DeepLabV3 on a MobileNetV3-Large backbone) at
  256x256, returning the `out` logits at input resolution;
- two single-stage detectors written here as small torch modules after the public
  YOLOv5n (v7.0) and YOLOv8n layouts, at 320x320: Conv-BN-SiLU, C3 / C2f blocks, SPPF,
  nearest upsampling, concatenations, and the detect heads with their decoding (reshape,
  permute, sigmoid, grid and anchor arithmetic, YOLOv8's DFL softmax). Each returns two
  outputs, `boxes` and `scores` (the head's single tensor split in two), so that the
  acceptance rule, which ignores elements below max|ref|/100, judges the class scores
  instead of letting pixel coordinates hide them.

Every model: `weights=None` (random init, nothing is downloaded), batch 1, static shapes,
opset 17, the TorchScript exporter (`dynamo=False`; in eval mode it folds each batch norm
into the conv before it, as deployed exports do). Then the weights are dropped, as the `onnx`
package's light models store theirs: each learned weight (a Conv / Gemm / MatMul weight or
bias, a BatchNormalization parameter) becomes `ConstantOfShape(<name>__SHAPE)` of 0.02.
Everything else stays as exported: the shape tensors, fixed constants (HardSwish's 3 and 6,
YOLO grids, anchors and strides) and non-trainable parameters (YOLOv8's DFL bins).
`mrvl.models.zoo.load_zoo_model` puts seeded random weights back. The files are IR version
10 (onnxruntime 1.31 reads up to 13) and are checked with onnx's checker and onnxruntime.
The export is deterministic: running it again writes byte-identical files.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import torch
import torchvision
from onnx import TensorProto, helper, numpy_helper
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
ZOO_DIR = ROOT / "mrvl_ir" / "models" / "zoo_onnx"
OPSET = 17
ONNX_IR_VERSION = 10
PLACEHOLDER = 0.02  # the light models' ConstantOfShape value
CLASSIFIER_SIZE = 224
SEGMENTATION_SIZE = 256
DETECTOR_SIZE = 320

# (op type, input index) of the learned weights that are dropped.
WEIGHT_ROLES = {
    ("Conv", 1),
    ("Conv", 2),
    ("Gemm", 1),
    ("Gemm", 2),
    ("MatMul", 1),
    ("BatchNormalization", 1),
    ("BatchNormalization", 2),
    ("BatchNormalization", 3),
    ("BatchNormalization", 4),
}


# ---------------------------------------------------------------------------------------------
# YOLO-style detectors (after the public YOLOv5 v7.0 and YOLOv8 layouts, "n" scale)


class ConvBnSiLU(nn.Module):
    def __init__(self, c1: int, c2: int, k: int = 1, s: int = 1, p: int | None = None):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2 if p is None else p, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1: int, c2: int, shortcut: bool = True, k=(1, 3), e: float = 0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = ConvBnSiLU(c1, c_, k[0])
        self.cv2 = ConvBnSiLU(c_, c2, k[1])
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    """YOLOv5's CSP block: two 1x1 branches, n bottlenecks on one, concat, 1x1."""

    def __init__(self, c1: int, c2: int, n: int = 1, shortcut: bool = True):
        super().__init__()
        c_ = c2 // 2
        self.cv1 = ConvBnSiLU(c1, c_)
        self.cv2 = ConvBnSiLU(c1, c_)
        self.cv3 = ConvBnSiLU(2 * c_, c2)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, e=1.0) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class C2f(nn.Module):
    """YOLOv8's CSP block: 1x1, split in two, n bottlenecks chained on one half, every
    intermediate result concatenated, 1x1."""

    def __init__(self, c1: int, c2: int, n: int = 1, shortcut: bool = False):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = ConvBnSiLU(c1, 2 * self.c)
        self.cv2 = ConvBnSiLU((2 + n) * self.c, c2)
        self.m = nn.ModuleList(
            Bottleneck(self.c, self.c, shortcut, k=(3, 3), e=1.0) for _ in range(n)
        )

    def forward(self, x):
        y = list(self.cv1(x).split((self.c, self.c), 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1: int, c2: int, k: int = 5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = ConvBnSiLU(c1, c_)
        self.cv2 = ConvBnSiLU(c_ * 4, c2)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


def _upsample() -> nn.Module:
    return nn.Upsample(scale_factor=2, mode="nearest")


class YoloV5Detect(nn.Module):
    """YOLOv5's head as exported: per level a 1x1 conv to na*(5+nc) channels, viewed as
    (1, na, 5+nc, ny, nx), permuted to (1, na, ny, nx, 5+nc), sigmoid, and decoded:
    xy = (2*sig + grid) * stride, wh = (2*sig)^2 * anchor."""

    ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))
    STRIDES = (8, 16, 32)

    def __init__(self, nc: int, ch: tuple[int, ...], size: int):
        super().__init__()
        self.nc, self.no, self.na = nc, nc + 5, 3
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch)
        for i, stride in enumerate(self.STRIDES):
            ny = nx = size // stride
            yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
            grid = torch.stack((xv, yv), 2).expand(1, self.na, ny, nx, 2).float() - 0.5
            anchors = torch.tensor(self.ANCHORS[i], dtype=torch.float32).view(1, self.na, 1, 1, 2)
            self.register_buffer(f"grid{i}", grid.contiguous(), persistent=False)
            self.register_buffer(
                f"anchor_grid{i}", anchors.expand(1, self.na, ny, nx, 2).contiguous(), False
            )

    def forward(self, xs):
        boxes, scores = [], []
        for i, x in enumerate(xs):
            x = self.m[i](x)
            _, _, ny, nx = x.shape
            x = x.view(1, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            xy, wh, conf = x.sigmoid().split((2, 2, self.nc + 1), 4)
            xy = (xy * 2 + getattr(self, f"grid{i}")) * self.STRIDES[i]
            wh = (wh * 2) ** 2 * getattr(self, f"anchor_grid{i}")
            boxes.append(torch.cat((xy, wh), 4).view(1, self.na * ny * nx, 4))
            scores.append(conf.reshape(1, self.na * ny * nx, self.nc + 1))
        return torch.cat(boxes, 1), torch.cat(scores, 1)


class YoloV5n(nn.Module):
    """YOLOv5n (v7.0 layout: width 0.25, depth 0.33): CSP backbone with C3 blocks and SPPF,
    PANet neck with nearest upsampling and concatenations, 3-level anchor head."""

    def __init__(self, nc: int = 80, size: int = DETECTOR_SIZE):
        super().__init__()
        self.b0 = ConvBnSiLU(3, 16, 6, 2, 2)
        self.b1 = ConvBnSiLU(16, 32, 3, 2)
        self.b2 = C3(32, 32, 1)
        self.b3 = ConvBnSiLU(32, 64, 3, 2)
        self.b4 = C3(64, 64, 2)
        self.b5 = ConvBnSiLU(64, 128, 3, 2)
        self.b6 = C3(128, 128, 3)
        self.b7 = ConvBnSiLU(128, 256, 3, 2)
        self.b8 = C3(256, 256, 1)
        self.b9 = SPPF(256, 256, 5)
        self.h10 = ConvBnSiLU(256, 128, 1, 1)
        self.h11 = _upsample()
        self.h13 = C3(256, 128, 1, False)
        self.h14 = ConvBnSiLU(128, 64, 1, 1)
        self.h15 = _upsample()
        self.h17 = C3(128, 64, 1, False)
        self.h18 = ConvBnSiLU(64, 64, 3, 2)
        self.h20 = C3(128, 128, 1, False)
        self.h21 = ConvBnSiLU(128, 128, 3, 2)
        self.h23 = C3(256, 256, 1, False)
        self.detect = YoloV5Detect(nc, (64, 128, 256), size)

    def forward(self, x):
        p4 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
        p6 = self.b6(self.b5(p4))
        p9 = self.b9(self.b8(self.b7(p6)))
        h10 = self.h10(p9)
        h14 = self.h14(self.h13(torch.cat((self.h11(h10), p6), 1)))
        h17 = self.h17(torch.cat((self.h15(h14), p4), 1))
        h20 = self.h20(torch.cat((self.h18(h17), h14), 1))
        h23 = self.h23(torch.cat((self.h21(h20), h10), 1))
        return self.detect((h17, h20, h23))


class DFL(nn.Module):
    """Distribution focal loss decoding: softmax over 16 bins, then their expectation (a fixed
    1x1 conv with weights 0..15, not a learned weight)."""

    def __init__(self, anchors: int, c1: int = 16):
        super().__init__()
        self.c1, self.anchors = c1, anchors  # static, as a simplified export has it
        self.conv = nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(c1, dtype=torch.float32).view(1, c1, 1, 1)

    def forward(self, x):
        a = self.anchors
        return self.conv(x.view(1, 4, self.c1, a).transpose(2, 1).softmax(1)).view(1, 4, a)


class YoloV8Detect(nn.Module):
    """YOLOv8's anchor-free decoupled head as exported: per level two conv branches (box: 4x16
    DFL bins, class: nc), concatenated and flattened over the three levels, split, DFL, boxes
    decoded against the anchor points (xywh) times the strides, sigmoid on the classes."""

    STRIDES = (8, 16, 32)

    def __init__(self, nc: int, ch: tuple[int, ...], size: int, reg_max: int = 16):
        super().__init__()
        self.nc, self.reg_max = nc, reg_max
        c2, c3 = max(16, ch[0] // 4, reg_max * 4), max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(
            nn.Sequential(
                ConvBnSiLU(c, c2, 3), ConvBnSiLU(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1)
            )
            for c in ch
        )
        self.cv3 = nn.ModuleList(
            nn.Sequential(ConvBnSiLU(c, c3, 3), ConvBnSiLU(c3, c3, 3), nn.Conv2d(c3, nc, 1))
            for c in ch
        )
        self.dfl = DFL(sum((size // s) ** 2 for s in self.STRIDES), reg_max)
        points, strides = [], []
        for stride in self.STRIDES:
            n = size // stride
            sy, sx = torch.meshgrid(torch.arange(n) + 0.5, torch.arange(n) + 0.5, indexing="ij")
            points.append(torch.stack((sx, sy), -1).view(-1, 2))
            strides.append(torch.full((n * n, 1), float(stride)))
        self.register_buffer("anchors", torch.cat(points).T.unsqueeze(0).contiguous(), False)
        self.register_buffer("strides", torch.cat(strides).T.contiguous(), False)

    def forward(self, xs):
        no = self.nc + 4 * self.reg_max
        x = [torch.cat((self.cv2[i](xi), self.cv3[i](xi)), 1) for i, xi in enumerate(xs)]
        x_cat = torch.cat([xi.view(1, no, xi.shape[2] * xi.shape[3]) for xi in x], 2)
        box, cls = x_cat.split((4 * self.reg_max, self.nc), 1)
        lt, rb = self.dfl(box).chunk(2, 1)
        x1y1 = self.anchors - lt
        x2y2 = self.anchors + rb
        dbox = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * self.strides
        return dbox, cls.sigmoid()


class YoloV8n(nn.Module):
    """YOLOv8n (width 0.25, depth 0.33): C2f backbone and neck, SPPF, nearest upsampling,
    concatenations, anchor-free decoupled head with DFL."""

    def __init__(self, nc: int = 80, size: int = DETECTOR_SIZE):
        super().__init__()
        self.b0 = ConvBnSiLU(3, 16, 3, 2)
        self.b1 = ConvBnSiLU(16, 32, 3, 2)
        self.b2 = C2f(32, 32, 1, True)
        self.b3 = ConvBnSiLU(32, 64, 3, 2)
        self.b4 = C2f(64, 64, 2, True)
        self.b5 = ConvBnSiLU(64, 128, 3, 2)
        self.b6 = C2f(128, 128, 2, True)
        self.b7 = ConvBnSiLU(128, 256, 3, 2)
        self.b8 = C2f(256, 256, 1, True)
        self.b9 = SPPF(256, 256, 5)
        self.h10 = _upsample()
        self.h12 = C2f(384, 128, 1)
        self.h13 = _upsample()
        self.h15 = C2f(192, 64, 1)
        self.h16 = ConvBnSiLU(64, 64, 3, 2)
        self.h18 = C2f(192, 128, 1)
        self.h19 = ConvBnSiLU(128, 128, 3, 2)
        self.h21 = C2f(384, 256, 1)
        self.detect = YoloV8Detect(nc, (64, 128, 256), size)

    def forward(self, x):
        p4 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
        p6 = self.b6(self.b5(p4))
        p9 = self.b9(self.b8(self.b7(p6)))
        h12 = self.h12(torch.cat((self.h10(p9), p6), 1))
        h15 = self.h15(torch.cat((self.h13(h12), p4), 1))
        h18 = self.h18(torch.cat((self.h16(h15), h12), 1))
        h21 = self.h21(torch.cat((self.h19(h18), p9), 1))
        return self.detect((h15, h18, h21))


# ---------------------------------------------------------------------------------------------
# The zoo


class WithSoftmax(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        return torch.softmax(self.model(x), 1)


class SegmentationOut(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def _classifier(factory, **kwargs):
    return lambda: WithSoftmax(factory(weights=None, **kwargs))


def _segmentation(factory):
    return lambda: SegmentationOut(factory(weights=None, weights_backbone=None, aux_loss=False))


tv = torchvision.models
seg = torchvision.models.segmentation

# name → (kind, torch module factory, input size, where the architecture comes from)
ZOO = {
    "mobilenet_v2": ("classifier", _classifier(tv.mobilenet_v2), CLASSIFIER_SIZE),
    "mobilenet_v3_small": ("classifier", _classifier(tv.mobilenet_v3_small), CLASSIFIER_SIZE),
    "mobilenet_v3_large": ("classifier", _classifier(tv.mobilenet_v3_large), CLASSIFIER_SIZE),
    "efficientnet_b0": ("classifier", _classifier(tv.efficientnet_b0), CLASSIFIER_SIZE),
    "regnet_x_400mf": ("classifier", _classifier(tv.regnet_x_400mf), CLASSIFIER_SIZE),
    "regnet_y_400mf": ("classifier", _classifier(tv.regnet_y_400mf), CLASSIFIER_SIZE),
    "shufflenet_v2_x1_0": ("classifier", _classifier(tv.shufflenet_v2_x1_0), CLASSIFIER_SIZE),
    "mnasnet1_0": ("classifier", _classifier(tv.mnasnet1_0), CLASSIFIER_SIZE),
    "resnet18": ("classifier", _classifier(tv.resnet18), CLASSIFIER_SIZE),
    "resnet50": ("classifier", _classifier(tv.resnet50), CLASSIFIER_SIZE),
    "googlenet": (
        "classifier",
        _classifier(tv.googlenet, aux_logits=False, init_weights=True),
        CLASSIFIER_SIZE,
    ),
    "densenet121": ("classifier", _classifier(tv.densenet121), CLASSIFIER_SIZE),
    "squeezenet1_1": ("classifier", _classifier(tv.squeezenet1_1), CLASSIFIER_SIZE),
    "lraspp_mobilenet_v3_large": (
        "segmentation",
        lambda: SegmentationOut(seg.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None)),
        SEGMENTATION_SIZE,
    ),
    "deeplabv3_mobilenet_v3_large": (
        "segmentation",
        _segmentation(seg.deeplabv3_mobilenet_v3_large),
        SEGMENTATION_SIZE,
    ),
    "yolov5n": ("detector", lambda: YoloV5n(size=DETECTOR_SIZE), DETECTOR_SIZE),
    "yolov8n": ("detector", lambda: YoloV8n(size=DETECTOR_SIZE), DETECTOR_SIZE),
}

SOURCES = {
    "classifier": "torchvision.models.{name}(weights=None), then a Softmax",
    "segmentation": "torchvision.models.segmentation.{name}(weights=None), output 'out'",
    "detector": "scripts/export_zoo.py, after the public {name} layout",
}


def _randomize_parameters(module: nn.Module) -> None:
    """Distinct random values in every parameter and batch-norm statistic before export.

    The stored weights are dropped anyway; this only keeps the exporter from sharing one
    initializer between layers whose folded weights happen to be equal (torchvision inits
    biases to zero and batch norms to the identity, so folded biases would all be equal).
    Non-trainable parameters keep their values.
    """
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.modules.batchnorm._BatchNorm):
                n = sub.num_features
                sub.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                sub.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
        for param in module.parameters():
            if param.requires_grad:
                param.add_(torch.randn(param.shape, generator=generator) * 1e-3)


def export(name: str) -> tuple[onnx.ModelProto, dict]:
    kind, factory, size = ZOO[name]
    torch.manual_seed(0)
    module = factory().eval()
    _randomize_parameters(module)
    fixed = {n for n, p in module.named_parameters() if not p.requires_grad}
    x = torch.randn(1, 3, size, size)
    outputs = ["boxes", "scores"] if kind == "detector" else ["output"]
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (x,),
            buffer,
            dynamo=False,
            opset_version=OPSET,
            input_names=["input"],
            output_names=outputs,
            do_constant_folding=True,
        )
    model = onnx.load_from_string(buffer.getvalue())
    model = strip_weights(model, fixed)
    model.producer_name = "mrvl scripts/export_zoo.py"
    model.producer_version = f"torch {torch.__version__}, torchvision {torchvision.__version__}"
    model.doc_string = (
        f"{name}: {SOURCES[kind].format(name=name)}; input 1x3x{size}x{size}; opset {OPSET}; "
        f"weights stored as ConstantOfShape({PLACEHOLDER}): mrvl.models.zoo re-weights them"
    )
    onnx.checker.check_model(model, full_check=True)
    info = {
        "kind": kind,
        "input": [1, 3, size, size],
        "outputs": outputs,
        "source": SOURCES[kind].format(name=name),
        "params": sum(p.numel() for p in module.parameters()),
        "macs": _macs(model),
        "ops": dict(sorted(Counter(n.op_type for n in model.graph.node).items())),
    }
    return model, info


def strip_weights(model: onnx.ModelProto, fixed: set[str]) -> onnx.ModelProto:
    """Learned weights → `ConstantOfShape(<name>__SHAPE)`; every initializer that is not a
    learned weight (or is in `fixed`) stays; each weight gets a consumer of its own."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}

    # Identity nodes on initializers (the exporter's way of sharing equal constants) become
    # initializers of their own.
    nodes = []
    for node in graph.node:
        if node.op_type == "Identity" and node.input[0] in inits:
            copy = onnx.TensorProto()
            copy.CopyFrom(inits[node.input[0]])
            copy.name = node.output[0]
            inits[copy.name] = copy
            continue
        nodes.append(node)

    uses: Counter = Counter(name for node in nodes for name in node.input)
    weights: dict[str, onnx.TensorProto] = {}
    for node in nodes:
        for index, name in enumerate(node.input):
            if (node.op_type, index) not in WEIGHT_ROLES or name not in inits or name in fixed:
                continue
            if inits[name].data_type != TensorProto.FLOAT:
                continue
            if uses[name] != 1:
                raise RuntimeError(f"weight {name} is shared by {uses[name]} uses")
            weights[name] = inits[name]

    generators, shapes = [], []
    for name in sorted(weights):
        shape_name = f"{name}__SHAPE"
        dims = np.array(weights[name].dims, dtype=np.int64)
        shapes.append(numpy_helper.from_array(dims, shape_name))
        value = helper.make_tensor("", TensorProto.FLOAT, [1], [PLACEHOLDER])
        generators.append(
            helper.make_node(
                "ConstantOfShape", [shape_name], [name], name=f"{name}__CONSTANT", value=value
            )
        )
    used = {name for node in nodes for name in node.input}
    kept = [i for name, i in inits.items() if name not in weights and name in used]
    del graph.node[:]
    graph.node.extend(generators + nodes)
    del graph.initializer[:]
    graph.initializer.extend(shapes + kept)
    del graph.value_info[:]
    model.ir_version = ONNX_IR_VERSION
    return model


def _macs(model: onnx.ModelProto) -> int:
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {}
    for info in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        shapes[info.name] = [d.dim_value for d in info.type.tensor_type.shape.dim]
    gen = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "ConstantOfShape"}
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}

    def shape(name):
        if name in gen:
            return list(inits[gen[name]])
        if name in inits:
            return list(inits[name].shape)
        return shapes[name]

    total = 0
    for node in model.graph.node:
        if node.op_type == "Conv":
            total += math.prod(shape(node.output[0])) * math.prod(shape(node.input[1])[1:])
        elif node.op_type in ("Gemm", "MatMul"):
            a = shape(node.input[0])
            total += math.prod(shape(node.output[0])) * a[-1]
    return int(total)


def check(model: onnx.ModelProto, info: dict) -> None:
    """onnxruntime loads and runs the weight-free file (its outputs are degenerate, even
    infinite in deep networks: every weight is 0.02); records the output shapes."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal(info["input"]).astype(np.float32)
    for out, value in zip(info["outputs"], session.run(info["outputs"], {"input": x})):
        info.setdefault("output_shapes", {})[out] = list(value.shape)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"models (default all): {', '.join(ZOO)}")
    parser.add_argument("--out", type=Path, default=ZOO_DIR)
    args = parser.parse_args(argv)
    names = args.names or list(ZOO)
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in names:
        model, info = export(name)
        check(model, info)
        path = args.out / f"{name}.onnx"
        onnx.save(model, path)
        manifest[name] = info
        print(
            f"{name:30s} {info['macs'] / 1e9:6.3f} GMAC {info['params'] / 1e6:6.2f} M params "
            f"{path.stat().st_size / 1024:7.1f} KiB  {len(model.graph.node)} nodes",
            flush=True,
        )
    ordered = {name: manifest[name] for name in ZOO if name in manifest}
    manifest_path.write_text(json.dumps(ordered, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
