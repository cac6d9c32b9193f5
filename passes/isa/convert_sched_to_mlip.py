"""convert-sched-to-mlip: select one MLIP instruction per scheduled DMA, conversion or task.

Each `sched` op that becomes an instruction has its own rewrite pattern (`InstructionSelection`
subclasses, gathered in `INSTRUCTION_SELECTIONS`), as xDSL's own lowerings to RISC-V do.

Buffers become byte addresses (so `sched-allocate` must have run), boxes become 4-D strided
descriptors, tokens become small integers (an instruction signals its token if anyone waits
for it). The module becomes an `mlip` program: I/O table, constant pool, instructions, `end`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint, Rewriter

from mrvl.dialects import mlip, sched
from mrvl.dialects.mrvl import numpy_dtype
from mrvl.errors import CompileError, layer_boundary
from mrvl.isa import NO_SIGNAL, Activation, BinaryMode, DType, MemSpace, PoolMode, ReduceMode
from mrvl.locations import location_name
from mrvl.passes.common import MrvlModulePass

_DTYPES = {"float32": DType.F32, "float16": DType.F16, "int8": DType.I8, "int32": DType.I32}


def _dtype(bt: sched.BufferType) -> DType:
    return _DTYPES[numpy_dtype(bt.element_type).name]


@cache
def _row_major_strides(bt: sched.BufferType) -> tuple[int, ...]:
    """Byte strides of a dense row-major buffer (one computation per buffer type)."""
    item = numpy_dtype(bt.element_type).itemsize
    return tuple(int(s) for s in np.cumprod([1, *bt.dims[::-1]])[:-1][::-1] * item)


def _pad4(values, fill: int) -> list[int]:
    values = list(values)
    if len(values) > 4:
        raise CompileError(f"rank {len(values)} exceeds the 4 dimensions of a descriptor")
    return [fill] * (4 - len(values)) + values


def _merged_dims(dims, perm) -> tuple[list[int], list[int]]:
    """A conversion of more than 4 dimensions (a rank-5 or 6 region input or output) as the
    same one over fewer: source dimensions that stay next to each other, in order, in the
    permutation are one. At rank 4 or less nothing is merged."""
    dims, perm = list(dims), list(perm)
    if len(dims) <= 4:
        return dims, perm
    groups = [[perm[0]]]  # runs of source dimensions, in destination order
    for p in perm[1:]:
        if p == groups[-1][-1] + 1:
            groups[-1].append(p)
        else:
            groups.append([p])
    by_source = sorted(groups)
    merged = [int(np.prod([dims[d] for d in group])) for group in by_source]
    return merged, [by_source.index(group) for group in groups]


def _merged_box(src_strides, dst_strides, box) -> tuple[list[int], list[int], list[int]]:
    """A DMA of more than 4 dimensions (a rank-5 or 6 copy or concat part) as the same one
    over fewer: dimensions of extent 1 go, and a dimension that both sides walk contiguously
    into the next one (its stride is the next one's stride times its extent, on both
    sides) is one with it. At rank 4 or less nothing changes."""
    src, dst, box = list(src_strides), list(dst_strides), list(box)
    if len(box) <= 4:
        return src, dst, box
    kept = [d for d in range(len(box)) if box[d] != 1] or [len(box) - 1]
    src, dst, box = [src[d] for d in kept], [dst[d] for d in kept], [box[d] for d in kept]
    d = len(box) - 2
    while d >= 0 and len(box) > 4:
        if src[d] == src[d + 1] * box[d + 1] and dst[d] == dst[d + 1] * box[d + 1]:
            src[d], dst[d], box[d] = src[d + 1], dst[d + 1], box[d] * box[d + 1]
            del src[d + 1], dst[d + 1], box[d + 1]
        d -= 1
    return src, dst, box


class SelectionState:
    """What the patterns of one program share: token numbers, and the instructions selected
    so far, in program order."""

    def __init__(self):
        self.tokens: dict[SSAValue, int] = {}
        self.instructions: list[Operation] = []

    def address(self, buffer: SSAValue) -> int:
        owner = buffer.owner
        if isinstance(owner, sched.ViewOp):
            return self.address(owner.source)
        assert isinstance(owner, sched.BufferDefBase)
        if owner.offset is None:
            raise CompileError(f"{owner.name} has no offset: run sched-allocate first")
        return owner.offset.value.data

    @staticmethod
    def space(buffer: SSAValue) -> int:
        return MemSpace.DDR if sched.buffer_type(buffer).space.data == "ddr" else MemSpace.OCM

    @staticmethod
    def strides(bt: sched.BufferType) -> list[int]:
        return list(_row_major_strides(bt))

    def token(self, value: SSAValue) -> int:
        if value not in self.tokens:
            self.tokens[value] = len(self.tokens) + 1
        return self.tokens[value]

    def header(self, task: sched.TaskBase) -> dict:
        signal = self.token(task.token) if task.token.uses else NO_SIGNAL
        return {
            "tile": task.tile.value.data,
            "signal": signal,
            "waits": [self.token(d) for d in task.deps],
        }

    def optional_address(self, buffer: SSAValue | None) -> int:
        """The address of an optional operand (a bias, partial sums), -1 without it."""
        return self.address(buffer) if buffer is not None else -1

    def box_address(self, buffer: SSAValue, offsets) -> int:
        bt = sched.buffer_type(buffer)
        return self.address(buffer) + sum(o * s for o, s in zip(offsets, self.strides(bt)))

    def dma_side(self, buffer: SSAValue, offsets, strides) -> tuple[int, list[int]]:
        """Byte address and byte strides of one side of a DMA: a box of a row-major buffer,
        or (explicit element strides) a strided walk through a flat buffer."""
        bt = sched.buffer_type(buffer)
        if strides is None:
            return self.box_address(buffer, offsets.get_values()), self.strides(bt)
        item = numpy_dtype(bt.element_type).itemsize
        (offset,) = offsets.get_values()
        return self.address(buffer) + offset * item, [st * item for st in strides.get_values()]

    def slopes_address(self, op: Operation) -> int:
        return self.address(op.prelu_slopes) if op.prelu_slopes is not None else -1

    @staticmethod
    def slopes_channels(op: Operation) -> int:
        return sched.buffer_type(op.prelu_slopes).dims[0] if op.prelu_slopes is not None else 0

    def conversion_fields(self, op: sched.DdrConversionBase) -> dict:
        """src_addr, src_shape, dst_addr and perm of a DDR conversion (`cvt`, `quant`,
        `dequant`), its dimensions merged to at most 4 and padded to 4 in front."""
        dims, perm = _merged_dims(sched.buffer_type(op.source).dims, op.perm.get_values())
        lead = 4 - len(dims)
        return {
            "src_addr": self.address(op.source),
            "src_shape": _pad4(dims, 1),
            "dst_addr": self.address(op.dest),
            "perm": list(range(lead)) + [p + lead for p in perm],
        }

    def accumulator_fields(self, op: Operation) -> dict:
        """acc_addr and acc_out of a task that may start from or give partial sums."""
        return {"acc_addr": self.optional_address(op.acc), "acc_out": int(op.acc_out is not None)}

    def bmm_fields(self, op) -> dict:
        """The operand and geometry fields that `bmm` and `qbmm` share."""
        batch, m, k, n = op.dims()
        return {
            **self.operand_fields(op),
            "batch": batch,
            "m": m,
            "k": k,
            "n": n,
            "trans_a": int(op.trans_a is not None),
            "trans_b": int(op.trans_b is not None),
            "a_shared": int(sched.buffer_type(op.lhs).dims[0] < batch),
            "b_shared": int(sched.buffer_type(op.rhs).dims[0] < batch),
        }

    def fc_fields(self, op) -> dict:
        """The operand and shape fields that `fc` and `qfc` share."""
        n, k = sched.buffer_type(op.input).dims
        return {
            "in_addr": self.address(op.input),
            "n": n,
            "k": k,
            "o": sched.buffer_type(op.weight).dims[0],
            "w_addr": self.address(op.weight),
            "b_addr": self.optional_address(op.bias),
            "out_addr": self.address(op.output),
        }

    def operand_fields(self, op) -> dict:
        """a_addr, b_addr and out_addr of a task of two operands (`lhs`, `rhs`)."""
        return {
            "a_addr": self.address(op.lhs),
            "b_addr": self.address(op.rhs),
            "out_addr": self.address(op.output),
        }

    def vector_fields(self, op) -> dict:
        """a_addr, b_addr, out_addr and count of an elementwise task of two vectors."""
        return {**self.operand_fields(op), "count": sched.buffer_type(op.output).dims[0]}

    def unary_fields(self, op) -> dict:
        """in_addr, out_addr and count of an elementwise task of one vector."""
        return {
            "in_addr": self.address(op.input),
            "out_addr": self.address(op.output),
            "count": sched.buffer_type(op.output).dims[0],
        }

    @staticmethod
    def finish_fields(op) -> dict:
        """clamp and lut_addr of an int8 result (isa_int8's `_finish_fields`): the task's
        clamp, and no table."""
        return {"clamp": list(op.clamp.get_values()), "lut_addr": -1}

    def int8_fields(self, op) -> dict:
        """in_zp, out_zp, clamp and lut_addr of an int8 task (`sched.Int8TaskBase`)."""
        return {
            "in_zp": op.in_zp.value.data,
            "out_zp": op.out_zp.value.data,
            **self.finish_fields(op),
        }

    def block_fields(self, op) -> dict:
        """in_addr, out_addr and the [outer, length, inner] of a task over a block's middle
        axis (softmax, reduce)."""
        outer, length, inner = sched.buffer_type(op.input).dims
        return {
            "in_addr": self.address(op.input),
            "out_addr": self.address(op.output),
            "outer": outer,
            "length": length,
            "inner": inner,
        }

    def window_fields(self, op: sched.WindowTaskBase) -> dict:
        pads = op.pads.get_values()
        return {
            "in_addr": self.address(op.input),
            "in_shape": list(sched.buffer_type(op.input).dims),
            "row0": op.row0.value.data,
            "out_addr": self.address(op.output),
            "out_shape": list(sched.buffer_type(op.output).dims),
            "orow0": op.orow0.value.data,
            "kernel": list(op.kernel.get_values()),
            "stride": list(op.strides.get_values()),
            "pad": [pads[0], pads[1]],
        }

    def conv_fields(self, op) -> dict:
        """The window, group, weight and accumulator fields that `conv` and `qconv` share."""
        fields = self.window_fields(op)
        fields.update(
            dilation=list(op.dilations.get_values()),
            groups=op.groups.value.data,
            oc0=op.oc0.value.data,
            oc_total=op.oc_total.value.data,
            w_addr=self.address(op.weight),
            b_addr=self.optional_address(op.bias),
            **self.accumulator_fields(op),
        )
        return fields

    def pool_fields(self, op) -> dict:
        """The window, mode and padding fields that `pool` and `qpool` share."""
        fields = self.window_fields(op)
        pads = op.pads.get_values()
        fields.update(
            mode=PoolMode[op.mode.data.name],
            in_hw=list(op.in_hw.get_values()),
            pad_end=[pads[2], pads[3]],
            count_include_pad=int(op.count_include_pad is not None),
        )
        return fields

    def resize_fields(self, op) -> dict:
        """The buffers, row and tables that `resize` and `qresize` share."""
        return {
            "in_addr": self.address(op.input),
            "in_shape": list(sched.buffer_type(op.input).dims),
            "row0": op.row0.value.data,
            "out_addr": self.address(op.output),
            "out_shape": list(sched.buffer_type(op.output).dims),
            "ytab_addr": self.address(op.ytab),
            "xtab_addr": self.address(op.xtab),
        }

    @staticmethod
    def activation_fields(op: Operation) -> dict:
        """act, act_a, act_b of a task (docs/isa.md section 4 says what a and b mean)."""
        if op.activation is None:
            return {"act": Activation.NONE, "act_a": 0.0, "act_b": 0.0}
        act = op.activation.isa
        a = b = 0.0
        if act == Activation.CLIP:
            a, b = op.act_min.value.data, op.act_max.value.data
        elif act in (
            Activation.LEAKY_RELU, Activation.HARD_SIGMOID, Activation.POW, Activation.LEAKY_FLOOR
        ):
            a = op.alpha.value.data
            if op.beta is not None:
                b = op.beta.value.data
        return {"act": act, "act_a": a, "act_b": b}

    def fused_activation_fields(self, op: Operation) -> dict:
        """The activation fields and act_addr, the PRELU slopes, of a task that may have
        them."""
        return {**self.activation_fields(op), "act_addr": self.slopes_address(op)}


class InstructionSelection(RewritePattern):
    """Base of the patterns, one per `sched` op that becomes an instruction: a subclass names
    the op class it selects (`source`), its `opcode`, and builds the instruction's fields from
    the op (`fields`). The instruction is inserted before the op it replaces, with its
    location; the pass moves the instructions out of the `sched.program` once every op is
    selected."""

    source: ClassVar[type[Operation]]
    opcode: ClassVar[str]

    def __init__(self, state: SelectionState):
        self.state = state

    def fields(self, op) -> dict:
        """The instruction's fields, by name (`mlip` takes them in the ISA table's order)."""
        raise NotImplementedError

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, self.source):
            return
        ins = mlip.INSTRUCTION_OPS[self.opcode].build(
            **self.state.header(op), fields=self.fields(op)
        )
        ins.location = op.location
        rewriter.insert(ins)
        self.state.instructions.append(ins)


class SelectDma(InstructionSelection):
    """A DMA, one tile or multicast, is one `dma`."""

    source = sched.DmaBase
    opcode = "dma"

    def fields(self, op: sched.DmaBase) -> dict:
        s = sched.buffer_type(op.source)
        src_addr, src_strides = self.state.dma_side(op.source, op.src_offsets, op.src_strides)
        dst_addr, dst_strides = self.state.dma_side(op.dest, op.dst_offsets, op.dst_strides)
        src_strides, dst_strides, box = _merged_box(
            src_strides, dst_strides, op.box.get_values()
        )
        return {
            "src_space": self.state.space(op.source),
            "src_addr": src_addr,
            "src_strides": _pad4(src_strides, 0),
            "dst_space": self.state.space(op.dest),
            "dst_addr": dst_addr,
            "dst_strides": _pad4(dst_strides, 0),
            "box": _pad4(box, 1),
            "elem_bytes": numpy_dtype(s.element_type).itemsize,
            "dst_tiles": (
                sum(1 << t for t in op.dest_tiles)
                if isinstance(op, sched.MulticastDmaOp)
                else 0
            ),
        }


class SelectConvert(InstructionSelection):
    """A cast or layout conversion is one `cvt`."""

    source = sched.ConvertOp
    opcode = "cvt"

    def fields(self, op: sched.ConvertOp) -> dict:
        return {
            **self.state.conversion_fields(op),
            "src_dtype": _dtype(sched.buffer_type(op.source)),
            "dst_dtype": _dtype(sched.buffer_type(op.dest)),
        }


class SelectConv2D(InstructionSelection):
    source = sched.Conv2DTaskOp
    opcode = "conv"

    def fields(self, op: sched.Conv2DTaskOp) -> dict:
        return {**self.state.conv_fields(op), **self.state.fused_activation_fields(op)}


class SelectPool2D(InstructionSelection):
    source = sched.Pool2DTaskOp
    opcode = "pool"

    def fields(self, op: sched.Pool2DTaskOp) -> dict:
        return self.state.pool_fields(op)


class SelectResize(InstructionSelection):
    source = sched.ResizeTaskOp
    opcode = "resize"

    def fields(self, op: sched.ResizeTaskOp) -> dict:
        return self.state.resize_fields(op)


class SelectFullyConnected(InstructionSelection):
    source = sched.FullyConnectedTaskOp
    opcode = "fc"

    def fields(self, op: sched.FullyConnectedTaskOp) -> dict:
        return {**self.state.fc_fields(op), **self.state.fused_activation_fields(op)}


class SelectBatchMatMul(InstructionSelection):
    source = sched.BatchMatMulTaskOp
    opcode = "bmm"

    def fields(self, op: sched.BatchMatMulTaskOp) -> dict:
        return {**self.state.bmm_fields(op), **self.state.accumulator_fields(op)}


class SelectAdd(InstructionSelection):
    source = sched.AddTaskOp
    opcode = "add"

    def fields(self, op: sched.AddTaskOp) -> dict:
        return {
            **self.state.vector_fields(op),
            "channels": self.state.slopes_channels(op),
            **self.state.fused_activation_fields(op),
        }


class SelectScale(InstructionSelection):
    source = sched.ScaleTaskOp
    opcode = "scale"

    def fields(self, op: sched.ScaleTaskOp) -> dict:
        return {
            **self.state.unary_fields(op),
            "channels": sched.buffer_type(op.scale).dims[0],
            "s_addr": self.state.address(op.scale),
            "b_addr": self.state.address(op.shift),
            **self.state.fused_activation_fields(op),
        }


class SelectMul(InstructionSelection):
    source = sched.MulTaskOp
    opcode = "mul"

    def fields(self, op: sched.MulTaskOp) -> dict:
        return {
            **self.state.vector_fields(op),
            "channels": op.channels.value.data,
            **self.state.activation_fields(op),
        }


class SelectLut(InstructionSelection):
    source = sched.LutTaskOp
    opcode = "lut"

    def fields(self, op: sched.LutTaskOp) -> dict:
        return {"src_addr": self.state.address(op.table), **self.state.activation_fields(op)}


class SelectSoftmax(InstructionSelection):
    source = sched.SoftmaxTaskOp
    opcode = "softmax"

    def fields(self, op: sched.SoftmaxTaskOp) -> dict:
        return self.state.block_fields(op)


class SelectLayerNorm(InstructionSelection):
    source = sched.LayerNormTaskOp
    opcode = "layernorm"

    def fields(self, op: sched.LayerNormTaskOp) -> dict:
        rows, length = sched.buffer_type(op.input).dims
        return {
            "in_addr": self.state.address(op.input),
            "out_addr": self.state.address(op.output),
            "rows": rows,
            "length": length,
            "g_addr": self.state.address(op.scale),
            "b_addr": self.state.address(op.shift),
            "eps": op.epsilon.value.data,
        }


class SelectReduce(InstructionSelection):
    source = sched.ReduceTaskOp
    opcode = "reduce"

    def fields(self, op: sched.ReduceTaskOp) -> dict:
        return {
            **self.state.block_fields(op),
            "mode": ReduceMode[op.mode.data.upper()],
            "divisor": op.divisor.value.data,
            **self.state.accumulator_fields(op),
        }


class SelectBinary(InstructionSelection):
    source = sched.BinaryTaskOp
    opcode = "binary"

    def fields(self, op: sched.BinaryTaskOp) -> dict:
        return {
            **self.state.operand_fields(op),
            "shape": list(sched.buffer_type(op.output).dims),
            "a_strides": list(op.lhs_strides.get_values()),
            "b_strides": list(op.rhs_strides.get_values()),
            "mode": BinaryMode[op.mode.data.upper()],
        }


from mrvl.passes.isa.select_int8 import INT8_SELECTIONS  # noqa: E402 - it extends the above
from mrvl.passes.isa.select_int8_bmm import (  # noqa: E402 - it extends the above
    INT8_BMM_SELECTIONS,
)
from mrvl.passes.isa.select_int8_elementwise import (  # noqa: E402 - it extends the above
    INT8_ELEMENTWISE_SELECTIONS,
)
from mrvl.passes.isa.select_int8_resize import (  # noqa: E402 - it extends the above
    INT8_RESIZE_SELECTIONS,
)
from mrvl.passes.isa.select_long_rows import LONG_ROW_SELECTIONS  # noqa: E402 - it extends the above

INSTRUCTION_SELECTIONS: tuple[type[InstructionSelection], ...] = (
    SelectDma,
    SelectConvert,
    SelectConv2D,
    SelectPool2D,
    SelectResize,
    SelectFullyConnected,
    SelectBatchMatMul,
    SelectAdd,
    SelectScale,
    SelectMul,
    SelectSoftmax,
    SelectLayerNorm,
    SelectReduce,
    SelectBinary,
    SelectLut,
    *INT8_SELECTIONS,
    *INT8_ELEMENTWISE_SELECTIONS,
    *INT8_RESIZE_SELECTIONS,
    *LONG_ROW_SELECTIONS,
    *INT8_BMM_SELECTIONS,
)
"""The instruction selection of every `sched` task, by pattern (the completeness test checks
that every task op has one); the int8 tasks' are in `select_int8.py`."""

