"""The `mlip` ISA dialect: one op per machine instruction, every field explicit.

The instruction ops are made from the ISA table in `mrvl.isa`, so the dialect, the binary
encoder and the simulator cannot disagree on what an instruction holds. A program is a
`builtin.module` whose attributes name the target, with `mlip.io` entries, one `mlip.consts`
pool, and the instructions in program order. It prints as assembly:

    mlip.conv tile 0 signal 3 wait [1, 2] : in_addr 0, in_shape [1, 15, 28, 1], ...

Enumeration fields print as their member's name in lower case (`act relu`, `mode max`).
An optional field (`FieldSpec.default`, e.g. `dma`'s `dst_tiles`) prints only when it differs
from its default, after the required fields, and parses when present:

    mlip.dma tile 0 : src_space ddr, ..., elem_bytes 2, dst_tiles 7
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import ClassVar

from xdsl.dialects.builtin import (
    I32,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float32Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    Signedness,
    StringAttr,
    TensorType,
    f32,
    i32,
)

ui8 = IntegerType(8, Signedness.UNSIGNED)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    param_def,
    prop_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from mrvl.isa import (
    NO_SIGNAL,
    OPCODES,
    DType,
    DTypeName,
    FieldSpec,
    IOKind,
    OpcodeSpec,
)
from mrvl.isa_rules import broken_rule

DTYPE_NAMES = {d: DTypeName[d.name] for d in DType}


@irdl_attr_definition
class IOKindAttr(EnumAttribute[IOKind], SpacedOpaqueSyntaxAttribute):
    """An I/O table entry's direction; prints as a word (`mlip.io "x" input ...`)."""

    name = "mlip.io_kind"


@irdl_attr_definition
class DTypeAttr(EnumAttribute[DTypeName], SpacedOpaqueSyntaxAttribute):
    """An I/O table entry's element type; prints as a word (`f32`, `f16`, `i8`, `i32`)."""

    name = "mlip.dtype"


def _field_constraint(spec: FieldSpec):
    if spec.kind == "f32":
        return prop_def(FloatAttr[Float32Type])
    if spec.kind == "i32":
        return prop_def(IntegerAttr[I32])
    return prop_def(DenseArrayBase[I32])


def field_attr(spec: FieldSpec, value) -> Attribute:
    """The property that stores `value` for instruction field `spec`."""
    if spec.kind == "f32":
        return _f32_attr(float(value))
    if spec.kind == "i32":
        return _i32_attr(int(value))
    return _i32_array_attr(tuple(int(v) for v in value))


# Attributes are immutable and a program repeats the same small values thousands of times;
# building (and verifying) each anew was a third of instruction selection on a ResNet-50.
@cache
def _i32_attr(value: int) -> IntegerAttr:
    return IntegerAttr(value, i32)


@cache
def _f32_attr(value: float) -> FloatAttr:
    return FloatAttr(value, f32)


@cache
def _i32_array_attr(values: tuple[int, ...]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, list(values))


def field_value(spec: FieldSpec, attr: Attribute):
    """The Python value of an instruction field's property."""
    if spec.kind == "f32":
        assert isinstance(attr, FloatAttr)
        return attr.value.data
    if spec.kind == "i32":
        assert isinstance(attr, IntegerAttr)
        return attr.value.data
    assert isinstance(attr, DenseArrayBase)
    return tuple(attr.get_values())


