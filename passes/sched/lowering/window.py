"""Lowering of the window layers, conv2d and the 2-D pools: the tiler's pieces (`tiling`,
or a recorded `sched.plan`, or `cascade`'s resident pieces) become loads of each piece's input
window and constants, one compute task per piece (or a chain of input-channel blocks through
fp32 partial sums) and the store of its output rows.
"""

from __future__ import annotations

import dataclasses

from xdsl.dialects.builtin import Float32Type, IntegerType, UnitAttr
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError
from mrvl.passes.sched.lowering.int8_compute import (
    is_int8_layer,
    qconv_task,
    qpool_task,
    requant_pairs,
    require_int8,
)
from mrvl.passes.sched.lowering.state import (
    LayerLowering,
    activation_props,
    buffer_type,
    i64_array,
    int_attr,
)
from mrvl.passes.sched.plan_tiling import PLAN, recorded_window_pieces, window_geometry
from mrvl.passes.sched.tiling import (
    WindowLayer,
    WindowPiece,
    early_outputs,
    plan_window_reads,
    shares_window,
)


class _LowerWindowLayer(LayerLowering):
    def lower(self, op: mrvl.Conv2DOp | mrvl.Pool2DBase) -> None:
        int8 = is_int8_layer(op)
        require_int8(op) if int8 else self.low.require_f16(op)
        is_conv = isinstance(op, mrvl.Conv2DOp)
        n, h, w, c = mrvl.shape_of(op.input)
        oc = mrvl.shape_of(op.output)[3]
        geometry = window_geometry(op)
        pieces = self.low.resident.pieces.get(op)
        planned = pieces is None  # else `plan_resident`'s pieces, which read the input in OCM
        target = dataclasses.replace(self.low.target, ocm_bytes_per_tile=self.low.ocm_bytes(op))
        recorded = op.attributes.get(PLAN)
        if planned and recorded is not None:
            if not isinstance(recorded, sched.WindowPlanAttr):
                raise CompileError(f"{self.low.what(op)}: {PLAN} must be a #sched.window_plan")
            geometry, pieces = recorded_window_pieces(
                recorded, geometry, target, self.low.num_tiles, self.low.what(op)
            )
        elif planned:
            geometry, pieces = plan_window_reads(
                geometry, target, self.low.num_tiles, self.low.what(op), split_columns=is_conv,
                pinned=self.low.wb_pin_ocm,
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
        src, dst = self.low.ddr_buffer(op.input), self.low.new_ddr(op.output)
        # an int8 conv's requantization pairs are loaded per piece where PRELU's slopes are
        slopes = (requant_pairs(self.low, op) if int8 else self.low.slopes(op)) if is_conv else None
        chains = []  # the chains of input-channel blocks of one round (a piece per tile)
        windows = {}  # tile -> (its last piece, the window it loaded, the load's token)
        # each output allocated before its tile's previous store, where that still fits
        early = planned and early_outputs(geometry, pieces, target, self.low.wb_pin_ocm)
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
            first = is_conv and self.low.constants_first
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
            piece_pads[1] = geometry.piece_pad_left(p)
            common = {
                "tile": int_attr(tile),
                "row0": int_attr(p.in_row0),
                "orow0": int_attr(p.orow0),
                "kernel": i64_array([kh, kw]),
                "strides": i64_array([sh, sw]),
                "pads": i64_array(piece_pads),
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
                    "dilations": i64_array([dh, dw]),
                    **{key: int_attr(value) for key, value in channel_props.items()},
                    **activation_props(op),
                }
                deps += self.low.activation_deps(op, tile)
                task = _conv_task(op, int8, props, deps, window, out, wbuf, bias, prelu, [])
            else:
                props = {
                    **common,
                    "mode": sched.PoolKindAttr(
                        sched.PoolKind.MAX
                        if isinstance(op, mrvl.MaxPool2DOp)
                        else sched.PoolKind.AVG
                    ),
                    "in_hw": i64_array([h, w]),
                }
                if isinstance(op, mrvl.AvgPool2DOp) and op.count_include_pad is not None:
                    props["count_include_pad"] = UnitAttr()
                if int8:
                    task = qpool_task(op, props, deps, window, out)
                else:
                    task = sched.Pool2DTaskOp.make(props, deps=deps, input=window, output=out)
            t_c = self.low.emit(task).results[0]
            if is_conv:
                self.low.computed(op, tile, t_c)
            if (after := following[index]) is not None and not after.ci_blocks:
                # apart from this output, so the next compute does not wait for this store
                outputs[tile] = self.output_buffer(op, after)
            self.low.store(out, dst, [0, p.orow0, p.ocol0, p.oc0], tile, t_c)

    def output_buffer(self, op: Operation, p: WindowPiece) -> SSAValue:
        """The OCM buffer of a conv or pool piece's output, on its tile."""
        n = mrvl.shape_of(op.input)[0]
        return self.low.ocm([n, p.rows, p.cols, p.ocs], mrvl.element_type_of(op.output), p.tile)

    def conv_constants(self, op: mrvl.Conv2DOp, p: WindowPiece, tile: int, slopes):
        """Loads of a conv piece's weights, bias and PRELU slopes: (weights, [bias],
        [slopes], their tokens)."""
        _, kh, kw, cg = mrvl.shape_of(op.weight)
        wbuf, t_w = self.low.load(
            self.low.ddr_buffer(op.weight), [p.oc0, 0, 0, 0], [p.ocs, kh, kw, cg], tile
        )
        tokens, bias, prelu = [t_w], [], []
        if op.bias is not None:
            bbuf, t_b = self.low.load(self.low.ddr_buffer(op.bias), [p.oc0], [p.ocs], tile)
            tokens.append(t_b)
            bias = [bbuf]
        if slopes is not None:  # (or an int8 conv's requantization pairs [O, 2])
            rest = sched.buffer_type(slopes).dims[1:]
            sbuf, t_s = self.low.load(slopes, [p.oc0, *[0] * len(rest)], [p.ocs, *rest], tile)
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
            return self.low.load(src, [0, *first], box, tile)
        c, et = geometry.c, sched.buffer_type(src).element_type
        if src not in self.low.flat_views:
            size = geometry.n * sampling.h * sampling.w * c
            self.low.flat_views[src] = self.low.flat_view(src, buffer_type("ddr", (size,), et))
        flat = self.low.flat_views[src]
        dst = self.low.ocm(box, et, tile)
        tok = self.low.emit(
            sched.DmaOp(
                flat, [sampling.element_offset(c, *first)], dst, [0] * len(box), box, tile,
                self.low.writes_to(flat), src_strides=list(sampling.element_strides(c)),
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
        pads[1] = geometry.piece_pad_left(p)
        props = {
            "tile": int_attr(tile),
            "row0": int_attr(p.in_row0),
            "orow0": int_attr(p.orow0),
            "kernel": i64_array([kh, kw]),
            "strides": i64_array([geometry.sh, geometry.sw]),
            "pads": i64_array(pads),
            "dilations": op.dilations,
            "groups": int_attr(1),
            "oc0": int_attr(p.oc0),
            "oc_total": int_attr(mrvl.shape_of(op.output)[3]),
        }
        acc: list[SSAValue] = []  # the previous block's partial sums
        t_acc: SSAValue | None = None
        for index, (c0, cs) in enumerate(p.ci_blocks):
            last = index == len(p.ci_blocks) - 1
            loads = [
                lambda: self.low.load(
                    self.low.ddr_buffer(op.weight), [p.oc0, 0, 0, c0], [p.ocs, kh, kw, cs], tile
                ),
                lambda: self.load_window(
                    src, geometry, [p.in_row0, p.in_col0, c0], [n, p.in_rows, p.in_cols, cs],
                    tile,
                ),
            ]  # fmt: skip
            (wbuf, t_w), (window, t_in) = self.low.in_load_order(*loads)
            deps, bias = [t_in, t_w], []
            if index == 0 and op.bias is not None:
                bbuf, t_b = self.low.load(self.low.ddr_buffer(op.bias), [p.oc0], [p.ocs], tile)
                deps.append(t_b)
                bias = [bbuf]
            if t_acc is not None:
                deps.append(t_acc)
            prelu = []
            int8 = is_int8_layer(op)
            if last or (int8 and slopes is not None):  # PRELU's slopes (or int8 requant pairs)
                if slopes is not None:
                    rest = sched.buffer_type(slopes).dims[1:]
                    box = [p.ocs, *rest]
                    sbuf, t_s = self.low.load(slopes, [p.oc0, *[0] * len(rest)], box, tile)
                    deps.append(t_s)
                    prelu = [sbuf]
                if last:  # a table activation's lut
                    deps += self.low.activation_deps(op, tile)
            partial = IntegerType(32) if int8 else Float32Type()
            element = mrvl.element_type_of(op.output) if last else partial
            out = self.low.ocm([n, p.rows, p.cols, p.ocs], element, tile)
            block_props = {**props, **(activation_props(op) if last else {"acc_out": UnitAttr()})}
            task = _conv_task(op, int8, block_props, deps, window, out, wbuf, bias, prelu, acc)
            t_acc = self.low.emit(task).results[0]
            if last:
                self.low.computed(op, tile, t_acc)
            acc = [out]
            if not last:
                yield
        self.low.store(acc[0], dst, [0, p.orow0, p.ocol0, p.oc0], tile, t_acc)


def _conv_task(op, int8: bool, props, deps, window, out, wbuf, bias, prelu, acc):
    """The conv task of one piece (or input-channel block): `sched.qconv2d` in int8 code
    (`prelu` is then the requantization pairs), else `sched.conv2d`."""
    if int8:
        return qconv_task(op, props, deps, window, out, wbuf, bias, prelu, acc)
    return sched.Conv2DTaskOp.make(
        props,
        deps=deps,
        input=window,
        output=out,
        weight=wbuf,
        bias=bias,
        prelu_slopes=prelu,
        acc=acc,
    )


class LowerConv2D(_LowerWindowLayer):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.Conv2DOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


class LowerPool2D(_LowerWindowLayer):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.Pool2DBase, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)


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
