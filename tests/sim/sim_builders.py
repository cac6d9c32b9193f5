"""Hand-built Programs and float64 references for the simulator and binary tests.

A layer test stages its tensors as constants in DDR, copies them to tile OCM with one DMA
(DDR and OCM use the same offsets), runs the compute instructions and copies the output tile
back to DDR, where an f16 output entry exposes it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import assert_same_bytes  # noqa: F401 - re-exported for the sim tests
from hypothesis import HealthCheck, settings

from mrvl.act_tables import activation_table
from mrvl.isa import (
    DTYPE_BYTES,
    NO_LOC,
    TABLE_ACTIVATIONS,
    Activation,
    DType,
    Instruction,
    IOEntry,
    MemSpace,
    Program,
)

ALIGN = 64

ENGINE_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
"""Hypothesis settings of the engines' bit-identity properties (derandomized: CI-stable)."""

# Values that exercise every rounding path: specials, subnormals, ties, saturation.
SPECIAL_F16 = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 65504, -65504, 6e-8, -6e-8, 6.1e-5, 1.0, -1.0, 2049],
    np.float16,
)


def f16_data(seed: int, shape, special: bool) -> np.ndarray:
    """Seeded f16 data at one of three scales, a tenth of it special values if `special`."""
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal(shape) * rng.choice([0.01, 1.0, 100.0])).astype(np.float16)
    if special and values.size:
        picks = rng.random(shape) < 0.1
        values[picks] = rng.choice(SPECIAL_F16, size=int(picks.sum()))
    return values


def instruction(
    opcode: str,
    tile: int = 0,
    *,
    signal: int = 0,
    waits: tuple[int, ...] = (),
    loc: int = NO_LOC,
    **fields,
) -> Instruction:
    return Instruction(opcode, tile, signal, tuple(waits), loc, fields)


def dma(
    src_space, src_addr, src_strides, dst_space, dst_addr, dst_strides, box, elem_bytes, **header
) -> Instruction:
    return instruction(
        "dma",
        src_space=int(src_space),
        src_addr=src_addr,
        src_strides=tuple(src_strides),
        dst_space=int(dst_space),
        dst_addr=dst_addr,
        dst_strides=tuple(dst_strides),
        box=tuple(box),
        elem_bytes=elem_bytes,
        **header,
    )


def cvt(src_addr, src_dtype, src_shape, dst_addr, dst_dtype, perm, **header) -> Instruction:
    """A `cvt` of a dense DDR tensor of `src_shape` to `dst_dtype`, dimensions permuted."""
    return instruction(
        "cvt",
        src_addr=src_addr,
        src_dtype=int(src_dtype),
        src_shape=tuple(src_shape),
        dst_addr=dst_addr,
        dst_dtype=int(dst_dtype),
        perm=tuple(perm),
        **header,
    )


def copy_bytes(src_space, src_addr, dst_space, dst_addr, nbytes, **header) -> Instruction:
    """A DMA of nbytes contiguous bytes."""
    return dma(
        src_space,
        src_addr,
        (0, 0, 0, 1),
        dst_space,
        dst_addr,
        (0, 0, 0, 1),
        (1, 1, 1, nbytes),
        1,
        **header,
    )


def window_fields(in_addr, in_shape, row0, out_addr, out_shape, orow0, kernel, stride, pad):
    """The window geometry fields that `conv`, `pool` and their int8 forms share."""
    return {
        "in_addr": in_addr,
        "in_shape": tuple(in_shape),
        "row0": row0,
        "out_addr": out_addr,
        "out_shape": tuple(out_shape),
        "orow0": orow0,
        "kernel": tuple(kernel),
        "stride": tuple(stride),
        "pad": tuple(pad),
    }


def conv(
    in_addr,
    in_shape,
    out_addr,
    out_shape,
    w_addr,
    *,
    kernel,
    b_addr=-1,
    row0=0,
    orow0=0,
    stride=(1, 1),
    pad=(0, 0),
    dilation=(1, 1),
    groups=1,
    oc0=0,
    oc_total=None,
    act=Activation.NONE,
    act_a=0.0,
    act_b=0.0,
    act_addr=-1,
    acc_addr=-1,
    acc_out=0,
    **header,
) -> Instruction:
    return instruction(
        "conv",
        **window_fields(in_addr, in_shape, row0, out_addr, out_shape, orow0, kernel, stride, pad),
        dilation=tuple(dilation),
        groups=groups,
        oc0=oc0,
        oc_total=out_shape[3] if oc_total is None else oc_total,
        w_addr=w_addr,
        b_addr=b_addr,
        act=int(act),
        act_a=act_a,
        act_b=act_b,
        act_addr=act_addr,
        acc_addr=acc_addr,
        acc_out=acc_out,
        **header,
    )


