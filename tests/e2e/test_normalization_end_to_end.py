"""Softmax and LayerNormalization on the MLIP, end to end against onnxruntime (fp16
acceptance rule): softmax on the last and on a middle axis, at rank 2 to 4, after a conv
(NHWC, no layout conversion), the flattening form of an opset-11 export; layer normalization
of a transformer-shaped [1, 197, 192] tensor, fused and in the decomposed form older exports
write, and over the last two axes after a conv. Each in one region with its neighbours, on the
interpreter and the Numba engine with the same bytes. A model's final softmax stays on the
CPU with its reason, as does a layer whose row does not fit a tile."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import float_model, offloaded_partition, onnxruntime_outputs, run_on_both_engines
from onnx import helper, numpy_helper

import mrvl
from mrvl.accuracy import fp16_agreement
from mrvl.fp16_emulation import fp16_emulation_outputs, judge

node = helper.make_node


def const(rng, name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def positive(rng, name, shape):
    """Weights in [0.1, 1): a layer after a softmax that sums its probabilities without
    cancellation, so that the fp16 rule judges the softmax rather than the network's noise."""
    return numpy_helper.from_array((0.1 + 0.9 * rng.random(shape)).astype(np.float32), name)


def model(nodes, inits, x_shape, y_shape, opset=17) -> onnx.ModelProto:
    return float_model(
        nodes, inits, [("x", x_shape)], [("y", y_shape)], name="norm", opset=opset, ir_version=8
    )


def conv_softmax_conv(shape, axis, opset=17):
    """conv 1x1 -> Softmax(axis) -> conv 1x1 on an NCHW tensor."""
    rng = np.random.default_rng(3)
    c = shape[1]
    inits = [const(rng, "w1", (c, c, 1, 1), 1.0), positive(rng, "w2", (c, c, 1, 1))]
    nodes = [
        node("Conv", ["x", "w1"], ["a"], name="/c1/Conv"),
        node("Softmax", ["a"], ["s"], name="/attn/Softmax", axis=axis),
        node("Conv", ["s", "w2"], ["y"], name="/c2/Conv"),
    ]
    return model(nodes, inits, shape, shape, opset)


def fc_softmax_fc(shape, axis):
    """MatMul -> Softmax(axis) -> MatMul over a rank-2 or rank-3 sequence."""
    rng = np.random.default_rng(4)
    k = shape[-1]
    inits = [const(rng, "w1", (k, k), 1.0), positive(rng, "w2", (k, k))]
    nodes = [
        node("MatMul", ["x", "w1"], ["a"], name="/q/MatMul"),
        node("Softmax", ["a"], ["s"], name="/attn/Softmax", axis=axis),
        node("MatMul", ["s", "w2"], ["y"], name="/o/MatMul"),
    ]
    return model(nodes, inits, shape, shape)


def run_checked(onnx_model, *, num_tiles, x_scale=2.0, emulation=False):
    """Partition (all on the MLIP, in one region), build, run on both engines (the same
    bytes) and judge against onnxruntime: by the fp16 rule, or with `emulation` within
    max(3 %, the fp16-storage emulation's own error) (DESIGN §9)."""
    mod = offloaded_partition(onnx_model, num_tiles=num_tiles)
    shape = [d.dim_value for d in onnx_model.graph.input[0].type.tensor_type.shape.dim]
    x = (np.random.default_rng(0).standard_normal(shape) * x_scale).astype(np.float32)
    outputs = run_on_both_engines(mrvl.build(mod), x)
    (want,) = onnxruntime_outputs(onnx_model, {"x": x})
    if emulation:
        verdict = judge(outputs, [want], fp16_emulation_outputs(onnx_model, {"x": x}))
        assert verdict.passed, str(verdict)
        return
    agreement = fp16_agreement(outputs[0], want)
    assert agreement.passed, str(agreement)


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize(
    "shape, axis, opset",
    [
        ((1, 16, 6, 5), 1, 17),  # channels: innermost in NHWC
        ((2, 8, 7, 6), 2, 17),  # H: a middle axis, rows strided by W*C
        ((1, 8, 5, 9), -1, 17),  # W
        ((1, 6, 4, 5), 1, 11),  # flattened: softmax over C*H*W
    ],
)
def test_softmax_after_a_conv(shape, axis, opset, num_tiles):
    run_checked(conv_softmax_conv(shape, axis, opset), num_tiles=num_tiles)


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize("shape, axis", [((12, 20), -1), ((2, 10, 16), -1), ((2, 10, 16), 1)])
def test_softmax_between_fcs(shape, axis, num_tiles):
    run_checked(fc_softmax_fc(shape, axis), num_tiles=num_tiles)


def test_a_models_final_softmax_stays_on_the_cpu_with_its_reason():
    rng = np.random.default_rng(5)
    nodes = [
        node("Conv", ["x", "w"], ["a"], name="/c/Conv"),
        node("Softmax", ["a"], ["y"], name="/out/Softmax", axis=1),
    ]
    m = model(nodes, [const(rng, "w", (4, 4, 1, 1))], (1, 4, 3, 3), (1, 4, 3, 3))
    report = mrvl.partition_report(mrvl.partition_for_mrvl(mrvl.from_onnx(m)))
    row = next(r for r in report.rows if r.node == "/out/Softmax")
    assert row.target == "cpu" and "final softmax kept on the CPU in fp32" in row.reason


