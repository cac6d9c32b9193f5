"""The packed weights of a program's qconvs (groups = 1), kept from run to run, as
`mrvl.sim.weight_cache` keeps the fp16 convs': packing reads every weight and cost as much as
the multiply-adds of light ResNet-50's int8 row pieces (a few hundred positions each).

Each such qconv gets a slot holding the int8 bytes it packed and their packing
(`int8_conv.pack_qweights`). Weights that are a fixed slice of the constant pool
(`weight_cache.constant_weights`: the compiler's case) are packed once and used as they are,
and a warm run skips the DMAs that only bring them (`skip`, as the fp16 cache's: light
ResNet-50's int8 run moved 33 MB of weights and compared them with their packings' bytes, on
thread 0 alone, each run). For any other, a run compares the weights in OCM with the bytes (a
vectorized pass) and repacks only if they differ, so the cache is right whatever the weights
are. Row pieces of one ONNX node with the same weight address, first output channel, shape and
copy of the pool share a slot, whatever their tile (the tiles load one layer's weights to the
same place). The Numba engine reads the slots as the last element of its `machine` tuple
(`dispatch.execute`).
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
from mrvl.sim.operands import operands
from mrvl.sim.validate import ValidProgram
from mrvl.sim.weight_cache import (
    CONSTANT,
    PerProgram,
    SlotTable,
    constant_weights,
    weight_only_dmas,
)


class QWeightCache:
    """A program's qconv weight slots: `arrays` = (slots per row, raw_at, packed_at, raw
    bytes, packed bytes (int8), flags per slot: `weight_cache.PACKED`, CONSTANT), built as
    the fp16 cache's (`SlotTable`), a lock that one run at a time holds, and the DMAs a warm
    run may skip (`skip`)."""

    def __init__(self, valid: ValidProgram):
        self.lock = threading.Lock()
        table, constant = SlotTable(len(valid.words), np.uint8, np.int8), []
        accesses = [operands(ins) for ins in valid.code]
        sources = constant_weights(valid, accesses)
        for index, row in enumerate(valid.words):
            if row[0] != OP_QCONV or row[QC_GROUPS] != 1:
                continue
            oc, kh, kw = int(row[QC_OUT_SHAPE + 3]), int(row[QC_KERNEL]), int(row[QC_KERNEL + 1])
            channels = int(row[QC_IN_SHAPE + 3])
            shape = (oc, kh, kw, channels)
            key = (valid.code[index].loc, int(row[QC_W_ADDR]), int(row[QC_OC0]), shape)
            key += (sources[index],)
            if table.add(index, key, oc * kh * kw * channels, int(qweights_size(*shape))):
                constant.append(sources[index] is not None)
        constant = np.array(constant, np.bool_)
        self.arrays = table.arrays(constant.astype(np.uint8) * np.uint8(CONSTANT))
        self.weight_only = weight_only_dmas(valid, accesses, table.slots, constant)
        self.warm = False
        """Whether a whole run has used the cache, packing every slot."""

    def skip(self) -> np.ndarray:
        """Per row, 1 for a DMA a run may skip: one whose bytes only qconvs of constant slots
        read as weights (`weight_cache.weight_only_dmas`), once a run has packed every slot."""
        return self.weight_only if self.warm else np.zeros_like(self.weight_only)

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
