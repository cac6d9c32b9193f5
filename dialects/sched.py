"""The `sched` scheduling dialect: memory and time made explicit.

Tensors become buffers in DDR or in one tile's on-chip memory (OCM), with sizes and (once
allocated) byte offsets. Work becomes DMA transfers and compute tasks, each placed on a tile and
ordered by tokens: a task lists the tokens it waits for (`after(...)`) and yields its own.
Tiling, tile assignment and allocation are all visible here.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from math import prod

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    ParametrizedAttribute,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    param_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.irdl.operations import AttrSizedOperandSegments
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from mrvl.dialects.mrvl import ACTIVATION_FORMAT, FusedActivation, numpy_dtype
from mrvl.isa import ACT_TABLE_ENTRIES, TABLE_ACTIVATIONS
from mrvl.target import UnknownTargetError, get_target, valid_tile_count

class MemorySpace(StrEnum):
    """Where a buffer lives: the DDR all tiles share, or one tile's on-chip memory."""

    DDR = "ddr"
    OCM = "ocm"


@irdl_attr_definition
class MemorySpaceAttr(EnumAttribute[MemorySpace], SpacedOpaqueSyntaxAttribute):
    """A buffer's memory space; a `MemorySpace` compares equal to its word ("ddr", "ocm")."""

    name = "sched.memory_space"


MEMORY_SPACES = tuple(MemorySpace)


class PoolKind(StrEnum):
    """Which reduction a pool task computes over its window."""

    MAX = "max"
    AVG = "avg"


@irdl_attr_definition
class PoolKindAttr(EnumAttribute[PoolKind], SpacedOpaqueSyntaxAttribute):
    """A pool task's reduction; prints as a word (`sched.pool2d tile 0 avg ...`)."""

    name = "sched.pool_kind"


@irdl_attr_definition
class BufferType(ParametrizedAttribute, TypeAttribute):
    """A dense row-major buffer in a memory space: `!sched.buffer<ocm, 1x15x28x1xf16>`."""

    name = "sched.buffer"
    space: MemorySpaceAttr = param_def()
    shape: ArrayAttr[IntAttr] = param_def()
    element_type: Attribute = param_def()

    def __init__(self, space: str, shape: Sequence[int], element_type: Attribute):
        super().__init__(
            _memory_space(space), ArrayAttr([IntAttr(d) for d in shape]), element_type
        )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            pos = parser.pos
            space = parser.parse_identifier("memory space")
            if space not in MEMORY_SPACES:
                parser.raise_error(f"unknown memory space '{space}' (ddr or ocm)", pos)
            parser.parse_punctuation(",")
            dims, element_type = parser.parse_ranked_shape()
        return (_memory_space(space), ArrayAttr([IntAttr(d) for d in dims]), element_type)

    def print_parameters(self, printer: Printer) -> None:
        dims = "x".join(str(d.data) for d in self.shape.data)
        printer.print_string(f"<{self.space.data}, {dims}x")
        printer.print_attribute(self.element_type)
        printer.print_string(">")

    def verify(self) -> None:
        if any(d.data < 1 for d in self.shape.data):
            raise VerifyException("buffer dimensions must be >= 1")

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def size_bytes(self) -> int:
        return prod(self.dims) * numpy_dtype(self.element_type).itemsize


@cache
def _memory_space(space: str) -> MemorySpaceAttr:
    return MemorySpaceAttr(MemorySpace(space))


@irdl_attr_definition
class TokenType(ParametrizedAttribute, TypeAttribute):
    """Completion of a DMA or a task; waited on by the tasks that depend on it."""

    name = "sched.token"


_PLAN_FIELDS = {
    "sched.window_plan": ("ocs", "rows", "cols", "cbs", "split", "strided"),
    "sched.fc_plan": ("os", "ns", "split"),
}


class _PlanAttr(ParametrizedAttribute):
    """A layer's tiling plan, `<name = value, ...>` with every field present and in order; its
    pieces (and their tiles) are regenerated from it (`tiling.window_pieces`, `fc_pieces`)."""

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        values = []
        with parser.in_angle_brackets():
            for i, field in enumerate(_PLAN_FIELDS[cls.name]):
                if i:
                    parser.parse_punctuation(",")
                parser.parse_keyword(field)
                parser.parse_punctuation("=")
                if field == "split":
                    values.append(StringAttr(parser.parse_str_literal("a split")))
                else:
                    values.append(IntAttr(parser.parse_integer(allow_boolean=False)))
        return values

    def print_parameters(self, printer: Printer) -> None:
        fields = []
        for field, value in zip(_PLAN_FIELDS[self.name], self.parameters, strict=True):
            text = f'"{value.data}"' if isinstance(value, StringAttr) else str(value.data)
            fields.append(f"{field} = {text}")
        printer.print_string(f"<{', '.join(fields)}>")

    def verify(self) -> None:
        for field, value in zip(_PLAN_FIELDS[self.name], self.parameters, strict=True):
            if isinstance(value, IntAttr) and value.data < (
                0 if field in ("cbs", "strided") else 1
            ):
                raise VerifyException(f"{self.name}: {field} = {value.data} is out of range")