def pool(
    in_addr,
    in_shape,
    out_addr,
    out_shape,
    *,
    kernel,
    mode,
    in_hw,
    row0=0,
    orow0=0,
    stride=(1, 1),
    pad=(0, 0),
    pad_end=(0, 0),
    count_include_pad=0,
    opcode="pool",
    **header,
) -> Instruction:
    """A `pool`; with `opcode="qpool"` (and its in_zp, out_zp and rq among `header`), the int8
    pool of the same geometry."""
    return instruction(
        opcode,
        **window_fields(in_addr, in_shape, row0, out_addr, out_shape, orow0, kernel, stride, pad),
        mode=int(mode),
        in_hw=tuple(in_hw),
        pad_end=tuple(pad_end),
        count_include_pad=count_include_pad,
        **header,
    )


def fc(
    in_addr,
    n,
    k,
    o,
    w_addr,
    out_addr,
    *,
    b_addr=-1,
    act=Activation.NONE,
    act_a=0.0,
    act_b=0.0,
    act_addr=-1,
    **header,
) -> Instruction:
    return instruction(
        "fc",
        in_addr=in_addr,
        n=n,
        k=k,
        o=o,
        w_addr=w_addr,
        b_addr=b_addr,
        out_addr=out_addr,
        act=int(act),
        act_a=act_a,
        act_b=act_b,
        act_addr=act_addr,
        **header,
    )


def qconv(in_addr, in_shape, out_addr, out_shape, w_addr, **fields) -> Instruction:
    """An int8 `qconv`: a whole window (rows from 0), a 1x1 kernel with stride 1 and no pad
    unless `fields` say otherwise, all output channels, no bias, pairs or table, zero points 0
    and the full int8 clamp."""
    base = dict(
        in_addr=in_addr,
        in_shape=tuple(in_shape),
        row0=0,
        out_addr=out_addr,
        out_shape=tuple(out_shape),
        orow0=0,
        kernel=(1, 1),
        stride=(1, 1),
        pad=(0, 0),
        dilation=(1, 1),
        groups=1,
        oc0=0,
        oc_total=out_shape[3],
        w_addr=w_addr,
        b_addr=-1,
        in_zp=0,
        out_zp=0,
        rq_addr=-1,
        clamp=(-128, 127),
        lut_addr=-1,
        acc_addr=-1,
        acc_out=0,
    )
    return instruction("qconv", **{**base, **fields})


def add(
    a_addr,
    b_addr,
    out_addr,
    count,
    *,
    channels=0,
    act=Activation.NONE,
    act_a=0.0,
    act_b=0.0,
    act_addr=-1,
    **header,
) -> Instruction:
    """An f16 `add` of two dense vectors, no activation (nor PRELU channels) unless given."""
    return instruction(
        "add",
        a_addr=a_addr,
        b_addr=b_addr,
        out_addr=out_addr,
        count=count,
        channels=channels,
        act=int(act),
        act_a=act_a,
        act_b=act_b,
        act_addr=act_addr,
        **header,
    )


def qfc(in_addr, n, k, o, w_addr, out_addr, **fields) -> Instruction:
    """An int8 `qfc` of rows [n, k] by weights [o, k]: no bias, pairs or table, zero points 0
    and the full int8 clamp unless `fields` say otherwise."""
    base = dict(
        in_addr=in_addr,
        n=n,
        k=k,
        o=o,
        w_addr=w_addr,
        b_addr=-1,
        out_addr=out_addr,
        in_zp=0,
        out_zp=0,
        rq_addr=-1,
        clamp=(-128, 127),
        lut_addr=-1,
    )
    return instruction("qfc", **{**base, **fields})


def lut(src_addr, act, act_a=0.0, act_b=0.0, **header) -> Instruction:
    return instruction("lut", src_addr=src_addr, act=int(act), act_a=act_a, act_b=act_b, **header)


def end(**header) -> Instruction:
    return instruction("end", **header)


