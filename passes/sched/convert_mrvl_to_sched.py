"""convert-mrvl-to-sched: schedule each layer as tiled DMA-in / compute / DMA-out on the tiles.

Every tensor becomes a DDR buffer (region I/O, constants, intermediates). Each layer is cut
by `tiling` into pieces that fit one tile's OCM; a piece loads its input window, weights and
bias into OCM, computes, and writes its output tile back to DDR. Pieces go round-robin over
`num_tiles` tiles, each layer starting at tile 0; conversions run on tile 0. Tokens order the work: a load waits for every write of the DDR buffer it
reads, a compute for its loads, a store for its compute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from math import prod

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float16Type,
    Float32Type,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError, layer_boundary
from mrvl.locations import location_name
from mrvl.passes.common import MrvlModulePass, module_num_tiles, module_target
from mrvl.passes.sched.tiling import (
    WindowLayer,
    WindowPiece,
    plan_elementwise,
    plan_fc_layer,
    plan_window_layer,
)
from mrvl.target import Target

F16_BYTES = 2


def _arr(values) -> DenseArrayBase:
    return _i64_array(tuple(int(v) for v in values))


# A schedule repeats the same attributes thousands of times; attributes are immutable, so
# each is built (and verified) once.
@cache
def _i64_array(values: tuple[int, ...]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


@cache
def _int(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


@cache
def _buffer(space: str, dims: tuple[int, ...], element_type: Attribute) -> sched.BufferType:
    return sched.BufferType(space, dims, element_type)


@dataclass
class _Lowering:
    target: Target
    num_tiles: int
    ops: list[Operation] = field(default_factory=list)
    buffers: dict[SSAValue, SSAValue] = field(default_factory=dict)
    writers: dict[SSAValue, dict[int, SSAValue]] = field(default_factory=dict)
    """DDR buffer -> tile -> the token of the last write to it from that tile. Writes from
    one tile are chained, so a reader waits for at most one token per tile (the binary
    allows 255 waits; a big FC layer is cut into a thousand pieces)."""
    location: Attribute | None = None

    # -- emission helpers -----------------------------------------------------------------------

    def emit(self, op: Operation) -> Operation:
        if self.location is not None:
            op.location = self.location
        self.ops.append(op)
        return op

    def ddr_buffer(self, value: SSAValue) -> SSAValue:
        return self.buffers[value]

    def new_ddr(self, value: SSAValue) -> SSAValue:
        t = _buffer("ddr", tuple(mrvl.shape_of(value)), mrvl.element_type_of(value))
        buf = self.emit(sched.AllocOp(t)).buffer
        self.buffers[value] = buf
        self.writers[buf] = {}
        return buf

    def ocm(self, shape, element_type: Attribute, tile: int) -> SSAValue:
        return self.emit(sched.AllocOp(_buffer("ocm", tuple(shape), element_type), tile)).buffer

    def load(self, ddr: SSAValue, offsets, box, tile: int) -> tuple[SSAValue, SSAValue]:
        """OCM copy of a box of a DDR buffer, after every write to that buffer."""
        et = sched.buffer_type(ddr).element_type
        dst = self.ocm(box, et, tile)
        tok = self.emit(
            sched.DmaOp(ddr, offsets, dst, [0] * len(box), box, tile, self.writes_to(ddr))
        ).token
        return dst, tok

    def writes_to(self, ddr: SSAValue) -> list[SSAValue]:
        """The tokens a reader of `ddr` waits for: the last write from each tile."""
        return list(self.writers.get(ddr, {}).values())

    def write_deps(self, ddr: SSAValue, tile: int, *after: SSAValue) -> list[SSAValue]:
        """Dependencies of a write to `ddr` from `tile`: `after`, and the tile's previous
        write to the same buffer (the chain that keeps readers' waits short)."""
        previous = self.writers.get(ddr, {}).get(tile)
        return [*after, previous] if previous is not None else list(after)

    def record_write(self, ddr: SSAValue, tile: int, token: SSAValue) -> None:
        self.writers.setdefault(ddr, {})[tile] = token

    def store(self, src: SSAValue, ddr: SSAValue, offsets, tile: int, after: SSAValue) -> None:
        box = sched.buffer_type(src).dims
        deps = self.write_deps(ddr, tile, after)
        tok = self.emit(sched.DmaOp(src, [0] * len(box), ddr, offsets, box, tile, deps)).token
        self.record_write(ddr, tile, tok)

    def require_f16(self, op: Operation) -> None:
        for v in (*op.operands, *op.results):
            t = v.type
            if mrvl.layout_of(t) in ("NHWC", "NC", "OHWI", "OI") and not isinstance(
                mrvl.element_type_of(t), Float16Type
            ):
                raise CompileError(
                    f"{op.name} at {location_name(op.location)}: the MLIP computes in f16; run "
                    "mrvl-cast-fp16 first"
                )

    def what(self, op: Operation) -> str:
        return f"layer {location_name(op.location) or op.name}"

    # -- ops ------------------------------------------------------------------------------------

    def constant(self, op: mrvl.ConstantOp) -> None:
        t = _buffer("ddr", tuple(mrvl.shape_of(op.result)), mrvl.element_type_of(op.result))
        buf = self.emit(sched.ConstOp(op.const_name.data, op.value, t)).buffer
        self.buffers[op.result] = buf
        self.writers[buf] = {}

    def convert(self, op: mrvl.CastOp | mrvl.LayoutConvertOp, dest: SSAValue | None) -> None:
        src = self.ddr_buffer(op.input)
        if dest is None:
            dest = self.new_ddr(op.output)
        else:
            self.buffers[op.output] = dest
        perm = (
            op.permutation
            if isinstance(op, mrvl.LayoutConvertOp)
            else range(len(mrvl.shape_of(op.input)))
        )
        tok = self.emit(
            sched.ConvertOp(
                src, dest, list(perm), 0, self.write_deps(dest, 0, *self.writes_to(src))
            )
        ).token
        self.record_write(dest, 0, tok)

    def reshape(self, op: mrvl.ReshapeOp) -> None:
        src = self.ddr_buffer(op.input)
        t = _buffer("ddr", tuple(mrvl.shape_of(op.output)), mrvl.element_type_of(op.output))
        view = self.emit(sched.ViewOp(src, t)).buffer
        self.buffers[op.output] = view
        self.writers[view] = self.writers.setdefault(src, {})  # the same bytes, the same writes

    def window_layer(self, op: mrvl.Conv2DOp | mrvl.Pool2DBase) -> None:
        self.require_f16(op)
        is_conv = isinstance(op, mrvl.Conv2DOp)
        n, h, w, c = mrvl.shape_of(op.input)
        oc = mrvl.shape_of(op.output)[3]
        geometry = window_geometry(op)
        kh, kw, sh, sw, dh, dw = (
            geometry.kh,
            geometry.kw,
            geometry.sh,
            geometry.sw,
            geometry.dh,
            geometry.dw,
        )
        pads = list(op.pads.get_values())
        pieces = plan_window_layer(
            geometry,
            self.target.ocm_bytes_per_tile,
            self.num_tiles,
            self.target.ocm_alignment,
            self.what(op),
            split_columns=is_conv,
        )
        groups = op.group_count if is_conv else 1
        cg = c // groups
        src, dst = self.ddr_buffer(op.input), self.new_ddr(op.output)
        for index, p in enumerate(pieces):
            tile = index % self.num_tiles
            if p.ci_blocks:
                self.conv_in_blocks(op, p, tile, src, dst)
                continue
            # Only the input columns and channels the piece reads (a pool's own channels, a
            # conv's groups); a piece of a few columns sees the others as padding.
            window, t_in = self.load(
                src,
                [0, p.in_row0, p.in_col0, p.ic0],
                [n, p.in_rows, p.in_cols, p.ics],
                tile,
            )
            deps = [t_in]
            out = self.ocm([n, p.rows, p.cols, p.ocs], mrvl.element_type_of(op.output), tile)
            piece_pads = list(pads)
            piece_pads[1] = pads[1] + p.in_col0 - p.ocol0 * sw
            common = {
                "tile": _int(tile),
                "row0": _int(p.in_row0),
                "orow0": _int(p.orow0),
                "kernel": _arr([kh, kw]),
                "strides": _arr([sh, sw]),
                "pads": _arr(piece_pads),
            }
            if is_conv:
                wbuf, t_w = self.load(
                    self.ddr_buffer(op.weight), [p.oc0, 0, 0, 0], [p.ocs, kh, kw, cg], tile
                )
                deps.append(t_w)
                bias = []
                if op.bias is not None:
                    bbuf, t_b = self.load(self.ddr_buffer(op.bias), [p.oc0], [p.ocs], tile)
                    deps.append(t_b)
                    bias = [bbuf]
                if groups == 1:
                    channel_props = {"groups": 1, "oc0": p.oc0, "oc_total": oc}
                else:  # the piece is a conv of its own groups: channels counted from its first
                    channel_props = {"groups": p.ics // cg, "oc0": 0, "oc_total": p.ocs}
                props = {
                    **common,
                    "dilations": _arr([dh, dw]),
                    **{key: _int(value) for key, value in channel_props.items()},
                    **_activation_props(op),
                }
                task = sched.Conv2DTaskOp.make(
                    props, deps=deps, input=window, output=out, weight=wbuf, bias=bias, acc=[]
                )
            else:
                props = {
                    **common,
                    "mode": StringAttr("max" if isinstance(op, mrvl.MaxPool2DOp) else "avg"),
                    "in_hw": _arr([h, w]),
                }
                if isinstance(op, mrvl.AvgPool2DOp) and op.count_include_pad is not None:
                    props["count_include_pad"] = UnitAttr()
                task = sched.Pool2DTaskOp.make(props, deps=deps, input=window, output=out)
            t_c = self.emit(task).results[0]
            self.store(out, dst, [0, p.orow0, p.ocol0, p.oc0], tile, t_c)

    def conv_in_blocks(
        self, op: mrvl.Conv2DOp, p: WindowPiece, tile: int, src: SSAValue, dst: SSAValue
    ) -> None:
        """One output piece of a conv cut into input-channel blocks, all on one tile: each
        block loads its channels of the window and weights and continues the fp32 partial
        sums of the previous block (the first starts from the bias); the last applies the
        activation and writes f16."""
        n = mrvl.shape_of(op.input)[0]
        _, kh, kw, _ = mrvl.shape_of(op.weight)
        pads = list(op.pads.get_values())
        sw = op.strides.get_values()[1]
        pads[1] = pads[1] + p.in_col0 - p.ocol0 * sw
        props = {
            "tile": _int(tile),
            "row0": _int(p.in_row0),
            "orow0": _int(p.orow0),
            "kernel": _arr([kh, kw]),
            "strides": op.strides,
            "pads": _arr(pads),
            "dilations": op.dilations,
            "groups": _int(1),
            "oc0": _int(p.oc0),
            "oc_total": _int(mrvl.shape_of(op.output)[3]),
        }
        acc: list[SSAValue] = []  # the previous block's partial sums
        t_acc: SSAValue | None = None
        for index, (c0, cs) in enumerate(p.ci_blocks):
            last = index == len(p.ci_blocks) - 1
            window, t_in = self.load(
                src, [0, p.in_row0, p.in_col0, c0], [n, p.in_rows, p.in_cols, cs], tile
            )
            wbuf, t_w = self.load(
                self.ddr_buffer(op.weight), [p.oc0, 0, 0, c0], [p.ocs, kh, kw, cs], tile
            )
            deps, bias = [t_in, t_w], []
            if index == 0 and op.bias is not None:
                bbuf, t_b = self.load(self.ddr_buffer(op.bias), [p.oc0], [p.ocs], tile)
                deps.append(t_b)
                bias = [bbuf]
            if t_acc is not None:
                deps.append(t_acc)
            element = mrvl.element_type_of(op.output) if last else Float32Type()
            out = self.ocm([n, p.rows, p.cols, p.ocs], element, tile)
            block_props = {**props, **(_activation_props(op) if last else {"acc_out": UnitAttr()})}
            task = sched.Conv2DTaskOp.make(
                block_props, deps=deps, input=window, output=out, weight=wbuf, bias=bias, acc=acc
            )
            t_acc = self.emit(task).results[0]
            acc = [out]
        self.store(acc[0], dst, [0, p.orow0, p.ocol0, p.oc0], tile, t_acc)

    def fc(self, op: mrvl.FullyConnectedOp) -> None:
        self.require_f16(op)
        n, k = mrvl.shape_of(op.input)
        o, _ = mrvl.shape_of(op.weight)
        pieces = plan_fc_layer(
            n,
            k,
            o,
            self.target.ocm_bytes_per_tile,
            self.num_tiles,
            self.target.ocm_alignment,
            self.what(op),
        )
        src, dst = self.ddr_buffer(op.input), self.new_ddr(op.output)
        for index, p in enumerate(pieces):
            tile = index % self.num_tiles
            x, t_x = self.load(src, [0, 0], [n, k], tile)
            wbuf, t_w = self.load(self.ddr_buffer(op.weight), [p.o0, 0], [p.os, k], tile)
            deps, bias = [t_x, t_w], []
            if op.bias is not None:
                bbuf, t_b = self.load(self.ddr_buffer(op.bias), [p.o0], [p.os], tile)
                deps.append(t_b)
                bias = [bbuf]
            out = self.ocm([n, p.os], mrvl.element_type_of(op.output), tile)
            task = sched.FullyConnectedTaskOp.make(
                {"tile": _int(tile), **_activation_props(op)},
                deps=deps,
                input=x,
                weight=wbuf,
                bias=bias,
                output=out,
            )
            t_c = self.emit(task).results[0]
            self.store(out, dst, [0, p.o0], tile, t_c)

    def add(self, op: mrvl.AddOp) -> None:
        self.require_f16(op)
        count = prod(mrvl.shape_of(op.output))
        et = mrvl.element_type_of(op.output)
        flat = _buffer("ddr", (count,), et)
        lhs, rhs = (self.flat_view(self.ddr_buffer(v), flat) for v in (op.lhs, op.rhs))
        dst = self.new_ddr(op.output)
        out = self.flat_view(dst, flat)
        chunks = plan_elementwise(
            count, 3, self.target.ocm_bytes_per_tile, self.num_tiles, self.target.ocm_alignment
        )
        for index, chunk in enumerate(chunks):
            tile = index % self.num_tiles
            a, t_a = self.load(lhs, [chunk.start], [chunk.length], tile)
            b, t_b = self.load(rhs, [chunk.start], [chunk.length], tile)
            y = self.ocm([chunk.length], et, tile)
            task = sched.AddTaskOp.make(
                {"tile": _int(tile), **_activation_props(op)},
                deps=[t_a, t_b],
                lhs=a,
                rhs=b,
                output=y,
            )
            t_c = self.emit(task).results[0]
            self.store(y, out, [chunk.start], tile, t_c)

    def scale_shift(self, op: mrvl.ScaleShiftOp) -> None:
        """Chunks of whole pixels (all channels), so a chunk's channel is its index mod C."""
        self.require_f16(op)
        count, channels = prod(mrvl.shape_of(op.output)), op.channels
        et = mrvl.element_type_of(op.output)
        flat = _buffer("ddr", (count,), et)
        src = self.flat_view(self.ddr_buffer(op.input), flat)
        dst = self.new_ddr(op.output)
        out = self.flat_view(dst, flat)
        chunks = plan_elementwise(
            count,
            2,
            self.target.ocm_bytes_per_tile,
            self.num_tiles,
            self.target.ocm_alignment,
            granule=channels,
            reserved_bytes=2 * channels * 4,
        )
        for index, chunk in enumerate(chunks):
            tile = index % self.num_tiles
            x, t_x = self.load(src, [chunk.start], [chunk.length], tile)
            s, t_s = self.load(self.ddr_buffer(op.scale), [0], [channels], tile)
            b, t_b = self.load(self.ddr_buffer(op.shift), [0], [channels], tile)
            y = self.ocm([chunk.length], et, tile)
            task = sched.ScaleTaskOp.make(
                {"tile": _int(tile), **_activation_props(op)},
                deps=[t_x, t_s, t_b],
                input=x,
                scale=s,
                shift=b,
                output=y,
            )
            self.store(y, out, [chunk.start], tile, self.emit(task).results[0])

    def flat_view(self, buffer: SSAValue, flat: sched.BufferType) -> SSAValue:
        """`buffer` seen as one dimension; its writers stay its writers."""
        view = self.emit(sched.ViewOp(buffer, flat)).buffer
        self.writers[view] = self.writers.setdefault(buffer, {})
        return view

    def concat(self, op: mrvl.ConcatOp) -> None:
        """Each input is copied by DMA, DDR to DDR, into its channel slice of the result."""
        dst = self.new_ddr(op.output)
        axis = op.channel_axis
        offset = 0
        for index, value in enumerate(op.inputs):
            src = self.ddr_buffer(value)
            shape = mrvl.shape_of(value)
            dst_offsets = [0] * len(shape)
            dst_offsets[axis] = offset
            tile = index % self.num_tiles
            deps = self.write_deps(dst, tile, *self.writes_to(src))
            tok = self.emit(
                sched.DmaOp(src, [0] * len(shape), dst, dst_offsets, shape, tile, deps)
            ).token
            self.record_write(dst, tile, tok)
            offset += shape[axis]


def window_geometry(op: mrvl.Conv2DOp | mrvl.Pool2DBase) -> WindowLayer:
    """The tiling geometry of a conv or pool op."""
    n, h, w, c = mrvl.shape_of(op.input)
    _, oh, ow, oc = mrvl.shape_of(op.output)
    if isinstance(op, mrvl.Conv2DOp):
        _, kh, kw, cg = mrvl.shape_of(op.weight)
        dh, dw = op.dilations.get_values()
        per_oc = kh * kw * cg * F16_BYTES + (4 if op.bias is not None else 0)
        groups = op.group_count
    else:
        kh, kw = op.kernel.get_values()
        dh = dw = 1
        per_oc, groups = 0, 1
    sh, sw = op.strides.get_values()
    pads = op.pads.get_values()
    return WindowLayer(
        n, h, w, c, oh, ow, oc, kh, kw, sh, pads[0], dh, per_oc,
        depthwise_channels=not isinstance(op, mrvl.Conv2DOp),
        sw=sw, pad_left=pads[1], dw=dw, groups=groups,
    )  # fmt: skip


def _activation_props(op: Operation) -> dict[str, Attribute]:
    return {
        k: op.properties[k]
        for k in ("activation", "act_min", "act_max", "alpha")
        if k in op.properties
    }


@dataclass(frozen=True)
class ConvertMrvlToSchedPass(MrvlModulePass):
    """Options: `mcpu` and `num-tiles` override the module's `mrvl.target`/`mrvl.num_tiles`."""

    name = "convert-mrvl-to-sched"
    mcpu: str | None = None
    num_tiles: int | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target = module_target(op, self.mcpu)
        num_tiles = module_num_tiles(op, self.num_tiles, target)
        funcs = [f for f in op.body.block.ops if isinstance(f, func.FuncOp)]
        if len(funcs) != 1:
            raise CompileError(f"expected one region function in the module, found {len(funcs)}")
        fn = funcs[0]
        low = _Lowering(target, num_tiles)
        block = fn.body.block
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        for i, arg in enumerate(block.args):
            low.location = None
            t = _buffer("ddr", tuple(mrvl.shape_of(arg)), mrvl.element_type_of(arg))
            name = arg.name_hint or f"input{i}"
            buf = low.emit(sched.IOOp(name, True, t)).buffer
            low.buffers[arg] = buf
            low.writers[buf] = {}
        outputs: dict[SSAValue, SSAValue] = {}
        for i, value in enumerate(ret.arguments):
            t = _buffer("ddr", tuple(mrvl.shape_of(value)), mrvl.element_type_of(value))
            outputs[value] = low.emit(sched.IOOp(f"output{i}", False, t)).buffer
            low.writers[outputs[value]] = {}
        for layer in block.ops:
            low.location = layer.location
            with layer_boundary(f"{self.name} of {layer.name}", location_name(layer.location)):
                if isinstance(layer, mrvl.ConstantOp):
                    low.constant(layer)
                elif isinstance(layer, mrvl.CastOp | mrvl.LayoutConvertOp):
                    low.convert(layer, outputs.get(layer.output))
                elif isinstance(layer, mrvl.ReshapeOp):
                    low.reshape(layer)
                elif isinstance(layer, mrvl.Conv2DOp | mrvl.Pool2DBase):
                    low.window_layer(layer)
                elif isinstance(layer, mrvl.FullyConnectedOp):
                    low.fc(layer)
                elif isinstance(layer, mrvl.AddOp):
                    low.add(layer)
                elif isinstance(layer, mrvl.ScaleShiftOp):
                    low.scale_shift(layer)
                elif isinstance(layer, mrvl.ConcatOp):
                    low.concat(layer)
                elif isinstance(layer, func.ReturnOp):
                    for value, io in outputs.items():
                        if low.buffers.get(value) is not io:
                            raise CompileError(
                                "a region output must be produced by a cast or layout conversion "
                                "(run mrvl-cast-fp16 so that outputs are converted back to f32)"
                            )
                else:
                    raise CompileError(f"convert-mrvl-to-sched: cannot lower {layer.name}")
        for value, io in outputs.items():
            low.buffers.setdefault(value, io)
        Rewriter.erase_op(fn, safe_erase=False)
        for new in low.ops:
            Rewriter.insert_op(new, InsertPoint.at_end(op.body.block))
        op.attributes["mrvl.target"] = StringAttr(target.name)
        op.attributes["mrvl.num_tiles"] = _int(num_tiles)
        if fn.sym_name.data:
            op.attributes["mrvl.symbol"] = StringAttr(fn.sym_name.data)
