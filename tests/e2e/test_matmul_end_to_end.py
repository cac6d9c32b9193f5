"""MatMul of two activations (`mrvl.bmm`) end to end against onnxruntime: attention's Q·Kᵀ
(the right operand through a Transpose of its last two axes) and A·V at ranks 2 to 4, an
operand shared by the batch, a reduction too long for a tile, a small attention block with
its Softmax, shapes drawn by hypothesis, and the broadcasts that stay on the CPU with their
reason."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tvm
from helpers import onnxruntime_outputs, region_functions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper
from test_shapes_end_to_end import check_offloaded_and_accurate, model
from tvm import relax

import mrvl
from mrvl.accuracy import fp16_agreement

node = helper.make_node


def swap_last_two(rank: int) -> list[int]:
    return [*range(rank - 2), rank - 1, rank - 2]


def matmul_model(a_shape, b_shape, *, trans_a=False, trans_b=False) -> onnx.ModelProto:
    """Y = A' · B' of two graph inputs, A' (B') a Transpose of A's (B's) last two axes when
    asked: A and B are given as stored."""
    nodes, names = [], []
    for name, shape, trans in (("A", a_shape, trans_a), ("B", b_shape, trans_b)):
        if trans:
            nodes.append(
                node("Transpose", [name], [name + "t"], perm=swap_last_two(len(shape)),
                     name=f"/{name.lower()}/Transpose")
            )  # fmt: skip
            names.append(name + "t")
        else:
            names.append(name)
    nodes.append(node("MatMul", names, ["Y"], name="/attn/MatMul"))
    a = np.zeros(a_shape)
    b = np.zeros(b_shape)
    a = np.swapaxes(a, -1, -2) if trans_a else a
    b = np.swapaxes(b, -1, -2) if trans_b else b
    out_shape = list(np.matmul(a, b).shape)
    return model(nodes, [], [("A", a_shape), ("B", b_shape)], [("Y", out_shape)])


def on_cpu(onnx_model, num_tiles=8) -> dict[str, str]:
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model), num_tiles=num_tiles)
    return {r.node: r.reason for r in mrvl.partition_report(mod).rows if r.target == "cpu"}


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_q_times_k_transposed_at_rank_4(num_tiles):
    """Scores of 3 heads: Q [2, 3, 10, 16] · Kᵀ, K [2, 3, 12, 16] transposed by a Transpose
    that the layer reads as it is stored."""
    m = matmul_model([2, 3, 10, 16], [2, 3, 12, 16], trans_b=True)
    check_offloaded_and_accurate(m, num_tiles=num_tiles)


@pytest.mark.parametrize("num_tiles", [1, 8])
def test_attention_times_values_at_rank_4(num_tiles):
    m = matmul_model([2, 4, 9, 9], [2, 4, 9, 8])
    check_offloaded_and_accurate(m, num_tiles=num_tiles)


def test_rank_3_with_a_batch_over_8_and_a_transposed_left_operand():
    """12 matrices (heads folded into the batch), the left operand through a Transpose."""
    check_offloaded_and_accurate(matmul_model([12, 16, 7], [12, 16, 5], trans_a=True))


def test_rank_2_product_of_two_activations():
    check_offloaded_and_accurate(matmul_model([6, 20], [5, 20], trans_b=True), num_tiles=2)


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [([2, 3, 5, 8], [8, 7]), ([5, 8], [2, 3, 8, 7]), ([1, 1, 5, 8], [2, 3, 8, 7])],
    ids=["right-shared", "left-shared-rank-2", "left-shared-unit-axes"],
)
def test_an_operand_shared_by_every_batch(a_shape, b_shape):
    check_offloaded_and_accurate(matmul_model(a_shape, b_shape), num_tiles=4)


def test_a_reduction_longer_than_a_tile_holds():
    """K [1, 64, 4096] (512 KiB of f16) cannot sit in a 256 KiB tile: the reduction is cut into
    blocks chained through fp32 partial sums (the same bits as one instruction)."""
    check_offloaded_and_accurate(matmul_model([1, 4, 4096], [1, 64, 4096], trans_b=True))


def test_a_broadcast_that_would_copy_an_operand_stays_on_the_cpu_with_its_reason():
    """[2, 1, 5, 8] · [1, 3, 8, 7]: each operand has some of the result's batch axes, so the
    MLIP would need a copy of both; the MatMul runs on the CPU and says why."""
    m = matmul_model([2, 1, 5, 8], [1, 3, 8, 7])
    reasons = on_cpu(m)
    assert list(reasons) == ["/attn/MatMul"]
    assert "leading axes [2, 1] broadcast to [2, 3]: that needs a copy" in reasons["/attn/MatMul"]
    vm = relax.VirtualMachine(mrvl.build(mrvl.partition_for_mrvl(mrvl.from_onnx(m))), tvm.cpu())
    rng = np.random.default_rng(0)
    feeds = {
        "A": rng.standard_normal([2, 1, 5, 8]).astype(np.float32),
        "B": rng.standard_normal([1, 3, 8, 7]).astype(np.float32),
    }
    got = vm["main"](*[tvm.runtime.tensor(v) for v in feeds.values()]).numpy()
    np.testing.assert_allclose(got, onnxruntime_outputs(m, feeds)[0], rtol=1e-5, atol=1e-5)


def test_a_transpose_also_read_elsewhere_is_not_folded():
    """Kᵀ feeds two products: the Transpose stays a copy of its own (on the MLIP) and each
    MatMul reads its result as stored."""
    nodes = [
        node("Transpose", ["K"], ["Kt"], perm=[0, 2, 1], name="/k/Transpose"),
        node("MatMul", ["Q", "Kt"], ["S"], name="/s/MatMul"),
        node("MatMul", ["P", "Kt"], ["T"], name="/t/MatMul"),
        node("Add", ["S", "T"], ["Y"], name="/y/Add"),
    ]
    m = model(nodes, [], [("Q", [3, 6, 8]), ("P", [3, 6, 8]), ("K", [3, 5, 8])], [("Y", [3, 6, 5])])
    check_offloaded_and_accurate(m, num_tiles=2)


def test_at_partition_time_a_product_that_cannot_fit_stays_on_the_cpu():
    """A part whose 4 KiB tile aligns every buffer to 2 KiB: not even one output element of the
    product (four buffers) fits, so the MatMul stays on the CPU with the bytes."""
    from mrvl.target import derive_target

    part = derive_target("cn10ka", ocm_bytes_per_tile=4096, ocm_alignment=2048)
    m = matmul_model([2, 5, 8], [2, 8, 7])
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(m), mcpu=part.name, num_tiles=1)
    reasons = {r.node: r.reason for r in mrvl.partition_report(mod).rows if r.target == "cpu"}
    assert reasons == {
        "/attn/MatMul": f"does not fit on chip: one output element needs 8192 bytes of OCM, a "
        f"tile of {part.name} has 4096"
    }


@pytest.mark.parametrize("also_used", [False, True])
def test_a_transpose_of_other_axes_is_an_operand_not_a_folded_transpose(also_used):
    """The left operand is a Transpose of the batch axes (a copy of its own) and the right one
    a Transpose of its last two axes (folded). The pattern that would fold both is rejected,
    and the one that folds only the right one takes the MatMul (found by the fuzzer: the
    matcher reports an operand as its bound value, a permute_dims either way)."""
    nodes = [
        node("Transpose", ["A"], ["At"], perm=[1, 0, 2, 3], name="/a/Transpose"),
        node("Transpose", ["B"], ["Bt"], perm=[0, 1, 3, 2], name="/b/Transpose"),
        node("MatMul", ["At", "Bt"], ["S"], name="/s/MatMul"),
    ]
    outputs = [("S", [3, 2, 5, 7])]
    if also_used:
        nodes.append(node("Relu", ["At"], ["R"], name="/r/Relu"))
        outputs.append(("R", [3, 2, 5, 8]))
    m = model(nodes, [], [("A", [2, 3, 5, 8]), ("B", [3, 2, 7, 8])], outputs)
    check_offloaded_and_accurate(m, num_tiles=2)


@pytest.mark.parametrize("num_tiles", [1, 8])
@pytest.mark.parametrize("options", [{}, {"wb_pin_ocm": True}, {"cascade": True}])
def test_the_cycle_model_times_the_product_and_finds_every_token(num_tiles, options):
    """The compiled Q·Kᵀ region replays on the cycle model without a hazard (every byte a
    piece reuses is ordered by a token), with the product's MACs on the MAC queues and its
    time no shorter than those MACs at the target's rate."""
    from mrvl.compiler import compile_region
    from mrvl.sim import prepare
    from mrvl.sim.cycles import model_cycles
    from mrvl.target import get_target

    m = matmul_model([2, 4, 24, 32], [2, 4, 40, 32], trans_b=True)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(m), num_tiles=num_tiles)
    ((_, func),) = list(region_functions(mod))
    region = compile_region(func, num_tiles=num_tiles, **options)
    timeline = model_cycles(prepare(region.binary))
    macs = 2 * 4 * 24 * 40 * 32
    assert int(timeline.macs.sum()) == macs
    rate = get_target("cn10ka").fp16_macs_per_cycle_per_tile * num_tiles
    assert int(timeline.end.max()) >= macs / rate


