"""Multicast expansion for engines: a program whose multicast `dma`s (`dst_tiles`, docs/isa.md)
each become one single-tile `dma` per destination tile, so that an engine's kernels, and any
analysis that reasons per tile (the weight cache), need no notion of a multicast."""

from __future__ import annotations

import dataclasses

import numpy as np

from mrvl import isa
from mrvl.sim.validate import ValidProgram, encode_words


def single_tile(valid: ValidProgram) -> tuple[ValidProgram, np.ndarray] | None:
    """None when no `dma` of `valid` multicasts; else the program the compiled call runs
    instead, with each multicast `dma` (`dst_tiles`, docs/isa.md) as one single-tile dma per
    destination tile, in ascending tile order, and per row the index of the instruction of
    `valid` it comes from. The copies read the same DDR bytes, which none of them writes, so
    together they store what the multicast stores; each is a dma that validation accepts on
    its tile, so the kernels and the weight cache (`constant_weights`, `weight_only_dmas`,
    which reason per tile) need no notion of a multicast."""
    if not any(ins.opcode == "dma" and ins.fields["dst_tiles"] for ins in valid.code):
        return None
    code, origin = [], []
    for index, ins in enumerate(valid.code):
        if ins.opcode == "dma" and ins.fields["dst_tiles"]:
            single = {**ins.fields, "dst_tiles": 0}
            copies = [
                dataclasses.replace(ins, tile=t, fields=single) for t in isa.destination_tiles(ins)
            ]
        else:
            copies = [ins]
        code += copies
        origin += [index] * len(copies)
    words = encode_words(code)
    rows = ValidProgram(valid.program, valid.target, tuple(code), words, words.view(np.float32))
    return rows, np.array(origin, np.int64)