class InstructionOp(IRDLOperation):
    """Common header of every instruction: tile, signal token, wait tokens."""

    SPEC: ClassVar[OpcodeSpec]

    tile = prop_def(IntegerAttr[I32])
    signal = opt_prop_def(IntegerAttr[I32])
    waits = opt_prop_def(DenseArrayBase[I32])

    @classmethod
    def build(
        cls,
        *,
        tile: int,
        signal: int = NO_SIGNAL,
        waits: Sequence[int] = (),
        fields: dict[str, object],
    ) -> InstructionOp:
        props: dict[str, Attribute] = {"tile": _i32_attr(tile)}
        if signal != NO_SIGNAL:
            props["signal"] = _i32_attr(signal)
        if waits:
            props["waits"] = _i32_array_attr(tuple(waits))
        for spec in cls.SPEC.fields:
            value = fields.get(spec.name, spec.default)
            if value is None:
                raise KeyError(f"{cls.SPEC.name}: field {spec.name} is required")
            props[spec.name] = field_attr(spec, value)
        return cls.create(properties=props)

    @property
    def signal_token(self) -> int:
        return self.signal.value.data if self.signal is not None else NO_SIGNAL

    @property
    def wait_tokens(self) -> tuple[int, ...]:
        return tuple(self.waits.get_values()) if self.waits is not None else ()

    def field_values(self) -> dict[str, object]:
        return {s.name: field_value(s, self.properties[s.name]) for s in self.SPEC.fields}

    def verify_(self) -> None:
        for spec in self.SPEC.fields:
            if spec.enum is not None:
                value = self.properties[spec.name].value.data  # type: ignore[union-attr]
                if value not in spec.enum._value2member_map_:
                    raise VerifyException(
                        f"{self.name}: field {spec.name}={value} is not a {spec.enum.__name__}"
                    )
            if spec.kind.startswith("i32x"):
                n = len(self.properties[spec.name])  # type: ignore[arg-type]
                if n != spec.length:
                    raise VerifyException(
                        f"{self.name}: field {spec.name} takes {spec.length} values, got {n}"
                    )
        # The legal ranges of the ISA table that need no target (the simulator's validator
        # checks the rest, with the target's memories).
        broken = broken_rule(self.SPEC, self.field_values())
        if broken is not None:
            raise VerifyException(f"{self.name}: {broken}")
        if self.SPEC.name == "end":
            verify_program(self)

    def print(self, printer: Printer) -> None:
        printer.print_string(f" tile {self.tile.value.data}")
        if self.signal is not None:
            printer.print_string(f" signal {self.signal.value.data}")
        if self.waits is not None:
            printer.print_string(f" wait {list(self.waits.get_values())}")
        parts = []
        for spec, value in zip(self.SPEC.fields, self.field_values().values()):
            if spec.default is not None and value == spec.default:
                continue  # an optional field at its default vanishes from the text
            if spec.kind == "f32":
                parts.append(f"{spec.name} {value!r}")
            elif spec.enum is not None and value in spec.enum._value2member_map_:
                parts.append(f"{spec.name} {spec.enum(value).name.lower()}")
            elif spec.kind == "i32":
                parts.append(f"{spec.name} {value}")
            else:
                parts.append(f"{spec.name} {list(value)}")  # type: ignore[arg-type]
        if parts:
            printer.print_string(" : " + ", ".join(parts))

    @classmethod
    def parse(cls, parser: Parser) -> InstructionOp:
        parser.parse_keyword("tile")
        tile = parser.parse_integer()
        signal = NO_SIGNAL
        waits: list[int] = []
        if parser.parse_optional_keyword("signal"):
            signal = parser.parse_integer()
        if parser.parse_optional_keyword("wait"):
            waits = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)
        fields: dict[str, object] = {}
        required = [s for s in cls.SPEC.fields if s.default is None]
        optional = [s for s in cls.SPEC.fields if s.default is not None]
        if required:
            parser.parse_punctuation(":")
            for i, spec in enumerate(required):
                if i:
                    parser.parse_punctuation(",")
                parser.parse_keyword(spec.name, f" (field {i} of {cls.SPEC.name})")
                fields[spec.name] = cls._parse_field(parser, spec)
        # Then the optional fields that differ from their default, in table order.
        names = ", ".join(s.name for s in optional)
        while optional and parser.parse_optional_punctuation(","):
            word = parser.parse_identifier(f" (an optional field of {cls.SPEC.name}: {names})")
            while optional and optional[0].name != word:
                optional.pop(0)  # left out: it keeps its default
            if not optional:
                parser.raise_error(
                    f"'{word}' is not an optional field of {cls.SPEC.name} here "
                    f"(optional fields, in this order: {names})"
                )
            spec = optional.pop(0)
            fields[spec.name] = cls._parse_field(parser, spec)
        return cls.build(tile=tile, signal=signal, waits=waits, fields=fields)

    @staticmethod
    def _parse_field(parser: Parser, spec: FieldSpec) -> object:
        """The value of one field, after its name."""
        if spec.kind == "f32":
            return parser.parse_float()
        if spec.enum is not None and (word := parser.parse_optional_identifier()):
            member = spec.enum.__members__.get(word.upper())
            if member is None:
                choices = ", ".join(m.name.lower() for m in spec.enum)
                parser.raise_error(
                    f"{spec.name}: '{word}' is not a {spec.enum.__name__} ({choices})"
                )
            return int(member)
        if spec.kind == "i32":
            return parser.parse_integer()
        return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_integer)