@irdl_attr_definition
class WindowPlanAttr(_PlanAttr):
    """The plan of a conv/pool layer (`tiling.WindowPlan`): output channels, rows and columns
    per piece, input channels per block (0: not cut into blocks), how the pieces go to the
    tiles (`tiling.SPLITS` or a grid `GxB`), and `strided = 1` when its pieces load only the
    rows and columns a strided 1x1 conv reads (`WindowLayer.subsampled`)."""

    name = "sched.window_plan"
    ocs: IntAttr = param_def()
    rows: IntAttr = param_def()
    cols: IntAttr = param_def()
    cbs: IntAttr = param_def()
    split: StringAttr = param_def()
    strided: IntAttr = param_def()

    def __init__(self, ocs: int, rows: int, cols: int, cbs: int, split: str, strided: bool):
        super().__init__(
            IntAttr(ocs), IntAttr(rows), IntAttr(cols), IntAttr(cbs), StringAttr(split),
            IntAttr(int(strided)),
        )  # fmt: skip

    def verify(self) -> None:
        super().verify()
        if self.strided.data > 1:
            raise VerifyException("sched.window_plan: strided is 0 or 1")


@irdl_attr_definition
class FcPlanAttr(_PlanAttr):
    """The plan of an FC layer (`tiling.FcPlan`): output features and rows per piece, and how
    the pieces go to the tiles (`tiling.FC_SPLITS`)."""

    name = "sched.fc_plan"
    os: IntAttr = param_def()
    ns: IntAttr = param_def()
    split: StringAttr = param_def()

    def __init__(self, os: int, ns: int, split: str):
        super().__init__(IntAttr(os), IntAttr(ns), StringAttr(split))


def buffer_type(value: SSAValue) -> BufferType:
    t = value.type
    if not isinstance(t, BufferType):
        raise VerifyException(f"expected a !sched.buffer, got {t}")
    return t


def _i64_array(values: Sequence[int]) -> DenseArrayBase:
    return _i64_array_of(tuple(int(v) for v in values))


