"""The Numba engine's data movers: `dma` (strided boxes, memcpy runs), `cvt` (dtype change and
transposition in DDR) and `lut` (loading a tile's activation table)."""

from __future__ import annotations

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from mrvl.isa import ACT_TABLE_ENTRIES
from mrvl.sim.engines.numba.fields import (
    CVT_DST_ADDR,
    CVT_DST_DTYPE,
    CVT_PERM,
    CVT_SRC_ADDR,
    CVT_SRC_DTYPE,
    CVT_SRC_SHAPE,
    DDR,
    DMA_BOX,
    DMA_DST_ADDR,
    DMA_DST_SPACE,
    DMA_DST_STRIDES,
    DMA_ELEM_BYTES,
    DMA_SRC_ADDR,
    DMA_SRC_SPACE,
    DMA_SRC_STRIDES,
    DTYPE_SIZE,
    F16,
    F32,
    LUT_SRC_ADDR,
)
from mrvl.sim.engines.numba.jit import jit
from mrvl.sim.engines.numba.numerics import (
    beyond_f16,
    f16_bits_from_f32,
    f32_from_bits,
    is_nan_f32,
    load_f16_into,
    store_f16,
)

# ------------------------------------------------------------------------------- the kernels


@jit
def longer_inner(box, src_strides, dst_strides, elem_bytes):
    """(box, src_strides, dst_strides) with dimensions 2 and 3 swapped when the elements of
    dimension 3 are not contiguous on both sides (so dma_move copies them one by one) and
    dimension 2 is the longer: a channel shuffle's box (rows, C/2 channels, 2 groups) then
    copies runs of C/2 strided elements instead of pairs (46 -> 4 us for 98 x 58 x 2). Only
    where no two elements of a (dimension 2, dimension 3) plane share a destination, so the
    copy's result does not depend on their order; else the arguments as they are."""
    t2, t3 = dst_strides[2], dst_strides[3]
    contiguous = src_strides[3] == elem_bytes and dst_strides[3] == elem_bytes
    apart = t2 > 0 and t3 > 0 and (t2 >= t3 * box[3] or t3 >= t2 * box[2])
    if contiguous or box[2] <= box[3] or not apart:
        return box, src_strides, dst_strides
    return (
        (box[0], box[1], box[3], box[2]),
        (src_strides[0], src_strides[1], src_strides[3], src_strides[2]),
        (dst_strides[0], dst_strides[1], dst_strides[3], dst_strides[2]),
    )


@jit
def dma_move(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes):
    """Copy the strided box at src[src_addr:] to the box at dst[dst_addr:] (two distinct
    buffers, or disjoint boxes of one), in runs as long as both innermost strides allow, in
    units of `src.itemsize` bytes (addresses and strides are multiples of it, so they are
    divided once: an array's itemsize is a runtime field, and two 64-bit divisions an element
    took 9 ns). Indices, not slices: a slice per run (often one element) cost two atomic
    reference counts. The box and strides are tuples of four int64 (`dma`)."""
    unit = src.itemsize
    box, src_strides, dst_strides = longer_inner(box, src_strides, dst_strides, elem_bytes)
    if src_strides[3] == elem_bytes and dst_strides[3] == elem_bytes:
        run, inner = box[3] * elem_bytes // unit, 1
    else:
        run, inner = elem_bytes // unit, box[3]
    s0, s1, s2 = src_strides[0] // unit, src_strides[1] // unit, src_strides[2] // unit
    t0, t1, t2 = dst_strides[0] // unit, dst_strides[1] // unit, dst_strides[2] // unit
    s3, t3 = src_strides[3] // unit, dst_strides[3] // unit
    src_at, dst_at = src_addr // unit, dst_addr // unit
    for i0 in range(box[0]):
        for i1 in range(box[1]):
            for i2 in range(box[2]):
                p = src_at + i0 * s0 + i1 * s1 + i2 * s2
                q = dst_at + i0 * t0 + i1 * t1 + i2 * t2
                if run == 1:  # one unit an element: no inner loop (its checks cost more)
                    a, b = np.uint64(p), np.uint64(q)
                    for i3 in range(np.uint64(inner)):
                        dst[b + i3 * np.uint64(t3)] = src[a + i3 * np.uint64(s3)]
                    continue
                for i3 in range(inner):
                    a = np.uint64(p + i3 * s3)
                    b = np.uint64(q + i3 * t3)
                    for e in range(np.uint64(run)):  # unsigned: no wraparound, vectorized
                        dst[b + e] = src[a + e]


