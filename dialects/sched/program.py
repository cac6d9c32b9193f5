"""`sched.program`: a scheduled region, its target and options, and what holds across it."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    I64,
    IntegerAttr,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Region,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

from mrvl.dialects.sched.buffers import (
    IOOp,
)
from mrvl.dialects.sched.tasks import (
    TaskBase,
)
from mrvl.target import UnknownTargetError, get_target, valid_tile_count


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """A scheduled region: its target, tile count and options, and its buffers and tasks.

    Every `sched` pass reads the program's properties here (never a module attribute with a
    default). `sched-allocate` adds the DDR layout: `ddr_size` and the constant pool's
    `[const_base, const_end)`.
    """

    name = "sched.program"
    sym_name = opt_prop_def(StringAttr)
    mcpu = prop_def(StringAttr)
    num_tiles = prop_def(IntegerAttr[I64])
    wb_pin_ocm = opt_prop_def(UnitAttr)
    cascade = opt_prop_def(UnitAttr)
    ddr_size = opt_prop_def(IntegerAttr[I64])
    const_base = opt_prop_def(IntegerAttr[I64])
    const_end = opt_prop_def(IntegerAttr[I64])
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    assembly_format = (
        "`mcpu` `(` $mcpu `)` `tiles` `(` $num_tiles `)` (`symbol` `(` $sym_name^ `)`)?"
        " (`wb_pin_ocm` $wb_pin_ocm^)? (`cascade` $cascade^)?"
        " (`ddr_size` `(` $ddr_size^ `)`)? (`const_base` `(` $const_base^ `)`)?"
        " (`const_end` `(` $const_end^ `)`)? attr-dict-with-keyword $body"
    )

    def __init__(
        self,
        mcpu: str,
        num_tiles: int,
        *,
        wb_pin_ocm: bool = False,
        cascade: bool = False,
        sym_name: str | None = None,
    ):
        properties: dict[str, Attribute] = {
            "mcpu": StringAttr(mcpu),
            "num_tiles": IntegerAttr(num_tiles, i64),
        }
        if wb_pin_ocm:
            properties["wb_pin_ocm"] = UnitAttr()
        if cascade:
            properties["cascade"] = UnitAttr()
        if sym_name:
            properties["sym_name"] = StringAttr(sym_name)
        super().__init__(properties=properties, regions=[Region(Block())])

    @property
    def ops(self):
        return self.body.block.ops

    @property
    def target(self):
        return get_target(self.mcpu.data)

    @property
    def tiles(self) -> int:
        return self.num_tiles.value.data

    @property
    def pin_weights(self) -> bool:
        return self.wb_pin_ocm is not None

    @property
    def cascades(self) -> bool:
        """Whether `sched-cascade` may keep intermediate tensors in OCM between layers."""
        return self.cascade is not None

    def layout(self) -> tuple[int, int, int]:
        """(ddr_size, const_base, const_end); a CompileError before `sched-allocate`."""
        from mrvl.errors import CompileError

        missing = [n for n in ("ddr_size", "const_base", "const_end") if getattr(self, n) is None]
        if missing:
            raise CompileError(
                f"sched.program has no {', '.join(missing)}: run sched-allocate first"
            )
        return (self.ddr_size.value.data, self.const_base.value.data, self.const_end.value.data)

    def verify_(self) -> None:
        try:
            max_tiles = get_target(self.mcpu.data).max_tiles
        except UnknownTargetError as err:
            raise VerifyException(f"sched.program: {err}") from None
        n = self.num_tiles.value.data
        if not valid_tile_count(self.target, n):
            raise VerifyException(
                f"sched.program: tiles({n}) is not valid for {self.mcpu.data} "
                f"(1, 2, 4 or 8, at most {max_tiles})"
            )
        verify_program_body(self)


def verify_program_body(program: ProgramOp) -> None:
    """What the simulator would refuse, refused in the IR (issue 19): a task or buffer on a
    tile outside `tiles(N)`, a task that waits on a token no earlier task yields (a wait on a
    later task's token is a cycle), and an I/O name used twice. The error marks the offending
    op, not the program."""
    from xdsl.ir import Operation
    from xdsl.utils.exceptions import DiagnosticException

    def fail(op: Operation, message: str) -> None:
        message = f"{op.name}: {message}"
        op.emit_error(f"Operation does not verify: {message}", DiagnosticException(message))

    n = program.num_tiles.value.data
    seen: set[Operation] = set()
    names: set[str] = set()
    for op in program.body.block.ops:
        tile = op.properties.get("tile")
        if isinstance(tile, IntegerAttr) and not 0 <= tile.value.data < n:
            fail(op, f"tile {tile.value.data} is outside tiles({n})")
        if isinstance(op, TaskBase):
            for dep in op.deps:
                owner = dep.owner
                if isinstance(owner, Operation) and owner.parent is op.parent and owner not in seen:
                    fail(op, f"waits on the token of a {owner.name} that comes after it (a cycle)")
        if isinstance(op, IOOp):
            if op.io_name.data in names:
                fail(op, f"the name '{op.io_name.data}' is used twice")
            names.add(op.io_name.data)
        seen.add(op)


def program_of(module) -> ProgramOp:
    """The module's one `sched.program`; a CompileError naming what is missing otherwise."""
    from mrvl.errors import CompileError

    programs = [o for o in module.body.block.ops if isinstance(o, ProgramOp)]
    if len(programs) != 1:
        raise CompileError(
            f"expected one sched.program in the module (run convert-mrvl-to-sched), "
            f"found {len(programs)}"
        )
    return programs[0]
