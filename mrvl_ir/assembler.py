"""Between the `mlip` dialect and the in-memory `Program`: assemble and disassemble.

Together with `mrvl.binary` this gives binary -> IR -> binary byte for byte: the source map
lists the ONNX node names in order of first use, which is how the assembler builds it.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from mrvl.dialects.mlip import (
    INSTRUCTION_OPS,
    PROGRAM_ATTR,
    ConstsOp,
    InstructionOp,
    IOOp,
    ProgramAttr,
)
from mrvl.errors import CompileError
from mrvl.isa import NO_LOC, Instruction, IOEntry, Program
from mrvl.locations import location_name, name_location


def assemble(module: ModuleOp) -> Program:
    """Collect an `mlip` module into a Program (the binary encoder's input)."""
    program = module.attributes.get(PROGRAM_ATTR)
    if not isinstance(program, ProgramAttr):
        raise CompileError(f"mlip program: module attribute {PROGRAM_ATTR} is missing")
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
                    op.is_input,
                    tuple(op.shape.get_values()),
                    op.element_type,
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
        target=program.target.data,
        num_tiles=program.tiles.data,
        ddr_size=program.ddr_size.data,
        io=io,
        code=code,
        const_base=program.const_base.data,
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
    module.attributes[PROGRAM_ATTR] = ProgramAttr(
        program.target, program.num_tiles, program.ddr_size, program.const_base
    )
    return module
