"""`run`: simulate a program on inputs with a chosen engine, after validating it once."""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mrvl.binary import decode
from mrvl.isa import DTYPE_BYTES, DTYPE_NUMPY, DType, MemSpace, Program
from mrvl.sim import wall_time
from mrvl.sim.engines import engine_name, load_engine
from mrvl.sim.errors import SimulatorInputError
from mrvl.sim.memory import Memory
from mrvl.sim.operands import DDR, OCM, operands
from mrvl.sim.stats import RunStats
from mrvl.sim.validate import ValidProgram, box_extent, validate
from mrvl.target import Target


def check_inputs(program: Program, inputs: Sequence[np.ndarray]) -> None:
    """Inputs must match the input table exactly: converting silently would hide caller bugs."""
    entries = program.inputs
    if len(inputs) != len(entries):
        names = ", ".join(repr(e.name) for e in entries)
        raise SimulatorInputError(f"expected {len(entries)} inputs ({names}), got {len(inputs)}")
    for entry, value in zip(entries, inputs):
        dtype = np.dtype(DTYPE_NUMPY[DType(entry.dtype)])
        expected = f"{dtype} array of shape {tuple(entry.shape)}"
        if not isinstance(value, np.ndarray):
            raise SimulatorInputError(
                f"input {entry.name!r}: expected a {expected}, got {type(value).__name__}"
            )
        if value.dtype != dtype:
            raise SimulatorInputError(
                f"input {entry.name!r}: expected dtype {dtype}, got {value.dtype}"
            )
        if value.shape != tuple(entry.shape):
            raise SimulatorInputError(
                f"input {entry.name!r}: expected shape {tuple(entry.shape)}, got {value.shape}"
            )


def prepare(
    program_or_bytes: Program | bytes | ValidProgram, target: Target | str | None = None
) -> ValidProgram:
    """Decode (if bytes) and validate a program; a ValidProgram is returned as it is."""
    if isinstance(program_or_bytes, ValidProgram):
        return program_or_bytes
    if isinstance(program_or_bytes, (bytes, bytearray, memoryview)):
        program = decode(bytes(program_or_bytes))
    else:
        program = program_or_bytes
    return validate(program, target)


def writes_constant_pool(valid: ValidProgram) -> bool:
    """Whether any instruction may write a byte of the program's constant pool in DDR (only
    `dma`, `cvt`, `quant` and `dequant` write DDR)."""
    program = valid.program
    lo, hi = program.const_base, program.const_base + len(program.consts)
    for ins in valid.code:
        f = ins.fields
        if ins.opcode == "dma" and f["dst_space"] == MemSpace.DDR and math.prod(f["box"]):
            lowest, highest = box_extent(tuple(f["box"]), tuple(f["dst_strides"]), f["elem_bytes"])
            start, stop = f["dst_addr"] + lowest, f["dst_addr"] + highest
        elif ins.opcode == "cvt":
            size = math.prod(f["src_shape"]) * DTYPE_BYTES[DType(f["dst_dtype"])]
            start, stop = f["dst_addr"], f["dst_addr"] + size
        elif ins.opcode in ("quant", "dequant"):  # dense, int8 or the dst_dtype of dequant
            dtype = DType.I8 if ins.opcode == "quant" else DType(f["dst_dtype"])
            start = f["dst_addr"]
            stop = start + math.prod(f["src_shape"]) * DTYPE_BYTES[dtype]
        else:
            continue
        if start < hi and lo < stop:
            return True
    return False