def verify_program(end: InstructionOp) -> None:
    """What the simulator checks of the program as a whole, checked once at its `end`: every
    instruction before it on a tile < the program's `tiles`, every waited token signalled by an
    earlier instruction, and each I/O name used once. The error marks the offending op."""
    from xdsl.utils.exceptions import DiagnosticException

    def fail(op: IRDLOperation, message: str) -> None:
        message = f"{op.name}: {message}"
        op.emit_error(f"Operation does not verify: {message}", DiagnosticException(message))

    block = end.parent_block()
    if block is None:
        return
    module = block.parent_op()
    attr = module.attributes.get(PROGRAM_ATTR) if module is not None else None
    num_tiles = attr.tiles.data if isinstance(attr, ProgramAttr) else None
    signalled: set[int] = set()
    names: set[str] = set()
    for op in block.ops:
        if isinstance(op, IOOp):
            if op.io_name.data in names:
                fail(op, f"the name '{op.io_name.data}' is used twice")
            names.add(op.io_name.data)
        if not isinstance(op, InstructionOp):
            continue
        tile = op.tile.value.data
        if num_tiles is not None and not 0 <= tile < num_tiles:
            fail(op, f"tile {tile} is outside the program's {num_tiles}")
        for token in op.wait_tokens:
            if token not in signalled:
                fail(op, f"waits on token {token}, which no earlier instruction signals")
        if op.signal_token != NO_SIGNAL:
            signalled.add(op.signal_token)
        if op is end:
            return


def _instruction_op(spec: OpcodeSpec) -> type[InstructionOp]:
    """Make the IRDL op class of one opcode: its fields become properties."""
    namespace: dict[str, object] = {
        "name": f"mlip.{spec.name}",
        "SPEC": spec,
        "__annotations__": {"SPEC": ClassVar[OpcodeSpec]},
        "__doc__": spec.doc,
        "__module__": __name__,
    }
    namespace.update({f.name: _field_constraint(f) for f in spec.fields})
    class_name = "".join(p.capitalize() for p in spec.name.split("_")) + "Op"
    return irdl_op_definition(type(class_name, (InstructionOp,), namespace))


INSTRUCTION_OPS: dict[str, type[InstructionOp]] = {s.name: _instruction_op(s) for s in OPCODES}
DmaOp = INSTRUCTION_OPS["dma"]
CvtOp = INSTRUCTION_OPS["cvt"]
ConvOp = INSTRUCTION_OPS["conv"]
PoolOp = INSTRUCTION_OPS["pool"]
FcOp = INSTRUCTION_OPS["fc"]
LutOp = INSTRUCTION_OPS["lut"]
MulOp = INSTRUCTION_OPS["mul"]
EndOp = INSTRUCTION_OPS["end"]


@irdl_op_definition
class IOOp(IRDLOperation):
    """An entry of the binary's I/O table: a dense tensor in DDR."""

    name = "mlip.io"
    io_name = prop_def(StringAttr)
    kind = prop_def(IOKindAttr)
    shape = prop_def(DenseArrayBase[I32])
    dtype = prop_def(DTypeAttr)
    addr = prop_def(IntegerAttr[I32])
    assembly_format = "$io_name $kind $shape $dtype `at` $addr attr-dict"

    def __init__(self, io_name: str, is_input: bool, shape, dtype: DType, addr: int):
        super().__init__(
            properties={
                "io_name": StringAttr(io_name),
                "kind": IOKindAttr(IOKind.INPUT if is_input else IOKind.OUTPUT),
                "shape": DenseArrayBase.from_list(i32, list(shape)),
                "dtype": DTypeAttr(DTYPE_NAMES[dtype]),
                "addr": IntegerAttr(addr, i32),
            }
        )

    @property
    def is_input(self) -> bool:
        return self.kind.data == IOKind.INPUT

    @property
    def element_type(self) -> DType:
        return DType[self.dtype.data.name]


