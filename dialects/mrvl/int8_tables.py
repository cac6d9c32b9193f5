"""The int8 table activation in the `mrvl` dialect: a function of one value between int8
tensors, as 256 int8 entries computed at compile time (docs/isa.md §4b, "Table activations").

A QDQ model writes Sigmoid, HardSigmoid, HardSwish, Tanh, GELU and the like as
`quantize(f(dequantize(q)))`: an int8 input has 256 values, so the whole layer is the table of
what that means for each of them (`mrvl.int8.int8_table`), and the machine only looks it up
(`requant` with the identity pair and `lut_addr`). `function` names what the table computes
(for the Nodes-JSON and for reading the IR); the entries are the layer.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntegerType,
    StringAttr,
    TensorType,
    i8,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.mrvl.attributes import layout_of, shape_of
from mrvl.dialects.mrvl.quantized import QuantAttr, is_int8

TABLE_ENTRIES = 256


@irdl_op_definition
class Int8TableOp(IRDLOperation):
    """int8 -> int8 by a 256-entry table: y = table[x + 128]. `in_quant` / `out_quant` are
    the quantizations the table was computed for (kept for the Nodes-JSON)."""

    name = "mrvl.int8_table"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    function = prop_def(StringAttr)
    table = prop_def(DenseArrayBase[IntegerType])
    in_quant = prop_def(ArrayAttr[QuantAttr])
    out_quant = prop_def(QuantAttr)
    assembly_format = (
        "$function $input `from` $in_quant `to` $out_quant `table` $table attr-dict `:` "
        "type($input) `->` type($output)"
    )
    traits = traits_def(Pure())

    def __init__(
        self,
        input: SSAValue,
        function: str,
        table,
        in_quant: QuantAttr,
        out_quant: QuantAttr,
    ):
        super().__init__(
            operands=[input],
            result_types=[input.type],
            properties={
                "function": StringAttr(function),
                "table": DenseArrayBase.from_list(i8, [int(v) for v in table]),
                "in_quant": ArrayAttr([in_quant]),
                "out_quant": out_quant,
            },
        )

    def verify_(self) -> None:
        if not is_int8(self.input) or not is_int8(self.output):
            raise VerifyException("mrvl.int8_table: the input and the result are i8")
        if shape_of(self.input) != shape_of(self.output) or layout_of(self.input) != layout_of(
            self.output
        ):
            raise VerifyException("mrvl.int8_table: only the values may change")
        if self.table.elt_type != i8 or len(self.table) != TABLE_ENTRIES:
            raise VerifyException(f"mrvl.int8_table: the table is {TABLE_ENTRIES} i8 entries")
        if len(self.in_quant) != 1:
            raise VerifyException("mrvl.int8_table: one in_quant, for its one input")

    def quant_of_input(self, index: int = 0) -> tuple[float, int]:
        return self.in_quant.data[index].values

    def entries(self) -> list[int]:
        return [int(v) for v in self.table.get_values()]
