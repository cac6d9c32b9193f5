#!/usr/bin/env python3
"""One large conv on the Numba engine, int8 (`qconv`) next to fp16 (`conv`), in one run.

    .venv/bin/python bench/int8_conv.py                      # 1x56x56x64 -> 64, 3x3, pad 1
    .venv/bin/python bench/int8_conv.py --hwc 28 28 128 --out 128 --repeat 5

Both instructions compute the same layer shape (a ResNet stage's 3x3 conv by default) from
data already in OCM, on a cn10ka whose tile OCM is made large enough to hold it whole (a
derived target), so the time is the kernel's and not the tiler's. Each is run once to load
or compile the engine, then `--repeat` times; the table gives the best time of each, their
ratio, and the modelled cycles of each instruction (the int8 MAC rate is twice fp16's), and
the path the int8 block took on this CPU (`int8_mac.QMAC_PATH`: VNNI, AVX2 or generic).
Threads: `MRVL_SIM_THREADS` (default: the engine's); both convs are shared among threads
(the int8 one from `int8.SHARED_QCONV_MACS` multiply-adds).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from mrvl.isa import DType, Instruction, IOEntry, MemSpace, Program
from mrvl.sim import prepare, run
from mrvl.sim.cycles import instruction_cost
from mrvl.sim.engines.numba.int8_mac import QMAC_PATH
from mrvl.target import derive_target


def _program(target, compute: Instruction, staged: list[np.ndarray], out_addr, out_bytes):
    blob, addrs = bytearray(), []
    for array in staged:
        addrs.append(len(blob))
        raw = np.ascontiguousarray(array).tobytes()
        blob += raw + bytes(-len(raw) % 64)
    load = Instruction(
        "dma",
        0,
        fields=dict(
            src_space=int(MemSpace.DDR), src_addr=0, src_strides=(0, 0, 0, 1),
            dst_space=int(MemSpace.OCM), dst_addr=0, dst_strides=(0, 0, 0, 1),
            box=(1, 1, 1, len(blob)), elem_bytes=1,
        ),
    )  # fmt: skip
    store = Instruction(
        "dma",
        0,
        fields=dict(
            src_space=int(MemSpace.OCM), src_addr=out_addr, src_strides=(0, 0, 0, 1),
            dst_space=int(MemSpace.DDR), dst_addr=len(blob), dst_strides=(0, 0, 0, 1),
            box=(1, 1, 1, out_bytes), elem_bytes=1,
        ),
    )  # fmt: skip
    return Program(
        target=target.name,
        num_tiles=1,
        ddr_size=len(blob) + out_bytes,
        io=[IOEntry("y", False, (out_bytes,), DType.I8, len(blob))],
        code=[load, compute, store, Instruction("end", 0)],
        const_base=0,
        consts=bytes(blob),
        srcmap=[],
    )


def programs(hwc, out_channels, kernel, target):
    """(int8 program, fp16 program, int8 instruction, fp16 instruction) for one conv."""
    rng = np.random.default_rng(0)
    h, w, c = hwc
    in_shape, out_shape = (1, h, w, c), (1, h, w, out_channels)
    pad = (kernel // 2, kernel // 2)
    geometry = dict(
        in_shape=in_shape, row0=0, out_shape=out_shape, orow0=0, kernel=(kernel, kernel),
        stride=(1, 1), pad=pad, dilation=(1, 1), groups=1, oc0=0, oc_total=out_channels,
    )  # fmt: skip
    x8 = rng.integers(-128, 128, in_shape).astype(np.int8)
    w8 = rng.integers(-127, 128, (out_channels, kernel, kernel, c)).astype(np.int8)
    b32 = rng.integers(-1000, 1000, out_channels).astype(np.int32)
    pairs = np.tile(np.array([[1 << 30, -8]], np.int32), (out_channels, 1))
    sizes = [x8.nbytes, w8.nbytes, b32.nbytes, pairs.nbytes]
    at = np.cumsum([0] + [s + (-s % 64) for s in sizes])
    out8 = int(at[-1])
    qconv = Instruction(
        "qconv",
        0,
        fields=dict(
            geometry, in_addr=int(at[0]), out_addr=out8, w_addr=int(at[1]), b_addr=int(at[2]),
            in_zp=3, out_zp=-2, rq_addr=int(at[3]), clamp=(-128, 127), lut_addr=-1,
            acc_addr=-1, acc_out=0,
        ),
    )  # fmt: skip
    x16 = (x8 / 64).astype(np.float16)
    w16 = (w8 / 256).astype(np.float16)
    b16 = b32.astype(np.float32) / 1000
    sizes = [x16.nbytes, w16.nbytes, b16.nbytes]
    at16 = np.cumsum([0] + [s + (-s % 64) for s in sizes])
    out16 = int(at16[-1])
    conv = Instruction(
        "conv",
        0,
        fields=dict(
            geometry, in_addr=int(at16[0]), out_addr=out16, w_addr=int(at16[1]),
            b_addr=int(at16[2]), act=0, act_a=0.0, act_b=0.0, act_addr=-1, acc_addr=-1,
            acc_out=0,
        ),
    )  # fmt: skip
    count = math.prod(out_shape)
    p8 = _program(target, qconv, [x8, w8, b32, pairs], out8, count)
    p16 = _program(target, conv, [x16, w16, b16], out16, 2 * count)
    return p8, p16, qconv, conv


def best_time(valid, repeat: int) -> float:
    run(valid, [], engine="numba")  # load or compile the engine, warm the weight cache
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run(valid, [], engine="numba")
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hwc", type=int, nargs=3, default=(56, 56, 64))
    parser.add_argument("--out", type=int, default=64, help="output channels")
    parser.add_argument("--kernel", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    target = derive_target("cn10ka", ocm_bytes_per_tile=1 << 24)
    p8, p16, qconv, conv = programs(args.hwc, args.out, args.kernel, target)
    macs = instruction_cost(qconv, target)[1]
    rows = []
    for name, program, ins in (("int8 qconv", p8, qconv), ("fp16 conv", p16, conv)):
        seconds = best_time(prepare(program, target), args.repeat)
        cycles = instruction_cost(ins, target)[0].cycles
        rows.append((name, seconds, cycles))
    h, w, c = args.hwc
    print(f"conv 1x{h}x{w}x{c} -> {args.out}, {args.kernel}x{args.kernel}: {macs / 1e6:.1f} M MACs")
    print(f"{'instruction':<12} {'best ms':>9} {'GMAC/s':>7} {'modelled cycles':>16}")
    for name, seconds, cycles in rows:
        print(f"{name:<12} {1e3 * seconds:9.2f} {macs / seconds / 1e9:7.2f} {cycles:16d}")
    print(f"int8 / fp16 time: {rows[0][1] / rows[1][1]:.2f}x (int8 path: {QMAC_PATH})")


if __name__ == "__main__":
    main()
