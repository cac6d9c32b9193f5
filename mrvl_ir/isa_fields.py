"""The fields of the ISA table's instructions (`mrvl.isa`): what a field is (`FieldSpec`), and
the groups of fields that several opcodes share, built once: the window geometry of conv and
pool, the operands of fc, and the two vectors of the elementwise instructions. `mrvl.isa`
holds the opcodes made of them (and re-exports `FieldSpec`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


@dataclass(frozen=True)
class FieldSpec:
    name: str
    kind: str  # "i32" | "f32" | "i32xN"
    doc: str
    enum: type[IntEnum] | None = None
    """The enumeration an `i32` field holds (the `mlip` dialect prints its member names)."""
    default: int | None = None
    """The value of an optional field, or None for a required one. An optional field added to
    an opcode keeps every existing program meaning what it meant: the `mlip` text leaves it out
    when it holds its default (and parses it when present), `InstructionOp.build` and an
    in-memory `Instruction` take the default when it is not given. The binary always carries
    it. Optional fields come after the required ones of their opcode."""
    legal: tuple[str, ...] = ()
    """The field's legal range: conditions (Python expressions over the opcode's fields, `d`
    the element of a vector field, and the machine's `ocm`, `ddr` and `tiles`) that every legal
    value meets. The simulator's validator, the `mlip` verifier, the binary encoder and
    docs/isa.md's fault list all read them (`isa_rules.legal_rules`, `isa_rules.broken_rule`)."""

    @property
    def length(self) -> int:
        """Number of 32-bit words this field occupies in the encoding."""
        if self.kind.startswith("i32x"):
            return int(self.kind[4:])
        return 1


def _f(
    name: str,
    kind: str,
    doc: str,
    enum: type[IntEnum] | None = None,
    *,
    default: int | None = None,
    legal: str | tuple[str, ...] = (),
) -> FieldSpec:
    return FieldSpec(name, kind, doc, enum, default, (legal,) if isinstance(legal, str) else legal)


def _window_fields(extent: str, pad_legal: tuple[str, ...]) -> tuple[FieldSpec, ...]:
    """The geometry shared by conv and pool. `extent` is the kernel's extent in columns (a
    conv's is dilated); `pad_legal` bounds the leading padding."""
    trailing = f"(out_shape[2] - 1) * stride[1] + {extent} - pad[1] - in_shape[2]"
    return (
        _f("in_addr", "i32", "OCM byte address of the input window, NHWC, f16"),
        _f(
            "in_shape",
            "i32x4",
            "input window shape [N, H, W, C]: all columns and channels, rows row0..",
            legal="in_shape[d] >= 1",
        ),
        _f("row0", "i32", "input-tensor row held by the window's first row", legal="row0 >= 0"),
        _f("out_addr", "i32", "OCM byte address of the output tile, NHWC, f16"),
        _f(
            "out_shape",
            "i32x4",
            "output tile shape [N, H, W, C]",
            legal=(
                "out_shape[d] >= 1",
                "out_shape[0] == in_shape[0]",
                # the trailing column padding the shapes imply, like the leading one, is at
                # most twice the kernel's extent and the input's width: an engine that pads
                # the window by them keeps its memory proportional to the window
                f"{trailing} <= 2 * ({extent} + in_shape[2])",
            ),
        ),
        _f("orow0", "i32", "output-tensor row of the tile's first row", legal="orow0 >= 0"),
        _f("kernel", "i32x2", "kernel [KH, KW]", legal="kernel[d] >= 1"),
        _f("stride", "i32x2", "stride [SH, SW]", legal="stride[d] >= 1"),
        _f(
            "pad",
            "i32x2",
            "leading padding [top, left]; trailing padding is implied by the shapes",
            legal=pad_legal,
        ),
    )


_CONV_EXTENT = "((kernel[1] - 1) * dilation[1] + 1)"
"""The extent of a conv's kernel in input columns."""

def _fc_fields(dtype: str, bias: str) -> tuple[FieldSpec, ...]:
    """The rows, sizes, weights, bias and output of `fc` and `qfc`: elements of `dtype`, a
    bias of `bias`."""
    return (
        _f("in_addr", "i32", f"OCM byte address of the input rows [N, K], {dtype}"),
        _f("n", "i32", "rows (batch)", legal="n >= 1"),
        _f("k", "i32", "input features", legal="k >= 1"),
        _f("o", "i32", "output features in this tile", legal="o >= 1"),
        _f("w_addr", "i32", f"OCM byte address of the weights [O, K], {dtype}"),
        _f("b_addr", "i32", f"OCM byte address of the bias [O], {bias}, or -1 for none"),
        _f("out_addr", "i32", f"OCM byte address of the output [N, O], {dtype}"),
    )


def _vector_fields(dtype: str, counted: bool = False) -> tuple[FieldSpec, ...]:
    """a_addr, b_addr, out_addr and count of an elementwise instruction of two dense `dtype`
    vectors (add, mul and their int8 kin); `counted`: a and the result say that they hold
    `count` elements (b may hold fewer)."""
    n = " [count]" if counted else ""
    return (
        _f("a_addr", "i32", f"OCM byte address of the first operand{n}, {dtype}"),
        _f("b_addr", "i32", f"OCM byte address of the second operand, {dtype}"),
        _f("out_addr", "i32", f"OCM byte address of the result{n}, {dtype}"),
        _f("count", "i32", "number of elements", legal="count >= 1"),
    )


_BROADCAST_CHANNELS = _f(
    "channels",
    "i32",
    "0: b holds count elements; C > 0: b holds C, element i reads b[i mod C]",
    legal=("channels >= 0", "channels == 0 or count % channels == 0"),
)
"""The per-channel broadcast of the second operand of `mul` and `qmul`."""
