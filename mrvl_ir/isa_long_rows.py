"""The instructions of a layer normalization whose row, with its f32 scales and shifts, does
not fit a tile's OCM (docs/isa.md, `lnstats` and `lnapply`): `lnstats` takes each row's mean
and rstd in f32, as `layernorm`'s two passes do, and `lnapply` normalizes a run of a row's
elements with them. Together they give `layernorm`'s bits: the same fp32 steps in the same
order, one rounding to f16. A row must then fit in f16 alone (2 bytes an element, not 12).

Apart from `mrvl.isa` to keep that module short; `isa.py` builds its `OPCODES` with
`with_long_row_opcodes`, which inserts these specs before `end`.
"""

from __future__ import annotations

LN_STATS_WORDS = 2
"""`lnstats` writes two f32 values a row: the mean, then rstd = 1 / sqrt(var + eps)."""


def long_row_opcodes() -> tuple:
    from mrvl.isa import OpcodeSpec
    from mrvl.isa import _f as f

    lnstats = OpcodeSpec(
        "lnstats",
        0x53,
        "vector",
        "The statistics of layernorm for each row of a dense f16 [rows, length] tensor: the "
        "mean and the variance in fp32 (two passes), rstd = 1 / sqrt(var + eps), written as "
        "f32 [rows, 2] (mean, rstd) for lnapply (docs/isa.md).",
        (
            f("in_addr", "i32", "OCM byte address of the input [rows, length], f16"),
            f("out_addr", "i32", "OCM byte address of the statistics [rows, 2], f32"),
            f("rows", "i32", "rows", legal="rows >= 1"),
            f("length", "i32", "elements of a row", legal="length >= 1"),
            f("eps", "f32", "epsilon added to the variance"),
        ),
    )
    lnapply = OpcodeSpec(
        "lnapply",
        0x54,
        "vector",
        "The normalization of layernorm on a run of count elements of each row of a dense f16 "
        "[rows, count] tensor, with the rows' f32 (mean, rstd) from lnstats and f32 scales and "
        "shifts [count]: (x - mean) * rstd * g + b in fp32, rounded once to f16.",
        (
            f("in_addr", "i32", "OCM byte address of the input [rows, count], f16"),
            f("out_addr", "i32", "OCM byte address of the result [rows, count], f16"),
            f("stats_addr", "i32", "OCM byte address of the rows' (mean, rstd) [rows, 2], f32"),
            f("rows", "i32", "rows", legal="rows >= 1"),
            f("count", "i32", "elements of each row in the run", legal="count >= 1"),
            f("g_addr", "i32", "OCM byte address of the run's scales [count], f32"),
            f("b_addr", "i32", "OCM byte address of the run's shifts [count], f32"),
        ),
    )
    return lnstats, lnapply


def with_long_row_opcodes(opcodes: tuple) -> tuple:
    """`opcodes` (ending with `end`) with `lnstats` and `lnapply` inserted before `end`."""
    *body, end = opcodes
    return (*body, *long_row_opcodes(), end)
