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
from mrvl.sim.weight_cache import PerProgram, SlotTable


class QWeightCache:
    """A program's qconv weight slots: `arrays` = (slots per row, raw_at, packed_at, raw
    bytes, packed bytes (int8), filled flags), built as the fp16 cache's (`SlotTable`), and a
    lock that one run at a time holds."""

    def __init__(self, valid: ValidProgram):
        self.lock = threading.Lock()
        table = SlotTable(len(valid.words), np.uint8, np.int8)
        for index, row in enumerate(valid.words):
            if row[0] != OP_QCONV or row[QC_GROUPS] != 1:
                continue
            oc, kh, kw = int(row[QC_OUT_SHAPE + 3]), int(row[QC_KERNEL]), int(row[QC_KERNEL + 1])
            channels = int(row[QC_IN_SHAPE + 3])
            shape = (oc, kh, kw, channels)
            key = (valid.code[index].loc, int(row[QC_W_ADDR]), int(row[QC_OC0]), shape)
            table.add(index, key, oc * kh * kw * channels, int(qweights_size(*shape)))
        self.arrays = table.arrays(np.zeros(len(table.keys), np.uint8))

    @staticmethod
    def none(valid: ValidProgram) -> tuple:
        """The arrays of an empty cache (every slot -1): for a run while another holds the
        lock; each qconv then packs its own weights."""
        return SlotTable.empty(len(valid.words), np.uint8, np.int8)


_caches = PerProgram()


def qweight_cache(valid: ValidProgram) -> QWeightCache:
    """The QWeightCache of `valid` (the rows the engine runs), made on its first run and
    dropped with it."""
    return _caches.get(valid, "qconv", lambda: QWeightCache(valid))
