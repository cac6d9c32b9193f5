"""The int8 forms of the compute layers' tasks: what an int8 conv, pool or fc piece computes
with besides its fp16 kin's operands (zero points, the requantization pairs, the clamp of its
activation), from the layer's quantization (`mrvl.Int8Properties`) by `mrvl.int8`'s
compile-time arithmetic. The tiler plans int8 layers in 1-byte elements (`WindowLayer.int8`,
`FcLayer.int8`), and `window.py` / `fc.py` build the int8 tasks through `qconv_task`,
`qpool_task`, `qfc_task`.
"""

from __future__ import annotations

from math import prod

import numpy as np
from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import Operation, SSAValue

from mrvl.dialects import mrvl, sched
from mrvl.errors import CompileError
from mrvl.locations import location_name
from mrvl.passes.sched.lowering.state import buffer_type, i64_array, int_attr


def is_int8_layer(op: Operation) -> bool:
    return mrvl.is_int8(op.results[0])


def require_int8(op: Operation) -> None:
    """An int8 layer reads and writes int8 (its i32 bias aside)."""
    values = [v for v in (*op.operands, *op.results) if mrvl.layout_of(v) != "O"]
    if not all(mrvl.is_int8(v) for v in values):
        raise CompileError(f"{op.name} at {location_name(op.location)}: int8 and float mixed")


def requant_pairs(low, op: Operation) -> SSAValue:
    """The DDR constant of an int8 conv's or fc's (multiplier, shift) per output channel:
    s_x * s_w[o] / s_y, as `int8.conv_requant_pairs` quantizes it."""
    from mrvl import int8

    s_x, _ = op.quant_of_input(0)
    s_y, _ = op.out_quant.values
    s_w = np.array(op.weight_scales.get_values(), np.float64)
    pairs = int8.conv_requant_pairs(s_x, s_w, s_y)
    return low.made_constant(f"mrvl_requant_{low.made_constants}", pairs)


def clamp(op: Operation) -> list[int]:
    """The int8 result's saturation bounds: its fused ReLU / Clip, at its output scale."""
    from mrvl import int8

    s_y, z_y = op.out_quant.values
    act = getattr(op, "activation", None)
    kind = "none" if act is None else act.data.value
    if kind == "clip":
        return list(int8.clamp_bounds("clip", s_y, z_y, op.act_min.value.data, op.act_max.value.data))
    return list(int8.clamp_bounds(kind, s_y, z_y))


def _zero_points(op: Operation) -> dict:
    _, z_x = op.quant_of_input(0)
    _, z_y = op.out_quant.values
    return {"in_zp": int_attr(z_x), "out_zp": int_attr(z_y), "clamp": i64_array(clamp(op))}


def qconv_task(
    op: mrvl.Conv2DOp,
    props: dict,
    deps: list[SSAValue],
    window: SSAValue,
    out: SSAValue,
    weight: SSAValue,
    bias: list[SSAValue],
    requant: list[SSAValue],
    acc: list[SSAValue],
) -> sched.QConv2DTaskOp:
    """The int8 conv task of a piece (`props`: the fp16 task's geometry; its activation
    becomes the clamp)."""
    geometry = {
        k: v
        for k, v in props.items()
        if k not in ("activation", "act_min", "act_max", "alpha", "beta")
    }
    if "acc_out" in geometry:
        geometry["acc_out"] = UnitAttr()
    return sched.QConv2DTaskOp.make(
        {**geometry, **_zero_points(op)},
        deps=deps,
        input=window,
        output=out,
        weight=weight,
        bias=bias,
        requant=requant[0],
        acc=acc,
    )


def qpool_task(
    op: mrvl.Pool2DBase, props: dict, deps: list[SSAValue], window: SSAValue, out: SSAValue
) -> sched.QPool2DTaskOp:
    """The int8 pool task of a piece: the pooled value rescaled from the input's scale to the
    result's by one (multiplier, shift) pair."""
    from mrvl import int8

    s_x, z_x = op.quant_of_input(0)
    s_y, z_y = op.out_quant.values
    properties = {
        **props,
        "in_zp": int_attr(z_x),
        "out_zp": int_attr(z_y),
        "rq": i64_array(int8.requant_params(s_x, s_y)),
    }
    return sched.QPool2DTaskOp.make(properties, deps=deps, input=window, output=out)


def qfc_task(
    op: mrvl.FullyConnectedOp,
    tile: int,
    deps: list[SSAValue],
    x: SSAValue,
    weight: SSAValue,
    bias: list[SSAValue],
    requant: SSAValue,
    out: SSAValue,
) -> sched.QFullyConnectedTaskOp:
    return sched.QFullyConnectedTaskOp.make(
        {"tile": int_attr(tile), **_zero_points(op)},
        deps=deps,
        input=x,
        weight=weight,
        bias=bias,
        requant=requant,
        output=out,
    )


def lower_qadd(low, op: mrvl.AddOp) -> None:
    """An int8 residual add: chunks of the flat tensors dealt over the tiles, as the fp16 add
    is cut (3 operands of 1 byte)."""
    from mrvl import int8
    from mrvl.passes.sched.tiling import plan_elementwise

    require_int8(op)
    (s_a, z_a), (s_b, z_b) = op.quant_of_input(0), op.quant_of_input(1)
    s_y, z_y = op.out_quant.values
    rq = int8.qadd_params(s_a, s_b, s_y)
    props = {
        "a_zp": int_attr(z_a),
        "b_zp": int_attr(z_b),
        "out_zp": int_attr(z_y),
        **{name: i64_array(pair) for name, pair in rq.items()},
        "clamp": i64_array(clamp(op)),
    }
    count = prod(mrvl.shape_of(op.output))
    flat = buffer_type("ddr", (count,), mrvl.element_type_of(op.output))
    lhs, rhs = (low.flat_view(low.ddr_buffer(v), flat) for v in (op.lhs, op.rhs))
    out = low.flat_view(low.new_ddr(op.output), flat)
    chunks = plan_elementwise(
        count, 3, low.ocm_bytes(op), low.num_tiles, low.target.ocm_alignment, elem_bytes=1
    )
    for index, chunk in enumerate(chunks):
        tile = index % low.num_tiles
        a, t_a = low.load(lhs, [chunk.start], [chunk.length], tile)
        b, t_b = low.load(rhs, [chunk.start], [chunk.length], tile)
        y = low.ocm([chunk.length], mrvl.element_type_of(op.output), tile)
        task = sched.QAddTaskOp.make(
            {"tile": int_attr(tile), **props}, deps=[t_a, t_b], lhs=a, rhs=b, output=y
        )
        t_c = low.emit(task).results[0]
        low.store(y, out, [chunk.start], tile, t_c)
