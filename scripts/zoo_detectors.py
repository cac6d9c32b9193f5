"""Detectors of the model zoo, written as small torch modules after public layouts
(imported by `scripts/export_zoo.py`, which runs in its own venv with torch).

- YOLOv5n (ultralytics/yolov5 v7.0) and YOLOv8n (ultralytics), "n" scale, with their
  decoding heads;
- RetinaFace with a MobileNet-0.25 backbone (the layout of biubug6/Pytorch_Retinaface's
  `retinaface.py` and `net.py`): LeakyReLU(0.1), an FPN over three levels with lateral 1x1
  convs, nearest upsampling to the next level's size and adds, SSH context modules, and
  the class, box and landmark heads of two anchors per position.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

DETECTOR_SIZE = 320
RETINAFACE_SIZE = 640


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
# RetinaFace (MobileNet-0.25), after biubug6/Pytorch_Retinaface


def _conv_bn(c1: int, c2: int, stride: int = 1, leaky: float = 0.0) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c1, c2, 3, stride, 1, bias=False), nn.BatchNorm2d(c2), nn.LeakyReLU(leaky)
    )


def _conv_bn_no_relu(c1: int, c2: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c1, c2, 3, 1, 1, bias=False), nn.BatchNorm2d(c2))


def _conv_bn_1x1(c1: int, c2: int, leaky: float = 0.0) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c1, c2, 1, 1, 0, bias=False), nn.BatchNorm2d(c2), nn.LeakyReLU(leaky)
    )


def _conv_dw(c1: int, c2: int, stride: int, leaky: float = 0.1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c1, c1, 3, stride, 1, groups=c1, bias=False),
        nn.BatchNorm2d(c1),
        nn.LeakyReLU(leaky),
        nn.Conv2d(c1, c2, 1, 1, 0, bias=False),
        nn.BatchNorm2d(c2),
        nn.LeakyReLU(leaky),
    )


class MobileNetV1x025(nn.Module):
    """RetinaFace's MobileNet-0.25 backbone: three stages, outputs at strides 8, 16, 32."""

    def __init__(self):
        super().__init__()
        self.stage1 = nn.Sequential(
            _conv_bn(3, 8, 2, leaky=0.1),
            _conv_dw(8, 16, 1),
            _conv_dw(16, 32, 2),
            _conv_dw(32, 32, 1),
            _conv_dw(32, 64, 2),
            _conv_dw(64, 64, 1),
        )
        self.stage2 = nn.Sequential(
            _conv_dw(64, 128, 2), *(_conv_dw(128, 128, 1) for _ in range(5))
        )
        self.stage3 = nn.Sequential(_conv_dw(128, 256, 2), _conv_dw(256, 256, 1))

    def forward(self, x):
        c3 = self.stage1(x)
        c4 = self.stage2(c3)
        return c3, c4, self.stage3(c4)


class SSH(nn.Module):
    """Single-stage headless context module: 3x3, 5x5 (two 3x3) and 7x7 (three 3x3) branches
    concatenated, then ReLU."""

    def __init__(self, c1: int, c2: int):
        super().__init__()
        leaky = 0.1 if c2 <= 64 else 0.0
        self.conv3X3 = _conv_bn_no_relu(c1, c2 // 2)
        self.conv5X5_1 = _conv_bn(c1, c2 // 4, leaky=leaky)
        self.conv5X5_2 = _conv_bn_no_relu(c2 // 4, c2 // 4)
        self.conv7X7_2 = _conv_bn(c2 // 4, c2 // 4, leaky=leaky)
        self.conv7x7_3 = _conv_bn_no_relu(c2 // 4, c2 // 4)

    def forward(self, x):
        c5_1 = self.conv5X5_1(x)
        c7 = self.conv7x7_3(self.conv7X7_2(c5_1))
        return F.relu(torch.cat((self.conv3X3(x), self.conv5X5_2(c5_1), c7), 1))


class FPN(nn.Module):
    """Lateral 1x1 convs; each coarser level upsampled (nearest, to the finer level's size),
    added, and merged by a 3x3 conv."""

    def __init__(self, in_channels: tuple[int, ...], c2: int):
        super().__init__()
        leaky = 0.1 if c2 <= 64 else 0.0
        self.output1 = _conv_bn_1x1(in_channels[0], c2, leaky)
        self.output2 = _conv_bn_1x1(in_channels[1], c2, leaky)
        self.output3 = _conv_bn_1x1(in_channels[2], c2, leaky)
        self.merge1 = _conv_bn(c2, c2, leaky=leaky)
        self.merge2 = _conv_bn(c2, c2, leaky=leaky)

    def forward(self, xs):
        out1, out2, out3 = self.output1(xs[0]), self.output2(xs[1]), self.output3(xs[2])
        up3 = F.interpolate(out3, size=[out2.size(2), out2.size(3)], mode="nearest")
        out2 = self.merge2(out2 + up3)
        up2 = F.interpolate(out2, size=[out1.size(2), out1.size(3)], mode="nearest")
        out1 = self.merge1(out1 + up2)
        return out1, out2, out3


class _AnchorHead(nn.Module):
    """A 1x1 conv to anchors*values channels, as (1, positions*anchors, values)."""

    def __init__(self, c1: int, values: int, anchors: int = 2):
        super().__init__()
        self.values = values
        self.conv1x1 = nn.Conv2d(c1, anchors * values, 1)

    def forward(self, x):
        out = self.conv1x1(x).permute(0, 2, 3, 1).contiguous()
        return out.view(out.shape[0], -1, self.values)


class RetinaFaceMNet(nn.Module):
    """RetinaFace, MobileNet-0.25 (out channels 64), in its test phase: outputs the box
    regressions, the face/background softmax and the five landmarks of every anchor."""

    def __init__(self):
        super().__init__()
        self.body = MobileNetV1x025()
        self.fpn = FPN((64, 128, 256), 64)
        self.ssh1, self.ssh2, self.ssh3 = SSH(64, 64), SSH(64, 64), SSH(64, 64)
        self.ClassHead = nn.ModuleList(_AnchorHead(64, 2) for _ in range(3))
        self.BboxHead = nn.ModuleList(_AnchorHead(64, 4) for _ in range(3))
        self.LandmarkHead = nn.ModuleList(_AnchorHead(64, 10) for _ in range(3))

    def forward(self, x):
        fpn = self.fpn(self.body(x))
        features = (self.ssh1(fpn[0]), self.ssh2(fpn[1]), self.ssh3(fpn[2]))
        boxes = torch.cat([self.BboxHead[i](f) for i, f in enumerate(features)], 1)
        scores = torch.cat([self.ClassHead[i](f) for i, f in enumerate(features)], 1)
        landmarks = torch.cat([self.LandmarkHead[i](f) for i, f in enumerate(features)], 1)
        return boxes, F.softmax(scores, dim=-1), landmarks
