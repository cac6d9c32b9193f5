#!/usr/bin/env python3
"""The Numba engine's fp16 MAC kernel alone: `matmul.mac_rows` (the `fc` and `bmm` path, the
`mac_tile` of every conv) on the fc shapes of ViT-Tiny and Swin-T, in GMAC/s of one thread.

    .venv/bin/python bench/mac_rows.py                  # the default shapes, best of 20
    .venv/bin/python bench/mac_rows.py --shape 197 192 576 --repeat 50

Each shape (rows M, reduction K, outputs N) gets f16-valued random inputs and weights packed
as the weight cache packs them (`pack_matrix`), then `--repeat` timed calls of mac_rows over
all rows from the bias; the table gives the best call's thread CPU time (`time.thread_time`,
so other processes on a busy machine count less) and its multiply-adds a second.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mrvl.sim.engines.numba.mac_tiles import packed_size
from mrvl.sim.engines.numba.matmul import mac_rows, pack_matrix, rows_scratch

SHAPES = (
    (197, 192, 576),  # ViT-Tiny qkv
    (197, 192, 192),  # ViT-Tiny proj
    (197, 192, 768),  # ViT-Tiny fc1
    (197, 768, 192),  # ViT-Tiny fc2
    (3136, 96, 384),  # Swin-T stage 1 fc1
    (784, 768, 192),  # Swin-T stage 2 fc2
)


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
    args = parser.parse_args()
    print(f"{'M':>6} {'K':>5} {'N':>5} {'ms':>8} {'GMAC/s':>7}")
    for m, k, n in args.shape or SHAPES:
        seconds, rate = gmacs(m, k, n, args.repeat)
        print(f"{m:6d} {k:5d} {n:5d} {seconds * 1e3:8.3f} {rate:7.1f}")


if __name__ == "__main__":
    main()
