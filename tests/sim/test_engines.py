"""The two engines give the same bytes, with no tolerance, on generated programs, and the
Numba engine's f16 conversions are numpy's on every half.

Split by subject: test_engine_threads.py (the Numba engine's threads), test_engine_validation.py
(validation and the choice of engine), test_weight_cache.py (the packed-weight cache).

The unit programs of test_sim_interpreter.py, test_sim_programs.py and test_sim_elementwise.py
also run on both engines (`run_both`), and
test_engines_models.py does the same for the e2e nets, node conformance cases and models.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_builders import (
    ENGINE_SETTINGS,
    Staging,
    activation,
    conv,
    cvt_program,
    dma,
    end,
    f16_data,
    fc,
    instruction,
    layer_program,
    pool,
    run_both,
)

from mrvl.isa import (
    CONV_CI_BLOCK,
    TABLE_ACTIVATIONS,
    Activation,
    DType,
    IOEntry,
    MemSpace,
    PoolMode,
    Program,
)
from mrvl.sim import (
    SimulatorError,
    validate,
)
from mrvl.sim.engines.numba import mac_tiles, numerics
from mrvl.sim.numerics import round_to_f16

# The generated programs saturate and make NaNs on purpose; the warning is tested on its own.
pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


SETTINGS = ENGINE_SETTINGS


ACTIVATIONS = st.sampled_from(list(Activation))
ACT_A = st.sampled_from([0.0, -1.5, 0.2, 6.0])
ACT_B = st.sampled_from([0.0, 0.5, 6.0, 1e30])


# ------------------------------------------------------------------- numerics, exhaustively


def _numba_round(values: np.ndarray) -> np.ndarray:
    """The engine's f16 store of `values`: at an even address (vector lanes, then a scalar tail)
    and at an odd one (scalar bytes), which must agree on the bits and on the counts."""
    values = np.ascontiguousarray(values, np.float32)
    buffer, tally = np.zeros(values.size * 2 + 1, np.uint8), np.zeros(2, np.int64)
    numerics.store_f16(buffer, 0, values, tally)
    odd_buffer, odd_tally = np.zeros_like(buffer), np.zeros(2, np.int64)
    numerics.store_f16(odd_buffer, 1, values, odd_tally)
    assert odd_buffer[1:].tobytes() == buffer[:-1].tobytes()
    assert tally.tolist() == odd_tally.tolist() == _rounding_counts(values)
    return buffer[:-1].view(np.uint16)


def _rounding_counts(values: np.ndarray) -> list[int]:
    """[saturated, NaNs] of storing `values` as f16 (docs/isa.md §4)."""
    nans = int(np.isnan(values).sum())
    saturated = int((np.abs(values[~np.isnan(values)]) > 65504).sum())  # infinities too
    return [saturated, nans]


def _rounding_cases() -> np.ndarray:
    """Every half, random fp32 bit patterns, every tie between two neighbouring halves, and
    halfway cases around the subnormals and 65504."""
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32)
    # Every tie between two neighbouring halves, and halfway cases around the subnormals.
    with np.errstate(invalid="ignore"):
        ties = (halves[:-1].astype(np.float64) + halves[1:].astype(np.float64)) / 2
    values = np.concatenate(
        [
            halves.astype(np.float32),
            bits.view(np.float32),
            ties[np.isfinite(ties)].astype(np.float32),
            np.array([2.0**-25, -(2.0**-25), 2.0**-24 * 1.5, 65519.99, 65520, 1e38], np.float32),
        ]
    )
    return values


def test_f32_to_f16_matches_numpy_on_every_half_and_random_floats():
    values = _rounding_cases()
    expected = round_to_f16(values).view(np.uint16)
    np.testing.assert_array_equal(_numba_round(values), expected)
    for size in range(1, 20):  # every length of the scalar tail after the vector lanes
        np.testing.assert_array_equal(_numba_round(values[-size:]), expected[-size:])


@pytest.mark.parametrize("f16c", [False, True])
def test_f16_vector_rounding_with_and_without_f16c(monkeypatch, f16c):
    """round_f16_vectors' two ways, the CPU's conversion (F16C) and integer steps (elsewhere),
    each compiled here afresh, give numpy's bits and the documented counts."""
    if f16c and not numerics.has_f16c():
        pytest.skip("this CPU has no F16C")
    monkeypatch.setattr(numerics, "has_f16c", lambda: f16c)

    @numba.njit
    def round_vectors(values, halves, tally):
        numerics.round_f16_vectors(values, halves, values.size, tally)

    values = _rounding_cases()
    values = values[: values.size - values.size % numerics.F16_LANES]
    halves, tally = np.zeros(values.size, np.uint16), np.zeros(2, np.int64)
    round_vectors(values, halves, tally)
    np.testing.assert_array_equal(halves, round_to_f16(values).view(np.uint16))
    assert tally.tolist() == _rounding_counts(values)


