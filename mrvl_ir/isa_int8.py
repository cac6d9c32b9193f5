"""The int8 instructions of the ISA table (docs/isa.md, "int8 mode"): quantize and dequantize
at region boundaries, and the integer conv, fc, add, mul, requantization, pools and resize
(`isa_int8_resize.py`).

They live apart from `mrvl.isa` to keep that module readable; `isa.py` builds its `OPCODES`
with `with_int8_opcodes`, which inserts these specs before `end`. The conv and pool forms
reuse the fp16 instructions' geometry fields (the same window, the same legal ranges), with
their element types said anew.

The numbers every engine shares (the requantization rule's shift range, qadd's left shift)
are here too, as plain constants.
"""

from __future__ import annotations

import dataclasses

QADD_LEFT_SHIFT = 20
"""`qadd` shifts each input's difference from its zero point left by this many bits before
rescaling it (TFLite's `left_shift`): 8-bit differences keep 20 fractional bits through the
rescale, and the sum of two of them stays below 2^29."""

RQ_SHIFT_MIN, RQ_SHIFT_MAX = -31, 30
"""A requantization's `shift` range: the real multiplier is multiplier * 2^(shift - 31), and
the right shift 31 - shift of the rule lies in [1, 62]. A pair read from OCM (data) is
clamped into this range; a pair in the instruction's fields must lie in it."""

INT8_MAC_OPCODES = frozenset({"qconv", "qfc", "qbmm"})
"""The int8 instructions of the MAC array: they run at `int8_macs_per_cycle_per_tile`."""

INT8_LUT_ENTRIES = 256
"""An int8 table maps every int8 value q (entry q + 128) to an int8 result."""


def _int8(spec_field, doc: str):
    """A geometry field of conv or pool, its meaning said for int8 data."""
    return dataclasses.replace(spec_field, doc=doc)


def _zp(name: str, doc: str):
    from mrvl.isa import _f

    return _f(name, "i32", doc, legal=f"-128 <= {name} <= 127")


def _rq(name: str, doc: str, shift_max: int = RQ_SHIFT_MAX):
    from mrvl.isa import _f

    return _f(
        name,
        "i32x2",
        doc,
        legal=(f"{name}[0] >= 0", f"{RQ_SHIFT_MIN} <= {name}[1] <= {shift_max}"),
    )


def _finish_fields():
    """clamp and lut_addr: the saturation bounds and the optional int8 table of every int8
    result."""
    from mrvl.isa import _f

    return (
        _f(
            "clamp",
            "i32x2",
            "saturation bounds [lo, hi] of the int8 result (ReLU, ReLU6, Clip)",
            legal=("-128 <= clamp[d] <= 127", "clamp[0] <= clamp[1]"),
        ),
        _f(
            "lut_addr",
            "i32",
            "OCM byte address of a 256-entry int8 table applied after the clamp "
            "(entry q + 128), or -1",
        ),
    )


def _quant_fields(base: dict):
    from mrvl.isa import _f

    cvt = {f.name: f for f in base["cvt"].fields}
    scale = _f(
        "scale",
        "f32",
        "the int8 tensor's scale: real = scale * (q - zp)",
        legal="0 < scale <= 3.4028234663852886e+38",
    )
    return cvt, scale