@jit
def as_units(buf, unit):
    """The longest prefix of the byte array `buf` that holds whole units, viewed as them."""
    return buf[: buf.size - buf.size % unit]


@intrinsic
def copy_bytes(typingctx, dst, dst_at, src, src_at, nbytes):
    """dst[dst_at : dst_at + nbytes] = src[src_at : src_at + nbytes] for two distinct uint8
    arrays or disjoint ranges of one, by LLVM's memcpy (the C library's, for long runs)."""
    sig = types.void(dst, dst_at, src, src_at, nbytes)

    def codegen(context, builder, signature, args):
        dst_value, dst_at_value, src_value, src_at_value, nbytes_value = args
        dst_ptr = context.make_array(signature.args[0])(context, builder, dst_value).data
        src_ptr = context.make_array(signature.args[2])(context, builder, src_value).data
        cgutils.raw_memcpy(
            builder,
            builder.gep(dst_ptr, [dst_at_value]),
            builder.gep(src_ptr, [src_at_value]),
            nbytes_value,
            1,
        )
        return context.get_dummy_value()

    return sig, codegen


MEMCPY_RUN = 16
"""Runs of at least this many bytes are copied by memcpy (dma_runs)."""


@jit
def dma_runs(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes):
    """The copy of dma_move when the innermost dimension is dense in both boxes: one memcpy
    per run, a run spanning the two innermost dimensions when both boxes are dense there."""
    run = box[3] * elem_bytes
    rows = box[2]
    if src_strides[2] == run and dst_strides[2] == run:
        run *= rows
        rows = 1
    for i0 in range(box[0]):
        for i1 in range(box[1]):
            p = src_addr + i0 * src_strides[0] + i1 * src_strides[1]
            q = dst_addr + i0 * dst_strides[0] + i1 * dst_strides[1]
            for i2 in range(rows):
                copy_bytes(dst, q + i2 * dst_strides[2], src, p + i2 * src_strides[2], run)


@jit
def dma_copy(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes):
    """dma_runs when the innermost dimension is dense in both boxes with runs of at least
    MEMCPY_RUN bytes, else dma_move in the widest unit (8, 4, 2 or 1 bytes) that divides every
    address, stride and element size."""
    if (
        src_strides[3] == elem_bytes
        and dst_strides[3] == elem_bytes
        and box[3] * elem_bytes >= MEMCPY_RUN
    ):
        dma_runs(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes)
        return
    bits = src_addr | dst_addr | elem_bytes
    bits |= src_strides[0] | src_strides[1] | src_strides[2] | src_strides[3]
    bits |= dst_strides[0] | dst_strides[1] | dst_strides[2] | dst_strides[3]
    if bits % 8 == 0:
        s = as_units(src, 8).view(np.uint64)
        t = as_units(dst, 8).view(np.uint64)
        dma_move(s, src_addr, src_strides, t, dst_addr, dst_strides, box, elem_bytes)
    elif bits % 4 == 0:
        s4 = as_units(src, 4).view(np.uint32)
        t4 = as_units(dst, 4).view(np.uint32)
        dma_move(s4, src_addr, src_strides, t4, dst_addr, dst_strides, box, elem_bytes)
    elif bits % 2 == 0:
        s2 = as_units(src, 2).view(np.uint16)
        t2 = as_units(dst, 2).view(np.uint16)
        dma_move(s2, src_addr, src_strides, t2, dst_addr, dst_strides, box, elem_bytes)
    else:
        dma_move(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes)


@jit
def fold_dim(box, d, src_strides, dst_strides):
    """(whether, box): `box` with dimension d folded into the innermost one (d set to 1) if d
    continues the innermost stride on both sides, else `box` as it is."""
    if src_strides[d] != src_strides[3] * box[3] or dst_strides[d] != dst_strides[3] * box[3]:
        return False, box
    if d == 2:
        return True, (box[0], box[1], np.int64(1), box[3] * box[2])
    if d == 1:
        return True, (box[0], np.int64(1), box[2], box[3] * box[1])
    return True, (np.int64(1), box[1], box[2], box[3] * box[0])


