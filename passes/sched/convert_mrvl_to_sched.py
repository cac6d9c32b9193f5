"""convert-mrvl-to-sched: schedule each layer as tiled DMA-in / compute / DMA-out on the tiles.

Every tensor becomes a DDR buffer (region I/O, constants, intermediates). Each layer is cut
by `tiling` into pieces that fit one tile's OCM; a piece loads its input window, weights and
bias into OCM, computes, and writes its output tile back to DDR. Pieces go round-robin over
`num_tiles` tiles, each layer starting at tile 0 (a conv, pool or FC piece on the tile its
plan names); conversions run on tile 0. Tokens order the work: a load waits for every write
of the DDR buffer it reads, a compute for its loads, a store for its compute.

Each `mrvl` op is lowered by its own rewrite pattern (`passes/sched/lowering/`), applied in
program order; the patterns share the region's `LoweringState` and replace each layer by a
cast of its DDR buffer, and the pass gathers what they emitted into one `sched.program`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriter
from xdsl.rewriter import Rewriter

from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError, layer_boundary
from mrvl.locations import location_name
from mrvl.passes.common import MrvlModulePass
from mrvl.passes.sched.cascade import plan_resident
from mrvl.passes.sched.lowering import LAYER_LOWERINGS, LoweringState
from mrvl.passes.sched.lowering.reduce import store_index_output
from mrvl.passes.sched.lowering.state import buffer_type
from mrvl.target import get_target, valid_tile_count


@dataclass(frozen=True)
class ConvertMrvlToSchedPass(MrvlModulePass):
    """Options: `mcpu` and `num-tiles` (both required: nothing defaults to a target), and
    `wb-pin-ocm` (upstream's option: keep a layer's weights and biases in OCM when they fit),
    and `cascade` (keep an intermediate tensor in OCM between layers when it fits:
    `sched-cascade`).

    The result is one `sched.program` carrying them, holding the scheduled region.
    """

    name = "convert-mrvl-to-sched"
    mcpu: str | None = None
    num_tiles: int | None = None
    wb_pin_ocm: bool = False
    cascade: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.mcpu is not None:
            get_target(self.mcpu)  # an unknown target is named first
        missing = [n for n, v in (("mcpu", self.mcpu), ("num-tiles", self.num_tiles)) if v is None]
        if missing:
            raise CompileError(
                f"convert-mrvl-to-sched needs the option{'s' if len(missing) > 1 else ''} "
                f"{' and '.join(missing)} (the target the region is scheduled for)"
            )
        target = get_target(self.mcpu)
        num_tiles = self.num_tiles
        if not valid_tile_count(target, num_tiles):
            raise CompileError(
                f"num_tiles={num_tiles} is not valid for {target.name} (1, 2, 4 or 8, at most "
                f"{target.max_tiles})"
            )
        funcs = [f for f in op.body.block.ops if isinstance(f, func.FuncOp)]
        if len(funcs) != 1:
            raise CompileError(f"expected one region function in the module, found {len(funcs)}")
        fn = funcs[0]
        low = LoweringState(target, num_tiles, self.wb_pin_ocm)
        if self.cascade:
            low.resident = plan_resident(fn.body.block, target, num_tiles)
        block = fn.body.block
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        for i, arg in enumerate(block.args):
            low.location = None
            t = buffer_type("ddr", tuple(mrvl.shape_of(arg)), mrvl.element_type_of(arg))
            name = arg.name_hint or f"input{i}"
            buf = low.emit(sched.IOOp(name, True, t)).buffer
            low.buffers[arg] = buf
            low.writers[buf] = {}
        for i, value in enumerate(ret.arguments):
            t = buffer_type("ddr", tuple(mrvl.shape_of(value)), mrvl.element_type_of(value))
            low.outputs[value] = low.emit(sched.IOOp(f"output{i}", False, t)).buffer
            low.writers[low.outputs[value]] = {}
        outputs = list(low.outputs.values())
        indices = [mrvl.holds_indices(value) for value in ret.arguments]  # argmax's, f32
        # The patterns are applied once each, in program order (the order of the schedule),
        # and not by a PatternRewriteWalker, which would re-raise a pattern's CompileError
        # with the whole module printed into it.
        patterns = GreedyRewritePatternApplier([lowering(low) for lowering in LAYER_LOWERINGS])
        for layer in list(block.ops):
            if isinstance(layer, func.ReturnOp):
                continue
            rewriter = PatternRewriter(layer)
            patterns.match_and_rewrite(layer, rewriter)
            if not rewriter.has_done_action:
                with layer_boundary(f"{self.name} of {layer.name}", location_name(layer.location)):
                    raise CompileError(f"convert-mrvl-to-sched: cannot lower {layer.name}")
        with layer_boundary(f"{self.name} of {ret.name}", location_name(ret.location)):
            for value, io, index in zip(ret.arguments, outputs, indices):
                if low.buffers.get(value) is not io and index:
                    store_index_output(low, value, io)
                if low.buffers.get(value) is not io:
                    raise CompileError(
                        "a region output must be produced by a cast, layout conversion or "
                        "dequantize "
                        "(run mrvl-cast-fp16 so that outputs are converted back to f32)"
                    )
        program = sched.ProgramOp(
            target.name,
            num_tiles,
            wb_pin_ocm=self.wb_pin_ocm,
            cascade=self.cascade,
            sym_name=fn.sym_name.data or None,
        )
        program.body.block.add_ops(low.ops)
        Rewriter.replace_op(fn, program)