# Attributes are immutable, and a program repeats the same offsets, boxes and strides
# thousands of times: building each anew was a third of convert-mrvl-to-sched on a ResNet-50.
@cache
def _i64_array_of(values: tuple[int, ...]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


@cache
def _i64_attr(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


class BufferDefBase(IRDLOperation):
    """An op that defines a buffer and may carry its allocated byte offset."""

    offset = opt_prop_def(IntegerAttr[I64])
    buffer = result_def(BufferType)

    @property
    def buffer_type(self) -> BufferType:
        return buffer_type(self.buffer)


@irdl_op_definition
class IOOp(BufferDefBase):
    """A region input or output: dense f32 in DDR, in the layout TVM passes (NCHW or NC)."""

    name = "sched.io"
    io_name = prop_def(StringAttr)
    kind = prop_def(StringAttr)
    assembly_format = "$io_name $kind (`offset` `(` $offset^ `)`)? attr-dict `:` type($buffer)"

    def __init__(self, io_name: str, is_input: bool, type: BufferType):
        super().__init__(
            properties={
                "io_name": StringAttr(io_name),
                "kind": StringAttr("input" if is_input else "output"),
            },
            result_types=[type],
        )

    @property
    def is_input(self) -> bool:
        return self.kind.data == "input"

    def verify_(self) -> None:
        if self.kind.data not in ("input", "output"):
            raise VerifyException('sched.io: kind must be "input" or "output"')
        if self.buffer_type.space.data != "ddr":
            raise VerifyException("sched.io: region I/O lives in DDR")


@irdl_op_definition
class ConstOp(BufferDefBase):
    """A constant buffer in DDR; its bytes go to the binary's constant pool."""

    name = "sched.const"
    const_name = prop_def(StringAttr)
    value = prop_def(DenseIntOrFPElementsAttr)
    assembly_format = (
        "$const_name `=` $value (`offset` `(` $offset^ `)`)? attr-dict `:` type($buffer)"
    )

    def __init__(self, const_name: str, value: DenseIntOrFPElementsAttr, type: BufferType):
        super().__init__(
            properties={"const_name": StringAttr(const_name), "value": value},
            result_types=[type],
        )

    def verify_(self) -> None:
        bt = self.buffer_type
        if bt.space.data != "ddr":
            raise VerifyException("sched.const: constants live in DDR")
        if len(self.value.data.data) != bt.size_bytes:
            raise VerifyException(
                f"sched.const '{self.const_name.data}': {len(self.value.data.data)} bytes of "
                f"data for a {bt.size_bytes}-byte buffer"
            )


@irdl_op_definition
class AllocOp(BufferDefBase):
    """A scratch buffer: an intermediate tensor in DDR, or a window in one tile's OCM."""

    name = "sched.alloc"
    tile = opt_prop_def(IntegerAttr[I64])
    assembly_format = (
        "(`tile` `(` $tile^ `)`)? (`offset` `(` $offset^ `)`)? attr-dict `:` type($buffer)"
    )

    def __init__(self, type: BufferType, tile: int | None = None):
        super().__init__(
            properties={"tile": _i64_attr(tile)} if tile is not None else {},
            result_types=[type],
        )

    def verify_(self) -> None:
        is_ocm = self.buffer_type.space.data == "ocm"
        if is_ocm != (self.tile is not None):
            raise VerifyException("sched.alloc: an OCM buffer names its tile, a DDR one does not")


@irdl_op_definition
class ViewOp(IRDLOperation):
    """The same bytes seen with another shape (a reshape of a dense buffer): no data moves."""

    name = "sched.view"
    source = operand_def(BufferType)
    buffer = result_def(BufferType)
    assembly_format = "$source attr-dict `:` type($source) `->` type($buffer)"

    def __init__(self, source: SSAValue, type: BufferType):
        super().__init__(operands=[source], result_types=[type])

    def verify_(self) -> None:
        s, r = buffer_type(self.source), buffer_type(self.buffer)
        if s.size_bytes != r.size_bytes or s.space != r.space:
            raise VerifyException("sched.view: a view keeps the memory space and the byte size")


class TaskBase(IRDLOperation):
    """Work placed on a tile, started once the tokens in `after` have completed."""

    deps = var_operand_def(TokenType())
    tile = prop_def(IntegerAttr[I64])
    token = result_def(TokenType)

    @classmethod
    def make(cls, properties: dict[str, Attribute], **operands):
        """Build from operands given by name (optional ones as [] or [value])."""
        names = [name for name, _ in cls.get_irdl_definition().operands]
        return cls.build(
            operands=[operands[n] for n in names],
            properties=properties,
            result_types=[TokenType()],
        )


@irdl_op_definition
class ConvertOp(TaskBase):
    """Dense DDR-to-DDR conversion of element type and dimension order (region I/O)."""

    name = "sched.convert"
    source = operand_def(BufferType)
    dest = operand_def(BufferType)
    perm = prop_def(DenseArrayBase[I64])
    assembly_format = (
        "`tile` $tile $source `->` $dest `perm` $perm (`after` `(` $deps^ `)`)? "
        "attr-dict `:` type($source) `,` type($dest)"
    )

    def __init__(self, source, dest, perm, tile: int, deps: Sequence[SSAValue] = ()):
        super().__init__(
            operands=[source, dest, list(deps)],
            properties={"perm": _i64_array(perm), "tile": _i64_attr(tile)},
            result_types=[TokenType()],
        )

    def verify_(self) -> None:
        s, d = buffer_type(self.source), buffer_type(self.dest)
        perm = self.perm.get_values()
        if sorted(perm) != list(range(len(s.dims))):
            raise VerifyException(f"sched.convert: perm {list(perm)} is not a permutation")
        if tuple(s.dims[p] for p in perm) != d.dims:
            raise VerifyException("sched.convert: destination shape is not the permuted source")
        if s.space.data != "ddr" or d.space.data != "ddr":
            raise VerifyException("sched.convert: converts between DDR buffers")


class DmaBase(TaskBase):
    """Copy a box of elements from `source[src_offsets]` to `dest[dst_offsets]`.

    With `src_strides` (or `dst_strides`) that side is a flat, 1-D buffer: its offset is one
    element index and the box steps through it by the given element strides, which may be 0
    on the source (a repeated element) and skip elements on the destination (zero
    insertion). The box then has one extent per stride, at most 4.
    """

    source = operand_def(BufferType)
    dest = operand_def(BufferType)
    src_offsets = prop_def(DenseArrayBase[I64])
    dst_offsets = prop_def(DenseArrayBase[I64])
    box = prop_def(DenseArrayBase[I64])
    src_strides = opt_prop_def(DenseArrayBase[I64])
    dst_strides = opt_prop_def(DenseArrayBase[I64])

    @staticmethod
    def dma_properties(src_offsets, dst_offsets, box, tile, src_strides, dst_strides) -> dict:
        properties = {
            "src_offsets": _i64_array(src_offsets),
            "dst_offsets": _i64_array(dst_offsets),
            "box": _i64_array(box),
            "tile": _i64_attr(tile),
        }
        if src_strides is not None:
            properties["src_strides"] = _i64_array(src_strides)
        if dst_strides is not None:
            properties["dst_strides"] = _i64_array(dst_strides)
        return properties

    def verify_(self) -> None:
        s, d = buffer_type(self.source), buffer_type(self.dest)
        box = self.box.get_values()
        for what, bt, offs, strides in (
            ("source", s, self.src_offsets.get_values(), self.src_strides),
            ("dest", d, self.dst_offsets.get_values(), self.dst_strides),
        ):
            if strides is not None:
                steps = strides.get_values()
                if len(bt.dims) != 1 or len(offs) != 1 or len(steps) != len(box) or len(box) > 4:
                    raise VerifyException(
                        f"{self.name}: a strided {what} is a 1-D buffer with one offset and one "
                        "stride per box dimension (at most 4)"
                    )
                if min(steps) < 0 or min(box) < 1 or offs[0] < 0:
                    raise VerifyException(f"{self.name}: negative {what} stride or offset")
                last = offs[0] + sum((b - 1) * st for b, st in zip(box, steps))
                if last >= bt.dims[0]:
                    raise VerifyException(
                        f"{self.name}: {what} element {last} is outside the buffer {list(bt.dims)}"
                    )
                continue
            if not (len(offs) == len(box) == len(bt.dims)):
                raise VerifyException(f"{self.name}: {what} offsets, box and buffer rank differ")
            if any(o < 0 or o + b > n for o, b, n in zip(offs, box, bt.dims)):
                raise VerifyException(
                    f"{self.name}: box {list(box)} at {list(offs)} exceeds the {what} "
                    f"buffer {list(bt.dims)}"
                )
        if s.element_type != d.element_type:
            raise VerifyException(f"{self.name}: source and dest element types differ")


@irdl_op_definition
class DmaOp(DmaBase):
    """A DMA on one tile (see `DmaBase`)."""

    name = "sched.dma"
    assembly_format = (
        "`tile` $tile $source $src_offsets (`strides` $src_strides^)? `->` $dest $dst_offsets "
        "(`strides` $dst_strides^)? `box` $box "
        "(`after` `(` $deps^ `)`)? attr-dict `:` type($source) `,` type($dest)"
    )

    def __init__(
        self,
        source,
        src_offsets,
        dest,
        dst_offsets,
        box,
        tile,
        deps=(),
        *,
        src_strides=None,
        dst_strides=None,
    ):
        super().__init__(
            operands=[source, dest, list(deps)],
            properties=self.dma_properties(
                src_offsets, dst_offsets, box, tile, src_strides, dst_strides
            ),
            result_types=[TokenType()],
        )


@irdl_op_definition
class MulticastDmaOp(DmaBase):
    """A load from DDR whose box also lands in `mirrors`: one DDR read, written at the same
    offsets to buffers on other tiles (the `dma` instruction's `dst_tiles`). `dest` and each
    mirror are OCM `sched.alloc` buffers of one type, each on its own tile, `dest` on the
    DMA's; `sched-allocate` gives them one offset. `sched-multicast` makes these; a separate
    op, so that a plain `sched.dma` needs no operand segments."""

    name = "sched.multicast_dma"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    mirrors = var_operand_def(BufferType)
    assembly_format = (
        "`tile` $tile $source $src_offsets (`strides` $src_strides^)? `->` $dest $dst_offsets "
        "(`strides` $dst_strides^)? `mirrors` `(` $mirrors `:` type($mirrors) `)` `box` $box "
        "(`after` `(` $deps^ `)`)? attr-dict `:` type($source) `,` type($dest)"
    )

    def __init__(self, load: DmaOp, mirrors: Sequence[SSAValue], deps: Sequence[SSAValue]):
        """`load` (a `sched.dma` into `dest`) that also writes `mirrors`, after `deps`."""
        super().__init__(
            operands=[list(mirrors), load.source, load.dest, list(deps)],  # the IRDL order
            properties=dict(load.properties),
            result_types=[TokenType()],
        )

    @property
    def dest_tiles(self) -> tuple[int, ...]:
        """The tiles whose OCM the DMA writes: its own, then its mirrors'."""
        return (self.tile.value.data, *(m.owner.tile.value.data for m in self.mirrors))

    def verify_(self) -> None:
        super().verify_()
        if buffer_type(self.source).space.data != "ddr":
            raise VerifyException(f"{self.name}: only a DMA from DDR writes mirrors")
        if not self.mirrors:
            raise VerifyException(f"{self.name}: at least one mirror")
        tiles = [self.tile.value.data]
        for value in (self.dest, *self.mirrors):
            owner = value.owner
            if not isinstance(owner, AllocOp) or owner.tile is None:
                raise VerifyException(
                    f"{self.name}: the dest and every mirror are OCM sched.alloc buffers"
                )
            if value is not self.dest:
                if value.type != self.dest.type:
                    raise VerifyException(f"{self.name}: a mirror has the type of the dest")
                tiles.append(owner.tile.value.data)
        if self.dest.owner.tile.value.data != tiles[0]:
            raise VerifyException(f"{self.name}: the dest is on the DMA's own tile")
        if len(set(tiles)) != len(tiles):
            raise VerifyException(f"{self.name}: mirrors on tiles {tiles}: each on its own tile")


SLOPES_FORMAT = " (`slopes_in` $prelu_slopes^)?"
"""A task's PRELU slopes: an OCM buffer of f32, one per output channel of the task."""


def _verify_slopes(op, channels: int) -> None:
    """The activation of a task with an optional `slopes` buffer (f32 [channels] in OCM)."""
    if op.prelu_slopes is not None:
        _check_ocm(op, op.tile.value.data, op.prelu_slopes)
        if buffer_type(op.prelu_slopes).dims != (channels,):
            raise VerifyException(f"{op.name}: slopes must hold {channels} values")
    op.verify_activation(slopes_operand=op.prelu_slopes is not None)


def _check_ocm(op: IRDLOperation, tile: int, *values: SSAValue) -> None:
    for v in values:
        bt = buffer_type(v)
        if bt.space.data != "ocm":
            raise VerifyException(f"{op.name}: compute operands must be in OCM, got {bt}")
        owner = v.owner
        if isinstance(owner, AllocOp) and owner.tile is not None and owner.tile.value.data != tile:
            raise VerifyException(
                f"{op.name}: runs on tile {tile} but uses a buffer of tile {owner.tile.value.data}"
            )


class WindowTaskBase(TaskBase):
    """A layer computed on one output tile: rows [orow0, ...) of the output, from an input
    window holding input rows [row0, ...), all columns and channels."""

    input = operand_def(BufferType)
    output = operand_def(BufferType)
    row0 = prop_def(IntegerAttr[I64])
    orow0 = prop_def(IntegerAttr[I64])
    kernel = prop_def(DenseArrayBase[I64])
    strides = prop_def(DenseArrayBase[I64])
    pads = prop_def(DenseArrayBase[I64])


@irdl_op_definition
class Conv2DTaskOp(FusedActivation, WindowTaskBase):
    """Convolution of an OCM input window with OCM weights (output channels oc0...)."""

    name = "sched.conv2d"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    weight = operand_def(BufferType)
    bias = opt_operand_def(BufferType)
    prelu_slopes = opt_operand_def(BufferType)
    acc = opt_operand_def(BufferType)
    """fp32 partial sums of the output tile to continue from (an input-channel block)."""
    dilations = prop_def(DenseArrayBase[I64])
    groups = prop_def(IntegerAttr[I64])
    oc0 = prop_def(IntegerAttr[I64])
    oc_total = prop_def(IntegerAttr[I64])
    acc_out = opt_prop_def(UnitAttr)
    """The output is the fp32 accumulator (partial sums), not the f16 result."""
    assembly_format = (
        "`tile` $tile $input `,` $weight (`bias` $bias^)? (`acc` `(` $acc^ `:` type($acc) `)`)? "
        "`->` $output (`acc_out` $acc_out^)? `in_row` $row0 `out_row` $orow0 "
        "`channels` $oc0 `of` $oc_total `kernel` $kernel `strides` $strides `pads` $pads "
        "`dilations` $dilations `groups` $groups "
        + ACTIVATION_FORMAT
        + SLOPES_FORMAT
        + " (`after` `(` $deps^ `)`)? attr-dict `:` type($input) `,` type($weight) "
        "(`,` type($bias)^)? (`,` `slopes` type($prelu_slopes)^)? `->` type($output)"
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.output, self.weight)
        if self.bias is not None:
            _check_ocm(self, self.tile.value.data, self.bias)
        _verify_slopes(self, buffer_type(self.output).dims[-1])
        if self.acc is not None:
            _check_ocm(self, self.tile.value.data, self.acc)


@irdl_op_definition
class Pool2DTaskOp(WindowTaskBase):
    """Max or average pooling of an OCM input window."""

    name = "sched.pool2d"
    mode = prop_def(PoolKindAttr)
    in_hw = prop_def(DenseArrayBase[I64])
    count_include_pad = opt_prop_def(UnitAttr)
    assembly_format = (
        "`tile` $tile $mode $input `->` $output `in_row` $row0 `out_row` $orow0 `of` $in_hw `kernel` $kernel "
        "`strides` $strides `pads` $pads (`count_include_pad` $count_include_pad^)? "
        "(`after` `(` $deps^ `)`)? attr-dict `:` type($input) `->` type($output)"
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.output)


@irdl_op_definition
class ResizeTaskOp(TaskBase):
    """Two-tap interpolation of an OCM input window (NHWC, input rows from `row0`) into an
    output tile, by a row table [OH, 4] and a column table [OW, 4] (f32: i0, i1, w0, w1)."""

    name = "sched.resize"
    input = operand_def(BufferType)
    ytab = operand_def(BufferType)
    xtab = operand_def(BufferType)
    output = operand_def(BufferType)
    row0 = prop_def(IntegerAttr[I64])
    assembly_format = (
        "`tile` $tile $input `,` $ytab `,` $xtab `->` $output `in_row` $row0 "
        "(`after` `(` $deps^ `)`)? attr-dict `:` type($input) `,` type($ytab) `,` "
        "type($xtab) `->` type($output)"
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.ytab, self.xtab, self.output)
        n, _, _, c = buffer_type(self.input).dims
        on, oh, ow, oc = buffer_type(self.output).dims
        if (on, oc) != (n, c):
            raise VerifyException("sched.resize: input and output differ in N or C")
        if buffer_type(self.ytab).dims != (oh, 4) or buffer_type(self.xtab).dims != (ow, 4):
            raise VerifyException(
                "sched.resize: the row table must be [OH, 4] and the column table [OW, 4]"
            )


@irdl_op_definition
class FullyConnectedTaskOp(FusedActivation, TaskBase):
    """Fully connected layer on OCM rows, for the output features held by `weight`."""

    name = "sched.fc"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    input = operand_def(BufferType)
    weight = operand_def(BufferType)
    bias = opt_operand_def(BufferType)
    prelu_slopes = opt_operand_def(BufferType)
    output = operand_def(BufferType)
    assembly_format = (
        "`tile` $tile $input `,` $weight (`bias` $bias^)? `->` $output "
        + ACTIVATION_FORMAT
        + SLOPES_FORMAT
        + " (`after` `(` $deps^ `)`)? attr-dict `:` type($input) `,` type($weight) "
        "(`,` type($bias)^)? (`,` `slopes` type($prelu_slopes)^)? `->` type($output)"
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.output, self.weight)
        n, k = buffer_type(self.input).dims
        o, wk = buffer_type(self.weight).dims
        if wk != k or buffer_type(self.output).dims != (n, o):
            raise VerifyException("sched.fc: shapes of input, weight and output do not agree")
        _verify_slopes(self, o)


@irdl_op_definition
class AddTaskOp(FusedActivation, TaskBase):
    """Elementwise sum of two OCM vectors into a third, fused activation. PRELU's slopes
    buffer holds C values; the vectors are then whole NHWC pixels of C channels."""

    name = "sched.add"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    lhs = operand_def(BufferType)
    rhs = operand_def(BufferType)
    prelu_slopes = opt_operand_def(BufferType)
    output = operand_def(BufferType)
    assembly_format = (
        "`tile` $tile $lhs `,` $rhs `->` $output "
        + ACTIVATION_FORMAT
        + SLOPES_FORMAT
        + " (`after` `(` $deps^ `)`)? attr-dict `:` type($lhs) `,` type($rhs) "
        "(`,` `slopes` type($prelu_slopes)^)? `->` type($output)"
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.lhs, self.rhs, self.output)
        shapes = {buffer_type(v).dims for v in (self.lhs, self.rhs, self.output)}
        if len(shapes) != 1 or len(next(iter(shapes))) != 1:
            raise VerifyException("sched.add: operands and result must be 1-D of one length")
        if self.prelu_slopes is None:
            self.verify_activation(slopes_operand=False)
            return
        ((count,),) = shapes
        (channels,) = buffer_type(self.prelu_slopes).dims
        if count % channels:
            raise VerifyException(f"sched.add: {count} elements are not whole pixels of {channels}")
        _verify_slopes(self, channels)


@irdl_op_definition
class ScaleTaskOp(FusedActivation, TaskBase):
    """Per-channel affine map of an OCM vector whose channel is its innermost index."""

    name = "sched.scale"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    input = operand_def(BufferType)
    scale = operand_def(BufferType)
    shift = operand_def(BufferType)
    prelu_slopes = opt_operand_def(BufferType)
    output = operand_def(BufferType)
    assembly_format = (
        "`tile` $tile $input `,` $scale `,` $shift `->` $output "
        + ACTIVATION_FORMAT
        + SLOPES_FORMAT
        + " (`after` `(` $deps^ `)`)? attr-dict `:` type($input) `,` type($scale) `,` "
        "type($shift) (`,` `slopes` type($prelu_slopes)^)? `->` type($output)"
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.scale, self.shift, self.output)
        (count,) = buffer_type(self.input).dims
        (channels,) = buffer_type(self.scale).dims
        if (
            buffer_type(self.output).dims != (count,)
            or buffer_type(self.shift).dims != (channels,)
            or count % channels
        ):
            raise VerifyException(
                "sched.scale: input and output of one length, a multiple of the channels of "
                "scale and shift"
            )
        _verify_slopes(self, channels)


@irdl_op_definition
class MulTaskOp(FusedActivation, TaskBase):
    """Elementwise product of two OCM vectors; with `channels` C > 0, `rhs` holds C values and
    element i takes rhs[i mod C] (one image of a squeeze-excitation gate)."""

    name = "sched.mul"
    lhs = operand_def(BufferType)
    rhs = operand_def(BufferType)
    output = operand_def(BufferType)
    channels = prop_def(IntegerAttr[I64])
    assembly_format = (
        "`tile` $tile $lhs `,` $rhs `->` $output `channels` $channels "
        + ACTIVATION_FORMAT
        + " (`after` `(` $deps^ `)`)? attr-dict `:` type($lhs) `,` type($rhs) `->` type($output)"
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.lhs, self.rhs, self.output)
        (count,) = buffer_type(self.lhs).dims
        (rhs,) = buffer_type(self.rhs).dims
        channels = self.channels.value.data
        if buffer_type(self.output).dims != (count,) or rhs != (channels or count):
            raise VerifyException(
                "sched.mul: lhs and output of one length; rhs of that length, or of `channels`"
            )
        if channels and count % channels:
            raise VerifyException(f"sched.mul: {count} elements are not whole pixels of {channels}")
        self.verify_activation()


@irdl_op_definition
class LutTaskOp(FusedActivation, TaskBase):
    """Load the table of a table activation from DDR into the tile's activation-table memory;
    the tile's compute tasks with that activation wait for it."""

    name = "sched.lut"
    table = operand_def(BufferType)
    assembly_format = (
        "`tile` $tile $table "
        + ACTIVATION_FORMAT
        + " (`after` `(` $deps^ `)`)? attr-dict `:` type($table)"
    )

    def verify_(self) -> None:
        bt = buffer_type(self.table)
        if (
            bt.space.data != "ddr"
            or bt.dims != (ACT_TABLE_ENTRIES,)
            or bt.size_bytes != 2 * ACT_TABLE_ENTRIES
        ):
            raise VerifyException(
                f"sched.lut: the table is a DDR buffer of {ACT_TABLE_ENTRIES} f16, got {bt}"
            )
        if self.activation is None or self.activation.isa not in TABLE_ACTIVATIONS:
            raise VerifyException("sched.lut: act must name a table activation")
        self.verify_activation()




@irdl_op_definition
class ProgramOp(IRDLOperation):
    """A scheduled region: its target, tile count and options, and its buffers and tasks.

    Every `sched` pass reads the program's properties here (never a module attribute with a
    default). `sched-allocate` adds the DDR layout: `ddr_size` and the constant pool's
    `[const_base, const_end)`.
    """

    name = "sched.program"
    sym_name = opt_prop_def(StringAttr)
    mcpu = prop_def(StringAttr)
    num_tiles = prop_def(IntegerAttr[I64])
    wb_pin_ocm = opt_prop_def(UnitAttr)
    cascade = opt_prop_def(UnitAttr)
    ddr_size = opt_prop_def(IntegerAttr[I64])
    const_base = opt_prop_def(IntegerAttr[I64])
    const_end = opt_prop_def(IntegerAttr[I64])
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = (
        "`mcpu` `(` $mcpu `)` `tiles` `(` $num_tiles `)` (`symbol` `(` $sym_name^ `)`)?"
        " (`wb_pin_ocm` $wb_pin_ocm^)? (`cascade` $cascade^)?"
        " (`ddr_size` `(` $ddr_size^ `)`)? (`const_base` `(` $const_base^ `)`)?"
        " (`const_end` `(` $const_end^ `)`)? attr-dict-with-keyword $body"
    )

    def __init__(
        self,
        mcpu: str,
        num_tiles: int,
        *,
        wb_pin_ocm: bool = False,
        cascade: bool = False,
        sym_name: str | None = None,
    ):
        properties: dict[str, Attribute] = {
            "mcpu": StringAttr(mcpu),
            "num_tiles": IntegerAttr(num_tiles, i64),
        }
        if wb_pin_ocm:
            properties["wb_pin_ocm"] = UnitAttr()
        if cascade:
            properties["cascade"] = UnitAttr()
        if sym_name:
            properties["sym_name"] = StringAttr(sym_name)
        super().__init__(properties=properties, regions=[Region(Block())])

    @property
    def ops(self):
        return self.body.block.ops

    @property
    def target(self):
        return get_target(self.mcpu.data)

    @property
    def tiles(self) -> int:
        return self.num_tiles.value.data

    @property
    def pin_weights(self) -> bool:
        return self.wb_pin_ocm is not None

    @property
    def cascades(self) -> bool:
        """Whether `sched-cascade` may keep intermediate tensors in OCM between layers."""
        return self.cascade is not None

    def layout(self) -> tuple[int, int, int]:
        """(ddr_size, const_base, const_end); a CompileError before `sched-allocate`."""
        from mrvl.errors import CompileError

        missing = [n for n in ("ddr_size", "const_base", "const_end") if getattr(self, n) is None]
        if missing:
            raise CompileError(
                f"sched.program has no {', '.join(missing)}: run sched-allocate first"
            )
        return (self.ddr_size.value.data, self.const_base.value.data, self.const_end.value.data)

    def verify_(self) -> None:
        try:
            max_tiles = get_target(self.mcpu.data).max_tiles
        except UnknownTargetError as err:
            raise VerifyException(f"sched.program: {err}") from None
        n = self.num_tiles.value.data
        if not valid_tile_count(self.target, n):
            raise VerifyException(
                f"sched.program: tiles({n}) is not valid for {self.mcpu.data} "
                f"(1, 2, 4 or 8, at most {max_tiles})"
            )
        verify_program_body(self)


def verify_program_body(program: ProgramOp) -> None:
    """What the simulator would refuse, refused in the IR (issue 19): a task or buffer on a
    tile outside `tiles(N)`, a task that waits on a token no earlier task yields (a wait on a
    later task's token is a cycle), and an I/O name used twice. The error marks the offending
    op, not the program."""
    from xdsl.ir import Operation
    from xdsl.utils.exceptions import DiagnosticException

    def fail(op: Operation, message: str) -> None:
        message = f"{op.name}: {message}"
        op.emit_error(f"Operation does not verify: {message}", DiagnosticException(message))

    n = program.num_tiles.value.data
    seen: set[Operation] = set()
    names: set[str] = set()
    for op in program.body.block.ops:
        tile = op.properties.get("tile")
        if isinstance(tile, IntegerAttr) and not 0 <= tile.value.data < n:
            fail(op, f"tile {tile.value.data} is outside tiles({n})")
        if isinstance(op, TaskBase):
            for dep in op.deps:
                owner = dep.owner
                if isinstance(owner, Operation) and owner.parent is op.parent and owner not in seen:
                    fail(op, f"waits on the token of a {owner.name} that comes after it (a cycle)")
        if isinstance(op, IOOp):
            if op.io_name.data in names:
                fail(op, f"the name '{op.io_name.data}' is used twice")
            names.add(op.io_name.data)
        seen.add(op)


def program_of(module) -> ProgramOp:
    """The module's one `sched.program`; a CompileError naming what is missing otherwise."""
    from mrvl.errors import CompileError

    programs = [o for o in module.body.block.ops if isinstance(o, ProgramOp)]
    if len(programs) != 1:
        raise CompileError(
            f"expected one sched.program in the module (run convert-mrvl-to-sched), "
            f"found {len(programs)}"
        )
    return programs[0]


Sched = Dialect(
    "sched",
    [
        ProgramOp,
        IOOp,
        ConstOp,
        AllocOp,
        ViewOp,
        ConvertOp,
        DmaOp,
        MulticastDmaOp,
        Conv2DTaskOp,
        Pool2DTaskOp,
        ResizeTaskOp,
        FullyConnectedTaskOp,
        AddTaskOp,
        ScaleTaskOp,
        MulTaskOp,
        LutTaskOp,
    ],
    [BufferType, MemorySpaceAttr, PoolKindAttr, TokenType, WindowPlanAttr, FcPlanAttr],
)
