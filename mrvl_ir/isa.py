"""The MLIP instruction set as data: opcodes, their fields, and the in-memory program.

This table is the single source of truth that the `mlip` dialect, the binary encoder/decoder
and the simulator all read, so that an instruction cannot mean one thing to the compiler and
another to the simulator. `docs/isa.md` is the prose specification of the same table.

Every instruction has a common header (tile, signal token, wait tokens, source-location index)
and a fixed list of fields. A field is a signed 32-bit integer (`i32`), an IEEE binary32 value
(`f32`), or a fixed-length vector of `i32` (`i32xN`): a `FieldSpec`, which `mrvl.isa_fields`
defines with the groups of fields that several opcodes share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from mrvl.isa_fields import (  # FieldSpec and _f are the table's, re-exported
    _BROADCAST_CHANNELS,
    _CONV_EXTENT,
    FieldSpec,
    _f,
    _fc_fields,
    _vector_fields,
    _window_fields,
)
from mrvl.isa_int8 import with_int8_opcodes
from mrvl.isa_int8_bmm import with_int8_bmm_opcode
from mrvl.isa_long_rows import with_long_row_opcodes


class MemSpace(IntEnum):
    """Where an address points: DDR (shared, byte-addressed) or the OCM slice of the
    instruction's tile."""

    DDR = 0
    OCM = 1


class DType(IntEnum):
    """Element types the machine stores."""

    F32 = 0
    F16 = 1
    I8 = 2
    I32 = 3


DTypeName = StrEnum("DTypeName", {d.name: d.name.lower() for d in DType})
"""A `DType` by its word in the IR and the docs (f32, f16, i8, i32)."""


class IOKind(StrEnum):
    """Which way an entry of the I/O table crosses between the host and the machine."""

    INPUT = "input"
    OUTPUT = "output"


DTYPE_BYTES = {DType.F32: 4, DType.F16: 2, DType.I8: 1, DType.I32: 4}
DTYPE_NUMPY = {DType.F32: "float32", DType.F16: "float16", DType.I8: "int8", DType.I32: "int32"}


class Activation(IntEnum):
    """Activation fused into a compute instruction (docs/isa.md section 4).

    NONE..PRELU act on the fp32 accumulator. The table kinds (`TABLE_ACTIVATIONS`) look the
    accumulator, rounded to f16, up in the tile's activation table, which a `lut` instruction
    loaded with the same (act, act_a, act_b).
    """

    NONE = 0
    RELU = 1
    CLIP = 2  # clamp to [act_a, act_b]
    LEAKY_RELU = 3  # x < 0 -> act_a * x
    PRELU = 4  # x < 0 -> slope[channel] * x, slopes f32 in OCM at act_addr
    SIGMOID = 5  # 1 / (1 + e^-x)
    TANH = 6
    HARD_SIGMOID = 7  # max(0, min(1, act_a * x + act_b))
    HARD_SWISH = 8  # x * max(0, min(6, x + 3)) / 6
    SILU = 9  # x * sigmoid(x)
    MISH = 10  # x * tanh(ln(1 + e^x))
    GELU = 11  # x * (1 + erf(x / sqrt 2)) / 2
    GELU_TANH = 12  # x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2
    ERF = 13
    EXP = 14
    LOG = 15  # ln x
    SQRT = 16
    RECIPROCAL = 17  # 1 / x
    ABS = 18
    POW = 19  # x ** act_a, act_a a constant exponent
    LEAKY_FLOOR = 20  # max(x < 0 ? act_a * x : x, act_b): Max(LeakyRelu(x), c)


TABLE_ACTIVATIONS = frozenset(
    {
        Activation.SIGMOID,
        Activation.TANH,
        Activation.HARD_SIGMOID,
        Activation.HARD_SWISH,
        Activation.SILU,
        Activation.MISH,
        Activation.GELU,
        Activation.GELU_TANH,
        Activation.ERF,
        Activation.EXP,
        Activation.LOG,
        Activation.SQRT,
        Activation.RECIPROCAL,
        Activation.ABS,
        Activation.POW,
        Activation.LEAKY_FLOOR,
    }
)
"""Activations computed by table lookup: y = T[bits(f16(acc))], T loaded by `lut`."""