def int8_opcodes(base: dict) -> tuple:
    """The int8 OpcodeSpecs, made from the fp16 specs `base` (by name) whose fields they
    share."""
    from mrvl.isa import _BROADCAST_CHANNELS, OpcodeSpec, _f, _fc_fields, _vector_fields
    from mrvl.isa_int8_resize import qresize_spec

    cvt, scale = _quant_fields(base)
    conv = {f.name: f for f in base["conv"].fields}
    pool = base["pool"].fields
    window_docs = {
        "in_addr": "OCM byte address of the input window, NHWC, int8",
        "out_addr": "OCM byte address of the output tile, NHWC, int8 (int32 with acc_out)",
    }
    conv_window = tuple(
        _int8(f, window_docs[f.name]) if f.name in window_docs else f
        for f in base["conv"].fields[: [f.name for f in base["conv"].fields].index("w_addr")]
    )
    pool_fields = tuple(
        _int8(f, window_docs[f.name].replace(" (int32 with acc_out)", ""))
        if f.name in window_docs
        else f
        for f in pool
    )
    in_zp = _zp("in_zp", "zero point of the int8 input")
    out_zp = _zp("out_zp", "zero point of the int8 result")
    return (
        OpcodeSpec(
            "quant",
            0x04,
            "dma",
            "Quantize a dense 4-D DDR tensor of f32 or f16 to int8 in a permuted layout "
            "(ONNX QuantizeLinear): q = saturate(round_half_even(fp32(x) / scale) + zp). "
            "dst dim i is src dim perm[i].",
            (
                cvt["src_addr"],
                _f(
                    "src_dtype",
                    "i32",
                    "DType of the source: F32 or F16",
                    cvt["src_dtype"].enum,
                    legal="src_dtype in (0, 1)",
                ),
                cvt["src_shape"],
                _f("dst_addr", "i32", "DDR byte address of the dense int8 destination"),
                cvt["perm"],
                scale,
                _zp("zp", "the int8 tensor's zero point"),
            ),
        ),
        OpcodeSpec(
            "dequant",
            0x05,
            "dma",
            "Dequantize a dense 4-D int8 DDR tensor to f32 or f16 in a permuted layout "
            "(ONNX DequantizeLinear): y = fp32(q - zp) * scale, rounded to f16 for F16. "
            "dst dim i is src dim perm[i].",
            (
                _f("src_addr", "i32", "DDR byte address of the dense int8 source"),
                cvt["src_shape"],
                cvt["dst_addr"],
                _f(
                    "dst_dtype",
                    "i32",
                    "DType of the destination: F32 or F16",
                    cvt["dst_dtype"].enum,
                    legal="dst_dtype in (0, 1)",
                ),
                cvt["perm"],
                scale,
                _zp("zp", "the int8 tensor's zero point"),
            ),
        ),
        OpcodeSpec(
            "qconv",
            0x11,
            "mac",
            "int8 2-D convolution of an input window into an output tile: exact int32 "
            "accumulation of bias + sum (x - in_zp) * w, then per output channel requantization "
            "(multiplier, shift), out_zp, clamp and an optional int8 table; or the int32 "
            "accumulator itself (acc_out). Weights OHWI int8 [out_shape.C, KH, KW, C/groups], "
            "bias int32 [out_shape.C].",
            conv_window
            + (
                _int8(conv["w_addr"], "OCM byte address of the weights, int8 OHWI"),
                _int8(conv["b_addr"], "OCM byte address of the bias, int32 [OCt], or -1 for none"),
                _zp("in_zp", "zero point of the int8 input; a padding tap reads it"),
                out_zp,
                _f(
                    "rq_addr",
                    "i32",
                    "OCM byte address of the requantization pairs [OCt, 2] int32 "
                    "(multiplier, shift), one per output channel of the tile",
                ),
                *_finish_fields(),
                _f(
                    "acc_addr",
                    "i32",
                    "OCM byte address of int32 partial sums [N, H, W, C] of out_shape to start "
                    "from instead of the bias, or -1",
                ),
                _f(
                    "acc_out",
                    "i32",
                    "1: write the int32 accumulator (no requantization) instead of int8",
                    legal="acc_out in (0, 1)",
                ),
            ),
        ),
        OpcodeSpec(
            "qpool",
            0x22,
            "vector",
            "int8 max or average pooling of an input window into an output tile (the `pool` "
            "geometry), the result rescaled by a (multiplier, shift) pair to the output's "
            "scale and zero point.",
            pool_fields
            + (
                in_zp,
                out_zp,
                _rq("rq", "requantization (multiplier, shift) of the pooled value"),
            ),
        ),
        OpcodeSpec(
            "qfc",
            0x32,
            "mac",
            "int8 fully connected layer: exact int32 acc = bias + sum (x - in_zp) * w, then per "
            "output feature requantization, out_zp, clamp and an optional int8 table.",
            (
                *_fc_fields("int8", "int32"),
                in_zp,
                out_zp,
                _f(
                    "rq_addr",
                    "i32",
                    "OCM byte address of the requantization pairs [O, 2] int32 "
                    "(multiplier, shift), one per output feature",
                ),
                *_finish_fields(),
            ),
        ),
        OpcodeSpec(
            "qadd",
            0x43,
            "vector",
            "Elementwise sum of two dense int8 vectors of different scales and zero points, by "
            "TFLite's fixed-point form: each difference from its zero point shifted left by "
            "QADD_LEFT_SHIFT and rescaled, the sum rescaled to the output, plus out_zp, "
            "clamped, then an optional int8 table.",
            (
                *_vector_fields("int8"),
                _zp("a_zp", "zero point of a"),
                _zp("b_zp", "zero point of b"),
                out_zp,
                _rq("a_rq", "rescale (multiplier, shift) of a, a multiplier below 1", 0),
                _rq("b_rq", "rescale (multiplier, shift) of b, a multiplier below 1", 0),
                _rq("out_rq", "rescale (multiplier, shift) of the sum to the output's scale"),
                *_finish_fields(),
            ),
        ),
        OpcodeSpec(
            "requant",
            0x44,
            "vector",
            "Rescale a dense int8 vector to another scale and zero point: "
            "y = saturate(out_zp + requantize(x - in_zp)), clamped, then an optional int8 table.",
            (
                _f("in_addr", "i32", "OCM byte address of the input, int8"),
                _f("out_addr", "i32", "OCM byte address of the result, int8"),
                _f("count", "i32", "number of elements", legal="count >= 1"),
                in_zp,
                out_zp,
                _rq("rq", "requantization (multiplier, shift)"),
                *_finish_fields(),
            ),
        ),
        OpcodeSpec(
            "qmul",
            0x46,
            "vector",
            "Elementwise product of two dense int8 vectors of their own scales and zero points "
            "(b optionally one value per channel, broadcast): the exact int32 product of the "
            "differences from the zero points, requantized once to the output, plus out_zp, "
            "clamped, then an optional int8 table.",
            (
                *_vector_fields("int8", counted=True),
                _BROADCAST_CHANNELS,
                _zp("a_zp", "zero point of a"),
                _zp("b_zp", "zero point of b"),
                out_zp,
                _rq("rq", "requantization (multiplier, shift) of the product, s_a * s_b / s_y"),
                *_finish_fields(),
            ),
        ),
        qresize_spec(base, in_zp, out_zp, _rq, _finish_fields),
    )


def with_int8_opcodes(opcodes: tuple) -> tuple:
    """`opcodes` (ending with `end`) with the int8 instructions inserted before `end`."""
    *body, end = opcodes
    return (*body, *int8_opcodes({spec.name: spec for spec in body}), end)
