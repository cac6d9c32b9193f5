"""What every layer's lowering to `sched` shares: the state of one region's lowering and the
base of the per-layer rewrite patterns.

`LoweringState` holds what the layers of a region hand on to each other: the DDR buffer of
every tensor, the last write to each buffer from each tile (the tokens a reader waits for),
the activation table each tile holds, and the `sched` ops emitted so far, in program order.
`LayerLowering` is the base of the patterns, one per `mrvl` op (`passes/sched/lowering/*.py`):
a pattern emits its layer's `sched` ops and replaces the layer by an
`unrealized_conversion_cast` of the DDR buffer that holds its result, as MLIR's dialect
conversion does; `convert-mrvl-to-sched` then gathers the emitted ops into a `sched.program`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import (
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    IntegerAttr,
    TensorType,
    UnrealizedConversionCastOp,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from mrvl.act_tables import activation_table, table_key, table_name
from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError, layer_boundary
from mrvl.isa import TABLE_ACTIVATIONS
from mrvl.locations import location_name
from mrvl.passes.sched.cascade import ResidentPlan
from mrvl.target import Target

F16_BYTES = 2


def i64_array(values) -> DenseArrayBase:
    return _i64_array(tuple(int(v) for v in values))


# A schedule repeats the same attributes thousands of times; attributes are immutable, so
# each is built (and verified) once.
@cache
def _i64_array(values: tuple[int, ...]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


@cache
def int_attr(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


@cache
def buffer_type(space: str, dims: tuple[int, ...], element_type: Attribute) -> sched.BufferType:
    return sched.BufferType(space, dims, element_type)


def dense_strides(dims) -> list[int]:
    """Element strides of a dense row-major array of `dims`."""
    strides, step = [], 1
    for d in reversed(list(dims)):
        strides.append(step)
        step *= d
    return strides[::-1]


def activation_props(op: Operation) -> dict[str, Attribute]:
    """The activation properties a task takes over from its layer (PRELU's slopes become a
    buffer operand of the task instead)."""
    return {
        k: op.properties[k]
        for k in ("activation", "act_min", "act_max", "alpha", "beta")
        if k in op.properties
    }


def table_parameters(op: Operation) -> tuple[float, float]:
    """act_a, act_b of a layer's table activation (HARD_SIGMOID's alpha and beta)."""
    a = op.alpha.value.data if op.alpha is not None else 0.0
    b = op.beta.value.data if op.beta is not None else 0.0
    return a, b


@dataclass
class LoweringState:
    """One region's lowering in progress (see the module docstring)."""

    target: Target
    num_tiles: int
    wb_pin_ocm: bool = False
    ops: list[Operation] = field(default_factory=list)
    buffers: dict[SSAValue, SSAValue] = field(default_factory=dict)
    writers: dict[SSAValue, dict[int, SSAValue]] = field(default_factory=dict)
    """DDR buffer -> tile -> the token of the last write to it from that tile. Writes from
    one tile are chained, so a reader waits for at most one token per tile (the binary
    allows 255 waits; a big FC layer is cut into a thousand pieces)."""
    location: Attribute | None = None
    tables: dict[tuple, SSAValue] = field(default_factory=dict)
    """Activation-table key -> the DDR constant holding the table."""
    loaded: dict[int, tuple] = field(default_factory=dict)
    """Tile -> the key of the table its activation-table memory holds (after the emitted luts)."""
    table_token: dict[int, SSAValue] = field(default_factory=dict)
    """Tile -> the token of the lut that loaded its table."""
    last_table_user: dict[int, SSAValue] = field(default_factory=dict)
    """Tile -> the last compute task that read its table. Table users on a tile are chained
    (each waits for the previous one), so the next lut waits for one token only."""
    made_constants: int = 0
    zeros: dict[Attribute, SSAValue] = field(default_factory=dict)
    flat_views: dict[SSAValue, SSAValue] = field(default_factory=dict)
    """DDR buffer -> its flat view, which strided window loads read."""
    resident: ResidentPlan = field(default_factory=ResidentPlan)
    """Where tensors are planned to stay in OCM: the OCM left to the layers next to them,
    and the pieces of the layers reading them (`cascade.plan_resident`)."""
    outputs: dict[SSAValue, SSAValue] = field(default_factory=dict)
    """Region output value -> its I/O buffer: the conversion producing an output writes it
    there directly."""

    def ocm_bytes(self, op: Operation) -> int:
        return self.resident.ocm_budget.get(op, self.target.ocm_bytes_per_tile)

    def emit(self, op: Operation) -> Operation:
        if self.location is not None:
            op.location = self.location
        self.ops.append(op)
        return op

    def ddr_buffer(self, value: SSAValue) -> SSAValue:
        return self.buffers[value]

    def new_ddr(self, value: SSAValue) -> SSAValue:
        t = buffer_type("ddr", tuple(mrvl.shape_of(value)), mrvl.element_type_of(value))
        buf = self.emit(sched.AllocOp(t)).buffer
        self.buffers[value] = buf
        self.writers[buf] = {}
        return buf

    def constant_array(self, value: SSAValue) -> np.ndarray | None:
        """The data of a constant tensor (lowered to a `sched.const` already), else None."""
        const = self.ddr_buffer(value).owner
        if not isinstance(const, sched.ConstOp):
            return None
        t = const.value.type
        dtype = mrvl.numpy_dtype(t.element_type)
        return np.frombuffer(const.value.data.data, dtype=dtype).reshape(t.get_shape())

    def ocm(self, shape, element_type: Attribute, tile: int) -> SSAValue:
        return self.emit(sched.AllocOp(buffer_type("ocm", tuple(shape), element_type), tile)).buffer

    def load(self, ddr: SSAValue, offsets, box, tile: int) -> tuple[SSAValue, SSAValue]:
        """OCM copy of a box of a DDR buffer, after every write to that buffer."""
        et = sched.buffer_type(ddr).element_type
        dst = self.ocm(box, et, tile)
        tok = self.emit(
            sched.DmaOp(ddr, offsets, dst, [0] * len(box), box, tile, self.writes_to(ddr))
        ).token
        return dst, tok

    def writes_to(self, ddr: SSAValue) -> list[SSAValue]:
        """The tokens a reader of `ddr` waits for: the last write from each tile."""
        return list(self.writers.get(ddr, {}).values())

    def write_deps(self, ddr: SSAValue, tile: int, *after: SSAValue) -> list[SSAValue]:
        """Dependencies of a write to `ddr` from `tile`: `after`, and the tile's previous
        write to the same buffer (the chain that keeps readers' waits short)."""
        previous = self.writers.get(ddr, {}).get(tile)
        return [*after, previous] if previous is not None else list(after)

    def record_write(self, ddr: SSAValue, tile: int, token: SSAValue) -> None:
        self.writers.setdefault(ddr, {})[tile] = token

    def store(self, src: SSAValue, ddr: SSAValue, offsets, tile: int, after: SSAValue) -> None:
        box = sched.buffer_type(src).dims
        deps = self.write_deps(ddr, tile, after)
        tok = self.emit(sched.DmaOp(src, [0] * len(box), ddr, offsets, box, tile, deps)).token
        self.record_write(ddr, tile, tok)

    def require_f16(self, op: Operation) -> None:
        for v in (*op.operands, *op.results):
            t = v.type
            if mrvl.layout_of(t) in ("NHWC", "NC", "OHWI", "OI") and not isinstance(
                element := mrvl.element_type_of(t), Float16Type
            ):
                # mrvl-cast-fp16 casts f32 only: for another type, running it is no remedy
                hint = (
                    "; run mrvl-cast-fp16 first"
                    if isinstance(element, Float32Type)
                    else f", not {element} (mrvl-cast-fp16 casts f32 only)"
                )
                raise CompileError(
                    f"{op.name} at {location_name(op.location)}: the MLIP computes in f16{hint}"
                )

    def what(self, op: Operation) -> str:
        return f"layer {location_name(op.location) or op.name}"

    def made_constant(self, name: str, array: np.ndarray) -> SSAValue:
        """A DDR constant the compiler makes (an activation table, PRELU slopes)."""
        self.made_constants += 1
        array = np.ascontiguousarray(array)
        et = mrvl.element_type_for(array.dtype)
        value = DenseIntOrFPElementsAttr(
            TensorType(et, list(array.shape)), BytesAttr(array.tobytes())
        )
        buf = self.emit(sched.ConstOp(name, value, buffer_type("ddr", array.shape, et))).buffer
        self.writers[buf] = {}
        return buf

    def slopes(self, op: Operation) -> SSAValue | None:
        """PRELU's slopes (f32 per channel) as a DDR constant, or None without PRELU."""
        if op.slopes is None:
            return None
        values = np.array(op.slopes.get_values(), np.float32)
        return self.made_constant(f"mrvl_prelu_slopes_{self.made_constants}", values)

    def activation_deps(self, op: Operation, tile: int) -> list[SSAValue]:
        """What a compute task of `op` on `tile` waits for besides its operands: for a table
        activation, the lut that loads its table (emitted if the tile holds another one) and
        the tile's previous table user."""
        act = op.activation
        if act is None or act.isa not in TABLE_ACTIVATIONS:
            return []
        a, b = table_parameters(op)
        key = table_key(act.isa, a, b)
        if self.loaded.get(tile) != key:
            if key not in self.tables:
                self.tables[key] = self.made_constant(
                    f"mrvl_{table_name(*key)}", activation_table(*key)
                )
            previous = self.last_table_user.get(tile)
            lut = sched.LutTaskOp.make(
                {"tile": int_attr(tile), **activation_props(op)},
                deps=[previous] if previous is not None else [],
                table=self.tables[key],
            )
            self.table_token[tile] = self.emit(lut).results[0]
            self.loaded[tile] = key
        deps = [self.table_token[tile]]
        if (previous := self.last_table_user.get(tile)) is not None:
            deps.append(previous)
        return deps

    def computed(self, op: Operation, tile: int, token: SSAValue) -> None:
        """Record a compute task of `op` on `tile` (the tile's table user, if it reads one)."""
        if op.activation is not None and op.activation.isa in TABLE_ACTIVATIONS:
            self.last_table_user[tile] = token

    @property
    def constants_first(self) -> bool:
        """Whether a piece loads its constants (weights, bias, slopes) before its input: on
        several tiles, they wait for nothing, so a tile's DMA queue loads them while the
        other tiles still write the input. On one tile the input's writes are on the same
        queue anyway, and the input first keeps `sched-pin-weights`' and `sched-pipeline`'s
        layouts as measured (1 tile pinned: 1.26x the roofline, 1.31x constants first)."""
        return self.num_tiles > 1

    def in_load_order(self, constants, data):
        """(constants(), data()), called in the order `constants_first` says."""
        if self.constants_first:
            first = constants()
            return first, data()
        second = data()
        return constants(), second

    def chunk_task(
        self, op, task_class, tile: int, chunk, out: SSAValue, deps, props=None, **operands
    ):
        """A flat chunk's compute task on `tile` into a fresh OCM buffer (waiting for `deps` and
        for its activation table), then the store of that buffer to `out` at the chunk."""
        y = self.ocm([chunk.length], mrvl.element_type_of(op.output), tile)
        task = task_class.make(
            {"tile": int_attr(tile), **(props or {}), **activation_props(op)},
            deps=[*deps, *self.activation_deps(op, tile)],
            output=y,
            **operands,
        )
        t_c = self.emit(task).results[0]
        self.computed(op, tile, t_c)
        self.store(y, out, [chunk.start], tile, t_c)

    def flat_view(self, buffer: SSAValue, flat: sched.BufferType) -> SSAValue:
        """`buffer` seen as one dimension; its writers stay its writers."""
        view = self.emit(sched.ViewOp(buffer, flat)).buffer
        self.writers[view] = self.writers.setdefault(buffer, {})
        return view

    def zero(self, element_type: Attribute) -> SSAValue:
        """A one-element zero constant (made once per element type)."""
        if element_type not in self.zeros:
            dtype = mrvl.numpy_dtype(element_type)
            value = DenseIntOrFPElementsAttr(
                TensorType(element_type, [1]), BytesAttr(np.zeros(1, dtype).tobytes())
            )
            name = f"mrvl_zero_{dtype.name}"
            buf = self.emit(sched.ConstOp(name, value, buffer_type("ddr", (1,), element_type)))
            self.zeros[element_type] = buf.buffer
            self.writers[buf.buffer] = {}
        return self.zeros[element_type]