ACT_TABLE_ENTRIES = 1 << 16
"""A table maps every binary16 bit pattern to a binary16 result: 65,536 entries, 128 KiB."""


class PoolMode(IntEnum):
    MAX = 0
    AVG = 1


ReduceMode = IntEnum(
    "ReduceMode", {"SUM": 0, "MEAN": 1, "MAX": 2, "MIN": 3, "ARGMAX": 4, "L2": 5}
)
"""What `reduce` computes over a row (docs/isa.md, `reduce`)."""
BinaryMode = IntEnum("BinaryMode", {"ADD": 0, "SUB": 1, "MUL": 2, "DIV": 3, "MAX": 4, "MIN": 5})
"""The operation of `binary` on its two operands (docs/isa.md, `binary`)."""


@dataclass(frozen=True)
class OpcodeSpec:
    name: str
    opcode: int
    engine: str  # "dma" | "mac" | "vector" | "control"
    doc: str
    fields: tuple[FieldSpec, ...]

    def __post_init__(self) -> None:
        optional = [f.default is not None for f in self.fields]
        if optional != sorted(optional):
            raise ValueError(f"{self.name}: optional fields must come after the required ones")

    def field(self, name: str) -> FieldSpec:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


_ACT_FIELDS = (
    _f("act", "i32", "Activation", Activation),
    _f(
        "act_a",
        "f32",
        "activation parameter a (clip min, leaky alpha, hard-sigmoid alpha, pow exponent)",
    ),
    _f("act_b", "f32", "activation parameter b (clip max, hard-sigmoid beta, leaky floor)"),
)
"""The fused activation of every compute instruction."""

_PRELU_FIELD = _f(
    "act_addr", "i32", "OCM byte address of the PRELU slopes, f32 per output channel, or -1"
)
"""Where per-channel PRELU slopes live, on the instructions whose elements have a channel."""