@irdl_op_definition
class ConstsOp(IRDLOperation):
    """The constant pool: raw bytes loaded into DDR at the program's `const_base`."""

    name = "mlip.consts"
    data = prop_def(DenseIntOrFPElementsAttr)
    assembly_format = "$data attr-dict"

    def __init__(self, blob: bytes):
        super().__init__(
            properties={
                "data": DenseIntOrFPElementsAttr(
                    TensorType(ui8, [len(blob)]), BytesAttr(bytes(blob))
                )
            }
        )

    @property
    def blob(self) -> bytes:
        return self.data.data.data


_PROGRAM_FIELDS = ("target", "tiles", "ddr_size", "const_base")


@irdl_attr_definition
class ProgramAttr(ParametrizedAttribute):
    """What an `mlip` program runs on and where its memory lies: the part, the tile count, the
    DDR bytes it uses and the address of its constant pool, and the region's symbol when
    known. The module carries it as `mlip.program`, the assembler reads it; written
    `#mlip.program<target = "cn10ka", tiles = 2, ddr_size = 4096, const_base = 128>`, with
    `, symbol = "name"` last when there is one."""

    name = "mlip.program"
    target: StringAttr = param_def()
    tiles: IntAttr = param_def()
    ddr_size: IntAttr = param_def()
    const_base: IntAttr = param_def()
    symbol: StringAttr | NoneAttr = param_def()

    def __init__(
        self, target: str, tiles: int, ddr_size: int, const_base: int, symbol: str | None = None
    ):
        super().__init__(
            StringAttr(target), IntAttr(tiles), IntAttr(ddr_size), IntAttr(const_base),
            StringAttr(symbol) if symbol is not None else NoneAttr(),
        )  # fmt: skip

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        values: list[Attribute] = []
        with parser.in_angle_brackets():
            for i, field in enumerate(_PROGRAM_FIELDS):
                if i:
                    parser.parse_punctuation(",")
                parser.parse_keyword(field)
                parser.parse_punctuation("=")
                if field == "target":
                    values.append(StringAttr(parser.parse_str_literal("a target name")))
                else:
                    values.append(IntAttr(parser.parse_integer(allow_boolean=False)))
            symbol: Attribute = NoneAttr()
            if parser.parse_optional_punctuation(","):
                parser.parse_keyword("symbol")
                parser.parse_punctuation("=")
                symbol = StringAttr(parser.parse_str_literal("a symbol"))
            values.append(symbol)
        return values

    def print_parameters(self, printer: Printer) -> None:
        text = (
            f'<target = "{self.target.data}", tiles = {self.tiles.data}, '
            f"ddr_size = {self.ddr_size.data}, const_base = {self.const_base.data}"
        )
        if isinstance(self.symbol, StringAttr):
            text += f', symbol = "{self.symbol.data}"'
        printer.print_string(text + ">")

    def verify(self) -> None:
        for field in ("tiles", "ddr_size", "const_base"):
            if getattr(self, field).data < (1 if field == "tiles" else 0):
                raise VerifyException(f"mlip.program: {field} = {getattr(self, field).data}")

    @property
    def symbol_name(self) -> str | None:
        return self.symbol.data if isinstance(self.symbol, StringAttr) else None


PROGRAM_ATTR = "mlip.program"
"""The module attribute holding an `mlip` program's `ProgramAttr`."""


def program_attr(module) -> ProgramAttr:
    """The `ProgramAttr` of an `mlip` module (a clear error where it is missing)."""
    attr = module.attributes.get(PROGRAM_ATTR)
    if not isinstance(attr, ProgramAttr):
        raise VerifyException(f"an mlip program needs the module attribute {PROGRAM_ATTR}")
    return attr


Mlip = Dialect(
    "mlip", [IOOp, ConstsOp, *INSTRUCTION_OPS.values()], [ProgramAttr, IOKindAttr, DTypeAttr]
)

__all__ = [
    "Mlip", "INSTRUCTION_OPS", "InstructionOp", "IOOp", "ConstsOp", "PROGRAM_ATTR",
    "ProgramAttr", "program_attr",
]  # fmt: skip
