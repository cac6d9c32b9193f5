"""`sched`'s int8 product of two activations (docs/isa.md `qbmm`): one piece of a
`mrvl.qbmm` on a tile, `sched.bmm`'s operands and partial sums on int8 data with int32
accumulators, requantized once by `rq` (s_a·s_b/s_y) to the result's scale."""

from __future__ import annotations

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, UnitAttr
from xdsl.irdl import irdl_op_definition, operand_def, opt_operand_def, opt_prop_def, prop_def
from xdsl.irdl.operations import AttrSizedOperandSegments
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.sched.attributes import BufferType, buffer_type
from mrvl.dialects.sched.int8_tasks import INT8_FORMAT, Int8TaskBase, _int_buffer
from mrvl.dialects.sched.tasks import _check_ocm, task_format


@irdl_op_definition
class QBatchMatMulTaskOp(Int8TaskBase):
    """int8 batched product of two OCM operands ([batch or 1, M, K] or, with `trans_a`,
    [.., K, M]; [batch or 1, K, N] or, with `trans_b`, [.., N, K]) into [batch, M, N]: the
    exact sum of (lhs - in_zp)·(rhs - rhs_zp) from 0, or from the int32 partial sums `acc`;
    int8 through `rq`, or the int32 accumulator with `acc_out`."""

    name = "sched.qbmm"
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    lhs = operand_def(BufferType)
    rhs = operand_def(BufferType)
    acc = opt_operand_def(BufferType)
    output = operand_def(BufferType)
    trans_a = opt_prop_def(UnitAttr)
    trans_b = opt_prop_def(UnitAttr)
    acc_out = opt_prop_def(UnitAttr)
    rhs_zp = prop_def(IntegerAttr[I64])
    rq = prop_def(DenseArrayBase[I64])
    assembly_format = task_format(
        "$lhs `,` $rhs (`acc` `(` $acc^ `:` type($acc) `)`)? `->` $output "
        "(`trans_a` $trans_a^)? (`trans_b` $trans_b^)? (`acc_out` $acc_out^)? "
        "`rhs_zp` $rhs_zp `rq` $rq " + INT8_FORMAT,
        "type($lhs) `,` type($rhs) `->` type($output)",
    )

    def dims(self) -> tuple[int, int, int, int]:
        """(batch, M, K, N) of the product."""
        batch, m, n = buffer_type(self.output).dims
        _, l1, l2 = buffer_type(self.lhs).dims
        return batch, m, (l1 if self.trans_a is not None else l2), n

    def verify_(self) -> None:
        self.verify_int8()
        tile = self.tile.value.data
        _check_ocm(self, tile, self.lhs, self.rhs, self.output)
        _int_buffer(self, "lhs", self.lhs, 8)
        _int_buffer(self, "rhs", self.rhs, 8)
        _int_buffer(self, "the output", self.output, 32 if self.acc_out is not None else 8)
        if not -128 <= self.rhs_zp.value.data <= 127:
            raise VerifyException(f"{self.name}: rhs_zp outside [-128, 127]")
        shapes = [buffer_type(v).dims for v in (self.lhs, self.rhs, self.output)]
        if any(len(s) != 3 for s in shapes):
            raise VerifyException(f"{self.name}: operands and result must be rank 3")
        (lb, l1, l2), (rb, r1, r2), (batch, m, n) = shapes
        lm, lk = (l2, l1) if self.trans_a is not None else (l1, l2)
        rk, rn = (r2, r1) if self.trans_b is not None else (r1, r2)
        if lk != rk or (lm, rn) != (m, n) or lb not in (1, batch) or rb not in (1, batch):
            raise VerifyException(
                f"{self.name}: shapes {[list(s) for s in shapes]} do not make a batched product"
            )
        if self.acc is not None:
            _check_ocm(self, tile, self.acc)
            _int_buffer(self, "the partial sums", self.acc, 32)
            if buffer_type(self.acc).dims != (batch, m, n):
                raise VerifyException(f"{self.name}: partial sums must have the result's shape")
