"""convert-mrvl-to-sched: schedule each layer as tiled DMA-in / compute / DMA-out on the tiles.

Every tensor becomes a DDR buffer (region I/O, constants, intermediates). Each layer is cut
by `tiling` into pieces that fit one tile's OCM; a piece loads its input window, weights and
bias into OCM, computes, and writes its output tile back to DDR. Pieces go round-robin over
`num_tiles` tiles, each layer starting at tile 0 (a conv, pool or FC piece on the tile its
plan names); conversions run on tile 0. Tokens order the work: a load waits for every write of the DDR buffer it
reads, a compute for its loads, a store for its compute.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from functools import cache
from math import prod

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import Rewriter

from mrvl.act_tables import activation_table, table_key, table_name
from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError, layer_boundary
from mrvl.isa import TABLE_ACTIVATIONS
from mrvl.locations import location_name
from mrvl.passes.common import MrvlModulePass
from mrvl.passes.sched.cascade import ResidentPlan, plan_resident
from mrvl.passes.sched.plan_tiling import (
    PLAN,
    plan_fc,
    recorded_fc_pieces,
    recorded_window_pieces,
)
from mrvl.passes.sched.tiling import (
    F32,
    ChannelChunk,
    Chunk,
    WindowLayer,
    WindowPiece,
    early_outputs,
    plan_elementwise,
    plan_per_channel,
    plan_resize_layer,
    plan_window_reads,
    shares_window,
)
from mrvl.target import Target, get_target

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
    wb_pin_ocm: bool = False
    ops: list[Operation] = field(default_factory=list)
    buffers: dict[SSAValue, SSAValue] = field(default_factory=dict)
    writers: dict[SSAValue, dict[int, SSAValue]] = field(default_factory=dict)
    """DDR buffer -> tile -> the token of the last write to it from that tile. Writes from
    one tile are chained, so a reader waits for at most one token per tile (the binary
    allows 255 waits; a big FC layer is cut into a thousand pieces)."""
    location: Attribute | None = None
    tables: dict[tuple, SSAValue] = field(default_factory=dict)
    """Activation-table key -> the DDR constant holding the table."""
    loaded: dict[int, tuple] = field(default_factory=dict)
    """Tile -> the key of the table its activation-table memory holds (after the emitted luts)."""
    table_token: dict[int, SSAValue] = field(default_factory=dict)
    """Tile -> the token of the lut that loaded its table."""
    last_table_user: dict[int, SSAValue] = field(default_factory=dict)
    """Tile -> the last compute task that read its table. Table users on a tile are chained
    (each waits for the previous one), so the next lut waits for one token only."""
    made_constants: int = 0
    zeros: dict[Attribute, SSAValue] = field(default_factory=dict)
    flat_views: dict[SSAValue, SSAValue] = field(default_factory=dict)
    """DDR buffer -> its flat view, which strided window loads read."""
    resident: ResidentPlan = field(default_factory=ResidentPlan)
    """Where tensors are planned to stay in OCM: the OCM left to the layers next to them,
    and the pieces of the layers reading them (`cascade.plan_resident`)."""

    def ocm_bytes(self, op: Operation) -> int:
        return self.resident.ocm_budget.get(op, self.target.ocm_bytes_per_tile)

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
                element := mrvl.element_type_of(t), Float16Type
            ):
                # mrvl-cast-fp16 casts f32 only: for another type, running it is no remedy
                hint = (
                    "; run mrvl-cast-fp16 first"
                    if isinstance(element, Float32Type)
                    else f", not {element} (mrvl-cast-fp16 casts f32 only)"
                )
                raise CompileError(
                    f"{op.name} at {location_name(op.location)}: the MLIP computes in f16{hint}"
                )

    def what(self, op: Operation) -> str:
        return f"layer {location_name(op.location) or op.name}"

    def made_constant(self, name: str, array: np.ndarray) -> SSAValue:
        """A DDR constant the compiler makes (an activation table, PRELU slopes)."""
        self.made_constants += 1
        array = np.ascontiguousarray(array)
        et = mrvl.element_type_for(array.dtype)
        value = DenseIntOrFPElementsAttr(
            TensorType(et, list(array.shape)), BytesAttr(array.tobytes())
        )
        buf = self.emit(sched.ConstOp(name, value, _buffer("ddr", array.shape, et))).buffer
        self.writers[buf] = {}
        return buf

    def slopes(self, op: Operation) -> SSAValue | None:
        """PRELU's slopes (f32 per channel) as a DDR constant, or None without PRELU."""
        if op.slopes is None:
            return None
        values = np.array(op.slopes.get_values(), np.float32)
        return self.made_constant(f"mrvl_prelu_slopes_{self.made_constants}", values)

    def activation_deps(self, op: Operation, tile: int) -> list[SSAValue]:
        """What a compute task of `op` on `tile` waits for besides its operands: for a table
        activation, the lut that loads its table (emitted if the tile holds another one) and
        the tile's previous table user."""
        act = op.activation
        if act is None or act.isa not in TABLE_ACTIVATIONS:
            return []
        a, b = _table_parameters(op)
        key = table_key(act.isa, a, b)
        if self.loaded.get(tile) != key:
            if key not in self.tables:
                self.tables[key] = self.made_constant(
                    f"mrvl_{table_name(*key)}", activation_table(*key)
                )
            previous = self.last_table_user.get(tile)
            lut = sched.LutTaskOp.make(
                {"tile": _int(tile), **_activation_props(op)},
                deps=[previous] if previous is not None else [],
                table=self.tables[key],
            )
            self.table_token[tile] = self.emit(lut).results[0]
            self.loaded[tile] = key
        deps = [self.table_token[tile]]
        if (previous := self.last_table_user.get(tile)) is not None:
            deps.append(previous)
        return deps

    def computed(self, op: Operation, tile: int, token: SSAValue) -> None:
        """Record a compute task of `op` on `tile` (the tile's table user, if it reads one)."""
        if op.activation is not None and op.activation.isa in TABLE_ACTIVATIONS:
            self.last_table_user[tile] = token

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
        pieces = self.resident.pieces.get(op)
        planned = pieces is None  # else `plan_resident`'s pieces, which read the input in OCM
        target = dataclasses.replace(self.target, ocm_bytes_per_tile=self.ocm_bytes(op))
        recorded = op.attributes.get(PLAN)
        if planned and recorded is not None:
            if not isinstance(recorded, sched.WindowPlanAttr):
                raise CompileError(f"{self.what(op)}: {PLAN} must be a #sched.window_plan")
            geometry, pieces = recorded_window_pieces(
                recorded, geometry, target, self.num_tiles, self.what(op)
            )
        elif planned:
            geometry, pieces = plan_window_reads(
                geometry, target, self.num_tiles, self.what(op), split_columns=is_conv,
                pinned=self.wb_pin_ocm,
            )  # fmt: skip
        kh, kw, sh, sw, dh, dw = (
            geometry.kh,
            geometry.kw,
            geometry.sh,
            geometry.sw,
            geometry.dh,
            geometry.dw,
        )
        pads = [geometry.pad_top, geometry.pad_left, *list(op.pads.get_values())[2:]]
        groups = op.group_count if is_conv else 1
        cg = c // groups
        src, dst = self.ddr_buffer(op.input), self.new_ddr(op.output)
        slopes = self.slopes(op) if is_conv else None
        chains = []  # the chains of input-channel blocks of one round (a piece per tile)
        windows = {}  # tile -> (its last piece, the window it loaded, the load's token)
        # each output allocated before its tile's previous store, where that still fits
        early = planned and early_outputs(geometry, pieces, target, self.wb_pin_ocm)
        following = _next_on_tile(pieces) if early else [None] * len(pieces)
        outputs = {}  # tile -> the output buffer allocated for its next piece
        for index, p in enumerate([*pieces, None]):
            if chains and (p is None or not p.ci_blocks or p.tile in {t for t, _ in chains}):
                _in_lockstep([chain for _, chain in chains])
                chains = []
            if p is None:
                break
            tile = p.tile
            if p.ci_blocks:
                chains.append((tile, self.conv_in_blocks(op, geometry, p, tile, src, dst, slopes)))
                continue
            first = is_conv and self.constants_first
            constants = self.conv_constants(op, p, tile, slopes) if first else None
            # Only the input columns and channels the piece reads (a pool's own channels, a
            # conv's groups); a piece of a few columns sees the others as padding. A window
            # the tile's previous piece loaded is read again from OCM.
            previous, window, t_in = windows.get(tile, (None, None, None))
            if not shares_window(previous, p):
                window, t_in = self.load_window(
                    src,
                    geometry,
                    [p.in_row0, p.in_col0, p.ic0],
                    [n, p.in_rows, p.in_cols, p.ics],
                    tile,
                )
            windows[tile] = (p, window, t_in)
            deps = [t_in]
            out = outputs.pop(tile, None) or self.output_buffer(op, p)
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
                wbuf, bias, prelu, tokens = constants or self.conv_constants(op, p, tile, slopes)
                deps += tokens
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
                deps += self.activation_deps(op, tile)
                task = sched.Conv2DTaskOp.make(
                    props,
                    deps=deps,
                    input=window,
                    output=out,
                    weight=wbuf,
                    bias=bias,
                    prelu_slopes=prelu,
                    acc=[],
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
            if is_conv:
                self.computed(op, tile, t_c)
            if (after := following[index]) is not None and not after.ci_blocks:
                # apart from this output, so the next compute does not wait for this store
                outputs[tile] = self.output_buffer(op, after)
            self.store(out, dst, [0, p.orow0, p.ocol0, p.oc0], tile, t_c)

    def output_buffer(self, op: Operation, p: WindowPiece) -> SSAValue:
        """The OCM buffer of a conv or pool piece's output, on its tile."""
        n = mrvl.shape_of(op.input)[0]
        return self.ocm([n, p.rows, p.cols, p.ocs], mrvl.element_type_of(op.output), p.tile)

    @property
    def constants_first(self) -> bool:
        """Whether a piece loads its constants (weights, bias, slopes) before its input: on
        several tiles, they wait for nothing, so a tile's DMA queue loads them while the
        other tiles still write the input. On one tile the input's writes are on the same
        queue anyway, and the input first keeps `sched-pin-weights`' and `sched-pipeline`'s
        layouts as measured (1 tile pinned: 1.26x the roofline, 1.31x constants first)."""
        return self.num_tiles > 1

    def in_load_order(self, constants, data):
        """(constants(), data()), called in the order `constants_first` says."""
        if self.constants_first:
            first = constants()
            return first, data()
        second = data()
        return constants(), second

    def conv_constants(self, op: mrvl.Conv2DOp, p: WindowPiece, tile: int, slopes):
        """Loads of a conv piece's weights, bias and PRELU slopes: (weights, [bias],
        [slopes], their tokens)."""
        _, kh, kw, cg = mrvl.shape_of(op.weight)
        wbuf, t_w = self.load(
            self.ddr_buffer(op.weight), [p.oc0, 0, 0, 0], [p.ocs, kh, kw, cg], tile
        )
        tokens, bias, prelu = [t_w], [], []
        if op.bias is not None:
            bbuf, t_b = self.load(self.ddr_buffer(op.bias), [p.oc0], [p.ocs], tile)
            tokens.append(t_b)
            bias = [bbuf]
        if slopes is not None:
            sbuf, t_s = self.load(slopes, [p.oc0], [p.ocs], tile)
            tokens.append(t_s)
            prelu = [sbuf]
        return wbuf, bias, prelu, tokens

    def load_window(
        self, src: SSAValue, geometry: WindowLayer, first, box, tile: int
    ) -> tuple[SSAValue, SSAValue]:
        """OCM copy of the input window `box` ([N, rows, columns, channels]) starting at
        input row, column and channel `first`; with `geometry.sampling`, only the rows and
        columns the layer reads, by DMA strides over a flat view of the DDR input."""
        sampling = geometry.sampling
        if sampling is None:
            return self.load(src, [0, *first], box, tile)
        c, et = geometry.c, sched.buffer_type(src).element_type
        if src not in self.flat_views:
            size = geometry.n * sampling.h * sampling.w * c
            self.flat_views[src] = self.flat_view(src, _buffer("ddr", (size,), et))
        flat = self.flat_views[src]
        dst = self.ocm(box, et, tile)
        tok = self.emit(
            sched.DmaOp(
                flat, [sampling.element_offset(c, *first)], dst, [0] * len(box), box, tile,
                self.writes_to(flat), src_strides=list(sampling.element_strides(c)),
            )
        ).token  # fmt: skip
        return dst, tok

    def conv_in_blocks(
        self,
        op: mrvl.Conv2DOp,
        geometry: WindowLayer,
        p: WindowPiece,
        tile: int,
        src: SSAValue,
        dst: SSAValue,
        slopes: SSAValue | None,
    ) -> None:
        """One output piece of a conv cut into input-channel blocks, all on one tile: each
        block loads its channels of the window and weights and continues the fp32 partial
        sums of the previous block (the first starts from the bias); the last applies the
        activation and writes f16. A generator that stops after each block, so that the
        chains of a round go block by block over the tiles (`_in_lockstep`): each tile's next
        loads are then in program order next to the others' and share the DDR port with
        them, rather than waiting for every load of the tiles before it."""
        n = mrvl.shape_of(op.input)[0]
        _, kh, kw, _ = mrvl.shape_of(op.weight)
        pads = [geometry.pad_top, geometry.pad_left, *list(op.pads.get_values())[2:]]
        pads[1] = pads[1] + p.in_col0 - p.ocol0 * geometry.sw
        props = {
            "tile": _int(tile),
            "row0": _int(p.in_row0),
            "orow0": _int(p.orow0),
            "kernel": _arr([kh, kw]),
            "strides": _arr([geometry.sh, geometry.sw]),
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
            loads = [
                lambda: self.load(
                    self.ddr_buffer(op.weight), [p.oc0, 0, 0, c0], [p.ocs, kh, kw, cs], tile
                ),
                lambda: self.load_window(
                    src, geometry, [p.in_row0, p.in_col0, c0], [n, p.in_rows, p.in_cols, cs],
                    tile,
                ),
            ]  # fmt: skip
            (wbuf, t_w), (window, t_in) = self.in_load_order(*loads)
            deps, bias = [t_in, t_w], []
            if index == 0 and op.bias is not None:
                bbuf, t_b = self.load(self.ddr_buffer(op.bias), [p.oc0], [p.ocs], tile)
                deps.append(t_b)
                bias = [bbuf]
            if t_acc is not None:
                deps.append(t_acc)
            prelu = []
            if last:  # the activation: PRELU's slopes, a table activation's lut
                if slopes is not None:
                    sbuf, t_s = self.load(slopes, [p.oc0], [p.ocs], tile)
                    deps.append(t_s)
                    prelu = [sbuf]
                deps += self.activation_deps(op, tile)
            element = mrvl.element_type_of(op.output) if last else Float32Type()
            out = self.ocm([n, p.rows, p.cols, p.ocs], element, tile)
            block_props = {**props, **(_activation_props(op) if last else {"acc_out": UnitAttr()})}
            task = sched.Conv2DTaskOp.make(
                block_props,
                deps=deps,
                input=window,
                output=out,
                weight=wbuf,
                bias=bias,
                prelu_slopes=prelu,
                acc=acc,
            )
            t_acc = self.emit(task).results[0]
            if last:
                self.computed(op, tile, t_acc)
            acc = [out]
            if not last:
                yield
        self.store(acc[0], dst, [0, p.orow0, p.ocol0, p.oc0], tile, t_acc)

    def fc(self, op: mrvl.FullyConnectedOp) -> None:
        self.require_f16(op)
        n, k = mrvl.shape_of(op.input)
        o, _ = mrvl.shape_of(op.weight)
        target = dataclasses.replace(self.target, ocm_bytes_per_tile=self.ocm_bytes(op))
        recorded = op.attributes.get(PLAN)
        if recorded is None:
            pieces = plan_fc(op, target, self.num_tiles, self.wb_pin_ocm)
        elif isinstance(recorded, sched.FcPlanAttr):
            pieces = recorded_fc_pieces(recorded, op, target, self.num_tiles, self.what(op))
        else:
            raise CompileError(f"{self.what(op)}: {PLAN} must be a #sched.fc_plan")
        slopes = self.slopes(op)
        src, dst = self.ddr_buffer(op.input), self.new_ddr(op.output)
        for p in pieces:
            tile = p.tile
            (wbuf, t_w), (x, t_x) = self.in_load_order(
                lambda: self.load(self.ddr_buffer(op.weight), [p.o0, 0], [p.os, k], tile),
                lambda: self.load(src, [p.n0, 0], [p.ns, k], tile),
            )
            deps, bias = [t_x, t_w], []
            if op.bias is not None:
                bbuf, t_b = self.load(self.ddr_buffer(op.bias), [p.o0], [p.os], tile)
                deps.append(t_b)
                bias = [bbuf]
            prelu = []
            if slopes is not None:
                sbuf, t_p = self.load(slopes, [p.o0], [p.os], tile)
                deps.append(t_p)
                prelu = [sbuf]
            out = self.ocm([p.ns, p.os], mrvl.element_type_of(op.output), tile)
            task = sched.FullyConnectedTaskOp.make(
                {"tile": _int(tile), **_activation_props(op)},
                deps=deps + self.activation_deps(op, tile),
                input=x,
                weight=wbuf,
                bias=bias,
                prelu_slopes=prelu,
                output=out,
            )
            t_c = self.emit(task).results[0]
            self.computed(op, tile, t_c)
            self.store(out, dst, [p.n0, p.o0], tile, t_c)

    def add(self, op: mrvl.AddOp) -> None:
        """Chunks of the flat sum; with PRELU, chunks of whole pixels (or channel groups of one
        pixel) with their slice of the slopes, cut as scale_shift cuts them."""
        self.require_f16(op)
        count = prod(mrvl.shape_of(op.output))
        et = mrvl.element_type_of(op.output)
        flat = _buffer("ddr", (count,), et)
        lhs, rhs = (self.flat_view(self.ddr_buffer(v), flat) for v in (op.lhs, op.rhs))
        dst = self.new_ddr(op.output)
        out = self.flat_view(dst, flat)
        slopes = self.slopes(op)
        ocm, alignment = self.ocm_bytes(op), self.target.ocm_alignment
        if slopes is None:
            chunks = [
                ChannelChunk(c.start, c.length, 0, 0)
                for c in plan_elementwise(count, 3, ocm, self.num_tiles, alignment)
            ]
        else:
            channels = mrvl.shape_of(op.output)[-1]
            chunks = plan_per_channel(
                count, channels, ocm, self.num_tiles, alignment, self.what(op),
                param_bytes=F32, operands=3,
            )  # fmt: skip
        for index, chunk in enumerate(chunks):
            tile = index % self.num_tiles
            a, t_a = self.load(lhs, [chunk.start], [chunk.length], tile)
            b, t_b = self.load(rhs, [chunk.start], [chunk.length], tile)
            deps, prelu = [t_a, t_b], []
            if slopes is not None:
                sbuf, t_p = self.load(slopes, [chunk.c0], [chunk.cs], tile)
                deps.append(t_p)
                prelu = [sbuf]
            self.chunk_task(
                op, sched.AddTaskOp, tile, chunk, out, deps, lhs=a, rhs=b, prelu_slopes=prelu
            )

    def chunk_task(
        self, op, task_class, tile: int, chunk, out: SSAValue, deps, props=None, **operands
    ):
        """A flat chunk's compute task on `tile` into a fresh OCM buffer (waiting for `deps` and
        for its activation table), then the store of that buffer to `out` at the chunk."""
        y = self.ocm([chunk.length], mrvl.element_type_of(op.output), tile)
        task = task_class.make(
            {"tile": _int(tile), **(props or {}), **_activation_props(op)},
            deps=[*deps, *self.activation_deps(op, tile)],
            output=y,
            **operands,
        )
        t_c = self.emit(task).results[0]
        self.computed(op, tile, t_c)
        self.store(y, out, [chunk.start], tile, t_c)

    def scale_shift(self, op: mrvl.ScaleShiftOp) -> None:
        """Chunks of whole pixels (all channels), so a chunk's channel is its index mod C; a
        pixel too large for a tile with all C channels' parameters is cut into channel groups,
        each with its slice of scale, shift and slopes."""
        self.require_f16(op)
        count, channels = prod(mrvl.shape_of(op.output)), op.channels
        et = mrvl.element_type_of(op.output)
        flat = _buffer("ddr", (count,), et)
        src = self.flat_view(self.ddr_buffer(op.input), flat)
        dst = self.new_ddr(op.output)
        out = self.flat_view(dst, flat)
        chunks = plan_per_channel(
            count,
            channels,
            self.ocm_bytes(op),
            self.num_tiles,
            self.target.ocm_alignment,
            self.what(op),
            param_bytes=(3 if op.slopes is not None else 2) * F32,
        )
        slopes = self.slopes(op)
        for index, chunk in enumerate(chunks):
            tile = index % self.num_tiles
            x, t_x = self.load(src, [chunk.start], [chunk.length], tile)
            s, t_s = self.load(self.ddr_buffer(op.scale), [chunk.c0], [chunk.cs], tile)
            b, t_b = self.load(self.ddr_buffer(op.shift), [chunk.c0], [chunk.cs], tile)
            deps = [t_x, t_s, t_b]
            prelu = []
            if slopes is not None:
                sbuf, t_p = self.load(slopes, [chunk.c0], [chunk.cs], tile)
                deps.append(t_p)
                prelu = [sbuf]
            self.chunk_task(
                op, sched.ScaleTaskOp, tile, chunk, out, deps,
                input=x, scale=s, shift=b, prelu_slopes=prelu,
            )  # fmt: skip

    def mul(self, op: mrvl.MulOp) -> None:
        """Chunks of the flat product; a broadcast `rhs` ([N, 1, 1, C]) is cut per image, so a
        chunk takes whole pixels of one image and that image's C gate values."""
        self.require_f16(op)
        shape = mrvl.shape_of(op.output)
        count = prod(shape)
        et = mrvl.element_type_of(op.output)
        flat = _buffer("ddr", (count,), et)
        lhs = self.flat_view(self.ddr_buffer(op.lhs), flat)
        dst = self.new_ddr(op.output)
        out = self.flat_view(dst, flat)
        if op.broadcasts:
            images, channels = shape[0], shape[-1]
            rhs = self.flat_view(self.ddr_buffer(op.rhs), _buffer("ddr", (images * channels,), et))
        else:
            images, channels = 1, 0
            rhs = self.flat_view(self.ddr_buffer(op.rhs), flat)
        per_image = count // images
        chunks = [
            (n, Chunk(n * per_image + c.start, c.length))
            for n in range(images)
            for c in plan_elementwise(
                per_image,
                2 if channels else 3,
                self.ocm_bytes(op),
                self.num_tiles,
                self.target.ocm_alignment,
                granule=max(channels, 1),
                reserved_bytes=channels * F16_BYTES,
            )
        ]
        for index, (n, chunk) in enumerate(chunks):
            tile = index % self.num_tiles
            a, t_a = self.load(lhs, [chunk.start], [chunk.length], tile)
            if channels:
                b, t_b = self.load(rhs, [n * channels], [channels], tile)
            else:
                b, t_b = self.load(rhs, [chunk.start], [chunk.length], tile)
            self.chunk_task(
                op, sched.MulTaskOp, tile, chunk, out, [t_a, t_b],
                props={"channels": _int(channels)}, lhs=a, rhs=b,
            )  # fmt: skip

    def flat_view(self, buffer: SSAValue, flat: sched.BufferType) -> SSAValue:
        """`buffer` seen as one dimension; its writers stay its writers."""
        view = self.emit(sched.ViewOp(buffer, flat)).buffer
        self.writers[view] = self.writers.setdefault(buffer, {})
        return view

    def concat(self, op: mrvl.ConcatOp) -> None:
        """Each input is copied by DMA, DDR to DDR, into its slice of the result."""
        dst = self.new_ddr(op.output)
        axis = op.concat_axis
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

    def strided_copy(self, op: mrvl.StridedCopyOp) -> None:
        """DDR to DDR DMAs. A descriptor has 4 dimensions: beyond those, the smallest
        dimensions are walked one index per DMA; the outermost remaining dimension is cut
        into one piece per tile."""
        box, strides = list(op.box.get_values()), list(op.strides.get_values())
        et = mrvl.element_type_of(op.output)
        src = self.flat_view(
            self.ddr_buffer(op.input), _buffer("ddr", (prod(mrvl.shape_of(op.input)),), et)
        )
        dst = self.new_ddr(op.output)
        out = self.flat_view(dst, _buffer("ddr", (prod(box),), et))
        dense = _dense_strides(box)
        walked = sorted(range(len(box)), key=lambda d: (box[d], d))[: max(0, len(box) - 4)]
        kept = [d for d in range(len(box)) if d not in walked]
        reads = self.writes_to(src)
        tiles_used = 0
        for index in itertools.product(*(range(box[d]) for d in walked)):
            src0 = op.offset.value.data + sum(i * strides[d] for i, d in zip(index, walked))
            dst0 = sum(i * dense[d] for i, d in zip(index, walked))
            outer = kept[0]
            step = -(-box[outer] // self.num_tiles)
            for first in range(0, box[outer], step):
                tile = tiles_used % self.num_tiles
                tiles_used += 1
                piece = [min(step, box[outer] - first), *(box[d] for d in kept[1:])]
                tok = self.emit(
                    sched.DmaOp(
                        src,
                        [src0 + first * strides[outer]],
                        out,
                        [dst0 + first * dense[outer]],
                        piece,
                        tile,
                        self.write_deps(out, tile, *reads),
                        src_strides=[strides[d] for d in kept],
                        dst_strides=[dense[d] for d in kept],
                    )
                ).token
                self.record_write(out, tile, tok)

    def resize(self, op: mrvl.ResizeOp) -> None:
        """Bands of output rows (and channel groups): each loads the input rows its row
        table reads, its slice of the row table and the whole column table."""
        self.require_f16(op)
        n, h, w, c = mrvl.shape_of(op.input)
        _, oh, ow, _ = mrvl.shape_of(op.output)
        ytab_op = op.ytab.owner
        if not isinstance(ytab_op, mrvl.ConstantOp):
            raise CompileError(f"{self.what(op)}: the row table must be a constant")
        rows_read = ytab_op.numpy().reshape(oh, 4)[:, :2].astype(int)
        pieces = plan_resize_layer(
            n,
            w,
            c,
            ow,
            [(int(min(r)), int(max(r))) for r in rows_read],
            self.target.ocm_bytes_per_tile,
            self.num_tiles,
            self.target.ocm_alignment,
            self.what(op),
        )
        et = mrvl.element_type_of(op.output)
        src, dst = self.ddr_buffer(op.input), self.new_ddr(op.output)
        ytab, xtab = self.ddr_buffer(op.ytab), self.ddr_buffer(op.xtab)
        f32 = sched.buffer_type(ytab).element_type
        for index, p in enumerate(pieces):
            tile = index % self.num_tiles
            window, t_in = self.load(src, [0, p.in_row0, 0, p.c0], [n, p.in_rows, w, p.cs], tile)
            ybuf = self.ocm([p.rows, 4], f32, tile)
            t_y = self.emit(
                sched.DmaOp(
                    ytab, [p.orow0 * 4], ybuf, [0, 0], [p.rows, 4], tile, self.writes_to(ytab),
                    src_strides=[4, 1],
                )
            ).token  # fmt: skip
            xbuf = self.ocm([ow, 4], f32, tile)
            t_x = self.emit(
                sched.DmaOp(
                    xtab, [0], xbuf, [0, 0], [ow, 4], tile, self.writes_to(xtab),
                    src_strides=[4, 1],
                )
            ).token  # fmt: skip
            out = self.ocm([n, p.rows, ow, p.cs], et, tile)
            task = sched.ResizeTaskOp.make(
                {"tile": _int(tile), "row0": _int(p.in_row0)},
                deps=[t_in, t_y, t_x],
                input=window,
                ytab=ybuf,
                xtab=xbuf,
                output=out,
            )
            self.store(out, dst, [0, p.orow0, 0, p.c0], tile, self.emit(task).results[0])

    def dilate(self, op: mrvl.DilateOp) -> None:
        """Zero insertion: fill the result with zeros (a DMA repeating one zero element of the
        constant pool), then scatter the input into it with destination strides."""
        n, h, w, c = mrvl.shape_of(op.input)
        _, oh, ow, _ = mrvl.shape_of(op.output)
        sh, sw = op.strides.get_values()
        et = mrvl.element_type_of(op.output)
        total = n * oh * ow * c
        dst = self.new_ddr(op.output)
        out = self.flat_view(dst, _buffer("ddr", (total,), et))
        zero = self.zero(et)
        tok = self.emit(
            sched.DmaOp(
                zero, [0], out, [0], [total], 0, self.write_deps(out, 0),
                src_strides=[0], dst_strides=[1],
            )
        ).token  # fmt: skip
        self.record_write(out, 0, tok)
        src = self.ddr_buffer(op.input)
        deps = self.write_deps(out, 0, *self.writes_to(src))
        tok = self.emit(
            sched.DmaOp(
                src, [0, 0, 0, 0], out, [0], [n, h, w, c], 0, deps,
                dst_strides=[oh * ow * c, sh * ow * c, sw * c, 1],
            )
        ).token  # fmt: skip
        self.record_write(out, 0, tok)

    def zero(self, element_type: Attribute) -> SSAValue:
        """A one-element zero constant (made once per element type)."""
        if element_type not in self.zeros:
            dtype = mrvl.numpy_dtype(element_type)
            value = DenseIntOrFPElementsAttr(
                TensorType(element_type, [1]), BytesAttr(np.zeros(1, dtype).tobytes())
            )
            name = f"mrvl_zero_{dtype.name}"
            buf = self.emit(sched.ConstOp(name, value, _buffer("ddr", (1,), element_type)))
            self.zeros[element_type] = buf.buffer
            self.writers[buf.buffer] = {}
        return self.zeros[element_type]


def _next_on_tile(pieces: list[WindowPiece]) -> list[WindowPiece | None]:
    """For each piece, the next piece on its tile (None for its tile's last)."""
    following: list[WindowPiece | None] = [None] * len(pieces)
    last: dict[int, int] = {}
    for index, p in enumerate(pieces):
        if p.tile in last:
            following[last[p.tile]] = p
        last[p.tile] = index
    return following


def _in_lockstep(chains: list) -> None:
    """Run generators one step each in turn until all are done."""
    while chains:
        for chain in list(chains):
            if next(chain, StopIteration) is StopIteration:
                chains.remove(chain)


def _dense_strides(dims) -> list[int]:
    """Element strides of a dense row-major array of `dims`."""
    strides, step = [], 1
    for d in reversed(list(dims)):
        strides.append(step)
        step *= d
    return strides[::-1]


def window_geometry(op: mrvl.Conv2DOp | mrvl.Pool2DBase) -> WindowLayer:
    """The tiling geometry of a conv or pool op."""
    n, h, w, c = mrvl.shape_of(op.input)
    _, oh, ow, oc = mrvl.shape_of(op.output)
    if isinstance(op, mrvl.Conv2DOp):
        _, kh, kw, cg = mrvl.shape_of(op.weight)
        dh, dw = op.dilations.get_values()
        per_oc = kh * kw * cg * F16_BYTES + (4 if op.bias is not None else 0)
        per_oc += 4 if op.slopes is not None else 0  # PRELU's f32 slope
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
    """The activation properties a task takes over from its layer (PRELU's slopes become a
    buffer operand of the task instead)."""
    return {
        k: op.properties[k]
        for k in ("activation", "act_min", "act_max", "alpha", "beta")
        if k in op.properties
    }


def _table_parameters(op: Operation) -> tuple[float, float]:
    """act_a, act_b of a layer's table activation (HARD_SIGMOID's alpha and beta)."""
    a = op.alpha.value.data if op.alpha is not None else 0.0
    b = op.beta.value.data if op.beta is not None else 0.0
    return a, b


@dataclass(frozen=True)
class ConvertMrvlToSchedPass(MrvlModulePass):
    """Options: `mcpu` and `num-tiles` (both required: nothing defaults to a target), and
    `wb-pin-ocm` (upstream's option: keep a layer's weights and biases in OCM when they fit),
    and `cascade` (keep an intermediate tensor in OCM between layers when it fits:
    `sched-cascade`).

    The result is one `sched.program` carrying them, holding the scheduled region.
    """

    name = "convert-mrvl-to-sched"
    mcpu: str | None = None
    num_tiles: int | None = None
    wb_pin_ocm: bool = False
    cascade: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.mcpu is not None:
            get_target(self.mcpu)  # an unknown target is named first
        missing = [n for n, v in (("mcpu", self.mcpu), ("num-tiles", self.num_tiles)) if v is None]
        if missing:
            raise CompileError(
                f"convert-mrvl-to-sched needs the option{'s' if len(missing) > 1 else ''} "
                f"{' and '.join(missing)} (the target the region is scheduled for)"
            )
        target = get_target(self.mcpu)
        num_tiles = self.num_tiles
        if num_tiles not in sched.TILE_COUNTS or num_tiles > target.max_tiles:
            raise CompileError(
                f"num_tiles={num_tiles} is not valid for {target.name} (1, 2, 4 or 8, at most "
                f"{target.max_tiles})"
            )
        funcs = [f for f in op.body.block.ops if isinstance(f, func.FuncOp)]
        if len(funcs) != 1:
            raise CompileError(f"expected one region function in the module, found {len(funcs)}")
        fn = funcs[0]
        low = _Lowering(target, num_tiles, self.wb_pin_ocm)
        if self.cascade:
            low.resident = plan_resident(fn.body.block, target, num_tiles)
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
                elif isinstance(layer, mrvl.MulOp):
                    low.mul(layer)
                elif isinstance(layer, mrvl.ConcatOp):
                    low.concat(layer)
                elif isinstance(layer, mrvl.StridedCopyOp):
                    low.strided_copy(layer)
                elif isinstance(layer, mrvl.DilateOp):
                    low.dilate(layer)
                elif isinstance(layer, mrvl.ResizeOp):
                    low.resize(layer)
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
        program = sched.ProgramOp(
            target.name,
            num_tiles,
            wb_pin_ocm=self.wb_pin_ocm,
            cascade=self.cascade,
            sym_name=fn.sym_name.data or None,
        )
        program.body.block.add_ops(low.ops)
        Rewriter.replace_op(fn, program)