OPCODES: tuple[OpcodeSpec, ...] = (
    OpcodeSpec(
        "dma",
        0x01,
        "dma",
        "Copy a 4-D strided box of elements between DDR and the tile's OCM (either way) "
        "or within one space. Strides are in bytes, outermost first. From DDR to OCM it may "
        "write the same OCM addresses on several tiles (dst_tiles), reading DDR once.",
        (
            _f("src_space", "i32", "MemSpace of the source", MemSpace),
            _f("src_addr", "i32", "source byte address"),
            _f("src_strides", "i32x4", "source byte strides"),
            _f("dst_space", "i32", "MemSpace of the destination", MemSpace),
            _f("dst_addr", "i32", "destination byte address"),
            _f("dst_strides", "i32x4", "destination byte strides"),
            _f("box", "i32x4", "elements per dimension", legal="box[d] >= 0"),
            _f("elem_bytes", "i32", "bytes per element", legal="elem_bytes >= 1"),
            _f(
                "dst_tiles",
                "i32",
                "bit mask of the tiles whose OCM receives the box (DDR to OCM only; it holds "
                "the instruction's tile); 0: the instruction's tile alone. Optional, default 0",
                default=0,
            ),
        ),
    ),
    OpcodeSpec(
        "cvt",
        0x02,
        "dma",
        "Convert a dense 4-D DDR tensor to another element type and a permuted layout "
        "(region I/O: f32 NCHW <-> f16 NHWC). dst dim i is src dim perm[i].",
        (
            _f("src_addr", "i32", "DDR byte address of the dense source"),
            _f("src_dtype", "i32", "DType of the source", DType),
            _f("src_shape", "i32x4", "source shape", legal="src_shape[d] >= 0"),
            _f("dst_addr", "i32", "DDR byte address of the dense destination"),
            _f("dst_dtype", "i32", "DType of the destination", DType),
            _f(
                "perm",
                "i32x4",
                "destination dimension i takes source dimension perm[i]",
                legal="sorted(perm) == [0, 1, 2, 3]",
            ),
        ),
    ),
    OpcodeSpec(
        "lut",
        0x03,
        "dma",
        "Load an activation table (65,536 f16 entries, indexed by the bits of an f16 value) "
        "from DDR into the tile's activation-table memory, for the table activation "
        "(act, act_a, act_b) of the compute instructions that follow on the tile.",
        (
            _f("src_addr", "i32", "DDR byte address of the table, 65,536 f16"),
            _f("act", "i32", "Activation", Activation, legal="act in TABLE_ACTIVATIONS"),
            *_ACT_FIELDS[1:],
        ),
    ),
    OpcodeSpec(
        "conv",
        0x10,
        "mac",
        "2-D convolution of an input window into an output tile, with bias and a fused "
        "activation. Weights OHWI f16 [out_shape.C, KH, KW, C/groups] for the tile's output "
        "channels; bias f32 [out_shape.C].",
        # A conv's padding may reach the kernel's extent (ONNX allows it: outputs that read
        # padding alone, as a 1x1 conv with pads 1 has), so it is bounded like the trailing
        # padding instead.
        _window_fields(
            _CONV_EXTENT,
            ("pad[d] >= 0", f"pad[1] <= 2 * ({_CONV_EXTENT} + in_shape[2])"),
        )
        + (
            _f("dilation", "i32x2", "dilation [DH, DW]", legal="dilation[d] >= 1"),
            _f(
                "groups",
                "i32",
                "channel groups",
                legal=("groups >= 1", "in_shape[3] % groups == 0"),
            ),
            _f(
                "oc0",
                "i32",
                "output-tensor channel of the tile's first channel (selects the group)",
                legal="0 <= oc0 <= oc_total - out_shape[3]",
            ),
            _f(
                "oc_total",
                "i32",
                "output channels of the whole layer",
                legal="oc_total % groups == 0",
            ),
            _f("w_addr", "i32", "OCM byte address of the weights"),
            _f("b_addr", "i32", "OCM byte address of the bias, or -1 for none"),
            *_ACT_FIELDS,
            _PRELU_FIELD,
            _f(
                "acc_addr",
                "i32",
                "OCM byte address of fp32 partial sums [N, H, W, C] of out_shape to start "
                "from instead of the bias, or -1",
            ),
            _f(
                "acc_out",
                "i32",
                "1: write the fp32 accumulator (no activation, no rounding) instead of f16",
                legal="acc_out in (0, 1)",
            ),
        ),
    ),
    OpcodeSpec(
        "pool",
        0x20,
        "vector",
        "Max or average pooling of an input window into an output tile.",
        _window_fields("kernel[1]", ("0 <= pad[d] < kernel[d]", "pad[d] <= in_hw[d]"))
        + (
            _f("mode", "i32", "PoolMode", PoolMode),
            _f(
                "in_hw",
                "i32x2",
                "full input tensor [H, W], to count padding for averages",
                legal=(
                    "in_hw[d] >= 1",
                    "in_hw[1] == in_shape[2]",
                    # the window lies inside the tensor and holds every row the tile reads
                    "row0 + in_shape[1] <= in_hw[0]",
                    "row0 <= max(0, orow0 * stride[0] - pad[0])",
                    (
                        "row0 + in_shape[1] >= "
                        "min(in_hw[0], (orow0 + out_shape[1] - 1) * stride[0] - pad[0] + kernel[0])"
                    ),
                ),
            ),
            _f(
                "pad_end",
                "i32x2",
                "trailing padding [bottom, right], to count padding for averages",
                legal=(
                    "0 <= pad_end[d] < kernel[d]",
                    "pad_end[d] <= in_hw[d]",
                    "kernel[d] <= in_hw[d] + pad[d] + pad_end[d]",
                ),
            ),
            _f(
                "count_include_pad",
                "i32",
                "1: average divides by the full window",
                legal="count_include_pad in (0, 1)",
            ),
        ),
    ),
    OpcodeSpec(
        "resize",
        0x21,
        "vector",
        "Separable two-tap interpolation of an NHWC input window into an output tile: each "
        "output row mixes two input rows and each output column two input columns, by the "
        "indices and fp32 weights of a row table and a column table (bilinear resize; "
        "nearest is weights 1, 0).",
        (
            _f("in_addr", "i32", "OCM byte address of the input window, NHWC, f16"),
            _f(
                "in_shape",
                "i32x4",
                "input window shape [N, H, W, C]: all columns, rows row0..",
                legal="in_shape[d] >= 1",
            ),
            _f("row0", "i32", "input-tensor row held by the window's first row"),
            _f("out_addr", "i32", "OCM byte address of the output tile, NHWC, f16"),
            _f(
                "out_shape",
                "i32x4",
                "output tile shape [N, OH, OW, C]",
                legal=(
                    "out_shape[d] >= 1",
                    "[out_shape[0], out_shape[3]] == [in_shape[0], in_shape[3]]",
                ),
            ),
            _f(
                "ytab_addr",
                "i32",
                "OCM byte address of the row table [OH, 4] f32: input rows i0, i1 and "
                "weights w0, w1 of each output row",
            ),
            _f(
                "xtab_addr",
                "i32",
                "OCM byte address of the column table [OW, 4] f32: input columns i0, i1 and "
                "weights w0, w1 of each output column",
            ),
        ),
    ),
    OpcodeSpec(
        "fc",
        0x30,
        "mac",
        "Fully connected layer: out[N, O] = act(in[N, K] . W[O, K]^T + b[O]) for the tile's "
        "output features.",
        (*_fc_fields("f16", "f32"), *_ACT_FIELDS, _PRELU_FIELD),
    ),
    OpcodeSpec(
        "bmm",
        0x31,
        "mac",
        "Batched product of two activations: out[b] = A[b] . B[b] for each of `batch` "
        "matrices, either operand optionally transposed or shared by every batch; fp32 "
        "accumulation from +0.0 or from fp32 partial sums, one rounding to f16 (or the fp32 "
        "accumulator itself, for a reduction split into blocks).",
        (
            _f(
                "a_addr",
                "i32",
                "OCM byte address of A, f16: per batch [M, K], or [K, M] with trans_a",
            ),
            _f(
                "b_addr",
                "i32",
                "OCM byte address of B, f16: per batch [K, N], or [N, K] with trans_b",
            ),
            _f("out_addr", "i32", "OCM byte address of the output [batch, M, N], f16 or fp32"),
            _f("batch", "i32", "matrices in the product", legal="batch >= 1"),
            _f("m", "i32", "rows of each output matrix", legal="m >= 1"),
            _f("k", "i32", "the reduction's length", legal="k >= 1"),
            _f("n", "i32", "columns of each output matrix", legal="n >= 1"),
            _f("trans_a", "i32", "1: A is stored [K, M]", legal="trans_a in (0, 1)"),
            _f("trans_b", "i32", "1: B is stored [N, K]", legal="trans_b in (0, 1)"),
            _f(
                "a_shared",
                "i32",
                "1: one A matrix for every batch (a broadcast operand)",
                legal="a_shared in (0, 1)",
            ),
            _f(
                "b_shared",
                "i32",
                "1: one B matrix for every batch (a broadcast operand)",
                legal="b_shared in (0, 1)",
            ),
            _f(
                "acc_addr",
                "i32",
                "OCM byte address of fp32 partial sums [batch, M, N] to start from instead of "
                "+0.0, or -1",
            ),
            _f(
                "acc_out",
                "i32",
                "1: write the fp32 accumulator (no rounding) instead of f16",
                legal="acc_out in (0, 1)",
            ),
        ),
    ),
    OpcodeSpec(
        "add",
        0x40,
        "vector",
        "Elementwise sum of two dense f16 vectors with a fused activation: "
        "out[i] = act(fp32(a[i]) + fp32(b[i])), rounded to f16.",
        (
            *_vector_fields("f16"),
            _f(
                "channels",
                "i32",
                "channels C of NHWC data for PRELU (element i belongs to channel i mod C), or 0",
                legal=("channels >= 0", "channels == 0 or count % channels == 0"),
            ),
            *_ACT_FIELDS,
            _PRELU_FIELD,
        ),
    ),
    OpcodeSpec(
        "scale",
        0x41,
        "vector",
        "Per-channel affine map of a dense f16 NHWC (or [N, C]) vector with a fused activation: "
        "out[i] = act(fp32(fp32(x[i]) * s[c]) + b[c]) with c = i mod channels, rounded to f16.",
        (
            _f("in_addr", "i32", "OCM byte address of the input, f16"),
            _f("out_addr", "i32", "OCM byte address of the result, f16"),
            _f("count", "i32", "number of elements (a multiple of channels)", legal="count >= 1"),
            _f(
                "channels",
                "i32",
                "channels C: element i belongs to channel i mod C",
                legal=("channels >= 1", "count % channels == 0"),
            ),
            _f("s_addr", "i32", "OCM byte address of the scales [C], f32"),
            _f("b_addr", "i32", "OCM byte address of the shifts [C], f32"),
            *_ACT_FIELDS,
            _PRELU_FIELD,
        ),
    ),
    OpcodeSpec(
        "mul",
        0x42,
        "vector",
        "Elementwise product of two f16 vectors with a fused activation, the second one "
        "optionally broadcast per channel: out[i] = act(fp32(a[i]) * fp32(b[j])), rounded "
        "to f16, with j = i, or j = i mod channels when channels > 0.",
        (*_vector_fields("f16", counted=True), _BROADCAST_CHANNELS, *_ACT_FIELDS),
    ),
    OpcodeSpec(
        "softmax",
        0x50,
        "vector",
        "Softmax of a dense f16 [outer, length, inner] tensor over its middle axis: the row "
        "max, exp32(x - max) (docs/isa.md), their fp32 sum, then f16(fp32(e / sum)).",
        (
            _f("in_addr", "i32", "OCM byte address of the input [outer, length, inner], f16"),
            _f("out_addr", "i32", "OCM byte address of the result [outer, length, inner], f16"),
            _f("outer", "i32", "extent of the axes before the reduced one", legal="outer >= 1"),
            _f("length", "i32", "extent of the reduced axis (a row)", legal="length >= 1"),
            _f("inner", "i32", "extent of the axes after it (a row's stride)", legal="inner >= 1"),
        ),
    ),
    OpcodeSpec(
        "layernorm",
        0x51,
        "vector",
        "Layer normalization of each row of a dense f16 [rows, length] tensor: mean and variance "
        "in fp32 (two passes), rstd = 1 / sqrt(var + eps), then (x - mean) * rstd * g + b in "
        "fp32, rounded once to f16 (docs/isa.md).",
        (
            _f("in_addr", "i32", "OCM byte address of the input [rows, length], f16"),
            _f("out_addr", "i32", "OCM byte address of the result [rows, length], f16"),
            _f("rows", "i32", "rows normalized", legal="rows >= 1"),
            _f("length", "i32", "elements of a row", legal="length >= 1"),
            _f("g_addr", "i32", "OCM byte address of the scales [length], f32"),
            _f("b_addr", "i32", "OCM byte address of the shifts [length], f32"),
            _f("eps", "f32", "epsilon added to the variance"),
        ),
    ),
    OpcodeSpec(
        "reduce",
        0x52,
        "vector",
        "Sum, mean, max, min, argmax or L2 norm of a dense f16 [outer, length, inner] tensor "
        "over its middle axis, in fp32 in order of the axis (docs/isa.md), optionally from or "
        "to fp32 partials.",
        (
            _f("in_addr", "i32", "OCM byte address of the input [outer, length, inner], f16"),
            _f("out_addr", "i32", "OCM byte address of the result [outer, inner]"),
            _f("outer", "i32", "extent of the axes before the reduced ones", legal="outer >= 1"),
            _f("length", "i32", "extent of the reduced axes (a row)", legal="length >= 1"),
            _f("inner", "i32", "extent of the axes after them (a row's stride)", legal="inner >= 1"),
            _f("mode", "i32", "ReduceMode", ReduceMode),
            _f("divisor", "i32", "MEAN divides the sum by it", legal="divisor >= 1"),
            _f(
                "acc_addr",
                "i32",
                "OCM byte address of fp32 partials [outer, inner] to start from, or -1",
            ),
            _f(
                "acc_out",
                "i32",
                "1: write the fp32 partials (no division or square root, no rounding) instead of "
                "the result",
                legal=("acc_out in (0, 1)", "mode != 4 or (acc_out == 0 and acc_addr == -1)"),
            ),
        ),
    ),
    OpcodeSpec(
        "binary",
        0x45,
        "vector",
        "Elementwise add, sub, mul, div, max or min of two f16 tensors broadcast (stride 0) to "
        "a dense 4-D result, in fp32, rounded to f16.",
        (
            _f("a_addr", "i32", "OCM byte address of the first operand, f16"),
            _f("b_addr", "i32", "OCM byte address of the second operand, f16"),
            _f("out_addr", "i32", "OCM byte address of the dense result, f16"),
            _f("shape", "i32x4", "result shape", legal="shape[d] >= 1"),
            _f("a_strides", "i32x4", "element strides of a (0: broadcast)", legal="a_strides[d] >= 0"),
            _f("b_strides", "i32x4", "element strides of b (0: broadcast)", legal="b_strides[d] >= 0"),
            _f("mode", "i32", "BinaryMode", BinaryMode),
        ),
    ),
    OpcodeSpec("end", 0x7F, "control", "End of the program.", ()),
)
OPCODES = with_int8_opcodes(OPCODES)  # quant, dequant, qconv, ... (mrvl_ir/isa_int8.py)
OPCODES = with_long_row_opcodes(OPCODES)  # lnstats, lnapply (mrvl_ir/isa_long_rows.py)
OPCODES = with_int8_bmm_opcode(OPCODES)  # qbmm (mrvl_ir/isa_int8_bmm.py)

