"""The Numba engine's depthwise convs (`depthwise.py`: `depthwise_tile`, fused multiply-adds
over 16, 8, 4, 2 and 1 channel lanes) give the interpreter's bytes: every channel count's
tail of lanes, taps in the padding, strides, dilations, a band of rows, a tile of the
channels (oc0), and fp32 partial sums in and out, special values (NaN, infinities, signed
zeros, subnormals) in the inputs, the weights and the partial sums."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_builders import (
    ENGINE_SETTINGS,
    Staging,
    activation,
    conv,
    f16_data,
    layer_program,
    stage_bias_and_partial_sums,
)
from sim_builders import run_both as run_engines

from mrvl.isa import Activation

pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


@st.composite
def depthwise_layers(draw):
    channels = draw(st.integers(1, 40))
    oc0 = draw(st.integers(0, channels - 1))
    tile_channels = draw(st.integers(1, channels - oc0))
    kernel = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    height, width = draw(st.integers(1, 7)), draw(st.integers(1, 11))
    out_hw = []
    for d, size in enumerate((height, width)):
        span = dilation[d] * (kernel[d] - 1) + 1
        out_hw.append(max(1, (size + 2 * pad[d] - span) // stride[d] + 1))
    row0 = draw(st.integers(0, 2))  # the window is a band of rows of a taller input
    orow0 = draw(st.integers(0, 1))
    return dict(
        n=draw(st.integers(1, 2)),
        in_hwc=(height, width, channels),
        out_hw=tuple(out_hw),
        kernel=kernel,
        stride=stride,
        dilation=dilation,
        pad=pad,
        row0=row0,
        orow0=orow0,
        oc0=oc0,
        tile_channels=tile_channels,
        chain=draw(st.sampled_from(["whole", "first", "next", "last"])),
        act=draw(st.sampled_from([Activation.NONE, Activation.RELU, Activation.HARD_SWISH])),
        seed=draw(st.integers(0, 2**16)),
        special=draw(st.booleans()),
    )


@ENGINE_SETTINGS
@given(depthwise_layers())
def test_depthwise_convs_engines_agree(layer):
    """A depthwise conv tile on both engines; `chain`: the whole sum (from the bias, to f16),
    its first input-channel block (to fp32 partial sums), a middle one (fp32 in and out) or
    the last (fp32 in, f16 out)."""
    height, width, channels = layer["in_hwc"]
    in_shape = (layer["n"], height, width, channels)
    out_shape = (layer["n"], *layer["out_hw"], layer["tile_channels"])
    positions = int(np.prod(out_shape[:3]))
    kernel = layer["kernel"]
    staging = Staging()
    x = f16_data(layer["seed"], in_shape, layer["special"])
    w = f16_data(layer["seed"] + 1, (out_shape[3], *kernel, 1), layer["special"])
    in_addr, w_addr = staging.add(x), staging.add(w)
    b_addr, acc_addr, acc_out, out_bytes = stage_bias_and_partial_sums(
        staging, layer["chain"], layer["seed"], out_shape[3], positions, layer["special"]
    )
    out_addr = staging.reserve(out_bytes)
    code, act = [], {}
    if not acc_out:
        code, act = activation(staging, layer["act"], 0.0, 0.0, out_shape[3], layer["seed"])
    ins = conv(
        in_addr,
        in_shape,
        out_addr,
        out_shape,
        w_addr,
        kernel=kernel,
        b_addr=b_addr,
        row0=layer["row0"],
        orow0=layer["orow0"],
        stride=layer["stride"],
        pad=layer["pad"],
        dilation=layer["dilation"],
        groups=channels,
        oc0=layer["oc0"],
        oc_total=channels,
        acc_addr=acc_addr,
        acc_out=int(acc_out),
        **act,
    )
    run_engines(layer_program(staging, [*code, ins], out_addr, (out_bytes // 2,)), [])
