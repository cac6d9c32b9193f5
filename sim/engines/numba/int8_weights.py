"""The packed weights of a program's qconvs (groups = 1), kept from run to run, as
`mrvl.sim.weight_cache` keeps the fp16 convs': packing reads every weight and cost as much as
the multiply-adds of light ResNet-50's int8 row pieces (a few hundred positions each).

Each such qconv gets a slot holding the int8 bytes it packed and their packing
(`int8_conv.pack_qweights`). A run compares the weights in OCM with the bytes (a vectorized
pass) and repacks only if they differ, so the cache is right whatever the weights are. Row
pieces of one ONNX node with the same weight address, first output channel and shape share a
slot, whatever their tile (the tiles load one layer's weights to the same place). The Numba
engine reads the slots as the last element of its `machine` tuple (`dispatch.execute`).
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from mrvl.sim.engines.numba.int8 import (
    OP_QCONV,
    QC_GROUPS,
    QC_IN_SHAPE,
    QC_KERNEL,
    QC_OC0,
    QC_OUT_SHAPE,
    QC_W_ADDR,
)
from mrvl.sim.engines.numba.int8_conv import qweights_size
from mrvl.sim.validate import ValidProgram


class QWeightCache:
    """A program's qconv weight slots: `arrays` = (slots per row, raw_at, packed_at, raw
    bytes, packed bytes (int8), filled flags), and a lock that one run at a time holds."""

    def __init__(self, valid: ValidProgram):
        self.lock = threading.Lock()
        slots = np.full(len(valid.words), -1, np.int64)
        raw_at, packed_at, keys = [0], [0], {}
        for index, row in enumerate(valid.words):
            if row[0] != OP_QCONV or row[QC_GROUPS] != 1:
                continue
            oc, kh, kw = int(row[QC_OUT_SHAPE + 3]), int(row[QC_KERNEL]), int(row[QC_KERNEL + 1])
            channels = int(row[QC_IN_SHAPE + 3])
            shape = (oc, kh, kw, channels)
            key = (valid.code[index].loc, int(row[QC_W_ADDR]), int(row[QC_OC0]), shape)
            if key not in keys:
                keys[key] = len(keys)
                raw_at.append(raw_at[-1] + oc * kh * kw * channels)
                packed_at.append(packed_at[-1] + int(qweights_size(*shape)))
            slots[index] = keys[key]
        self.arrays = (
            slots,
            np.array(raw_at, np.int64),
            np.array(packed_at, np.int64),
            np.zeros(raw_at[-1], np.uint8),
            np.zeros(packed_at[-1], np.int8),
            np.zeros(len(keys), np.uint8),
        )

    @staticmethod
    def none(valid: ValidProgram) -> tuple:
        """The arrays of an empty cache (every slot -1): for a run while another holds the
        lock; each qconv then packs its own weights."""
        return (
            np.full(len(valid.words), -1, np.int64),
            np.zeros(1, np.int64),
            np.zeros(1, np.int64),
            np.zeros(0, np.uint8),
            np.zeros(0, np.int8),
            np.zeros(0, np.uint8),
        )


_caches: dict[int, tuple] = {}
_caches_lock = threading.Lock()


def qweight_cache(valid: ValidProgram) -> QWeightCache:
    """The QWeightCache of `valid` (the rows the engine runs), made on its first run and
    dropped with it."""
    key = id(valid)
    with _caches_lock:
        entry = _caches.get(key)
        if entry is not None and entry[0]() is valid:
            return entry[1]
        cache = QWeightCache(valid)
        _caches[key] = (weakref.ref(valid, lambda _: _caches.pop(key, None)), cache)
        return cache