@cache
def opcode_of(op_class: type[Operation]) -> str:
    """The opcode a `sched` op class becomes (what its selection pattern names)."""
    for pattern in INSTRUCTION_SELECTIONS:
        if issubclass(op_class, pattern.source):
            return pattern.opcode
    raise KeyError(f"{op_class.name} selects no instruction")


NO_INSTRUCTION = (sched.IOOp, sched.ConstOp, sched.AllocOp, sched.ViewOp)
"""The `sched` ops that select no instruction: buffers become addresses (the I/O table and
the constant pool are written from `sched.io` and `sched.const`)."""


@dataclass(frozen=True)
class ConvertSchedToMlipPass(MrvlModulePass):
    name = "convert-sched-to-mlip"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        prog = sched.program_of(op)
        ddr_size, const_base, const_end = prog.layout()
        pool = bytearray(const_end - const_base)
        state = SelectionState()
        program: list[Operation] = []
        for o in prog.ops:
            if isinstance(o, sched.IOOp):
                bt = o.buffer_type
                io = mlip.IOOp(
                    o.io_name.data, o.is_input, bt.dims, _dtype(bt), state.address(o.buffer)
                )
                io.location = o.location
                program.append(io)
            elif isinstance(o, sched.ConstOp):
                start = state.address(o.buffer) - const_base
                data = o.value.data.data
                pool[start : start + len(data)] = data
        program.append(mlip.ConstsOp(bytes(pool)))
        # Applied once each in program order (a PatternRewriteWalker would re-raise a
        # pattern's CompileError with the whole module printed into it).
        patterns = GreedyRewritePatternApplier([s(state) for s in INSTRUCTION_SELECTIONS])
        for o in list(prog.ops):
            if isinstance(o, NO_INSTRUCTION):
                continue
            rewriter = PatternRewriter(o)
            with layer_boundary(f"{self.name} of {o.name}", location_name(o.location)):
                patterns.match_and_rewrite(o, rewriter)
                if not rewriter.has_done_action:
                    raise CompileError(f"convert-sched-to-mlip: no instruction for {o.name}")
        for ins in state.instructions:
            ins.detach()
        program += state.instructions
        program.append(mlip.EndOp.build(tile=0, fields={}))
        for ins in program:
            Rewriter.insert_op(ins, InsertPoint.before(prog))
        Rewriter.erase_op(prog, safe_erase=False)
        symbol = prog.sym_name.data if prog.sym_name is not None else None
        op.attributes.clear()
        op.attributes[mlip.PROGRAM_ATTR] = mlip.ProgramAttr(
            prog.mcpu.data, prog.tiles, ddr_size, const_base, symbol
        )
