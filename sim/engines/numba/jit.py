"""How the Numba engine compiles: one `jit` for every kernel, cached on disk.

Numba checks only the source file of the function it loads, but a cached function holds the
compiled code of everything it calls, in this package's other modules too. So the cache lives in
a directory named after the bytes of every module the kernels bake in (the ISA table, the row
layout and this package), and any edit to them compiles afresh.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path

from llvmlite import binding as _llvm
from numba.core import config as _numba_config

STAMPED_MODULES = (
    "mrvl.isa",
    "mrvl.isa_int8",
    "mrvl.isa_int8_resize",
    "mrvl.isa_int8_bmm",
    "mrvl.sim.validate",
    "mrvl.sim.weight_cache",
)
"""Modules outside this package whose constants the kernels bake in."""


def cache_dir() -> Path:
    """Where compiled kernels live: $NUMBA_CACHE_DIR, else the user's cache directory
    (~/.cache/mrvl/numba), in a subdirectory per version of the ISA table, the row layout and
    the engine's own modules (see the module docstring)."""
    base = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "mrvl",
        "numba",
    )
    stamp = hashlib.blake2b(digest_size=6)
    for module in STAMPED_MODULES:
        stamp.update(Path(importlib.import_module(module).__file__).read_bytes())
    for source in sorted(Path(__file__).parent.glob("*.py")):
        stamp.update(source.name.encode())
        stamp.update(source.read_bytes())
    return Path(base) / f"isa-{stamp.hexdigest()}"


def cpu_features() -> str:
    """The CPU features Numba compiles for, as LLVM spells them ("+avx2,-avx512vnni,..."), by
    Numba's rule: $NUMBA_CPU_FEATURES if set, else the host's as llvmlite reads them (none if
    LLVM cannot tell), every AVX feature off if $NUMBA_ENABLE_AVX is 0. The kernels that
    emit vector code choose their form by it (`int8_mac.QMAC_PATH`, `mac_tiles.WIDE_REGISTERS`,
    `numerics.has_f16c`)."""
    if _numba_config.CPU_FEATURES is not None:
        return _numba_config.CPU_FEATURES
    try:
        features = _llvm.get_host_cpu_features()
    except RuntimeError:
        return ""
    if not _numba_config.ENABLE_AVX:
        for name in features:
            if name.startswith("avx"):
                features[name] = False
    return features.flatten()


# Numba reads CACHE_DIR when a function is decorated, so it is set before the first @njit.
_numba_config.CACHE_DIR = str(cache_dir())

import numba  # noqa: E402

assert sys.byteorder == "little", "the engine reads little-endian memory through native views"

jit = numba.njit(cache=True, fastmath=False, boundscheck=False, nogil=True)

jit_inline = numba.njit(cache=True, fastmath=False, boundscheck=False, nogil=True, inline="always")
"""`jit` for a small helper inlined into each caller in Numba's IR (the shared kernels' tail,
`sharing.all_stored`), so that a kernel's one-thread path calls nothing more than it did
before the helper. It does not save reference counts: the inlined body increfs the arrays it
is given as a call would (inlining `mac_tiles.segment_rows`, two arrays every 6 output
positions, left a MobileNetV3-Small run's NRT_incref/NRT_decref count the same, 24,240)."""
