#!/usr/bin/env python3
"""The Numba engine's fp16 MAC kernels alone, in GMAC/s of one thread: `matmul.mac_rows` (the
`fc` and `bmm` path) on the fc shapes of ViT-Tiny and Swin-T, and `mac_tiles.conv_run_blocked`
(a conv with a weight-cache slot) on convs of ResNet-18 and -50.

    .venv/bin/python bench/mac_rows.py                  # the default shapes, best of 20
    .venv/bin/python bench/mac_rows.py --shape 197 192 576 --repeat 50 --no-conv

Each fc shape (rows M, reduction K, outputs N) gets f16-valued random inputs and weights
packed as the weight cache packs them (`pack_matrix`), then `--repeat` timed calls of mac_rows
over all rows from the bias; each conv (input H x W x C, output channels, kernel, stride, pad)
the same with its window (`mac.new_window`) and `pack_weights` in the documented order, the
whole layer in one call (a compiled program's conv instruction holds at most a tile's OCM of
weights, 256 KiB on cn10ka, so the 7x7x512 layer's 9.4 MB of packed weights, read from L3 by
every tile of positions, are this bench's alone). The table gives the best call's thread CPU time (`time.thread_time`, so other processes on a busy
machine count less) and its multiply-adds a second.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mrvl.isa import OPCODE_BY_NAME
from mrvl.sim.engines.numba.mac import new_window
from mrvl.sim.engines.numba.mac_tiles import (
    blocked_scratch,
    conv_order,
    conv_run_blocked,
    pack_weights,
    packed_size,
)
from mrvl.sim.engines.numba.matmul import mac_rows, pack_matrix, rows_scratch
from mrvl.sim.validate import field_words

SHAPES = (
    (197, 192, 576),  # ViT-Tiny qkv
    (197, 192, 192),  # ViT-Tiny proj
    (197, 192, 768),  # ViT-Tiny fc1
    (197, 768, 192),  # ViT-Tiny fc2
    (3136, 96, 384),  # Swin-T stage 1 fc1
    (784, 768, 192),  # Swin-T stage 2 fc2
)


CONVS = (
    (56, 56, 64, 64, 3, 1, 1),  # ResNet-18 stage 1
    (56, 56, 64, 256, 1, 1, 0),  # ResNet-50 stage 1 expand
    (28, 28, 128, 128, 3, 1, 1),  # ResNet-50 stage 2
    (14, 14, 256, 1024, 1, 1, 0),  # ResNet-50 stage 3 expand
    (7, 7, 512, 512, 3, 1, 1),  # ResNet-18 stage 4
)
"""(H, W, C, output channels, kernel, stride, pad) of one image."""


def conv_row(h, w, c, oc, kernel, stride, pad) -> tuple[np.ndarray, int]:
    """A conv instruction's row (the words the engine reads) and its output positions."""
    words = field_words(OPCODE_BY_NAME["conv"])
    row = np.zeros(max(words.values()) + 1, np.int64)
    oh, ow = (h + 2 * pad - kernel) // stride + 1, (w + 2 * pad - kernel) // stride + 1
    fields = dict(
        in_shape=(1, h, w, c), out_shape=(1, oh, ow, oc), kernel=(kernel, kernel),
        stride=(stride, stride), pad=(pad, pad), dilation=(1, 1), groups=(1,),
        oc0=(0,), oc_total=(oc,), acc_addr=(-1,), b_addr=(-1,), act_addr=(-1,),
    )  # fmt: skip
    for name, values in fields.items():
        row[words[name] : words[name] + len(values)] = values
    return row, oh * ow


def conv_gmacs(h, w, c, oc, kernel, stride, pad, repeat, seed=0) -> tuple[float, float]:
    """(best thread CPU seconds, GMAC/s) of conv_run_blocked over a whole conv."""
    rng = np.random.default_rng(seed)
    row, positions = conv_row(h, w, c, oc, kernel, stride, pad)
    x = new_window(row, False)
    x[: h * w * c] = rng.standard_normal(h * w * c).astype(np.float16)
    steps = kernel * kernel * c
    weights = rng.standard_normal(oc * steps).astype(np.float16).astype(np.float32)
    packed = np.empty(packed_size(oc, steps), np.float32)
    pack_weights(weights, conv_order(kernel, kernel, c), 0, oc, packed)
    bias = rng.standard_normal(oc).astype(np.float16).astype(np.float32)
    out = np.empty(positions * oc, np.float32)
    scratch = blocked_scratch(row, oc, False)

    def call():
        conv_run_blocked(
            row, x, packed, steps, bias, out[:0], out, 0, oc, 0, 0, positions, False, scratch
        )

    call()  # compile or load
    best = float("inf")
    for _ in range(repeat):
        cpu = time.thread_time()
        call()
        best = min(best, time.thread_time() - cpu)
    return best, positions * steps * oc / best / 1e9


def gmacs(m: int, k: int, n: int, repeat: int, seed: int = 0) -> tuple[float, float]:
    """(best thread CPU seconds, GMAC/s) of mac_rows over an [m, k] x [k, n] product."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(m * k).astype(np.float16).astype(np.float32)
    b = rng.standard_normal(k * n).astype(np.float16).astype(np.float32)  # [K, N]
    bias = rng.standard_normal(n).astype(np.float16).astype(np.float32)
    packed = np.empty(packed_size(n, k), np.float32)
    pack_matrix(b, 0, k, n, False, packed)
    out = np.empty(m * n, np.float32)
    scratch = rows_scratch()
    mac_rows(x, 0, packed, 0, m, k, n, bias, 0, 0, out, 0, scratch)  # compile or load
    best = float("inf")
    for _ in range(repeat):
        cpu = time.thread_time()
        mac_rows(x, 0, packed, 0, m, k, n, bias, 0, 0, out, 0, scratch)
        best = min(best, time.thread_time() - cpu)
    return best, m * k * n / best / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", type=int, nargs=3, action="append", metavar=("M", "K", "N"))
    parser.add_argument("--repeat", type=int, default=20, help="timed calls (best is kept)")
    parser.add_argument("--no-conv", action="store_true", help="only the fc shapes")
    args = parser.parse_args()
    print(f"{'fc M':>6} {'K':>5} {'N':>5} {'ms':>8} {'GMAC/s':>7}")
    for m, k, n in args.shape or SHAPES:
        seconds, rate = gmacs(m, k, n, args.repeat)
        print(f"{m:6d} {k:5d} {n:5d} {seconds * 1e3:8.3f} {rate:7.1f}")
    if args.no_conv:
        return
    print(f"{'conv HxWxC':>14} {'out':>5} {'k/s':>4} {'ms':>8} {'GMAC/s':>7}")
    for h, w, c, oc, kernel, stride, pad in CONVS:
        seconds, rate = conv_gmacs(h, w, c, oc, kernel, stride, pad, args.repeat)
        shape = f"{h}x{w}x{c}"
        print(f"{shape:>14} {oc:5d} {kernel}/{stride:<2d} {seconds * 1e3:8.3f} {rate:7.1f}")


if __name__ == "__main__":
    main()