def test_a_softmax_row_too_long_for_a_tile_stays_on_the_cpu():
    """cnf10kb's tile has 128 KiB: a row of 40000 f16 with its result needs 160 KB."""
    rng = np.random.default_rng(6)
    nodes = [
        node("Softmax", ["x"], ["s"], name="/big/Softmax", axis=-1),
        node("Mul", ["s", "k"], ["y"], name="/scale/Mul"),
    ]
    k = numpy_helper.from_array(np.float32(rng.standard_normal()), "k")
    m = model(nodes, [k], (1, 40000), (1, 40000))
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(m), mcpu="cnf10kb", num_tiles=4)
    report = mrvl.partition_report(mod)
    row = next(r for r in report.rows if r.node == "/big/Softmax")
    assert row.target == "cpu"
    assert "does not fit on chip: one row of 40000 elements needs" in row.reason
    assert "cnf10kb has 131072" in row.reason


# ------------------------------------------------------------------------------- layernorm


def layernorm_net(shape, decomposed, axis=-1, conv=False, project=True):
    """LayerNormalization(axis) or its decomposed form -> MatMul over the last axis (a
    transformer's LN -> projection); with `conv`, conv 1x1 -> LN -> conv 1x1 instead; without
    `project`, the normalization alone."""
    rng = np.random.default_rng(8)
    row = shape[axis:] if axis != -1 else shape[-1:]
    k = shape[-1]
    inits = [
        numpy_helper.from_array((1 + 0.2 * rng.standard_normal(row)).astype(np.float32), "g"),
        numpy_helper.from_array((0.2 * rng.standard_normal(row)).astype(np.float32), "b"),
    ]
    if project:
        inits.append(const(rng, "w", (shape[1], shape[1], 1, 1) if conv else (k, k), 0.1))
    nodes, x = [], "x"
    if conv:
        inits.append(const(rng, "wc", (shape[1], shape[1], 1, 1), 1.0))
        nodes.append(node("Conv", ["x", "wc"], ["c"], name="/pre/Conv"))
        x = "c"
    if decomposed:
        axes = list(range(axis % len(shape), len(shape)))
        inits += [
            numpy_helper.from_array(np.float32(2.0), "two"),
            numpy_helper.from_array(np.float32(1e-5), "eps"),
        ]
        nodes += [
            node("ReduceMean", [x], ["m"], name="/ln/ReduceMean", axes=axes),
            node("Sub", [x, "m"], ["d"], name="/ln/Sub"),
            node("Pow", ["d", "two"], ["p"], name="/ln/Pow"),
            node("ReduceMean", ["p"], ["v"], name="/ln/ReduceMean_1", axes=axes),
            node("Add", ["v", "eps"], ["ve"], name="/ln/Add"),
            node("Sqrt", ["ve"], ["s"], name="/ln/Sqrt"),
            node("Div", ["d", "s"], ["n"], name="/ln/Div"),
            node("Mul", ["n", "g"], ["nm"], name="/ln/Mul"),
            node("Add", ["nm", "b"], ["y0"], name="/ln/Add_1"),
        ]
    else:
        nodes.append(
            node("LayerNormalization", [x, "g", "b"], ["y0"], name="/ln/LN", axis=axis,
                 epsilon=1e-5)
        )  # fmt: skip
    if project:
        nodes.append(node("Conv" if conv else "MatMul", ["y0", "w"], ["y"], name="/proj/MatMul"))
    else:
        nodes[-1].output[0] = "y"
    return model(nodes, inits, shape, shape)


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize("decomposed", [False, True], ids=["LayerNormalization", "decomposed"])
def test_layernorm_of_a_transformer_sequence(decomposed, num_tiles):
    run_checked(layernorm_net((1, 197, 192), decomposed), num_tiles=num_tiles, emulation=True)


@pytest.mark.parametrize("decomposed", [False, True], ids=["LayerNormalization", "decomposed"])
def test_layernorm_over_the_last_two_axes_after_a_conv(decomposed):
    run_checked(
        layernorm_net((2, 6, 5, 8), decomposed, axis=-2, conv=True), num_tiles=4, emulation=True
    )


def test_layernorm_of_rank_2_rows():
    run_checked(layernorm_net((40, 64), False), num_tiles=8, emulation=True)


def test_a_layernorm_row_too_long_for_its_scale_and_shift_runs_in_runs():
    """cnf10kb: a row of 20000 elements, with its result and its f32 scale and shift, needs
    240 KB; a tile has 128 KiB. Its f16 input alone fits: `lnstats` takes the rows' mean and
    rstd, `lnapply` normalizes runs of them (layernorm_long_rows.py), with layernorm's bits."""
    m = layernorm_net((1, 2, 20000), False, project=False)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(m), mcpu="cnf10kb", num_tiles=4)
    row = next(r for r in mrvl.partition_report(mod).rows if r.node == "/ln/LN")
    assert row.target != "cpu", row.reason
    x = (np.random.default_rng(0).standard_normal((1, 2, 20000)) * 2).astype(np.float32)
    outputs = run_on_both_engines(mrvl.build(mod), x)
    (want,) = onnxruntime_outputs(m, {"x": x})
    verdict = judge(outputs, [want], fp16_emulation_outputs(m, {"x": x}))
    assert verdict.passed, str(verdict)


def test_a_layernorm_row_too_long_for_a_tile_stays_on_the_cpu():
    """cnf10kb: a row of 70000 elements needs 140,000 bytes in f16 alone; a tile has 128 KiB."""
    m = layernorm_net((1, 2, 70000), False, project=False)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(m), mcpu="cnf10kb", num_tiles=4)
    row = next(r for r in mrvl.partition_report(mod).rows if r.node == "/ln/LN")
    assert row.target == "cpu"
    assert "does not fit on chip: one row of 70000 elements needs 140264 bytes" in row.reason
