"""The run-time half of the BYOC backend: `mrvl.runtime.run_region`.

Each region's external module (made by `mrvl.byoc` from `csrc/region.c`) embeds the model
binary and calls this function with (pointer to the binary, its length, the region's tensors,
outputs last). Here the binary is decoded and validated once per distinct binary, and run on
the simulator, reusing that binary's simulated memory from call to call. The engine is the one
`MRVL_SIM_ENGINE` or `mrvl.sim.use_engine` names when the call starts (default: numba).

Errors keep their type across TVM's FFI (the VM raises `SimulatorError`, `BinaryFormatError`,
... with the simulator's message), because their classes are registered with tvm_ffi. A run
that saturated values or produced NaNs warns (`mrvl.sim.SaturationWarning`, naming the layers);
the class is registered too, so a filter that turns it into an error raises it from the VM.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import tvm_ffi

from mrvl import binary, sim
from mrvl.binary import BinaryFormatError
from mrvl.sim import SaturationWarning, SimulatorError, SimulatorInputError, ValidProgram
from mrvl.sim.memory import Memory
from mrvl.sim.stats import RunStats

__all__ = ["RegionRuntimeError", "recording", "run_region"]

_CACHE_SIZE = 8
_MEMORY_BUDGET = 1 << 30
"""Bytes of simulated memory kept between calls, over all cached regions (oldest dropped)."""


@dataclass
class _Region:
    """A decoded, validated binary and the simulated memory its runs reuse."""

    valid: ValidProgram
    memory: Memory | None
    busy: threading.Lock = field(default_factory=threading.Lock)


_regions: OrderedDict[bytes, _Region] = OrderedDict()
_regions_lock = threading.Lock()


class RegionRuntimeError(RuntimeError):
    """A region's tensors do not match its binary's I/O table."""


# Without this, TVM's FFI would turn each into a plain RuntimeError on the way to the caller.
for _error in (
    RegionRuntimeError,
    BinaryFormatError,
    SimulatorError,
    SimulatorInputError,
    SaturationWarning,
):
    tvm_ffi.register_error(_error)


def _region(blob_ptr: int, blob_len: int) -> _Region:
    """Decode and validate the binary at `blob_ptr`, reusing earlier work on the same binary.

    The key is the address, the length and the header, whose crc32 covers every byte after it:
    hashing or copying the whole binary on every call would cost more than a small region's
    run, and the address alone is not enough (a library can be unloaded and another loaded at
    the same address). The binary is copied and fully checked the first time it is seen.
    """
    address = ctypes.cast(blob_ptr, ctypes.c_void_p).value
    key = (address, blob_len, ctypes.string_at(blob_ptr, min(blob_len, binary.HEADER_SIZE)))
    with _regions_lock:
        region = _regions.get(key)
        if region is not None:
            _regions.move_to_end(key)
            return region
    valid = sim.prepare(binary.decode(ctypes.string_at(blob_ptr, blob_len)))
    region = _Region(valid, sim.new_memory(valid))
    with _regions_lock:
        _regions[key] = region
        if len(_regions) > _CACHE_SIZE:
            _regions.popitem(last=False)
        kept = 0
        for cached in reversed(_regions.values()):  # newest first
            if cached.memory is not None:
                kept += cached.memory.ddr.nbytes + cached.memory.ocm.nbytes
                if kept > _MEMORY_BUDGET and cached is not region:
                    cached.memory = None
    return region


class RunRecorder:
    """What each region run counted while `recording()` is active: (binary header, ValidProgram,
    RunStats) per call, in call order. The header (whose CRC covers the rest of the binary)
    tells which compiled region ran."""

    def __init__(self):
        self.runs: list[tuple[bytes, ValidProgram, RunStats]] = []


_recorders: list[RunRecorder] = []
_recorders_lock = threading.Lock()


@contextlib.contextmanager
def recording() -> Iterator[RunRecorder]:
    """Count saturated values and NaNs (`RunStats`) of every region run inside the block."""
    recorder = RunRecorder()
    with _recorders_lock:
        _recorders.append(recorder)
    try:
        yield recorder
    finally:
        with _recorders_lock:
            _recorders.remove(recorder)


@tvm_ffi.register_global_func("mrvl.runtime.run_region")
def run_region(blob_ptr, blob_len: int, *tensors) -> None:
    """Run one region on the simulator: `tensors` are its inputs then its outputs (DPS)."""
    if not blob_ptr or blob_len <= 0:
        raise RegionRuntimeError("mrvl region: the embedded model binary is empty")
    region = _region(blob_ptr, blob_len)
    program = region.valid.program
    n_in, n_out = len(program.inputs), len(program.outputs)
    if len(tensors) != n_in + n_out:
        raise RegionRuntimeError(
            f"mrvl region: called with {len(tensors)} tensors, its binary has "
            f"{n_in} inputs and {n_out} outputs"
        )
    arrays = [np.from_dlpack(t) for t in tensors]
    inputs, outputs = arrays[:n_in], arrays[n_in:]
    with _recorders_lock:
        recorders = list(_recorders)
    stats = RunStats() if recorders else None
    # The region's memory is reused unless another thread is running the same region.
    if region.busy.acquire(blocking=False):
        try:
            if region.memory is None:
                region.memory = sim.new_memory(region.valid)
            results = sim.run(region.valid, inputs, memory=region.memory, stats=stats)
        finally:
            region.busy.release()
    else:
        results = sim.run(region.valid, inputs, stats=stats)
    if stats is not None:
        header = ctypes.string_at(blob_ptr, min(blob_len, binary.HEADER_SIZE))
        for recorder in recorders:
            recorder.runs.append((header, region.valid, stats))
    for entry, out, result in zip(program.outputs, outputs, results):
        if out.shape != result.shape:
            raise RegionRuntimeError(
                f"mrvl region: output '{entry.name}' has shape {result.shape}, "
                f"TVM allocated {out.shape}"
            )
        if out.dtype.kind in "iu" and result.dtype.kind == "f":
            # argmax's indices: exact f32 values (docs/isa.md, `reduce`) into ONNX's int64
            np.copyto(out, result, casting="unsafe")
        else:
            np.copyto(out, result, casting="same_kind")