@jit
def merge_dims(box, src_strides, dst_strides):
    """The DMA box with the outer dimensions that continue the innermost one's stride on both
    sides folded into it (box 1 where folded): the same elements copied in the same order,
    in fewer, longer runs. A box of whole pixels of 3 channels (an image, a ViT's patches)
    otherwise moves 6 bytes a run; dense in all its dimensions, it is one memcpy. Tuples of
    four int64, not arrays: three small arrays a DMA (their allocations and reference counts)
    cost a short DMA much of its time."""
    for d in (2, 1, 0):
        if box[d] == 1:
            continue
        folded, box = fold_dim(box, d, src_strides, dst_strides)
        if not folded:
            return box
    return box


@jit
def four(row, at):
    """row[at : at + 4] as a tuple of four int64."""
    return (np.int64(row[at]), np.int64(row[at + 1]), np.int64(row[at + 2]), np.int64(row[at + 3]))


@jit
def box_bounds(addr, strides, box, elem_bytes):
    """[lo, hi): the bytes a strided box at `addr` spans (tuples of four int64)."""
    lo, hi = addr, addr + elem_bytes
    for d in range(4):
        reach = (box[d] - 1) * strides[d]
        if reach < 0:
            lo += reach
        else:
            hi += reach
    return lo, hi


@jit
def boxes_apart(src_addr, src_strides, dst_addr, dst_strides, box, elem_bytes):
    """Whether a DMA's source and destination boxes in one memory span disjoint bytes: then
    no destination byte is one the copy still reads, and nothing need be staged."""
    src_lo, src_hi = box_bounds(src_addr, src_strides, box, elem_bytes)
    dst_lo, dst_hi = box_bounds(dst_addr, dst_strides, box, elem_bytes)
    return src_hi <= dst_lo or dst_hi <= src_lo


@jit
def dma(row, ddr, ocm):
    box = four(row, DMA_BOX)
    elem_bytes = np.int64(row[DMA_ELEM_BYTES])
    if box[0] == 0 or box[1] == 0 or box[2] == 0 or box[3] == 0:
        return
    src = ddr if row[DMA_SRC_SPACE] == DDR else ocm
    dst = ddr if row[DMA_DST_SPACE] == DDR else ocm
    src_strides, dst_strides = four(row, DMA_SRC_STRIDES), four(row, DMA_DST_STRIDES)
    box = merge_dims(box, src_strides, dst_strides)
    src_addr, dst_addr = np.int64(row[DMA_SRC_ADDR]), np.int64(row[DMA_DST_ADDR])
    # DDR and OCM do not overlap, nor do two disjoint boxes of one: copy directly
    if row[DMA_SRC_SPACE] != row[DMA_DST_SPACE] or boxes_apart(
        src_addr, src_strides, dst_addr, dst_strides, box, elem_bytes
    ):
        dma_copy(src, src_addr, src_strides, dst, dst_addr, dst_strides, box, elem_bytes)
        return
    # memmove semantics: the whole source is read before any destination byte is written.
    staged = np.empty(box[0] * box[1] * box[2] * box[3] * elem_bytes, np.uint8)
    d2 = elem_bytes * box[3]
    dense = (d2 * box[2] * box[1], d2 * box[2], d2, elem_bytes)
    dma_copy(src, src_addr, src_strides, staged, np.int64(0), dense, box, elem_bytes)
    box = merge_dims(box, dense, dst_strides)  # the staged side is dense: fold what dst allows
    dma_copy(staged, np.int64(0), dense, dst, dst_addr, dst_strides, box, elem_bytes)


