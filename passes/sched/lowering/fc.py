"""Lowering of fully connected layers: the planned pieces (rows of the batch by output
features) each load their slice of the input, weights and bias, compute and store."""

from __future__ import annotations

import dataclasses

from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError
from mrvl.passes.sched.lowering.int8_compute import (
    is_int8_layer,
    qfc_task,
    requant_pairs,
    require_int8,
)
from mrvl.passes.sched.lowering.state import LayerLowering, activation_props, int_attr
from mrvl.passes.sched.plan_tiling import PLAN, plan_fc, recorded_fc_pieces


class LowerFullyConnected(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.FullyConnectedOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.FullyConnectedOp) -> None:
        int8 = is_int8_layer(op)
        require_int8(op) if int8 else self.low.require_f16(op)
        n, k = mrvl.shape_of(op.input)
        o, _ = mrvl.shape_of(op.weight)
        target = dataclasses.replace(self.low.target, ocm_bytes_per_tile=self.low.ocm_bytes(op))
        recorded = op.attributes.get(PLAN)
        if recorded is None:
            pieces = plan_fc(op, target, self.low.num_tiles, self.low.wb_pin_ocm)
        elif isinstance(recorded, sched.FcPlanAttr):
            pieces = recorded_fc_pieces(recorded, op, target, self.low.num_tiles, self.low.what(op))
        else:
            raise CompileError(f"{self.low.what(op)}: {PLAN} must be a #sched.fc_plan")
        # an int8 fc's requantization pairs are loaded per piece where PRELU's slopes are
        slopes = requant_pairs(self.low, op) if int8 else self.low.slopes(op)
        src, dst = self.low.ddr_buffer(op.input), self.low.new_ddr(op.output)
        for p in pieces:
            tile = p.tile
            (wbuf, t_w), (x, t_x) = self.low.in_load_order(
                lambda: self.low.load(self.low.ddr_buffer(op.weight), [p.o0, 0], [p.os, k], tile),
                lambda: self.low.load(src, [p.n0, 0], [p.ns, k], tile),
            )
            deps, bias = [t_x, t_w], []
            if op.bias is not None:
                bbuf, t_b = self.low.load(self.low.ddr_buffer(op.bias), [p.o0], [p.os], tile)
                deps.append(t_b)
                bias = [bbuf]
            prelu = []
            if slopes is not None:
                rest = sched.buffer_type(slopes).dims[1:]
                sbuf, t_p = self.low.load(slopes, [p.o0, *[0] * len(rest)], [p.os, *rest], tile)
                deps.append(t_p)
                prelu = [sbuf]
            out = self.low.ocm([p.ns, p.os], mrvl.element_type_of(op.output), tile)
            if int8:
                task = qfc_task(op, tile, deps, x, wbuf, bias, prelu[0], out)
            else:
                task = sched.FullyConnectedTaskOp.make(
                    {"tile": int_attr(tile), **activation_props(op)},
                    deps=deps + self.low.activation_deps(op, tile),
                    input=x,
                    weight=wbuf,
                    bias=bias,
                    prelu_slopes=prelu,
                    output=out,
                )
            t_c = self.low.emit(task).results[0]
            self.low.computed(op, tile, t_c)
            self.low.store(out, dst, [p.n0, p.o0], tile, t_c)
