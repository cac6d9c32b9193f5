"""Between the `mlip` dialect and the in-memory `Program`: assemble and disassemble.

Together with `mrvl.binary` this gives binary -> IR -> binary byte for byte: the source map
lists the ONNX node names in order of first use, which is how the assembler builds it.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64

from mrvl.dialects.mlip import INSTRUCTION_OPS, ConstsOp, InstructionOp, IOOp
from mrvl.errors import CompileError
from mrvl.isa import NO_LOC, DType, Instruction, IOEntry, Program
from mrvl.locations import location_name, name_location

_DTYPE_BY_NAME = {d.name.lower(): d for d in DType}


def _int_attr(module: ModuleOp, key: str) -> int:
    attr = module.attributes.get(key)
    if not isinstance(attr, IntegerAttr):
        raise CompileError(f"mlip program: module attribute {key} is missing")
    return attr.value.data


def assemble(module: ModuleOp) -> Program:
    """Collect an `mlip` module into a Program (the binary encoder's input)."""
    target = module.attributes.get("mlip.target")
    if not isinstance(target, StringAttr):
        raise CompileError("mlip program: module attribute mlip.target is missing")
    io: list[IOEntry] = []
    code: list[Instruction] = []
    consts = b""
    srcmap: list[str] = []
    src_index: dict[str, int] = {}
    for op in module.body.block.ops:
        if isinstance(op, IOOp):
            io.append(
                IOEntry(
                    op.io_name.data,
                    op.kind.data == "input",
                    tuple(op.shape.get_values()),
                    _DTYPE_BY_NAME[op.dtype.data],
                    op.addr.value.data,
                )
            )
        elif isinstance(op, ConstsOp):
            consts = op.blob
        elif isinstance(op, InstructionOp):
            loc = NO_LOC
            if (name := location_name(op.location)) is not None:
                if name not in src_index:
                    src_index[name] = len(srcmap)
                    srcmap.append(name)
                loc = src_index[name]
            code.append(
                Instruction(
                    op.SPEC.name,
                    op.tile.value.data,
                    op.signal_token,
                    op.wait_tokens,
                    loc,
                    op.field_values(),
                )
            )
        else:
            raise CompileError(f"mlip program: unexpected op {op.name}")
    return Program(
        target=target.data,
        num_tiles=_int_attr(module, "mlip.num_tiles"),
        ddr_size=_int_attr(module, "mlip.ddr_size"),
        io=io,
        code=code,
        const_base=_int_attr(module, "mlip.const_base"),
        consts=consts,
        srcmap=srcmap,
    )


def disassemble(program: Program) -> ModuleOp:
    """Turn a Program (decoded from a binary) back into an `mlip` module."""
    ops = [IOOp(e.name, e.is_input, e.shape, e.dtype, e.ddr_addr) for e in program.io]
    ops.append(ConstsOp(program.consts))
    for ins in program.code:
        op = INSTRUCTION_OPS[ins.opcode].build(
            tile=ins.tile, signal=ins.signal, waits=ins.waits, fields=ins.fields
        )
        if ins.loc != NO_LOC:
            op.location = name_location(program.srcmap[ins.loc])
        ops.append(op)
    module = ModuleOp(ops)
    module.attributes.update(
        {
            "mlip.target": StringAttr(program.target),
            "mlip.num_tiles": IntegerAttr(program.num_tiles, i64),
            "mlip.ddr_size": IntegerAttr(program.ddr_size, i64),
            "mlip.const_base": IntegerAttr(program.const_base, i64),
        }
    )
    return module
