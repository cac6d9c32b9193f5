"""Encoder, recognizer, segmenter and audio models of the model zoo, written as small torch
modules after public layouts (imported by `scripts/export_zoo.py`, which runs in its own
venv with torch). Each class names the layout it follows.
"""

from __future__ import annotations

import math

import torch
from torch import nn

# ---------------------------------------------------------------------------------------------
# BERT-Mini encoder (Google's BERT-Mini: 4 layers, hidden 256, 4 heads, intermediate 1024)


class BertSelfAttention(nn.Module):
    """Hugging Face `BertSelfAttention`: query, key and value projections, heads split by
    view + permute, scores scaled by 1/sqrt(head size), softmax, context merged back."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_size = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def _heads(self, x):
        batch, length, _ = x.shape
        return x.view(batch, length, self.heads, self.head_size).permute(0, 2, 1, 3)

    def forward(self, x):
        batch, length, hidden = x.shape
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size)
        context = torch.matmul(torch.softmax(scores, -1), v)
        return context.permute(0, 2, 1, 3).contiguous().view(batch, length, hidden)


class BertLayer(nn.Module):
    """Hugging Face `BertLayer` (post-norm): attention, dense + residual + LayerNorm, then
    the feed-forward (dense, GELU in its erf form, dense) + residual + LayerNorm."""

    def __init__(self, hidden: int, heads: int, intermediate: int):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads)
        self.attention_output = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = nn.Linear(intermediate, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x):
        x = self.attention_norm(x + self.attention_output(self.attention(x)))
        ffn = self.output(nn.functional.gelu(self.intermediate(x)))
        return self.output_norm(x + ffn)


class BertEncoder(nn.Module):
    """Hugging Face `BertModel` from its summed embeddings on: the embedding LayerNorm and
    the encoder layers; returns the last hidden state. The token, position and segment
    embedding lookups (a gather of a table) stay with the host: the model's input is their
    sum, (1, sequence, hidden), with no padding mask (a full sequence)."""

    def __init__(self, layers: int = 4, hidden: int = 256, heads: int = 4):
        super().__init__()
        self.embeddings_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layer = nn.ModuleList(BertLayer(hidden, heads, 4 * hidden) for _ in range(layers))

    def forward(self, embeddings):
        x = self.embeddings_norm(embeddings)
        for layer in self.layer:
            x = layer(x)
        return x


# ---------------------------------------------------------------------------------------------
# PP-OCRv3 text recognizer (PaddleOCR's SVTR_LCNet: MobileNetV1Enhance, EncoderWithSVTR, CTC)


class ConvBnAct(nn.Module):
    """PaddleOCR's `ConvBNLayer`: conv without bias, batch norm, activation."""

    def __init__(self, c1, c2, k, stride=1, padding=0, groups=1, act=nn.Hardswish):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, stride, padding, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = act()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class SEModule(nn.Module):
    """`rec_mv1_enhance.SEModule`: global average, 1x1 conv + ReLU, 1x1 conv + hard
    sigmoid (Paddle's: slope 1/6, offset 0.5), scale the input."""

    def __init__(self, channels: int, reduction: int = 4):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels // reduction, 1)
        self.conv2 = nn.Conv2d(channels // reduction, channels, 1)

    def forward(self, x):
        gate = self.conv2(torch.relu(self.conv1(x.mean((2, 3), keepdim=True))))
        return x * nn.functional.hardsigmoid(gate)


class DepthwiseSeparable(nn.Module):
    """`rec_mv1_enhance.DepthwiseSeparable`: depthwise conv (3x3 or 5x5), optional SE, 1x1."""

    def __init__(self, c1, f1, f2, groups, stride, scale, dw_size=3, padding=1, use_se=False):
        super().__init__()
        self.depthwise = ConvBnAct(
            c1, int(f1 * scale), dw_size, stride, padding, groups=int(groups * scale)
        )
        self.se = SEModule(int(f1 * scale)) if use_se else nn.Identity()
        self.pointwise = ConvBnAct(int(f1 * scale), int(f2 * scale), 1)

    def forward(self, x):
        return self.pointwise(self.se(self.depthwise(x)))


class MobileNetV1Enhance(nn.Module):
    """PP-OCRv3's recognition backbone (scale 0.5, last conv stride (1, 2), average pool):
    strides (2, 1) keep the text line's width; a 48x320 line becomes 512 x 1 x 40."""

    def __init__(self, scale: float = 0.5):
        super().__init__()
        s = scale
        blocks = [
            DepthwiseSeparable(int(32 * s), 32, 64, 32, 1, s),
            DepthwiseSeparable(int(64 * s), 64, 128, 64, 1, s),
            DepthwiseSeparable(int(128 * s), 128, 128, 128, 1, s),
            DepthwiseSeparable(int(128 * s), 128, 256, 128, (2, 1), s),
            DepthwiseSeparable(int(256 * s), 256, 256, 256, 1, s),
            DepthwiseSeparable(int(256 * s), 256, 512, 256, (2, 1), s),
        ]
        blocks += [
            DepthwiseSeparable(int(512 * s), 512, 512, 512, 1, s, dw_size=5, padding=2)
            for _ in range(5)
        ]
        blocks += [
            DepthwiseSeparable(int(512 * s), 512, 1024, 512, (2, 1), s, 5, 2, use_se=True),
            DepthwiseSeparable(int(1024 * s), 1024, 1024, 1024, (1, 2), s, 5, 2, use_se=True),
        ]
        self.conv1 = ConvBnAct(3, int(32 * s), 3, 2, 1)
        self.block_list = nn.Sequential(*blocks)
        self.pool = nn.AvgPool2d(2, 2)

    def forward(self, x):
        return self.pool(self.block_list(self.conv1(x)))


class SvtrAttention(nn.Module):
    """`svtrnet.Attention`, global mixer: one qkv projection reshaped to
    (1, N, 3, heads, head dim) and permuted to (3, 1, heads, N, head dim)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        batch, length, dim = x.shape
        qkv = self.qkv(x).reshape(batch, length, 3, self.heads, self.head_dim)
        qkv = qkv.permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0] * self.scale, qkv[1], qkv[2]
        attn = torch.softmax(q.matmul(k.transpose(-1, -2)), -1)
        return self.proj(attn.matmul(v).transpose(1, 2).reshape(batch, length, dim))


class SvtrBlock(nn.Module):
    """`svtrnet.Block` (post-norm, `prenorm=False`): x + attention(norm(x)), then
    x + mlp(norm(x)) with Swish."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 2.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-5)
        self.mixer = SvtrAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-5)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.SiLU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class EncoderWithSVTR(nn.Module):
    """PaddleOCR's `EncoderWithSVTR` neck (dims 64, depth 2, hidden 120, 8 heads): reduce,
    two global SVTR blocks over the sequence, expand, concatenate with the shortcut, fuse."""

    def __init__(self, c1: int = 512, dims: int = 64, depth: int = 2, hidden: int = 120):
        super().__init__()
        self.conv1 = ConvBnAct(c1, c1 // 8, 3, padding=1, act=nn.SiLU)
        self.conv2 = ConvBnAct(c1 // 8, hidden, 1, act=nn.SiLU)
        self.svtr_block = nn.ModuleList(SvtrBlock(hidden, 8) for _ in range(depth))
        self.norm = nn.LayerNorm(hidden, eps=1e-6)
        self.conv3 = ConvBnAct(hidden, c1, 1, act=nn.SiLU)
        self.conv4 = ConvBnAct(2 * c1, c1 // 8, 3, padding=1, act=nn.SiLU)
        self.conv1x1 = ConvBnAct(c1 // 8, dims, 1, act=nn.SiLU)

    def forward(self, x):
        z = self.conv2(self.conv1(x))
        batch, channels, height, width = z.shape
        z = z.flatten(2).transpose(1, 2)
        for block in self.svtr_block:
            z = block(z)
        z = self.norm(z).reshape(batch, height, width, channels).permute(0, 3, 1, 2)
        z = torch.cat((x, self.conv3(z)), 1)
        return self.conv1x1(self.conv4(z))


class PPOCRv3Recognizer(nn.Module):
    """PP-OCRv3's English recognizer as exported for inference: backbone, SVTR neck,
    `Im2Seq` (squeeze the height of 1, time first) and the CTC head (a linear layer to the
    97 symbols and a softmax per time step)."""

    def __init__(self, classes: int = 97):
        super().__init__()
        self.backbone = MobileNetV1Enhance()
        self.neck = EncoderWithSVTR()
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        features = self.neck(self.backbone(x)).squeeze(2).permute(0, 2, 1)
        return torch.softmax(self.head(features), 2)


# ---------------------------------------------------------------------------------------------
# U-Net with sub-pixel upsampling


class DoubleConv(nn.Module):
    """milesial/Pytorch-UNet's `DoubleConv`: (3x3 conv, batch norm, ReLU) twice."""

    def __init__(self, c1: int, c2: int):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(c1, c2, 3, padding=1, bias=False),
            nn.BatchNorm2d(c2),
            nn.ReLU(),
            nn.Conv2d(c2, c2, 3, padding=1, bias=False),
            nn.BatchNorm2d(c2),
            nn.ReLU(),
        )

    def forward(self, x):
        return self.double_conv(x)


class UpShuffle(nn.Module):
    """An up step of the U-Net whose 2x upsampling is sub-pixel (fastai's
    `PixelShuffle_ICNR`: 1x1 conv to 4x the channels, ReLU, PixelShuffle(2), exported as
    DepthToSpace), then concatenated with the skip and a `DoubleConv`."""

    def __init__(self, c1: int, c2: int):
        super().__init__()
        self.shuf = nn.Sequential(nn.Conv2d(c1, 4 * (c1 // 2), 1), nn.ReLU(), nn.PixelShuffle(2))
        self.conv = DoubleConv(c1, c2)

    def forward(self, x, skip):
        return self.conv(torch.cat((skip, self.shuf(x)), 1))


class PixelShuffleUNet(nn.Module):
    """milesial/Pytorch-UNet's `UNet` layout (four max-pool downs, four ups with skips, a 1x1
    classifier), at a quarter of its widths (16 to 256 channels), with sub-pixel ups."""

    def __init__(self, classes: int = 2, base: int = 16):
        super().__init__()
        widths = [base * 2**i for i in range(5)]
        self.inc = DoubleConv(3, widths[0])
        self.downs = nn.ModuleList(
            nn.Sequential(nn.MaxPool2d(2), DoubleConv(widths[i], widths[i + 1])) for i in range(4)
        )
        self.ups = nn.ModuleList(UpShuffle(widths[i + 1], widths[i]) for i in reversed(range(4)))
        self.outc = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(skips[-1]))
        x = skips.pop()
        for up in self.ups:
            x = up(x, skips.pop())
        return self.outc(x)


# ---------------------------------------------------------------------------------------------
# TC-ResNet8 keyword spotting


class TCResidualBlock(nn.Module):
    """TC-ResNet's block: temporal conv (kernel 9) + BN + ReLU, temporal conv + BN; when it
    strides or widens, a 1x1 conv + BN + ReLU shortcut; add, ReLU."""

    def __init__(self, c1: int, c2: int, stride: int, kernel: int = 9):
        super().__init__()
        pad = kernel // 2
        self.conv1 = nn.Conv1d(c1, c2, kernel, stride, pad, bias=False)
        self.bn1 = nn.BatchNorm1d(c2)
        self.conv2 = nn.Conv1d(c2, c2, kernel, 1, pad, bias=False)
        self.bn2 = nn.BatchNorm1d(c2)
        self.shortcut = None
        if stride != 1 or c1 != c2:
            self.shortcut = nn.Sequential(
                nn.Conv1d(c1, c2, 1, stride, bias=False), nn.BatchNorm1d(c2), nn.ReLU()
            )

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class TCResNet8(nn.Module):
    """TC-ResNet8 (Choi et al., Interspeech 2019; hyperconnect/TC-ResNet): the MFCCs'
    coefficients are the channels of a 1-D convolution over time (40 x 98 frames); a 3-wide
    conv to 16 channels, three strided residual blocks (24, 32, 48), average over time, a
    linear layer to the 12 Speech Commands classes, softmax."""

    def __init__(self, mfcc: int = 40, classes: int = 12):
        super().__init__()
        self.conv = nn.Conv1d(mfcc, 16, 3, 1, 1, bias=False)
        self.blocks = nn.Sequential(
            TCResidualBlock(16, 24, 2), TCResidualBlock(24, 32, 2), TCResidualBlock(32, 48, 2)
        )
        self.fc = nn.Linear(48, classes)

    def forward(self, x):
        features = self.blocks(self.conv(x)).mean(2)
        return torch.softmax(self.fc(features), 1)


# ---------------------------------------------------------------------------------------------
# MobileFaceNet face embedding


class ConvBnPReLU(nn.Module):
    """TreB1eN/InsightFace_Pytorch's `Conv_block` (conv, BN, PReLU), or its `Linear_block`
    (conv, BN) without the PReLU."""

    def __init__(self, c1, c2, k=1, stride=1, padding=0, groups=1, prelu=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, stride, padding, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.prelu = nn.PReLU(c2) if prelu else nn.Identity()

    def forward(self, x):
        return self.prelu(self.bn(self.conv(x)))


class DepthWise(nn.Module):
    """`Depth_Wise`: the MobileNetV2 bottleneck with PReLU (1x1 expand, 3x3 depthwise,
    linear 1x1), with a residual when it keeps the shape."""

    def __init__(self, c1, c2, groups, stride=1, residual=False):
        super().__init__()
        self.conv = ConvBnPReLU(c1, groups)
        self.conv_dw = ConvBnPReLU(groups, groups, 3, stride, 1, groups=groups)
        self.project = ConvBnPReLU(groups, c2, prelu=False)
        self.residual = residual

    def forward(self, x):
        y = self.project(self.conv_dw(self.conv(x)))
        return x + y if self.residual else y


class MobileFaceNet(nn.Module):
    """MobileFaceNet (Chen et al. 2018) in TreB1eN/InsightFace_Pytorch's layout: a 112x112
    face to a 128-d embedding through bottlenecks with PReLU, a global depthwise 7x7
    ("GDConv"), a linear layer with batch norm, and L2 normalization."""

    def __init__(self, embedding: int = 128):
        super().__init__()

        def residual(channels, blocks, groups):
            return nn.Sequential(
                *(DepthWise(channels, channels, groups, residual=True) for _ in range(blocks))
            )

        self.features = nn.Sequential(
            ConvBnPReLU(3, 64, 3, 2, 1),
            ConvBnPReLU(64, 64, 3, 1, 1, groups=64),
            DepthWise(64, 64, 128, stride=2),
            residual(64, 4, 128),
            DepthWise(64, 128, 256, stride=2),
            residual(128, 6, 256),
            DepthWise(128, 128, 512, stride=2),
            residual(128, 2, 256),
            ConvBnPReLU(128, 512),
            ConvBnPReLU(512, 512, 7, groups=512, prelu=False),
        )
        self.linear = nn.Linear(512, embedding, bias=False)
        self.bn = nn.BatchNorm1d(embedding)

    def forward(self, x):
        out = self.bn(self.linear(self.features(x).flatten(1)))
        return out / torch.norm(out, 2, 1, True)