class LayerLowering(RewritePattern):
    """Base of the per-layer patterns of `convert-mrvl-to-sched`.

    A subclass implements `match_and_rewrite` with `@op_type_rewrite_pattern` for its `mrvl`
    op, calling `self.rewrite(op, rewriter)`, and `lower(op)`, which emits the layer's `sched`
    ops and gives its result a DDR buffer (`LoweringState.new_ddr`). `rewrite` names the pass
    and the layer in any error and replaces the op by a cast of its buffer.
    """

    registered: ClassVar[list[type[LayerLowering]]] = []
    """Every pattern class, in definition order: a subclass that defines `match_and_rewrite`
    registers itself, so a new layer's module of this package is all it takes."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "match_and_rewrite" in cls.__dict__:
            LayerLowering.registered.append(cls)

    def __init__(self, low: LoweringState):
        self.low = low

    def rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        """Lower `op` (`self.lower`, each pattern's own) and replace it by its buffer."""
        with self.lowering(op):
            self.lower(op)
        self.lowered(op, rewriter)

    def lower(self, op: Operation) -> None:
        raise NotImplementedError

    def lowering(self, op: Operation):
        """Emit `op`'s ops with its location; an error inside names the pass and the layer."""
        self.low.location = op.location
        return layer_boundary(f"convert-mrvl-to-sched of {op.name}", location_name(op.location))

    def lowered(self, op: Operation, rewriter: PatternRewriter) -> None:
        """Replace `op` by a cast of the DDR buffer its lowering gave its result."""
        buffer = self.low.buffers.pop(op.results[0])
        cast = UnrealizedConversionCastOp.get([buffer], [op.results[0].type])
        rewriter.replace(op, cast)
        self.low.buffers[cast.results[0]] = buffer