def cvt_program(
    shape, perm, src: DType, dst: DType, *, src_addr: int, dst_addr: int, ddr_size: int
) -> Program:
    """One `cvt` of input 'x' ([`shape`] of `src` at DDR `src_addr`) to output 'y' (`dst`,
    dimensions permuted by `perm`, at `dst_addr`, which may overlap the input), in a DDR of
    `ddr_size` bytes."""
    return Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=ddr_size,
        io=[
            IOEntry("x", True, tuple(shape), src, src_addr),
            IOEntry("y", False, tuple(shape[p] for p in perm), dst, dst_addr),
        ],
        code=[cvt(src_addr, src, shape, dst_addr, dst, perm), end()],
        const_base=0,
        consts=b"",
        srcmap=[],
    )


def conversion_program(opcode: str, shape, perm, src: DType, dst: DType, scale, zp) -> Program:
    """One `quant` or `dequant` from input 'x' at DDR 0 to output 'y'."""
    count = int(np.prod(shape))
    dst_addr = -(-count * 4 // 64) * 64
    dtype_field = {"src_dtype": int(src)} if opcode == "quant" else {"dst_dtype": int(dst)}
    return Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=dst_addr + count * 4,
        io=[
            IOEntry("x", True, tuple(shape), src, 0),
            IOEntry("y", False, tuple(shape[p] for p in perm), dst, dst_addr),
        ],
        code=[
            instruction(
                opcode,
                src_addr=0,
                src_shape=tuple(shape),
                dst_addr=dst_addr,
                perm=tuple(perm),
                scale=scale,
                zp=zp,
                **dtype_field,
            ),
            end(),
        ],
        const_base=0,
        consts=b"",
        srcmap=[],
    )


class Staging:
    """Tensors laid out at 64-byte-aligned offsets; the same offsets serve in DDR and OCM."""

    def __init__(self):
        self.blob = bytearray()

    def add(self, array: np.ndarray) -> int:
        addr = len(self.blob)
        raw = np.ascontiguousarray(array).tobytes()
        self.blob += raw + bytes(-len(raw) % ALIGN)
        return addr

    def reserve(self, nbytes: int) -> int:
        addr = len(self.blob)
        self.blob += bytes(nbytes + (-nbytes % ALIGN))
        return addr


def layer_program(
    staging: Staging,
    compute: list[Instruction],
    out_addr: int,
    out_shape,
    *,
    tile: int = 0,
    num_tiles: int = 1,
    srcmap=(),
    target: str = "cn10ka",
    dtype: DType = DType.F16,
) -> Program:
    """Constants -> OCM of `tile`, `compute`, output tile (f16, or `dtype`) -> DDR output
    entry 'y'."""
    nbytes = math.prod(out_shape) * DTYPE_BYTES[dtype]
    consts = bytes(staging.blob)
    out_ddr = len(consts)
    code = [
        copy_bytes(MemSpace.DDR, 0, MemSpace.OCM, 0, len(consts), tile=tile),
        *compute,
        copy_bytes(MemSpace.OCM, out_addr, MemSpace.DDR, out_ddr, nbytes, tile=tile),
        end(),
    ]
    return Program(
        target=target,
        num_tiles=num_tiles,
        ddr_size=out_ddr + nbytes,
        io=[IOEntry("y", False, tuple(out_shape), dtype, out_ddr)],
        code=code,
        const_base=0,
        consts=consts,
        srcmap=list(srcmap),
    )


