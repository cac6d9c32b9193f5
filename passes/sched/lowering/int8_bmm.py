"""Lowering of the int8 product of two activations (`mrvl.qbmm`): `mrvl.bmm`'s plan and
pieces (`bmm.py`) in 1-byte operands and results with int32 partial sums, each piece a chain
of `sched.qbmm` tasks over the blocks of the reduction. Integer sums do not depend on where
the reduction is cut, so any plan gives the bits of one instruction over the whole of it."""

from __future__ import annotations

from xdsl.dialects.builtin import i32
from xdsl.pattern_rewriter import PatternRewriter, op_type_rewrite_pattern

from mrvl.dialects import mrvl, sched
from mrvl.passes.sched.lowering.bmm import BmmShape, emit_pieces, plan_bmm
from mrvl.passes.sched.lowering.int8_compute import require_int8
from mrvl.passes.sched.lowering.state import LayerLowering, i64_array, int_attr

INT8_SIZES = (1, 1, 4)
"""Bytes of an operand element, a result element and a partial sum (int32) of `qbmm`."""


def qbmm_shape(op: mrvl.QuantizedBatchMatMulOp) -> BmmShape:
    batch, m, k, n = op.dims()
    return BmmShape(batch, m, k, n, mrvl.shape_of(op.lhs)[0], mrvl.shape_of(op.rhs)[0])


class LowerQuantizedBatchMatMul(LayerLowering):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: mrvl.QuantizedBatchMatMulOp, rewriter: PatternRewriter) -> None:
        self.rewrite(op, rewriter)

    def lower(self, op: mrvl.QuantizedBatchMatMulOp) -> None:
        from mrvl import int8

        require_int8(op)
        low = self.low
        shape = qbmm_shape(op)
        pieces = plan_bmm(
            shape,
            low.ocm_bytes(op),
            low.num_tiles,
            low.target.ocm_alignment,
            low.what(op),
            INT8_SIZES,
        )
        (s_a, z_a), (s_b, z_b) = op.quant_of_input(0), op.quant_of_input(1)
        s_y, z_y = op.out_quant.values
        extra = {
            "in_zp": int_attr(z_a),
            "rhs_zp": int_attr(z_b),
            "out_zp": int_attr(z_y),
            "rq": i64_array(int8.qmul_params(s_a, s_b, s_y)),
            "clamp": i64_array([-128, 127]),
        }
        emit_pieces(low, op, shape, pieces, i32, sched.QBatchMatMulTaskOp, extra)