def written_bytes(valid: ValidProgram) -> tuple[int, tuple[tuple[int, int], ...]]:
    """(ocm_end, ddr_ranges): the end of the OCM bytes any instruction writes, on any tile,
    and the DDR byte ranges [start, stop) the instructions and the inputs write, merged.
    Outside them a run leaves its memory as Memory.load made it."""
    ocm_end, ranges = 0, []
    for ins in valid.code:
        for access in operands(ins)[1]:
            start, stop = access.hull
            if access.space == OCM:
                ocm_end = max(ocm_end, stop)
            elif access.space == DDR:
                ranges.append((start, stop))
    for entry in valid.program.inputs:
        nbytes = math.prod(entry.shape) * DTYPE_BYTES[DType(entry.dtype)]
        ranges.append((entry.ddr_addr, entry.ddr_addr + nbytes))
    merged: list[tuple[int, int]] = []
    for start, stop in sorted(r for r in ranges if r[1] > r[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return ocm_end, tuple(merged)


@dataclass(frozen=True)
class MemoryUse:
    """What a reused Memory need not redo before a run of this program (Memory.load)."""

    pool_kept: bool
    """No instruction writes the constant pool (writes_constant_pool)."""
    tables_kept: bool
    """No `lut` loads an activation table, so the tables stay zero."""
    written: tuple[int, tuple[tuple[int, int], ...]]
    """What a run of it may leave nonzero (written_bytes): all the next load must zero."""


_memory_use: dict[int, tuple[weakref.ref, MemoryUse]] = {}


def memory_use(valid: ValidProgram) -> MemoryUse:
    """The MemoryUse of `valid`, computed once per ValidProgram."""
    key = id(valid)
    entry = _memory_use.get(key)
    if entry is None or entry[0]() is not valid:
        ref = weakref.ref(valid, lambda _: _memory_use.pop(key, None))
        use = MemoryUse(
            pool_kept=not writes_constant_pool(valid),
            tables_kept=all(ins.opcode != "lut" for ins in valid.code),
            written=written_bytes(valid),
        )
        entry = _memory_use[key] = (ref, use)
    return entry[1]


def new_memory(valid: ValidProgram) -> Memory:
    program = valid.program
    return Memory(program.ddr_size, program.num_tiles, valid.target.ocm_bytes_per_tile)


def load_memory(valid: ValidProgram, memory: Memory, inputs: Sequence[np.ndarray]) -> None:
    """`memory` (new_memory's) as a run of `valid` on `inputs` starts: Memory.load, keeping
    what the program's MemoryUse says it leaves alone."""
    use = memory_use(valid)
    memory.load(
        valid.program,
        inputs,
        pool_kept=use.pool_kept,
        tables_kept=use.tables_kept,
        written=use.written,
    )


def run(
    program_or_bytes: Program | bytes | ValidProgram,
    inputs: Sequence[np.ndarray],
    *,
    target: Target | str | None = None,
    engine: str | None = None,
    memory: Memory | None = None,
    stats: RunStats | None = None,
) -> list[np.ndarray]:
    """Simulate a program (a model binary, a Program or a ValidProgram) on `inputs`; returns
    the outputs in I/O-table order.

    `target` overrides the machine description (a Target or an mcpu name); by default it is the
    one the program was compiled for (a ValidProgram keeps the target it was validated for).
    `engine` is "numba" or "interp" (default: the one `use_engine` chose, else the
    MRVL_SIM_ENGINE environment variable, else "numba"); both give the same bits. `memory`, a
    Memory made by `new_memory` for this program, is reused instead of allocating one.
    `stats`, if given, is reset and filled with what the run counted (saturated values, NaNs).
    Whether or not it is given, a run that stored any value saturated at +-65504 or any NaN
    warns with a `SaturationWarning` naming the layers (ONNX nodes).
    """
    start = time.perf_counter()
    name = engine_name(engine)
    if isinstance(program_or_bytes, ValidProgram):
        valid = program_or_bytes
        if target is not None:
            raise SimulatorInputError(
                f"target={target!r} given for a program already validated for "
                f"{valid.target.name}: pass the target to prepare()"
            )
        check_inputs(valid.program, inputs)
    else:
        program = program_or_bytes
        if isinstance(program, (bytes, bytearray, memoryview)):
            program = decode(bytes(program))
        check_inputs(program, inputs)
        valid = validate(program, target)
    if memory is None:
        memory = new_memory(valid)
    load_memory(valid, memory, inputs)
    if stats is None:
        stats = RunStats()
    stats.reset(len(valid.code))
    load_engine(name).execute(valid, memory, stats)
    outputs = memory.outputs(valid.program)
    stats.warn(valid.program, stacklevel=2)
    wall_time.record(name, time.perf_counter() - start)
    return outputs