OPCODE_BY_NAME = {spec.name: spec for spec in OPCODES}
OPCODE_BY_VALUE = {spec.opcode: spec for spec in OPCODES}


def bmm_shapes(f: dict) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The shapes of A, B and the output of a `bmm`, as stored."""
    batch, m, k, n = f["batch"], f["m"], f["k"], f["n"]
    a = (1 if f["a_shared"] else batch, *((k, m) if f["trans_a"] else (m, k)))
    b = (1 if f["b_shared"] else batch, *((n, k) if f["trans_b"] else (k, n)))
    return a, b, (batch, m, n)

EXP_LOW = -80.0
"""exp32 (docs/isa.md §4) takes arguments below this as it (exp(-80) = 1.8e-35: nothing an
f16 result can show)."""
EXP_LOG2E = 1.44269504088896341
EXP_LN2_HI = 0.693359375
"""ln 2 in two parts (HI + LO): HI has 9 significant bits, so k * HI is exact in fp32."""
EXP_LN2_LO = -2.12194440e-4
EXP_POLY = tuple(1.0 / f for f in (5040, 720, 120, 24, 6, 2, 1, 1))
"""exp32's polynomial, 1/7! .. 1/0!, highest degree first; every constant is used as the
nearest fp32 value."""

NO_SIGNAL = 0
"""Token 0 means "signals nothing"; real tokens are 1..2**32 - 1 (u32 in the binary)."""

NO_LOC = 0xFFFFFFFF
"""Source-location index of an instruction that no ONNX node produced."""

CONV_CI_BLOCK = 64
"""Input channels per block of the conv reduction (docs/isa.md, `conv`): the accumulation runs
block by block over a group's input channels, all taps of one block before the next, as a MAC
array that takes 64 channels per pass would. A layer split over input channels at block
boundaries therefore computes the same bits as the whole layer."""


FieldValue = int | float | tuple[int, ...]


@dataclass
class Instruction:
    """One decoded instruction: header plus the opcode's fields by name."""

    opcode: str
    tile: int
    signal: int = NO_SIGNAL
    waits: tuple[int, ...] = ()
    loc: int = NO_LOC
    fields: dict[str, FieldValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # An optional field left out takes its default (FieldSpec.default); a field the
        # opcode does not have, or a missing required one, is for validation to report.
        defaults = _DEFAULTS.get(self.opcode)
        if defaults and not defaults.keys() <= self.fields.keys():
            self.fields = {
                **self.fields,
                **{k: v for k, v in defaults.items() if k not in self.fields},
            }

    @property
    def spec(self) -> OpcodeSpec:
        return OPCODE_BY_NAME[self.opcode]


_DEFAULTS = {
    spec.name: {f.name: f.default for f in spec.fields if f.default is not None} for spec in OPCODES
}
"""Per opcode, its optional fields and their defaults (empty for most opcodes)."""


def destination_tiles(ins: Instruction) -> tuple[int, ...]:
    """The tiles whose OCM a `dma` writes when its destination is OCM, in ascending order:
    its own tile when `dst_tiles` is 0, else the tiles of the mask (docs/isa.md, `dma`; a
    validated program's mask holds its own tile and only tiles < num_tiles)."""
    mask = ins.fields["dst_tiles"] & 0xFFFFFFFF
    if mask == 0:
        return (ins.tile,)
    return tuple(t for t in range(mask.bit_length()) if mask >> t & 1)


@dataclass
class IOEntry:
    """One region input or output: a dense f32 NCHW (or [N, F]) tensor in DDR."""

    name: str
    is_input: bool
    shape: tuple[int, ...]
    dtype: DType
    ddr_addr: int


@dataclass
class Program:
    """A whole model binary, decoded."""

    target: str
    num_tiles: int
    ddr_size: int
    io: list[IOEntry]
    code: list[Instruction]
    const_base: int
    consts: bytes
    srcmap: list[str]

    @property
    def inputs(self) -> list[IOEntry]:
        return [e for e in self.io if e.is_input]

    @property
    def outputs(self) -> list[IOEntry]:
        return [e for e in self.io if not e.is_input]


ENGINE_QUEUES = {"dma": 0, "mac": 1, "vector": 2, "control": 2}
"""Each tile runs three queues in order: 0 DMA (and conversions and table loads), 1 MAC,
2 vector (and control). An opcode's queue is its `OpcodeSpec.engine`'s; the scheduler
(`sched-insert-sync`) and the cycle model both read it from here."""


def queue_slot(opcode: str) -> int:
    """The queue, within its tile, that runs `opcode` (`ENGINE_QUEUES`)."""
    return ENGINE_QUEUES[OPCODE_BY_NAME[opcode].engine]


class OpcodeTable(dict):
    """One stage's entry for every opcode (a kernel, a check, a cost, an operand rule), filled
    by `@table.register("conv")`. `require_complete()`, called once the stage's module has
    registered its entries, names any opcode of the ISA table without one, so that a new
    instruction cannot miss a stage (xDSL's `@register_impls` idea, with its guard)."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def register(self, opcode: str):
        """Register the decorated function as `opcode`'s entry."""
        if opcode not in OPCODE_BY_NAME:
            raise KeyError(f"no opcode {opcode!r} in the ISA table")

        def add(entry):
            self[opcode] = entry
            return entry

        return add

    def require_complete(self) -> None:
        missing = sorted(set(OPCODE_BY_NAME) - set(self))
        if missing:
            raise AssertionError(f"opcodes without {self.what}: {missing}")