def random_f16(rng: np.random.Generator, shape, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def assert_f16_close(actual: np.ndarray, reference: np.ndarray) -> None:
    """Within fp16 storage error of a float64 reference (inputs are exact f16 values)."""
    assert actual.dtype == np.float16
    assert actual.shape == reference.shape
    np.testing.assert_allclose(actual.astype(np.float64), reference, rtol=2**-10, atol=2**-14)


# --------------------------------------------------------------------------- float64 references


def reference_conv(x, w, b, *, stride=(1, 1), pad=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """NHWC x OHWI -> NHWC in float64; pad = (top, left, bottom, right)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    top, left, bottom, right = pad
    padded = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    n, height, width, channels = padded.shape
    out_channels, kh_count, kw_count, group_channels = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    out_h = (height - dh * (kh_count - 1) - 1) // sh + 1
    out_w = (width - dw * (kw_count - 1) - 1) // sw + 1
    per_group = out_channels // groups
    out = np.zeros((n, out_h, out_w, out_channels))
    for g in range(groups):
        outs = slice(g * per_group, (g + 1) * per_group)
        ins = slice(g * group_channels, (g + 1) * group_channels)
        for kh in range(kh_count):
            for kw in range(kw_count):
                patch = padded[
                    :,
                    kh * dh : kh * dh + sh * (out_h - 1) + 1 : sh,
                    kw * dw : kw * dw + sw * (out_w - 1) + 1 : sw,
                    ins,
                ]
                out[..., outs] += np.einsum("nhwc,oc->nhwo", patch, w[outs, kh, kw, :])
    if b is not None:
        out += b.astype(np.float64)
    return out


def reference_pool(x, kernel, *, mode, stride=(1, 1), pad=(0, 0, 0, 0), count_include_pad=False):
    """NHWC pooling in float64, one output position at a time."""
    x = x.astype(np.float64)
    top, left, bottom, right = pad
    n, height, width, channels = x.shape
    out_h = (height + top + bottom - kernel[0]) // stride[0] + 1
    out_w = (width + left + right - kernel[1]) // stride[1] + 1
    out = np.zeros((n, out_h, out_w, channels))
    for oh in range(out_h):
        for ow in range(out_w):
            r0, c0 = oh * stride[0] - top, ow * stride[1] - left
            rows = [r for r in range(r0, r0 + kernel[0]) if 0 <= r < height]
            cols = [c for c in range(c0, c0 + kernel[1]) if 0 <= c < width]
            taps = x[:, rows][:, :, cols]
            if mode == "max":
                out[:, oh, ow] = taps.max(axis=(1, 2))
            else:
                if count_include_pad:
                    count = sum(
                        -top <= r < height + bottom for r in range(r0, r0 + kernel[0])
                    ) * sum(-left <= c < width + right for c in range(c0, c0 + kernel[1]))
                else:
                    count = len(rows) * len(cols)
                out[:, oh, ow] = taps.sum(axis=(1, 2)) / count
    return out


def conv_region_program(w: np.ndarray, b: np.ndarray, in_shape=(1, 3, 6, 6)) -> Program:
    """A whole region as the compiler would emit it: f32 NCHW input -> cvt to f16 NHWC ->
    OCM -> 3x3 "same" conv -> DDR -> cvt to f32 NCHW output, ordered by tokens."""
    n, channels, height, width = in_shape
    out_channels = w.shape[0]
    staging = Staging()
    w_addr, b_addr = staging.add(w), staging.add(b)
    consts_size = len(staging.blob)
    x_ddr = staging.reserve(4 * math.prod(in_shape))
    x16_ddr = staging.reserve(2 * math.prod(in_shape))
    out_nhwc = (n, height, width, out_channels)
    y16_ddr = staging.reserve(2 * math.prod(out_nhwc))
    y_ddr = staging.reserve(4 * math.prod(out_nhwc))
    x_ocm = consts_size  # the input window goes right after the weights and bias in OCM
    y_ocm = x_ocm + 2 * math.prod(in_shape)
    code = [
        cvt(x_ddr, DType.F32, in_shape, x16_ddr, DType.F16, (0, 2, 3, 1), signal=1),
        copy_bytes(MemSpace.DDR, 0, MemSpace.OCM, 0, consts_size, signal=2),
        copy_bytes(
            MemSpace.DDR,
            x16_ddr,
            MemSpace.OCM,
            x_ocm,
            2 * math.prod(in_shape),
            waits=(1,),
            signal=3,
        ),
        conv(
            x_ocm,
            (n, height, width, channels),
            y_ocm,
            out_nhwc,
            w_addr,
            kernel=(3, 3),
            b_addr=b_addr,
            pad=(1, 1),
            waits=(2, 3),
            signal=4,
        ),
        copy_bytes(
            MemSpace.OCM,
            y_ocm,
            MemSpace.DDR,
            y16_ddr,
            2 * math.prod(out_nhwc),
            waits=(4,),
            signal=5,
        ),
        cvt(y16_ddr, DType.F16, out_nhwc, y_ddr, DType.F32, (0, 3, 1, 2), waits=(5,)),
        end(),
    ]
    return Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=len(staging.blob),
        io=[
            IOEntry("x", True, in_shape, DType.F32, x_ddr),
            IOEntry("y", False, (n, out_channels, height, width), DType.F32, y_ddr),
        ],
        code=code,
        const_base=0,
        consts=bytes(staging.blob[:consts_size]),
        srcmap=[],
    )


def corrupt_and_run_both(data, program: Program, ins: Instruction) -> None:
    """One integer field of `ins` (an instruction of `program`), drawn by the hypothesis
    `data`, set to an arbitrary value: validation rejects the program with SimulatorError,
    or both engines run it to the same bytes (and neither crashes)."""
    from hypothesis import strategies as st

    from mrvl.sim import SimulatorError, validate

    names = sorted(n for n, v in ins.fields.items() if not isinstance(v, float))
    if not names:
        return
    name = data.draw(st.sampled_from(names))
    value = ins.fields[name]
    arbitrary = st.integers(-3, 300) | st.integers(-(2**31), 2**31 - 1)
    if isinstance(value, tuple):
        position = data.draw(st.integers(0, len(value) - 1))
        value = value[:position] + (data.draw(arbitrary),) + value[position + 1 :]
    else:
        value = data.draw(arbitrary)
    ins.fields[name] = value
    try:
        valid = validate(program)
    except SimulatorError:
        return
    try:
        run_both(valid, [])
    except SimulatorError:
        # only data faults at run time (a resize's or qresize's tables, which a corrupted
        # instruction may overwrite or point elsewhere): both engines must fault alike
        from mrvl.sim import run

        messages = []
        for engine in ("interp", "numba"):
            try:
                run(valid, [], engine=engine)
                messages.append(f"{engine} ran")
            except SimulatorError as error:
                messages.append(str(error))
        assert messages[0] == messages[1], messages


def run_both(program, inputs, **kwargs) -> list[np.ndarray]:
    """`mrvl.sim.run` on the reference interpreter and on the Numba engine: the outputs must be
    the same bytes (no tolerance), and the counts of saturated values and NaNs the same per
    instruction. Returns the interpreter's. A program that fails validation raises before
    either engine runs, so both raise the same error."""
    from mrvl.sim import RunStats, prepare, run

    valid = prepare(program, kwargs.pop("target", None))
    expected, counted = RunStats(), RunStats()
    reference = run(valid, inputs, engine="interp", stats=expected, **kwargs)
    compiled = run(valid, inputs, engine="numba", stats=counted, **kwargs)
    assert_same_bytes(reference, compiled)
    np.testing.assert_array_equal(counted.saturated, expected.saturated)
    np.testing.assert_array_equal(counted.nans, expected.nans)
    return reference


def activation(staging: Staging, act: Activation, act_a: float, act_b: float, channels: int, seed):
    """The code before a compute instruction with activation `act` (a `lut` for a table
    activation) and its activation fields (PRELU slopes staged for `channels` channels)."""
    fields = dict(act=int(act), act_a=act_a, act_b=act_b)
    code = []
    if act in TABLE_ACTIVATIONS:
        code.append(
            instruction("lut", src_addr=staging.add(activation_table(act, act_a, act_b)), **fields)
        )
    if act == Activation.PRELU:
        slopes = f16_data(seed, max(channels, 1), False).astype(np.float32)
        fields["act_addr"] = staging.add(slopes)
    return code, fields


def stage_bias_and_partial_sums(
    staging: Staging, chain: str, seed: int, out_channels: int, positions: int, special=False
):
    """Where a conv stands in its `chain` of input-channel blocks: "whole" (from the bias to
    f16), "first" (to fp32 partial sums), "next" or "next_in_place" (fp32 partial sums in and
    out) or "last" (fp32 in, f16 out). Stages its fp32 bias and, for a chain it continues,
    the fp32 partial sums over `positions` output positions (`special` values among them).
    Returns (b_addr, acc_addr (-1: none), acc_out, the output's bytes)."""
    b_addr = staging.add(f16_data(seed + 2, out_channels, False).astype(np.float32))
    acc_addr = -1
    if chain.startswith("next") or chain == "last":
        partial = f16_data(seed + 3, positions * out_channels, special)
        acc_addr = staging.add(partial.astype(np.float32))
    acc_out = chain == "first" or chain.startswith("next")
    return b_addr, acc_addr, acc_out, positions * out_channels * (4 if acc_out else 2)


def same_on_any_number_of_threads(program) -> None:
    """The interpreter, and the engine on 1, 2 and 3 threads, give the same bytes and counts."""
    from mrvl.sim import RunStats, prepare, run
    from mrvl.sim.engines.numba.sharing import THREADS_ENV

    valid = prepare(program)
    expected = RunStats()
    reference = run(valid, [], engine="interp", stats=expected)
    for workers in (1, 2, 3):
        counted = RunStats()
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(THREADS_ENV, str(workers))
            compiled = run(valid, [], engine="numba", stats=counted)
        assert_same_bytes(reference, compiled)
        np.testing.assert_array_equal(counted.saturated, expected.saturated)
        np.testing.assert_array_equal(counted.nans, expected.nans)


def valid_conv_program() -> Program:
    """x [1, 3, 3, 4] of ones and one 3x3 conv of it (2 outputs) on tile 0: the smallest valid
    program, for tests of what happens around a run."""
    staging = Staging()
    x_addr = staging.add(np.ones((1, 3, 3, 4), np.float16))
    w_addr = staging.add(np.ones((2, 3, 3, 4), np.float16))
    out_addr = staging.reserve(2 * 2)
    ins = conv(x_addr, (1, 3, 3, 4), out_addr, (1, 1, 1, 2), w_addr, kernel=(3, 3), loc=0)
    return layer_program(staging, [ins], out_addr, (1, 1, 1, 2), srcmap=["/c/Conv"])


def multicast_program(multicast: bool) -> Program:
    """x [1, 5, 3, 4] and 3x3 conv weights (16 outputs) in the constant pool, brought to the
    same OCM addresses on tiles 0, 1 and 2 by a multicast dma each (issued by tile 1), or by
    one dma per tile; then tile t computes output row t with a conv that waits on both, and
    stores it to row t of y [3, 16] (f16)."""
    channels, outs, tiles = 4, 16, (0, 1, 2)
    staging = Staging()
    x = f16_data(11, (1, 5, 3, channels), False)
    w = f16_data(12, (outs, 3, 3, channels), False)
    x_addr, w_addr = staging.add(x), staging.add(w)
    out_ocm = staging.reserve(outs * 2)
    consts = bytes(staging.blob)
    out_ddr, nbytes = len(consts), outs * 2
    code = []
    for signal, (addr, size) in enumerate(((x_addr, x.nbytes), (w_addr, w.nbytes)), 1):
        ddr_to_ocm = (MemSpace.DDR, addr, MemSpace.OCM, addr, size)
        if multicast:
            code.append(copy_bytes(*ddr_to_ocm, tile=1, signal=signal, dst_tiles=0b111, loc=0))
        else:
            code += [copy_bytes(*ddr_to_ocm, tile=t, signal=signal, loc=0) for t in tiles]
    for t in tiles:
        code.append(
            conv(
                *(x_addr, (1, 5, 3, channels), out_ocm, (1, 1, 1, outs), w_addr),
                kernel=(3, 3),
                orow0=t,
                tile=t,
                waits=(1, 2),
                signal=3 + t,
                loc=1,
            )
        )
        code.append(
            copy_bytes(
                *(MemSpace.OCM, out_ocm, MemSpace.DDR, out_ddr + t * nbytes, nbytes),
                tile=t,
                waits=(3 + t,),
                loc=1,
            )
        )
    return Program(
        target="cn10ka",
        num_tiles=3,
        ddr_size=out_ddr + 3 * nbytes,
        io=[IOEntry("y", False, (3, outs), DType.F16, out_ddr)],
        code=[*code, end()],
        const_base=0,
        consts=consts,
        srcmap=["/m/Load", "/m/Conv"],
    )


def run_conv(x, w, b=None, *, stride=(1, 1), pad=(0, 0), dilation=(1, 1), groups=1, **kwargs):
    """One conv instruction over the whole input; output size from the bottom/right padding
    that the reference uses (pad is [top, left], pad_end [bottom, right])."""
    pad_end = kwargs.pop("pad_end", (0, 0))
    n, height, width, _ = x.shape
    out_channels, kh, kw, _ = w.shape
    out_h = (height + pad[0] + pad_end[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    out_w = (width + pad[1] + pad_end[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out_shape = (n, out_h, out_w, out_channels)
    staging = Staging()
    in_addr, w_addr = staging.add(x), staging.add(w)
    b_addr = -1 if b is None else staging.add(b)
    out_addr = staging.reserve(np.prod(out_shape) * 2)
    ins = conv(
        in_addr,
        x.shape,
        out_addr,
        out_shape,
        w_addr,
        kernel=(kh, kw),
        b_addr=b_addr,
        stride=stride,
        pad=pad,
        dilation=dilation,
        groups=groups,
        **kwargs,
    )
    (y,) = run_both(layer_program(staging, [ins], out_addr, out_shape), [])
    return y
