"""The int8 product of two activations (`qbmm`, docs/isa.md): `bmm`'s batched geometry (either
operand transposed or shared by every batch, a reduction split into blocks through partial
sums) on int8 data, with `qfc`'s exact int32 accumulation and requantization.

Attention's Q·Kᵀ and A·V in a quantized model: both operands are activations, each with its
own zero point, so the accumulator sums (a - a_zp)·(b - b_zp), and the product of the two
scales is the one factor `rq` brings to the result's scale (`mrvl.int8.qmul_params`, as
`qmul`'s). Apart from `isa_int8.py` to keep that module short; `isa.py` builds its `OPCODES`
with `with_int8_bmm_opcode`, which inserts the spec before `end`.
"""

from __future__ import annotations

import dataclasses


def _int8(field, doc: str):
    return dataclasses.replace(field, doc=doc)


def qbmm_spec(base: dict):
    """The `qbmm` OpcodeSpec, from the `bmm` spec in `base` (by name) whose fields it shares."""
    from mrvl.isa import OpcodeSpec
    from mrvl.isa import _f as f
    from mrvl.isa_int8 import RQ_SHIFT_MAX, RQ_SHIFT_MIN, _finish_fields, _zp

    bmm = {field.name: field for field in base["bmm"].fields}
    shared = ("batch", "m", "k", "n", "trans_a", "trans_b", "a_shared", "b_shared")
    return OpcodeSpec(
        "qbmm",
        0x33,
        "mac",
        "int8 batched product of two activations: out[b] = A[b] . B[b] for each of `batch` "
        "matrices (the `bmm` geometry), exact int32 accumulation of sum (a - a_zp) * (b - b_zp) "
        "from 0 or from int32 partial sums, then one requantization (multiplier, shift) to the "
        "result's scale, out_zp, clamp and an optional int8 table; or the int32 accumulator "
        "itself (acc_out).",
        (
            _int8(
                bmm["a_addr"],
                "OCM byte address of A, int8: per batch [M, K], or [K, M] with trans_a",
            ),
            _int8(
                bmm["b_addr"],
                "OCM byte address of B, int8: per batch [K, N], or [N, K] with trans_b",
            ),
            _int8(bmm["out_addr"], "OCM byte address of the output [batch, M, N], int8 or int32"),
            *(bmm[name] for name in shared),
            _zp("a_zp", "zero point of A"),
            _zp("b_zp", "zero point of B"),
            _zp("out_zp", "zero point of the int8 result"),
            f(
                "rq",
                "i32x2",
                "requantization (multiplier, shift) of the accumulator, s_a * s_b / s_y",
                legal=("rq[0] >= 0", f"{RQ_SHIFT_MIN} <= rq[1] <= {RQ_SHIFT_MAX}"),
            ),
            *_finish_fields(),
            _int8(
                bmm["acc_addr"],
                "OCM byte address of int32 partial sums [batch, M, N] to start from instead of "
                "0, or -1",
            ),
            _int8(
                bmm["acc_out"], "1: write the int32 accumulator (no requantization) instead of int8"
            ),
        ),
    )


def with_int8_bmm_opcode(opcodes: tuple) -> tuple:
    """`opcodes` (ending with `end`) with `qbmm` inserted before `end`."""
    *body, end = opcodes
    return (*body, qbmm_spec({spec.name: spec for spec in body}), end)