@jit
def dense_strides(shape):
    """The element strides of a dense array of 4-d `shape`."""
    strides = np.empty(4, np.int64)
    strides[3] = 1
    for d in range(2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return strides


@jit
def gather_permuted(source, shape, perm, out):
    """out[k] = the k-th element of the dense array `source` of `shape` in the order of its
    dimensions permuted by `perm` (cvt's transposition)."""
    strides = dense_strides(shape)
    s0, s1, s2, s3 = strides[perm[0]], strides[perm[1]], strides[perm[2]], strides[perm[3]]
    k = 0
    inner, stride = np.uint64(shape[perm[3]]), np.uint64(s3)
    for j0 in range(shape[perm[0]]):
        for j1 in range(shape[perm[1]]):
            for j2 in range(shape[perm[2]]):
                base, at = np.uint64(j0 * s0 + j1 * s1 + j2 * s2), np.uint64(k)
                for j3 in range(inner):  # unsigned indices: no wraparound test an element
                    out[at + j3] = source[base + j3 * stride]
                k += shape[perm[3]]


@jit
def permuted_strides(shape, perm):
    """Per dimension d of a dense array of 4-d `shape`, the element stride of d in the dense
    array it becomes when transposed by `perm` (gather_permuted's order)."""
    out_shape = np.empty(4, np.int64)
    for i in range(4):
        out_shape[i] = shape[perm[i]]
    out_strides = dense_strides(out_shape)
    to = np.empty(4, np.int64)
    for i in range(4):
        to[perm[i]] = out_strides[i]
    return to


@jit
def scatter_permuted(source, shape, perm, out):
    """gather_permuted's result, made in the order of `source` (each element read once, in
    order, and written where the permuted order puts it): an image's NCHW -> NHWC has runs
    of W this way, against runs of C (3) gathering."""
    to = permuted_strides(shape, perm)  # to[d]: the stride in out of source dimension d
    k = 0
    inner, stride = np.uint64(shape[3]), np.uint64(to[3])
    for i0 in range(shape[0]):
        for i1 in range(shape[1]):
            for i2 in range(shape[2]):
                base, at = np.uint64(i0 * to[0] + i1 * to[1] + i2 * to[2]), np.uint64(k)
                for i3 in range(inner):  # unsigned indices: no wraparound test an element
                    out[base + i3 * stride] = source[at + i3]
                k += shape[3]


@jit
def permute(source, shape, perm, out):
    """out = the dense array `source` of `shape` transposed by `perm` (gather_permuted), by
    the loop whose innermost run is the longer: gathering (runs of the destination's last
    dimension) or scattering (runs of the source's)."""
    if shape[perm[3]] >= shape[3]:
        gather_permuted(source, shape, perm, out)
    else:
        scatter_permuted(source, shape, perm, out)


@jit
def widen_permuted(ddr, src_addr, shape, perm, out, lut):
    """out = the fp32 of the dense f16 array of `shape` at ddr[src_addr:], transposed by `perm`
    (gather_permuted's order), for an `out` apart from the source: each slab of the source's
    two inner dimensions is widened at once into a scratch array, then written along out's
    shorter stride. An output's NHWC -> NCHW (256 x 21 a slab) then reads the source once and
    writes each channel's row in order, where a staged copy, a permutation and a widening
    passed over the whole tensor three times."""
    to = permuted_strides(shape, perm)  # to[d]: the stride in out of source dimension d
    rows, columns = shape[2], shape[3]
    scratch = np.empty(rows * columns, np.float32)
    for i0 in range(shape[0]):
        for i1 in range(shape[1]):
            at = src_addr + 2 * (i0 * shape[1] + i1) * rows * columns
            load_f16_into(ddr, at, scratch, lut)
            base = i0 * to[0] + i1 * to[1]
            if to[2] == 1:  # out runs along source dimension 2 (NHWC -> NCHW): dense stores
                for i3 in range(columns):  # unsigned indices: no wraparound test an element
                    start, c = np.uint64(base + i3 * to[3]), np.uint64(i3)
                    for i2 in range(np.uint64(rows)):
                        out[start + i2] = scratch[i2 * np.uint64(columns) + c]
            elif to[2] <= to[3]:
                for i3 in range(columns):
                    start = base + i3 * to[3]
                    for i2 in range(rows):
                        out[start + i2 * to[2]] = scratch[i2 * columns + i3]
            else:
                for i2 in range(rows):
                    start = base + i2 * to[2]
                    for i3 in range(columns):
                        out[start + i3 * to[3]] = scratch[i2 * columns + i3]


@jit
def cvt(row, ddr, lut_bits, tally):
    """`cvt`: the source is read whole (converted, or permuted, into a staging array) before
    any destination byte is written, so the two may overlap. F32 -> F16 converts first, then
    moves halves; F16 -> F32 widens straight into a destination apart from the source
    (widen_permuted), else moves halves, then widens them; the saturation and NaN counts
    are sums, the same in any order."""
    src_dtype, dst_dtype = row[CVT_SRC_DTYPE], row[CVT_DST_DTYPE]
    shape = row[CVT_SRC_SHAPE : CVT_SRC_SHAPE + 4].astype(np.int64)
    perm = row[CVT_PERM : CVT_PERM + 4]
    src_size, dst_size = DTYPE_SIZE[src_dtype], DTYPE_SIZE[dst_dtype]
    count = shape[0] * shape[1] * shape[2] * shape[3]
    src_addr = np.int64(row[CVT_SRC_ADDR])
    dst_addr = np.int64(row[CVT_DST_ADDR])
    identity = perm[0] == 0 and perm[1] == 1 and perm[2] == 2 and perm[3] == 3
    if src_dtype == F32 and dst_dtype == F16 and src_addr % 4 == 0 and dst_addr % 2 == 0:
        staged = np.empty(2 * count, np.uint8)  # a model's input: rounded, then moved
        store_f16(staged, 0, ddr[src_addr : src_addr + 4 * count].view(np.float32), tally)
        halves = ddr[dst_addr : dst_addr + 2 * count].view(np.uint16)
        if identity:
            halves[:] = staged.view(np.uint16)
        else:
            permute(staged.view(np.uint16), shape, perm, halves)
        return
    if src_dtype == F16 and dst_dtype == F32 and src_addr % 2 == 0 and dst_addr % 4 == 0:
        if src_addr + 2 * count <= dst_addr or dst_addr + 4 * count <= src_addr:
            out = ddr[dst_addr : dst_addr + 4 * count].view(np.float32)  # an output, apart
            if identity:
                load_f16_into(ddr, src_addr, out, lut_bits.view(np.float32))
            else:
                widen_permuted(ddr, src_addr, shape, perm, out, lut_bits.view(np.float32))
            return
        halves = ddr[src_addr : src_addr + 2 * count].view(np.uint16).copy()  # overlapping
        if not identity:
            moved = np.empty(count, np.uint16)
            permute(halves, shape, perm, moved)
            halves = moved
        load_f16_into(
            halves.view(np.uint8),
            0,
            ddr[dst_addr : dst_addr + 4 * count].view(np.float32),
            lut_bits.view(np.float32),
        )
        return
    if src_dtype == dst_dtype and src_size == 2 and src_addr % 2 == 0:  # a transposition
        halves = np.empty(count, np.uint16)  # read whole before any byte is written
        permute(ddr[src_addr : src_addr + 2 * count].view(np.uint16), shape, perm, halves)
        ddr[dst_addr : dst_addr + 2 * count] = halves.view(np.uint8)
        return
    strides = dense_strides(shape)
    staged = np.empty(count * dst_size, np.uint8)
    k = 0
    for j0 in range(shape[perm[0]]):
        for j1 in range(shape[perm[1]]):
            for j2 in range(shape[perm[2]]):
                for j3 in range(shape[perm[3]]):
                    element = (
                        j0 * strides[perm[0]]
                        + j1 * strides[perm[1]]
                        + j2 * strides[perm[2]]
                        + j3 * strides[perm[3]]
                    )
                    p = src_addr + element * src_size
                    if src_dtype == dst_dtype:
                        for e in range(src_size):
                            staged[k + e] = ddr[p + e]
                    elif src_dtype == F32:  # -> F16
                        u = (
                            np.uint32(ddr[p])
                            | (np.uint32(ddr[p + 1]) << 8)
                            | (np.uint32(ddr[p + 2]) << 16)
                            | (np.uint32(ddr[p + 3]) << 24)
                        )
                        tally[0] += beyond_f16(u)
                        tally[1] += is_nan_f32(u)
                        h = f16_bits_from_f32(f32_from_bits(np.uint32(u)))
                        staged[k] = np.uint8(h & 0xFF)
                        staged[k + 1] = np.uint8(h >> 8)
                    else:  # F16 -> F32, exact
                        u = lut_bits[np.int64(ddr[p]) | (np.int64(ddr[p + 1]) << 8)]
                        for e in range(4):
                            staged[k + e] = np.uint8((u >> (8 * e)) & 0xFF)
                    k += dst_size
    for i in range(staged.size):
        ddr[dst_addr + i] = staged[i]


@jit
def load_table(row, ddr, table):
    """`lut`: the 65,536 f16 entries at src_addr into the tile's activation-table memory."""
    src = row[LUT_SRC_ADDR]
    if src % 2 == 0:  # aligned: one copy of whole halves (a byte loop took 0.1 ms a table)
        table[:] = ddr[src : src + 2 * ACT_TABLE_ENTRIES].view(np.uint16)
        return
    for i in range(ACT_TABLE_ENTRIES):
        table[i] = np.uint16(ddr[src + 2 * i]) | (np.uint16(ddr[src + 2 * i + 1]) << 8)
