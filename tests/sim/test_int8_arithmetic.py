"""`mrvl.int8`, the compile-time arithmetic of int8, and the int8 cycle model:

- the requantization rule against exact rational arithmetic, in numpy and in the Numba engine;
- `quantize_multiplier`'s range and error, `qadd_params` through the machine against real
  arithmetic, clamps against clipping real values, biases beyond int32 refused;
- `int8_table` against onnxruntime running DequantizeLinear -> f -> QuantizeLinear;
- the cycle cost of an int8 conv at the int8 MAC rate, and its operands at 1 byte an element.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from sim_builders import ENGINE_SETTINGS, Staging, instruction, layer_program, qconv, run_both

from mrvl import int8
from mrvl.isa import DType, Instruction
from mrvl.sim.cycles import instruction_cost
from mrvl.sim.engines.numba.int8 import requantize as numba_requantize
from mrvl.sim.operands import operands
from mrvl.target import get_target

HYPOTHESIS = settings(max_examples=300, deadline=None, derandomize=True)


def exact_rounding(v: int, multiplier: int, shift: int) -> int:
    """round(v * multiplier * 2^(shift - 31)) with ties toward +inf, in rationals."""
    shift = min(max(shift, -31), 30)
    return math.floor(Fraction(v * multiplier, 2 ** (31 - shift)) + Fraction(1, 2))


@HYPOTHESIS
@given(
    v=st.integers(-(2**31), 2**31 - 1),
    multiplier=st.integers(-(2**31), 2**31 - 1),
    shift=st.integers(-40, 40),
)
def test_requantize_rounds_once_to_nearest_with_ties_toward_plus_infinity(v, multiplier, shift):
    expected = exact_rounding(v, multiplier, shift)
    assert int(int8.requantize(v, multiplier, shift)) == expected
    assert int(numba_requantize(v, multiplier, shift)) == expected


def test_requantize_ties_and_identity():
    assert int(int8.requantize(1, 1 << 30, 0)) == 1  # 0.5 -> 1
    assert int(int8.requantize(-1, 1 << 30, 0)) == 0  # -0.5 -> 0 (toward +inf)
    assert int(int8.requantize(3, 1 << 30, 0)) == 2  # 1.5 -> 2
    values = np.arange(-255, 256)
    np.testing.assert_array_equal(int8.requantize(values, 1 << 30, 1), values)


@HYPOTHESIS
@given(st.floats(2**-32, 2**29, allow_subnormal=False))
def test_quantize_multiplier_is_a_q31_value_within_2_to_the_minus_31(real):
    multiplier, shift = int8.quantize_multiplier(real)
    assert 2**30 <= multiplier < 2**31
    assert -31 <= shift <= 30
    represented = Fraction(multiplier) * Fraction(2) ** (shift - 31)
    assert abs(represented - Fraction(real)) <= Fraction(real) * Fraction(1, 2**31)


def test_quantize_multiplier_edges_are_clear():
    assert int8.quantize_multiplier(0.0) == (0, 0)
    assert int8.quantize_multiplier(2**-33) == (0, 0)
    assert int8.quantize_multiplier(1.0) == (1 << 30, 1)
    for bad in (-1.0, math.nan, math.inf, 2.0**30):
        with pytest.raises(int8.Int8RangeError, match="rescale factor"):
            int8.quantize_multiplier(bad)


@HYPOTHESIS
@given(
    scale=st.floats(2**-10, 4.0, width=32),
    zp=st.integers(-128, 127),
    kind=st.sampled_from(["relu", "relu6", "clip", "none"]),
    bounds=st.tuples(st.floats(-50, 0), st.floats(0.1, 50)),
)
def test_a_clamp_is_clipping_the_real_value_then_quantizing(scale, zp, kind, bounds):
    lo, hi = bounds
    real = {"relu": (0.0, np.inf), "relu6": (0.0, 6.0), "clip": (lo, hi), "none": (-np.inf, np.inf)}
    q_lo, q_hi = int8.clamp_bounds(kind, scale, zp, lo, hi)
    q = np.arange(-128, 128)
    clipped = np.clip(int8.dequantize_linear(q, scale, zp), *real[kind]).astype(np.float32)
    np.testing.assert_array_equal(
        int8.quantize_linear(clipped, scale, zp), np.clip(int8.quantize_linear(
            int8.dequantize_linear(q, scale, zp), scale, zp), q_lo, q_hi)
    )  # fmt: skip


def test_a_bias_beyond_32_bits_is_refused_naming_its_channel():
    np.testing.assert_array_equal(int8.quantize_bias([1.0, -2.5], 0.5, [1.0, 1.0]), [2, -5])
    with pytest.raises(int8.Int8RangeError, match="output channel 1 .* more than 32 bits"):
        int8.quantize_bias([1.0, 3e9], 1.0, [1.0, 1.0])


def test_accumulator_bound():
    assert int8.accumulator_fits(65_793, in_zp=-128)  # |x - zp| <= 255, |w| <= 128
    assert not int8.accumulator_fits(65_794, in_zp=-128)
    assert int8.accumulator_fits(3 * 3 * 512, in_zp=0, bias_abs_max=2**30)


@ENGINE_SETTINGS
@given(
    scales=st.tuples(*[st.floats(1e-3, 1.0)] * 3),
    zps=st.tuples(*[st.integers(-128, 127)] * 3),
    seed=st.integers(0, 2**16),
)
def test_qadd_params_make_the_machine_add_real_values_within_one_step(scales, zps, seed):
    rng = np.random.default_rng(seed)
    count = 512
    a = rng.integers(-128, 128, count).astype(np.int8)
    b = rng.integers(-128, 128, count).astype(np.int8)
    staging = Staging()
    aa, ba, out = staging.add(a), staging.add(b), staging.reserve(count)
    ins = instruction(
        "qadd", a_addr=aa, b_addr=ba, out_addr=out, count=count, a_zp=zps[0], b_zp=zps[1],
        out_zp=zps[2], clamp=(-128, 127), lut_addr=-1, **int8.qadd_params(*scales),
    )  # fmt: skip
    (y,) = run_both(layer_program(staging, [ins], out, (count,), dtype=DType.I8), [])
    s_a, s_b, s_y = scales
    real = s_a * (a.astype(np.float64) - zps[0]) + s_b * (b.astype(np.float64) - zps[1])
    ideal = np.clip(np.floor(real / s_y + 0.5) + zps[2], -128, 127)
    assert np.abs(y - ideal).max() <= 1


def _ort_activation(op: str, q: np.ndarray, s_in, z_in, s_out, z_out, opset=19) -> np.ndarray:
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "si", "zi"], ["xf"]),
        helper.make_node(op, ["xf"], ["yf"]),
        helper.make_node("QuantizeLinear", ["yf", "so", "zo"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [q.size])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [
            helper.make_tensor("si", TensorProto.FLOAT, [], [s_in]),
            helper.make_tensor("zi", TensorProto.INT8, [], [z_in]),
            helper.make_tensor("so", TensorProto.FLOAT, [], [s_out]),
            helper.make_tensor("zo", TensorProto.INT8, [], [z_out]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": q})[0]


ACTIVATIONS = {
    "Sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)),
    "Tanh": math.tanh,
    "HardSwish": lambda x: x * min(6.0, max(0.0, x + 3.0)) / 6.0,
}


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
def test_int8_tables_are_what_the_qdq_model_means(op, record_property):
    """onnxruntime evaluates f in fp32 (its own approximations), the table in float64: they
    can differ where f(x)/s_out lies within an fp32 rounding of a tie. The share exact is
    reported; every entry is within one step."""
    rng = np.random.default_rng(5)
    q = np.arange(-128, 128).astype(np.int8)
    exact = total = 0
    for _ in range(8):
        s_in, s_out = float(rng.uniform(0.01, 0.1)), float(rng.uniform(0.002, 0.05))
        z_in, z_out = (int(v) for v in rng.integers(-128, 128, 2))
        table = int8.int8_table(ACTIVATIONS[op], s_in, z_in, s_out, z_out)
        expected = _ort_activation(op, q, s_in, z_in, s_out, z_out)
        steps = np.abs(table.astype(np.int64) - expected.astype(np.int64))
        assert steps.max() <= 1
        exact, total = exact + int((steps == 0).sum()), total + steps.size
    record_property(f"{op}_table_exact_share_vs_onnxruntime", exact / total)
    print(f"int8 {op} table vs onnxruntime QDQ: {exact}/{total} exact")
    assert exact / total > 0.95


# -------------------------------------------------------------------------- cycle model


def _qconv(**fields) -> Instruction:
    """A 3x3 qconv of 64 to 64 channels over 56x56 pixels."""
    shape = (1, 56, 56, 64)
    return qconv(0, shape, 0, shape, 0, kernel=(3, 3), pad=(1, 1), rq_addr=0, **fields)


def test_an_int8_conv_runs_at_the_int8_mac_rate_on_bytes_of_one():
    target = get_target("cn10ka")
    ins = _qconv()
    macs = 56 * 56 * 64 * 3 * 3 * 64
    cost, counted = instruction_cost(ins, target)
    assert counted == macs
    assert target.int8_macs_per_cycle_per_tile == 2048
    assert cost.cycles == target.mac_setup_cycles + math.ceil(macs / 2048)
    fp16 = instruction(
        "conv",
        **{k: v for k, v in ins.fields.items() if k not in ("in_zp", "out_zp", "rq_addr", "clamp", "lut_addr")},
        act=0, act_a=0.0, act_b=0.0, act_addr=-1,
    )  # fmt: skip
    assert instruction_cost(fp16, target)[0].cycles == target.mac_setup_cycles + math.ceil(
        macs / 1024
    )
    reads, writes = operands(ins)
    assert [r.nbytes for r in reads[:2]] == [56 * 56 * 64, 64 * 3 * 3 * 64]  # input, weights
    assert [w.nbytes for w in writes] == [56 * 56 * 64]
    assert [r.nbytes for r in reads[2:]] == [64 * 2 * 4]  # the int32 pairs
    _, partial_writes = operands(_qconv(acc_out=1))
    assert [w.nbytes for w in partial_writes] == [56 * 56 * 64 * 4]  # int32 partial sums


def test_quantize_and_dequantize_move_one_byte_per_int8_element():
    target = get_target("cn10ka")
    shape = (1, 3, 224, 224)
    count = math.prod(shape)
    common = dict(src_addr=0, src_shape=shape, dst_addr=1 << 20, perm=(0, 2, 3, 1), scale=1.0, zp=0)
    quant = instruction("quant", src_dtype=int(DType.F32), **common)
    dequant = instruction("dequant", dst_dtype=int(DType.F16), **common)
    assert instruction_cost(quant, target)[0].cycles == target.dma_setup_cycles + math.ceil(
        4 * count / 64
    )
    assert instruction_cost(dequant, target)[0].cycles == target.dma_setup_cycles + math.ceil(
        2 * count / 64
    )
    assert [a.nbytes for a in operands(quant)[1]] == [count]
    assert [a.nbytes for a in operands(dequant)[0]] == [count]


def test_the_profile_counts_int8_macs_at_the_int8_rate():
    """A qconv alone in its layer: its roofline is its MACs at 2,048 a cycle, and it runs at
    that peak but for the MAC array's set-up (utilization near 1, not near 2)."""
    from mrvl.sim import validate
    from mrvl.sim.cycles import model_cycles
    from mrvl.sim.profile import profile_timeline

    staging = Staging()
    x = staging.add(np.zeros((1, 28, 28, 64), np.int8))
    w = staging.add(np.zeros((64, 3, 3, 64), np.int8))
    rq = staging.add(np.zeros((64, 2), np.int32))
    out = staging.reserve(28 * 28 * 64)
    fields = dict(_qconv().fields, in_addr=x, in_shape=(1, 28, 28, 64), out_addr=out)
    ins = instruction("qconv", loc=0, **{**fields, "out_shape": (1, 28, 28, 64), "w_addr": w})
    ins.fields["rq_addr"] = rq
    program = layer_program(staging, [ins], out, (1, 28, 28, 64), dtype=DType.I8, srcmap=["/c"])
    load, _, store, _ = program.code  # ordered by tokens, as the cycle model requires
    load.signal, ins.waits, ins.signal, store.waits = 1, (1,), 2, (2,)
    _, layers = profile_timeline(model_cycles(validate(program)), "region")
    (conv,) = [layer for layer in layers if layer.onnx_node == "/c"]
    macs = 28 * 28 * 64 * 9 * 64
    target = get_target("cn10ka")
    assert conv.macs == macs
    assert conv.cycles == target.mac_setup_cycles + math.ceil(macs / 2048)
    assert conv.roofline_cycles == math.ceil(macs / 2048)
    assert conv.utilization == pytest.approx((macs / 2048) / conv.cycles)
