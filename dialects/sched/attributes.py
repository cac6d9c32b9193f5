"""`sched`'s types and attributes: buffers in a memory space, tokens, pool kinds, and the tiling
plans that `sched-plan-tiling` records on layers."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from math import prod

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntAttr,
    IntegerAttr,
    StringAttr,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    ParametrizedAttribute,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    irdl_attr_definition,
    param_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from mrvl.dialects.mrvl import numpy_dtype
from mrvl.isa import IOKind


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
class IOKindAttr(EnumAttribute[IOKind], SpacedOpaqueSyntaxAttribute):
    """A region I/O buffer's direction; prints as a word (`sched.io "x" input ...`)."""

    name = "sched.io_kind"


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
