"""`sched`'s tasks: conversions, DMA transfers and the compute tasks, each on a tile, waiting
for tokens (`after(...)`) and yielding its own."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    UnitAttr,
)
from xdsl.ir import (
    Attribute,
    SSAValue,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.irdl.operations import AttrSizedOperandSegments
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.mrvl import ACTIVATION_FORMAT, BatchedProduct, FusedActivation, box_span
from mrvl.dialects.sched.attributes import (
    BufferType,
    PoolKindAttr,
    TokenType,
    _i64_array,
    _i64_attr,
    buffer_type,
)
from mrvl.dialects.sched.buffers import (
    AllocOp,
)
from mrvl.isa import ACT_TABLE_ENTRIES, TABLE_ACTIVATIONS


def task_format(operands: str, types: str) -> str:
    """The assembly format of a task: `tile N`, its own `operands` part, the tokens it waits
    for and `: types`, the syntax that every task shares."""
    return f"`tile` $tile {operands} (`after` `(` $deps^ `)`)? attr-dict `:` {types}"


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


class DdrConversionBase(TaskBase):
    """A dense DDR-to-DDR conversion of a whole tensor, `source` -> `dest`, its dimensions
    permuted by `perm`: what `sched.convert` and the int8 (de)quantizations share."""

    source = operand_def(BufferType)
    dest = operand_def(BufferType)
    perm = prop_def(DenseArrayBase[I64])

    def __init__(self, source, dest, perm, tile: int, deps: Sequence[SSAValue] = (), **properties):
        super().__init__(
            operands=[source, dest, list(deps)],
            properties={"perm": _i64_array(perm), **properties, "tile": _i64_attr(tile)},
            result_types=[TokenType()],
        )

    def verify_(self) -> None:
        s, d = buffer_type(self.source), buffer_type(self.dest)
        perm = self.perm.get_values()
        if sorted(perm) != list(range(len(s.dims))):
            raise VerifyException(f"{self.name}: perm {list(perm)} is not a permutation")
        if tuple(s.dims[p] for p in perm) != d.dims:
            raise VerifyException(f"{self.name}: destination shape is not the permuted source")
        if s.space.data != "ddr" or d.space.data != "ddr":
            raise VerifyException(f"{self.name}: converts between DDR buffers")


@irdl_op_definition
class ConvertOp(DdrConversionBase):
    """Dense DDR-to-DDR conversion of element type and dimension order (region I/O)."""

    name = "sched.convert"
    assembly_format = task_format(
        "$source `->` $dest `perm` $perm", "type($source) `,` type($dest)"
    )

    def __init__(self, source, dest, perm, tile: int, deps: Sequence[SSAValue] = ()):
        super().__init__(source, dest, perm, tile, deps)


class DmaBase(TaskBase):
    """Copy a box of elements from `source[src_offsets]` to `dest[dst_offsets]`.

    With `src_strides` (or `dst_strides`) that side is a flat, 1-D buffer: its offset is one
    element index and the box steps through it by the given element strides, which may be 0
    or negative on the source (a repeated element, a reversal) and skip elements on the
    destination (zero insertion). The box then has one extent per stride, at most 4.
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
                if min(box) < 1 or (what == "dest" and min(steps) < 0):
                    raise VerifyException(f"{self.name}: negative {what} stride or empty box")
                first, last = box_span(offs[0], box, steps)
                if first < 0 or last >= bt.dims[0]:
                    raise VerifyException(
                        f"{self.name}: {what} elements {first} to {last} are outside the buffer "
                        f"{list(bt.dims)}"
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


DMA_FORMAT = (
    "$source $src_offsets (`strides` $src_strides^)? `->` $dest $dst_offsets "
    "(`strides` $dst_strides^)?"
)
"""A DMA's source and destination boxes, each with its optional element strides."""


@irdl_op_definition
class DmaOp(DmaBase):
    """A DMA on one tile (see `DmaBase`)."""

    name = "sched.dma"
    assembly_format = task_format(DMA_FORMAT + " `box` $box", "type($source) `,` type($dest)")

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
    assembly_format = task_format(
        DMA_FORMAT + " `mirrors` `(` $mirrors `:` type($mirrors) `)` `box` $box",
        "type($source) `,` type($dest)",
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


class WindowGeometry:
    """Mixin: the properties of a task computed on one output tile: rows [orow0, ...) of the
    output, from an input window holding input rows [row0, ...), all columns and channels."""

    row0 = prop_def(IntegerAttr[I64])
    orow0 = prop_def(IntegerAttr[I64])
    kernel = prop_def(DenseArrayBase[I64])
    strides = prop_def(DenseArrayBase[I64])
    pads = prop_def(DenseArrayBase[I64])


class ConvGeometry(WindowGeometry):
    """Mixin: a convolution's window geometry, its output channels oc0... of oc_total, and
    whether the output is the accumulator of partial sums (`acc_out`); fp16 and int8 alike."""

    dilations = prop_def(DenseArrayBase[I64])
    groups = prop_def(IntegerAttr[I64])
    oc0 = prop_def(IntegerAttr[I64])
    oc_total = prop_def(IntegerAttr[I64])
    acc_out = opt_prop_def(UnitAttr)
    """The output is the accumulator (partial sums), not the layer's result."""


CONV_FORMAT = (
    "`in_row` $row0 `out_row` $orow0 `channels` $oc0 `of` $oc_total `kernel` $kernel "
    "`strides` $strides `pads` $pads `dilations` $dilations `groups` $groups"
)
"""`ConvGeometry`'s part of a convolution task's format."""


class PoolGeometry(WindowGeometry):
    """Mixin: a pooling's window geometry, its kind and input size; fp16 and int8 alike."""

    mode = prop_def(PoolKindAttr)
    in_hw = prop_def(DenseArrayBase[I64])
    count_include_pad = opt_prop_def(UnitAttr)


POOL_FORMAT = (
    "$mode $input `->` $output `in_row` $row0 `out_row` $orow0 `of` $in_hw `kernel` $kernel "
    "`strides` $strides `pads` $pads (`count_include_pad` $count_include_pad^)?"
)
"""A pooling task's operands and `PoolGeometry`."""


class WindowTaskBase(WindowGeometry, TaskBase):
    """A layer computed on one output tile (`WindowGeometry`) from an OCM input window."""

    input = operand_def(BufferType)
    output = operand_def(BufferType)


@irdl_op_definition
class Conv2DTaskOp(FusedActivation, ConvGeometry, WindowTaskBase):
    """Convolution of an OCM input window with OCM weights (output channels oc0...); with
    `acc_out`, the output is the fp32 accumulator, not the f16 result."""

    name = "sched.conv2d"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    weight = operand_def(BufferType)
    bias = opt_operand_def(BufferType)
    prelu_slopes = opt_operand_def(BufferType)
    acc = opt_operand_def(BufferType)
    """fp32 partial sums of the output tile to continue from (an input-channel block)."""
    assembly_format = task_format(
        "$input `,` $weight (`bias` $bias^)? (`acc` `(` $acc^ `:` type($acc) `)`)? "
        "`->` $output (`acc_out` $acc_out^)? "
        + CONV_FORMAT
        + " "
        + ACTIVATION_FORMAT
        + SLOPES_FORMAT,
        "type($input) `,` type($weight) (`,` type($bias)^)? (`,` `slopes` type($prelu_slopes)^)? "
        "`->` type($output)",
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.output, self.weight)
        if self.bias is not None:
            _check_ocm(self, self.tile.value.data, self.bias)
        _verify_slopes(self, buffer_type(self.output).dims[-1])
        if self.acc is not None:
            _check_ocm(self, self.tile.value.data, self.acc)


@irdl_op_definition
class Pool2DTaskOp(PoolGeometry, WindowTaskBase):
    """Max or average pooling of an OCM input window."""

    name = "sched.pool2d"
    assembly_format = task_format(POOL_FORMAT, "type($input) `->` type($output)")

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
    assembly_format = task_format(
        "$input `,` $ytab `,` $xtab `->` $output `in_row` $row0",
        "type($input) `,` type($ytab) `,` type($xtab) `->` type($output)",
    )

    def verify_(self) -> None:
        verify_resize(self, 4)


def verify_resize(op, columns: int) -> None:
    """The OCM window, tables and tile of a resize task (fp16 or int8, whose table rows have
    `columns` entries): input and output of one N and C, tables [OH, columns] and [OW,
    columns]."""
    _check_ocm(op, op.tile.value.data, op.input, op.ytab, op.xtab, op.output)
    n, _, _, c = buffer_type(op.input).dims
    on, oh, ow, oc = buffer_type(op.output).dims
    if (on, oc) != (n, c):
        raise VerifyException(f"{op.name}: input and output differ in N or C")
    if buffer_type(op.ytab).dims != (oh, columns) or buffer_type(op.xtab).dims != (ow, columns):
        raise VerifyException(
            f"{op.name}: the row table must be [OH, {columns}] and the column table "
            f"[OW, {columns}]"
        )


def fc_features(op) -> int:
    """The output features of a fully connected task (fp16 or int8), its input [N, K], weight
    [O, K] and output [N, O] checked to agree."""
    n, k = buffer_type(op.input).dims
    o, wk = buffer_type(op.weight).dims
    if wk != k or buffer_type(op.output).dims != (n, o):
        raise VerifyException(f"{op.name}: shapes of input, weight and output do not agree")
    return o


def vector_length(op, what: str, *values: SSAValue) -> int:
    """The length of the 1-D OCM buffers `values` of `op`, which must all be one."""
    shapes = {buffer_type(v).dims for v in values}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise VerifyException(f"{op.name}: {what} must be 1-D of one length")
    ((count,),) = shapes
    return count


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
    assembly_format = task_format(
        "$input `,` $weight (`bias` $bias^)? `->` $output " + ACTIVATION_FORMAT + SLOPES_FORMAT,
        "type($input) `,` type($weight) (`,` type($bias)^)? (`,` `slopes` type($prelu_slopes)^)? "
        "`->` type($output)",
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.output, self.weight)
        _verify_slopes(self, fc_features(self))


@irdl_op_definition
class BatchMatMulTaskOp(BatchedProduct, TaskBase):
    """Batched product of two OCM operands ([batch or 1, M, K] or, with `trans_a`, [.., K, M];
    [batch or 1, K, N] or, with `trans_b`, [.., N, K]) into [batch, M, N]: from +0.0, or from
    the fp32 partial sums `acc`; f16, or the fp32 accumulator with `acc_out`."""

    name = "sched.bmm"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    lhs = operand_def(BufferType)
    rhs = operand_def(BufferType)
    acc = opt_operand_def(BufferType)
    output = operand_def(BufferType)
    trans_a = opt_prop_def(UnitAttr)
    trans_b = opt_prop_def(UnitAttr)
    acc_out = opt_prop_def(UnitAttr)
    assembly_format = task_format(
        "$lhs `,` $rhs (`acc` `(` $acc^ `:` type($acc) `)`)? `->` $output "
        "(`trans_a` $trans_a^)? (`trans_b` $trans_b^)? (`acc_out` $acc_out^)?",
        "type($lhs) `,` type($rhs) `->` type($output)",
    )

    def value_shape(self, value: SSAValue) -> tuple[int, ...]:
        return buffer_type(value).dims

    def verify_(self) -> None:
        tile = self.tile.value.data
        _check_ocm(self, tile, self.lhs, self.rhs, self.output)
        if any(len(buffer_type(v).dims) != 3 for v in (self.lhs, self.rhs, self.output)):
            raise VerifyException("sched.bmm: operands and result must be rank 3")
        self.verify_product_shapes()
        batch, m, n = buffer_type(self.output).dims
        if self.acc is not None:
            _check_ocm(self, tile, self.acc)
            if buffer_type(self.acc).dims != (batch, m, n):
                raise VerifyException("sched.bmm: partial sums must have the result's shape")


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
    assembly_format = task_format(
        "$lhs `,` $rhs `->` $output " + ACTIVATION_FORMAT + SLOPES_FORMAT,
        "type($lhs) `,` type($rhs) (`,` `slopes` type($prelu_slopes)^)? `->` type($output)",
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.lhs, self.rhs, self.output)
        count = vector_length(self, "operands and result", self.lhs, self.rhs, self.output)
        if self.prelu_slopes is None:
            self.verify_activation(slopes_operand=False)
            return
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
    assembly_format = task_format(
        "$input `,` $scale `,` $shift `->` $output " + ACTIVATION_FORMAT + SLOPES_FORMAT,
        "type($input) `,` type($scale) `,` type($shift) (`,` `slopes` type($prelu_slopes)^)? "
        "`->` type($output)",
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
    assembly_format = task_format(
        "$lhs `,` $rhs `->` $output `channels` $channels " + ACTIVATION_FORMAT,
        "type($lhs) `,` type($rhs) `->` type($output)",
    )

    def verify_(self) -> None:
        verify_channel_product(self)
        self.verify_activation()


def verify_channel_product(op) -> None:
    """The OCM operands of an elementwise product (fp16 or int8): `lhs` and the output of one
    length, `rhs` of that length or, with `channels` C > 0, of C (whole pixels of C)."""
    _check_ocm(op, op.tile.value.data, op.lhs, op.rhs, op.output)
    (count,) = buffer_type(op.lhs).dims
    (rhs,) = buffer_type(op.rhs).dims
    channels = op.channels.value.data
    if buffer_type(op.output).dims != (count,) or rhs != (channels or count):
        raise VerifyException(
            f"{op.name}: lhs and output of one length; rhs of that length, or of `channels`"
        )
    if channels and count % channels:
        raise VerifyException(f"{op.name}: {count} elements are not whole pixels of {channels}")


@irdl_op_definition
class SoftmaxTaskOp(TaskBase):
    """Softmax of an OCM block [outer, length, inner] over its middle axis into an OCM block
    of the same shape."""

    name = "sched.softmax"
    input = operand_def(BufferType)
    output = operand_def(BufferType)
    assembly_format = task_format("$input `->` $output", "type($input) `->` type($output)")

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.output)
        dims = buffer_type(self.input).dims
        if len(dims) != 3 or buffer_type(self.output).dims != dims:
            raise VerifyException(
                "sched.softmax: input and output must be one [outer, length, inner] shape"
            )


@irdl_op_definition
class LayerNormTaskOp(TaskBase):
    """Layer normalization of each row of an OCM block [rows, length], with f32 scales and
    shifts [length] in OCM, into an OCM block of the same shape."""

    name = "sched.layernorm"
    input = operand_def(BufferType)
    scale = operand_def(BufferType)
    shift = operand_def(BufferType)
    output = operand_def(BufferType)
    epsilon = prop_def(FloatAttr[Float32Type])
    assembly_format = task_format(
        "$input `,` $scale `,` $shift `->` $output `epsilon` $epsilon",
        "type($input) `,` type($scale) `,` type($shift) `->` type($output)",
    )

    def verify_(self) -> None:
        _check_ocm(self, self.tile.value.data, self.input, self.scale, self.shift, self.output)
        dims = buffer_type(self.input).dims
        if len(dims) != 2 or buffer_type(self.output).dims != dims:
            raise VerifyException("sched.layernorm: input and output must be one [rows, length]")
        for what, value in (("scale", self.scale), ("shift", self.shift)):
            if buffer_type(value).dims != (dims[1],):
                raise VerifyException(f"sched.layernorm: {what} must hold {dims[1]} values")


@irdl_op_definition
class LutTaskOp(FusedActivation, TaskBase):
    """Load the table of a table activation from DDR into the tile's activation-table memory;
    the tile's compute tasks with that activation wait for it."""

    name = "sched.lut"
    table = operand_def(BufferType)
    assembly_format = task_format("$table " + ACTIVATION_FORMAT, "type($table)")

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