def test_rank_5():
    check_offloaded_and_accurate(matmul_model([2, 2, 3, 6, 8], [2, 2, 3, 5, 8], trans_b=True))


def test_an_attention_block():
    """Single-head attention over a sequence: projections (fc), Q·Kᵀ, a scale, Softmax, ·V.
    Every node but the Softmax runs on the MLIP; the result passes the fp16 rule."""
    rng = np.random.default_rng(3)
    d = 16
    inits = [
        numpy_helper.from_array((rng.standard_normal((d, d)) / 4).astype(np.float32), f"W{x}")
        for x in "qkv"
    ] + [numpy_helper.from_array(np.array(d**-0.5, np.float32), "scale")]
    nodes = [
        node("MatMul", ["X", "Wq"], ["Q"], name="/q/MatMul"),
        node("MatMul", ["X", "Wk"], ["K"], name="/k/MatMul"),
        node("MatMul", ["X", "Wv"], ["V"], name="/v/MatMul"),
        node("Transpose", ["K"], ["Kt"], perm=[0, 2, 1], name="/k/Transpose"),
        node("MatMul", ["Q", "Kt"], ["S"], name="/qk/MatMul"),
        node("Mul", ["S", "scale"], ["Ss"], name="/qk/Mul"),
        node("Softmax", ["Ss"], ["P"], axis=-1, name="/softmax/Softmax"),
        node("MatMul", ["P", "V"], ["Y"], name="/pv/MatMul"),
    ]
    m = model(nodes, inits, [("X", [2, 12, d])], [("Y", [2, 12, d])])
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(m), num_tiles=8)
    rows = mrvl.partition_report(mod).rows
    placed = {r.node: r.target for r in rows}
    for name in ("/q/MatMul", "/k/MatMul", "/v/MatMul", "/k/Transpose", "/qk/MatMul", "/qk/Mul",
                 "/pv/MatMul"):  # fmt: skip
        assert placed[name].startswith("mrvl_region_"), (name, placed)
    x = rng.standard_normal((2, 12, d)).astype(np.float32)
    got = relax.VirtualMachine(mrvl.build(mod), tvm.cpu())["main"](tvm.runtime.tensor(x))
    agreement = fp16_agreement(got.numpy(), onnxruntime_outputs(m, {"X": x})[0])
    assert agreement.passed, str(agreement)


@settings(
    max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    batch=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    m=st.integers(1, 12),
    k=st.integers(1, 40),
    n=st.integers(1, 12),
    trans_a=st.booleans(),
    trans_b=st.booleans(),
    shared=st.sampled_from(["none", "a", "b"]),
    num_tiles=st.sampled_from([1, 2, 8]),
)
def test_drawn_shapes_run_on_the_mlip_and_match_onnxruntime(
    batch, m, k, n, trans_a, trans_b, shared, num_tiles
):
    a_lead = [] if shared == "a" else batch
    b_lead = [] if shared == "b" else batch
    a_shape = [*a_lead, *((k, m) if trans_a else (m, k))]
    b_shape = [*b_lead, *((n, k) if trans_b else (k, n))]
    mm = matmul_model(a_shape, b_shape, trans_a=trans_a, trans_b=trans_b)
    check_offloaded_and_accurate(mm, num_tiles=num_tiles)