def test_f16_to_f32_table_is_numpy_exact():
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    np.testing.assert_array_equal(
        numerics.F16_TO_F32.view(np.uint32), halves.astype(np.float32).view(np.uint32)
    )


def test_f16_loads_widen_every_half_like_the_table_at_any_length_and_address():
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    memory = np.concatenate([np.zeros(1, np.uint16), halves]).view(np.uint8)
    table = numerics.F16_TO_F32
    expected = table.view(np.uint32)
    loaded = numerics.load_f16(memory, 2, halves.size, table)  # the vector lanes
    np.testing.assert_array_equal(loaded.view(np.uint32), expected)
    for size in range(1, 20):  # every length of the tail after the vector lanes
        loaded = numerics.load_f16(memory, 2 * (1 << 16) + 2 - 2 * size, size, table)
        np.testing.assert_array_equal(loaded.view(np.uint32), expected[-size:])
    unaligned = numerics.load_f16(
        np.concatenate([[7], memory[2:40]]).astype(np.uint8), 1, 19, table
    )
    np.testing.assert_array_equal(unaligned.view(np.uint32), expected[:19])


# --------------------------------------------------------------- generated single layers


@st.composite
def conv_layers(draw, group_outputs=st.integers(1, 6), depthwise=False):
    """A conv layer; `group_outputs` draws the output channels per group (narrow runs by
    default; from mac_tiles.NARROW on, the engine's blocked kernel); `depthwise`: many
    groups of one input channel."""
    if depthwise:
        groups, group_channels = draw(st.sampled_from([8, 17, 32])), 1
    else:
        groups = draw(st.sampled_from([1, 1, 2, 3]))
        group_channels = draw(st.sampled_from([1, 2, 5, CONV_CI_BLOCK - 1, CONV_CI_BLOCK + 3]))
    channels = groups * group_channels
    oc_total = groups * draw(group_outputs)
    n = draw(st.integers(1, 2))
    height, width = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    pad_end = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    out_h = (height + pad[0] + pad_end[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    out_w = (width + pad[1] + pad_end[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    if out_h < 1 or out_w < 1:
        pad_end = (pad_end[0] + dilation[0] * kernel[0], pad_end[1] + dilation[1] * kernel[1])
        out_h = (height + pad[0] + pad_end[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
        out_w = (width + pad[1] + pad_end[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    # A tile of the output channels (it may cross group boundaries).
    oc0 = draw(st.integers(0, oc_total - 1))
    tile_channels = draw(st.integers(1, oc_total - oc0))
    return dict(
        n=n,
        in_hwc=(height, width, channels),
        out_hw=(out_h, out_w),
        kernel=kernel,
        stride=stride,
        dilation=dilation,
        pad=pad,
        groups=groups,
        oc0=oc0,
        oc_total=oc_total,
        tile_channels=tile_channels,
        bias=draw(st.booleans()),
        act=draw(ACTIVATIONS),
        act_a=draw(ACT_A),
        act_b=draw(ACT_B),
        seed=draw(st.integers(0, 2**16)),
        special=draw(st.booleans()),
    )


@SETTINGS
@given(
    conv_layers()
    | conv_layers(st.integers(mac_tiles.NARROW, 40))
    | conv_layers(st.integers(1, 2), depthwise=True)
)
def test_conv_engines_agree(layer):
    height, width, channels = layer["in_hwc"]
    in_shape = (layer["n"], height, width, channels)
    out_shape = (layer["n"], *layer["out_hw"], layer["tile_channels"])
    group_channels = channels // layer["groups"]
    staging = Staging()
    x = f16_data(layer["seed"], in_shape, layer["special"])
    w = f16_data(layer["seed"] + 1, (out_shape[3], *layer["kernel"], group_channels), False)
    in_addr, w_addr = staging.add(x), staging.add(w)
    b_addr = staging.add(f16_data(layer["seed"] + 2, out_shape[3], False).astype(np.float32))
    out_addr = staging.reserve(int(np.prod(out_shape)) * 2)
    code, act = activation(
        staging, layer["act"], layer["act_a"], layer["act_b"], out_shape[3], layer["seed"]
    )
    ins = conv(
        in_addr,
        in_shape,
        out_addr,
        out_shape,
        w_addr,
        kernel=layer["kernel"],
        b_addr=b_addr if layer["bias"] else -1,
        stride=layer["stride"],
        pad=layer["pad"],
        dilation=layer["dilation"],
        groups=layer["groups"],
        oc0=layer["oc0"],
        oc_total=layer["oc_total"],
        **act,
    )
    run_both(layer_program(staging, [*code, ins], out_addr, out_shape), [])


@SETTINGS
@given(
    n=st.integers(1, 2),
    hw=st.tuples(st.integers(1, 7), st.integers(1, 7)),
    channels=st.integers(1, 20),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    pad=st.tuples(st.integers(0, 1), st.integers(0, 1)),
    mode=st.sampled_from(list(PoolMode)),
    count_include_pad=st.integers(0, 1),
    seed=st.integers(0, 2**16),
    special=st.booleans(),
)
def test_pool_engines_agree(
    n, hw, channels, kernel, stride, pad, mode, count_include_pad, seed, special
):
    kernel = (min(kernel[0], hw[0] + pad[0]), min(kernel[1], hw[1] + pad[1]))
    pad = (min(pad[0], kernel[0] - 1), min(pad[1], kernel[1] - 1))  # the ISA's pad < kernel
    pad_end = pad
    out_h = (hw[0] + 2 * pad[0] - kernel[0]) // stride[0] + 1
    out_w = (hw[1] + 2 * pad[1] - kernel[1]) // stride[1] + 1
    in_shape, out_shape = (n, *hw, channels), (n, out_h, out_w, channels)
    staging = Staging()
    in_addr = staging.add(f16_data(seed, in_shape, special))
    out_addr = staging.reserve(int(np.prod(out_shape)) * 2)
    ins = pool(
        in_addr,
        in_shape,
        out_addr,
        out_shape,
        kernel=kernel,
        mode=mode,
        in_hw=hw,
        stride=stride,
        pad=pad,
        pad_end=pad_end,
        count_include_pad=count_include_pad,
    )
    try:
        program = layer_program(staging, [ins], out_addr, out_shape)
        validate(program)
    except SimulatorError as e:  # an output position with no tap inside the window
        assert "has no tap inside" in str(e)
        return
    run_both(program, [])


@SETTINGS
@given(
    rows=st.integers(1, 3),
    inner=st.integers(1, 150),
    outs=st.integers(1, 40),
    bias=st.booleans(),
    act=ACTIVATIONS,
    seed=st.integers(0, 2**16),
    special=st.booleans(),
)
def test_fc_engines_agree(rows, inner, outs, bias, act, seed, special):
    run_fc(rows, inner, outs, bias, act, seed, special)


@pytest.mark.parametrize("rows, outs", [(1, 64), (1, 133), (7, 150), (13, 200)])
@pytest.mark.parametrize("act", [Activation.NONE, Activation.HARD_SWISH])
def test_fc_last_row_alone_engines_agree(rows, outs, act):
    """A last row alone with at least mac_tiles.ROW_BLOCKS blocks of outputs left runs on
    mac_tile_row (a classifier's one row), the blocks after them and the other rows on
    mac_tile: the same bits as the interpreter."""
    assert outs >= mac_tiles.ROW_BLOCKS * mac_tiles.MAC_CHANNELS
    run_fc(rows, 150, outs, True, act, rows * outs, True)


def run_fc(rows, inner, outs, bias, act, seed, special):
    """An fc of `rows` x `inner` inputs and `outs` outputs on both engines (run_both)."""
    staging = Staging()
    in_addr = staging.add(f16_data(seed, (rows, inner), special))
    w_addr = staging.add(f16_data(seed + 1, (outs, inner), False))
    b_addr = staging.add(f16_data(seed + 2, outs, False).astype(np.float32)) if bias else -1
    out_addr = staging.reserve(rows * outs * 2)
    code, fields = activation(staging, act, 0.25, 0.5, outs, seed)
    ins = fc(in_addr, rows, inner, outs, w_addr, out_addr, b_addr=b_addr, **fields)
    run_both(layer_program(staging, [*code, ins], out_addr, (rows, outs)), [])


@SETTINGS
@given(
    channels=st.integers(1, 17),
    repeats=st.integers(1, 9),
    acts=st.tuples(ACTIVATIONS, ACTIVATIONS, ACTIVATIONS),
    broadcast=st.booleans(),
    seed=st.integers(0, 2**16),
    special=st.booleans(),
    place=st.sampled_from(["apart", "on_a", "on_b", "overlap"]),
)
def test_add_scale_and_mul_engines_agree(channels, repeats, acts, broadcast, seed, special, place):
    """add, then scale, then mul (maybe broadcast per channel), each with its activation (PRELU
    on add and scale, whose elements have channels). The sum goes apart from the addends, onto
    one, or one element past the first (overlapping it: every input is read before any output
    is written)."""
    chosen, tables = [], 0
    for i, act in enumerate(acts):
        if act == Activation.PRELU and i == 2:
            act = Activation.RELU
        if act in TABLE_ACTIVATIONS:
            tables += 1
            if tables > 1:  # the OCM holds the staged constants and one table, not two
                act = Activation.CLIP
        chosen.append(act)
    add_act, scale_act, mul_act = chosen
    count = channels * repeats
    staging = Staging()
    a_addr = staging.add(f16_data(seed, count, special))
    b_addr = staging.add(f16_data(seed + 1, count, special))
    s_addr = staging.add(f16_data(seed + 2, channels, special).astype(np.float32))
    t_addr = staging.add(f16_data(seed + 3, channels, False).astype(np.float32))
    m_addr = staging.add(f16_data(seed + 4, channels if broadcast else count, special))
    sum_addr, scaled_addr = staging.reserve(count * 2), staging.reserve(count * 2)
    sum_addr = {"apart": sum_addr, "on_a": a_addr, "on_b": b_addr, "overlap": a_addr + 2}[place]
    out_addr = staging.reserve(count * 2)
    code = []
    prefix, fields = activation(staging, add_act, -2.0, 3.0, channels, seed)
    fields.setdefault("act_addr", -1)
    code += prefix
    add_channels = channels if add_act == Activation.PRELU else 0
    code.append(
        instruction(
            "add",
            a_addr=a_addr,
            b_addr=b_addr,
            out_addr=sum_addr,
            count=count,
            channels=add_channels,
            **fields,
        )  # fmt: skip
    )
    prefix, fields = activation(staging, scale_act, 0.2, 0.5, channels, seed)
    fields.setdefault("act_addr", -1)
    code += prefix
    code.append(
        instruction(
            "scale",
            in_addr=sum_addr,
            out_addr=scaled_addr,
            count=count,
            channels=channels,
            s_addr=s_addr,
            b_addr=t_addr,
            **fields,
        )
    )
    prefix, fields = activation(staging, mul_act, 0.2, 0.5, 0, seed)
    code += prefix
    code.append(
        instruction(
            "mul",
            a_addr=scaled_addr,
            b_addr=m_addr,
            out_addr=out_addr,
            count=count,
            channels=channels if broadcast else 0,
            **fields,
        )
    )
    run_both(layer_program(staging, code, out_addr, (count,)), [])


@SETTINGS
@given(
    shape=st.tuples(*[st.integers(1, 4)] * 4),
    perm=st.permutations(range(4)),
    dtypes=st.sampled_from(
        [
            (DType.F32, DType.F16),
            (DType.F16, DType.F32),
            (DType.F16, DType.F16),
            (DType.I8, DType.I8),
            (DType.I32, DType.I32),
            (DType.F32, DType.F32),
        ]
    ),
    seed=st.integers(0, 2**16),
)
def test_cvt_engines_agree(shape, perm, dtypes, seed):
    """Conversions and same-type copies (a transposition of f16 goes by whole halves in the
    Numba engine), with permuted layouts."""
    src, dst = dtypes
    rng = np.random.default_rng(seed)
    numpy_type = {
        DType.F32: np.float32,
        DType.F16: np.float16,
        DType.I8: np.int8,
        DType.I32: np.int32,
    }
    if src in (DType.I8, DType.I32):
        x = rng.integers(-100, 100, size=shape).astype(numpy_type[src])
    else:
        with np.errstate(over="ignore"):  # beyond the f16 range: infinities, on purpose
            x = (rng.standard_normal(shape) * 3e4).astype(numpy_type[src])
        x.reshape(-1)[::7] = np.nan
    dst_addr = ((x.nbytes + 63) // 64) * 64
    ddr_size = dst_addr + x.size * 4
    program = cvt_program(shape, perm, src, dst, src_addr=0, dst_addr=dst_addr, ddr_size=ddr_size)
    run_both(program, [x])


def permuted_strides(box, elem_bytes, order):
    """The strides of a dense box of `box` whose dimensions lie in memory in `order`
    (outermost first), and the bytes it spans."""
    strides = [0, 0, 0, 0]
    step = elem_bytes
    for d in reversed(order):
        strides[d] = step
        step *= box[d]
    return tuple(strides), step


@SETTINGS
@given(
    box=st.tuples(*[st.integers(0, 3)] * 3, st.integers(1, 12)),
    elem_bytes=st.sampled_from([1, 2, 4]),
    order=st.permutations(range(4)),
    reverse=st.sampled_from(["none", "all", "outer"]),
    tiles=st.integers(0, 3),
)
def test_dma_engines_agree(box, elem_bytes, order, reverse, tiles):
    """A dense source box stored to a destination with permuted strides, all or the outer three
    maybe negative (runs of 16 bytes and more are copied by memcpy in the Numba engine). The
    box goes to OCM by a multicast from tile 0 to tiles 0..tiles-1 (tiles=0: dst_tiles 0, one
    tile), and the last tile stores it."""
    dense = [0, 0, 0, elem_bytes]
    for d in (2, 1, 0):
        dense[d] = dense[d + 1] * box[d + 1]
    permuted, step = permuted_strides(box, elem_bytes, order)
    size = max(step, 1)
    negated = {"none": (), "all": (0, 1, 2, 3), "outer": (0, 1, 2)}[reverse]
    dst_addr = 256 + sum((box[d] - 1) * permuted[d] for d in negated if box[d])
    dst_strides = tuple(-s if d in negated else s for d, s in enumerate(permuted))
    consts = np.arange(256, dtype=np.uint8).tobytes()
    last = max(tiles, 1) - 1
    program = Program(
        target="cn10ka",
        num_tiles=max(tiles, 1),
        ddr_size=256 + size,
        io=[IOEntry("y", False, (size,), DType.I8, 256)],
        code=[
            dma(
                *(MemSpace.DDR, 0, tuple(dense), MemSpace.OCM, 0, tuple(dense), box, elem_bytes),
                dst_tiles=(1 << tiles) - 1,
            ),
            dma(
                *(MemSpace.OCM, 0, tuple(dense), MemSpace.DDR, dst_addr, dst_strides),
                *(box, elem_bytes),
                tile=last,
            ),
            end(),
        ],
        const_base=0,
        consts=consts,
        srcmap=[],
    )
    run_both(program, [])


@SETTINGS
@given(
    box=st.tuples(*[st.integers(1, 3)] * 2, st.integers(1, 9), st.integers(1, 4)),
    elem_bytes=st.sampled_from([1, 2, 4]),
    src_order=st.permutations(range(4)),
    dst_order=st.permutations(range(4)),
    dst_at=st.integers(0, 2),
)
def test_dma_within_one_memory_engines_agree(box, elem_bytes, src_order, dst_order, dst_at):
    """A box moved within DDR between permuted layouts (a channel shuffle's, among others),
    its destination overlapping its source (dst_at 0: the same bytes, 1: half way) or apart
    (2): the Numba engine copies disjoint boxes directly, in its own loop order, and stages
    overlapping ones, as the reference reads the whole source first."""
    src_strides, size = permuted_strides(box, elem_bytes, src_order)
    dst_strides, _ = permuted_strides(box, elem_bytes, dst_order)
    dst_addr = (dst_at * size // 2) // elem_bytes * elem_bytes
    ddr_size = 2 * size + elem_bytes
    program = Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=ddr_size,
        io=[IOEntry("y", False, (ddr_size,), DType.I8, 0)],
        code=[
            dma(MemSpace.DDR, 0, src_strides, MemSpace.DDR, dst_addr, dst_strides, box, elem_bytes),
            end(),
        ],
        const_base=0,
        consts=(np.arange(ddr_size) * 37 % 251).astype(np.uint8).tobytes(),
        srcmap=[],
    )
    run_both(program, [])


@SETTINGS
@given(
    n=st.integers(1, 2),
    in_hw=st.tuples(st.integers(1, 6), st.integers(1, 6)),
    out_hw=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    channels=st.integers(1, 9),
    method=st.sampled_from(["linear", "nearest_neighbor"]),
    mode=st.sampled_from(["half_pixel", "align_corners", "asymmetric"]),
    seed=st.integers(0, 2**16),
    special=st.booleans(),
)
def test_resize_engines_agree(n, in_hw, out_hw, channels, method, mode, seed, special):
    from mrvl.strided import interpolation_table

    x = f16_data(seed, (n, *in_hw, channels), special)
    ytab = interpolation_table(in_hw[0], out_hw[0], method, mode)
    xtab = interpolation_table(in_hw[1], out_hw[1], method, mode)
    staging = Staging()
    x_addr, y_addr, t_addr = staging.add(x), staging.add(ytab), staging.add(xtab)
    out_shape = (n, *out_hw, channels)
    out_addr = staging.reserve(int(np.prod(out_shape)) * 2)
    ins = instruction(
        "resize",
        in_addr=x_addr,
        in_shape=x.shape,
        row0=0,
        out_addr=out_addr,
        out_shape=out_shape,
        ytab_addr=y_addr,
        xtab_addr=t_addr,
    )
    run_both(layer_program(staging, [ins], out_addr, out_shape), [])
