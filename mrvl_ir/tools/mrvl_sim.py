"""`mrvl-sim`: run a model binary on .npy inputs, or describe it with --info.

Every failure a user can cause (unreadable file, corrupt binary, wrong inputs, a program that
faults) ends with one line on stderr and exit code 1, never a traceback.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from mrvl.binary import BinaryFormatError, decode, read_header
from mrvl.isa import NO_LOC, DType
from mrvl.sim import ENGINES, SimulatorError, SimulatorInputError, one_line_warnings, run

_NPY_MAGIC = b"\x93NUMPY"


def _load_array(path: Path) -> np.ndarray:
    with path.open("rb") as stream:
        if stream.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            raise SimulatorInputError(f"{path}: not a .npy array file")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, EOFError) as e:
        raise SimulatorInputError(f"{path}: unreadable .npy file ({e})") from None


def _file_names(names: list[str]) -> list[str]:
    """Output names such as '/fc/Gemm_output_0' made safe and distinct as file names."""
    chosen: list[str] = []
    for index, name in enumerate(names):
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip("._") or "output"
        chosen.append(f"{safe}_{index}" if safe in chosen else safe)
    return chosen


def describe(data: bytes) -> str:
    """The --info report: header, I/O table and instruction counts per opcode."""
    header = read_header(data)
    program = decode(data)
    lines = [
        f"format      MLIP model binary {header.version[0]}.{header.version[1]}, "
        f"{header.total_size} bytes, crc32 {header.checksum:#010x}",
        f"target      {header.target}",
        f"num_tiles   {header.num_tiles}",
        f"ddr_size    {header.ddr_size:#x}",
        f"constants   {len(program.consts)} bytes at {header.const_base:#x}",
        f"srcmap      {len(program.srcmap)} ONNX nodes",
        "sections",
    ]
    lines += [f"  {s.type.name:<8} offset {s.offset:>8}  size {s.size:>8}" for s in header.sections]
    lines.append("I/O")
    for entry in program.io:
        kind = "input " if entry.is_input else "output"
        lines.append(
            f"  {kind} {entry.name}  {DType(entry.dtype).name.lower()}{list(entry.shape)}"
            f"  at DDR {entry.ddr_addr:#x}"
        )
    counts = Counter(ins.opcode for ins in program.code)
    located = sum(ins.loc != NO_LOC for ins in program.code)
    lines.append(f"instructions {len(program.code)} ({located} with an ONNX node)")
    lines += [f"  {opcode:<6} {count}" for opcode, count in sorted(counts.items())]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mrvl-sim", description="Run an MLIP model binary on the simulator."
    )
    parser.add_argument("model", type=Path, help="model binary (.bin)")
    parser.add_argument(
        "-i",
        "--input",
        type=Path,
        action="append",
        default=[],
        metavar="X.npy",
        help="an input array, once per program input, in I/O-table order",
    )
    parser.add_argument(
        "-o", "--output-dir", type=Path, help="write each output to OUTPUT_DIR/<name>.npy"
    )
    parser.add_argument(
        "--info", action="store_true", help="describe the binary instead of running it"
    )
    parser.add_argument(
        "--engine",
        choices=tuple(ENGINES),
        help="numba (compiled) or interp (the reference interpreter); both give the same "
        "bits (default: $MRVL_SIM_ENGINE, else numba)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        data = args.model.read_bytes()
        if args.info:
            print(describe(data))
            return 0
        program = decode(data)
        inputs = [_load_array(path) for path in args.input]
        with one_line_warnings("mrvl-sim"):  # a saturated or NaN run says so, on one line
            outputs = run(program, inputs, engine=args.engine)
        names = _file_names([entry.name for entry in program.outputs])
        for entry, file_name, value in zip(program.outputs, names, outputs):
            if args.output_dir is None:
                print(f"{entry.name}: {value.dtype}{list(value.shape)}")
                print(np.array2string(value))
            else:
                args.output_dir.mkdir(parents=True, exist_ok=True)
                path = args.output_dir / f"{file_name}.npy"
                np.save(path, value)
                print(f"{entry.name}: {value.dtype}{list(value.shape)} -> {path}")
    except (BinaryFormatError, SimulatorInputError, SimulatorError, OSError) as e:
        print(f"mrvl-sim: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
