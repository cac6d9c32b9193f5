"""The run-time half of the BYOC backend: `mrvl.runtime.run_region`.

Each region's external module (made by `mrvl.byoc` from `csrc/region.c`) embeds the model
binary and calls this function with (pointer to the binary, its length, the region's tensors,
outputs last). Here the binary is decoded (once per distinct binary) and run on the simulator.

Errors keep their type across TVM's FFI (the VM raises `SimulatorError`, `BinaryFormatError`,
... with the simulator's message), because their classes are registered with tvm_ffi.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np
import tvm_ffi

from mrvl import binary, sim
from mrvl.binary import BinaryFormatError
from mrvl.sim import SimulatorError, SimulatorInputError

if TYPE_CHECKING:
    from mrvl.isa import Program

__all__ = ["run_region", "RegionRuntimeError"]

_CACHE_SIZE = 8
_programs: OrderedDict[bytes, Program] = OrderedDict()


class RegionRuntimeError(RuntimeError):
    """A region's tensors do not match its binary's I/O table."""


# Without this, TVM's FFI would turn each into a plain RuntimeError on the way to the caller.
for _error in (RegionRuntimeError, BinaryFormatError, SimulatorError, SimulatorInputError):
    tvm_ffi.register_error(_error)


def _program(blob: bytes) -> Program:
    """Decode `blob`, reusing earlier decodes of identical bytes.

    Keyed by a hash of the bytes, not the pointer: a library can be unloaded and another
    loaded at the same address.
    """
    key = hashlib.blake2b(blob, digest_size=32).digest()
    program = _programs.get(key)
    if program is None:
        program = binary.decode(blob)
        _programs[key] = program
        if len(_programs) > _CACHE_SIZE:
            _programs.popitem(last=False)
    else:
        _programs.move_to_end(key)
    return program


@tvm_ffi.register_global_func("mrvl.runtime.run_region")
def run_region(blob_ptr, blob_len: int, *tensors) -> None:
    """Run one region on the simulator: `tensors` are its inputs then its outputs (DPS)."""
    if not blob_ptr or blob_len <= 0:
        raise RegionRuntimeError("mrvl region: the embedded model binary is empty")
    program = _program(ctypes.string_at(blob_ptr, blob_len))
    n_in, n_out = len(program.inputs), len(program.outputs)
    if len(tensors) != n_in + n_out:
        raise RegionRuntimeError(
            f"mrvl region: called with {len(tensors)} tensors, its binary has "
            f"{n_in} inputs and {n_out} outputs"
        )
    arrays = [np.from_dlpack(t) for t in tensors]
    inputs, outputs = arrays[:n_in], arrays[n_in:]
    results = sim.run(program, inputs)
    for entry, out, result in zip(program.outputs, outputs, results):
        if out.shape != result.shape:
            raise RegionRuntimeError(
                f"mrvl region: output '{entry.name}' has shape {result.shape}, "
                f"TVM allocated {out.shape}"
            )
        np.copyto(out, result, casting="same_kind")
