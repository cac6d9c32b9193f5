"""Each distinct bug the fuzzer found, as its shrunk reproducer (`scripts/fuzz.py` writes the
`Spec`; `Spec.describe()` is the one-line description in each docstring).

A bug not fixed yet is `xfail(strict=True)` naming it and the helper area that owns the fix,
so the test turns into a failure (XPASS) the day the fix lands, and the marker goes. The
property test's `KNOWN` list (test_fuzz.py) names the same tests.
"""

from __future__ import annotations

import harness
import numpy as np
import pytest
from grammar import Layer, Spec, build_model, conv_params, input_array
from onnx import numpy_helper

pytestmark = pytest.mark.filterwarnings("ignore")


def assert_property(spec: Spec) -> harness.Outcome:
    """The fuzz property: no failure (see harness.check)."""
    outcome = harness.check(spec)
    assert outcome.status != harness.FAILED, f"{spec.describe()}\n{outcome}"
    return outcome


def assert_decided_at_partition(spec: Spec) -> None:
    """Stricter, as issue 6 asks: what `partition_for_mrvl` put on the MLIP also builds, so
    a refusal comes at partition time (the layer stays on the CPU), never from `build`."""
    outcome = assert_property(spec)
    assert not outcome.signature.startswith("rejected:build"), f"{spec.describe()}\n{outcome}"


def test_reused_block_constants():
    """cn10ka/1 tiles, x 1x1x1x1: block(groups=1, times=2, bias=False, shared=False): the same
    conv+relu with equal (unshared) weights twice in a row."""
    block = Layer("block", {"groups": "1", "times": 2, "bias": False, "shared": False, "seed": 1})
    assert_property(Spec((1, 1, 1, 1), (block,)))


def test_constant_on_the_left():
    """cn10ka/1 tiles, x 1x1x1x1: se(order=0, gate=HardSigmoid): squeeze-excitation whose gate
    is a HardSigmoid after a 1x1 conv."""
    se = Layer("se", {"order": 0, "gate": "HardSigmoid", "seed": 15010020})
    assert_property(Spec((1, 1, 1, 1), (se,), seed=15010))


def test_scale_shift_constant_on_the_left():
    """cn10ka/1 tiles, x 1x1x1x1: const(op=Mul, side=left, kind=channel4, signed=True)."""
    mul = Layer("const", {"op": "Mul", "side": "left", "kind": "channel4", "signed": True,
                          "seed": 53936010})  # fmt: skip
    assert_decided_at_partition(Spec((1, 1, 1, 1), (mul,), seed=53936))


def test_grouped_conv_too_big_for_one_tile():
    """cnf10kb/1 tiles, x 2x1x2x61: conv(cout=480, k=5x5, same) -> conv(cout=8, groups=2,
    k=5x5, pads=(2, 1, 2, 1))."""
    wide = Layer("conv", conv_params(56844010, 480, (5, 5)))
    grouped = Layer(
        "conv", conv_params(56844030, 8, (5, 5), groups="g2", pads=(2, 1, 2, 1), bias=False)
    )
    assert_decided_at_partition(Spec((2, 1, 2, 61), (wide, grouped), "cnf10kb", 1, 56844))


def test_fc_too_big_for_one_tile():
    """cn10ka/1 tiles, x 1x120x4x160: to_rank2(how=Reshape) -> fc(op=Gemm, out=3, alpha=0.5,
    transB=True, bias=True)."""
    flat = Layer("to_rank2", {"how": "Reshape"})
    fc = Layer("fc", {"op": "Gemm", "out": 3, "alpha": 0.5, "beta": 1.0, "transB": True,
                      "bias": True, "seed": 7})  # fmt: skip
    assert_decided_at_partition(Spec((1, 120, 4, 160), (flat, fc)))


def test_depthwise_conv_too_big_for_one_tile():
    """cn10ka/1 tiles, x 1x512x4x80: conv(groups=dw, k=5x5, s=2x2, same, bias)."""
    dw = Layer("conv", conv_params(50109020, 16, (5, 5), groups="dw", s=(2, 2), mult=1))
    assert_decided_at_partition(Spec((1, 512, 4, 80), (dw,), seed=50109))


def test_conv_row_too_big_for_one_tile():
    """cn10ka/1 tiles, x 1x480x9x39: conv(cout=4, k=7x7, pads=(0, 2, 0, 0))."""
    conv = Layer("conv", conv_params(13093020, 4, (7, 7), pads=(0, 2, 0, 0), bias=False))
    assert_decided_at_partition(Spec((1, 480, 9, 39), (conv,), seed=13093))


def test_scale_shift_over_many_channels():
    """cn10ka/1 tiles, x 1x23040x1x1: bn(). Found as conv(1->480, 11x11, same) on 1x1x1x48 ->
    Reshape(N, -1) -> BatchNormalization on the rank-2 result. One pixel with its 184 KB of
    f32 scale and shift does not fit a tile: the scale_shift is cut into channel groups."""
    assert_decided_at_partition(Spec((1, 23040, 1, 1), (Layer("bn", {"seed": 5}),)))


def test_bmm_of_a_transpose_and_its_own_transpose():
    """cn10ka/1 tiles, x 1x1x1x1 (found at 2x3x3x61): transpose(perm=(0, 1, 3, 2)) ->
    bmm(form=qk, self=True): MatMul(t, Transpose(t)) with t = Transpose(x). The pattern that
    folds both operands' transposes took both, so the right one's source was the left one,
    inside the layer, and the import stopped the build ("operand ... is not a tensor computed
    in the region"). That match is refused now: t is a copy and the bmm folds one transpose."""
    transpose = Layer("transpose", {"perm": (0, 1, 3, 2)})
    qk = Layer("bmm", {"form": "qk", "self": True, "k": 3, "seed": 59295010})
    assert_decided_at_partition(Spec((1, 1, 1, 1), (transpose, qk), seed=59295))
    outcome = assert_property(Spec((2, 3, 3, 61), (transpose, qk), seed=59295))
    assert outcome.status == harness.PASSED, outcome


def test_decomposed_layernorm_over_three_axes_after_softmaxes():
    """cn10ka/1 tiles, x 1x256x2x80: softmax(axis=2) -> act(Softmax) -> layernorm(k=3,
    decomposed=True). Found by scripts/fuzz.py --seed 28 (example 1047): 43 elements beyond
    3 % against the emulation's 33 of 39,719, p99 1.574 % against 1.408 %. Systematic, not
    noise: over 12 inputs mrvl is above the emulation on all 12 (71.9 against 62.1 elements
    beyond 3 % on average, p99 1.607 % against 1.510 %); the layernorm alone on small inputs
    has a p99 2.6x the emulation's on 6 of 6. Over three axes the decomposed form was not
    matched as one `layernorm`: a row of 40,960 elements with its result and its f32 scale
    and shift needs 480 KiB, more than a tile's 256 KiB, so the check refused it and it ran
    as reduce, binary and scale_shift layers, each rounding to f16, while the emulation kept
    its intermediates in f32 (`layernorm_f32_tensors`). Such a row is now one layer, as
    `lnstats` (its f16 input alone, 80 KiB) and `lnapply` over runs of it, with
    `layernorm`'s bits (`lowering/layernorm_long_rows.py`)."""
    layers = (
        Layer("softmax", {"axis": 2}),
        Layer("act", {"act": "Softmax", "side": "left"}),
        Layer("layernorm", {"k": 3, "decomposed": True, "seed": 49879060}),
    )
    assert_property(Spec((1, 256, 2, 80), layers, seed=49879))


def test_fp16_noise_at_the_ignore_threshold():
    """cn10ka/1 tiles, x 1x8x4x257: concat(axis=1, with=branch) -> act(Relu) ->
    block(groups=1, times=2, bias=False, shared=False).

    Was a strict xfail: 3.36 % against the emulation's 3.30 %, fp16 noise on an element just
    above max|ref|/100 after a relu, that no re-drawn rounding moved. The emulation now keeps
    in f32 what the MLIP keeps in f32 (the conv's affine chain: `on_chip_f32_tensors`) and
    draws the same 3.36 %, so it passes the first comparison."""
    concat = Layer("concat", {"axis": 1, "with": "branch", "pick": 0, "order": 0, "k": 1,
                              "relu": False, "cout": 2, "seed": 1310000})  # fmt: skip
    relu = Layer("act", {"act": "Relu"})
    block = Layer("block", {"groups": "1", "times": 2, "bias": False, "shared": False,
                            "seed": 1310020})  # fmt: skip
    assert_property(Spec((1, 8, 4, 257), (concat, relu, block), seed=1310))


def test_all_zero_output_matched_exactly():
    """cn10ka/1 tiles, x 1x1x2x4: global_pool(op=GlobalMaxPool) -> add(with=branch, pick=2,
    order=1, k=3, relu=False, op=Mul) -> se(order=1, gate=HardSigmoid). The reference output is
    all zeros, so the fp16 rule judges no element: the result's exact zeros pass (the second
    look on the distribution once failed them for having nothing to count)."""
    pool = Layer("global_pool", {"op": "GlobalMaxPool"})
    mul = Layer("add", {"with": "branch", "pick": 2, "order": 1, "k": 3, "relu": False,
                        "seed": 56908020, "op": "Mul"})  # fmt: skip
    se = Layer("se", {"order": 1, "gate": "HardSigmoid", "seed": 56908040})
    assert_property(Spec((1, 1, 2, 4), (pool, mul, se), seed=56908))


def test_gather_then_tile_concatenates_at_rank_5():
    """cn10ka/1 tiles, x 1x1x2x1: gather(axis=2, picks=(11, 0, 0, 4, 11), negative=(False,
    False, True, True, False)) -> repeat(op=Tile, rh=1, rw=3, size=2). TVM tiles through a
    rank-5 tensor, so the pieces of the gather are concatenated at rank 5: each piece's DMA
    had 5 dimensions and the build ended ("rank 5 exceeds the 4 dimensions of a
    descriptor"); they are merged to 4 now. Its Nodes-JSON also failed the schema, which
    refused the negative source stride of the reversed piece."""
    gather = Layer("gather", {"axis": 2, "picks": (11, 0, 0, 4, 11),
                              "negative": (False, False, True, True, False)})  # fmt: skip
    tile = Layer("repeat", {"op": "Tile", "rh": 1, "rw": 3, "size": 2})
    assert_decided_at_partition(Spec((1, 1, 2, 1), (gather, tile), seed=2682))


def _bmm_bn_constant_linear_bn_conv() -> Spec:
    """cn10ka/1 tiles, x 1x1x2x2: bmm(form=shared, self=True, k=1) -> bn() -> const(op=Add,
    side=right, kind=full) -> matmul4(out=1) -> bn() -> conv(cout=7, k=1x1, d=3x3, pads=(2, 2,
    2, 1), bias), found by scripts/fuzz.py --seed 26 (example 1529)."""
    layers = (
        Layer("bmm", {"form": "shared", "self": True, "k": 1, "seed": 4141000}),
        Layer("bn", {"seed": 4141010}),
        Layer("const", {"op": "Add", "side": "right", "kind": "full", "signed": False,
                        "seed": 4141020}),  # fmt: skip
        Layer("matmul4", {"out": 1, "seed": 4141030}),
        Layer("bn", {"seed": 4141040}),
        Layer("conv", conv_params(4141050, 7, (1, 1), d=(3, 3), pads=(2, 2, 2, 1))),
    )
    return Spec((1, 1, 2, 2), layers, seed=4141)


def _run_compiled(model, inputs: list[np.ndarray]) -> list[np.ndarray]:
    import tvm
    from tvm import relax

    import mrvl

    module = mrvl.partition_for_mrvl(mrvl.from_onnx(model), mcpu="cn10ka", num_tiles=1)
    vm = relax.VirtualMachine(mrvl.build(module), tvm.cpu())
    return [vm["main"](tvm.runtime.tensor(x)).numpy() for x in inputs]


def _in_documented_order(model, x: np.ndarray) -> np.ndarray:
    """The six layers in numpy, rounding where docs/isa.md says the MLIP rounds: fp32 sums in
    order of k, one fp32 division for the mean, each bn (with the bmm's scalar Mul) folded into
    one f32 scale and shift after its fc/bmm, each result rounded once to f16."""
    w = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    f16 = lambda a: np.asarray(a, np.float32).astype(np.float16).astype(np.float32)  # noqa: E731

    def dot(row, col):
        acc = np.float32(0)
        for a, b in zip(row, col, strict=True):
            acc = np.float32(acc + np.float32(a * b))
        return acc

    def folded(prefix: str, first: int, scale=np.float32(1)):
        gamma, beta, mean, var = (w[f"{prefix}{first + i}"][0] for i in range(4))
        a = gamma / np.sqrt(var + np.float32(1e-5))
        return np.float32(scale * a), np.float32(beta - mean * a)

    x16 = f16(x)[0, 0]
    means = [f16(dot(x16[:, j], (1, 1)) / np.float32(2)) for j in range(2)]
    raw = np.array([[f16(dot(x16[i], means)) for _ in range(2)] for i in range(2)])
    a, b = folded("L1_bn", 14, w["L0_scale11"])
    y = f16(f16(np.float32(raw * a) + b) + f16(w["L2_k20"][0, 0]))
    y = np.array([f16(dot(y[i], f16(w["L3_w23"][:, 0]))) for i in range(2)])
    a, b = folded("L4_bn", 26)
    y = f16(np.float32(y * a) + b)
    weight, bias = f16(w["L5_w32"].ravel()), w["L5_b33"]
    out = np.broadcast_to(f16(bias)[:, None, None], (7, 6, 4)).copy()
    out[:, 2:4, 2] = f16(np.float32(weight[:, None] * y[None, :]) + bias[:, None])
    return out[None]


def test_self_bmm_bn_full_constant_linear_bn_conv_is_fp16_noise():
    """Was a strict xfail: on the fuzzer's input mrvl missed the fp16 rule, 4.24 % against the
    emulation's 0.39 %, RMS error 3.7x the emulation's. Diagnosed as fp16 noise, not a
    compiler bug:

    - mrvl's bytes are exactly the six layers in isa.md's rounding order (below), so no layer
      (the fused affine order, the bn folded after the bmm and the Linear, the rank-4 constant's
      layout, the bmm's f32 sums) computes anything else;
    - on that input both share the bmm's error (1.1328125 for 1.131936, from the f16 means).
      The emulation rounds the scalar Mul apart from the bn, which the MLIP folds: 0.8010194
      is 1640.49 ulps, so it takes back half an ulp by luck; the MLIP's constant Add then lands
      on an exact tie (1191.5 ulps) that rounds to even away from the true value. The next
      Linear sums two values of ~1.1 to -0.07, so that ulp becomes 1 % there and 4 % on the
      conv output beside a small bias;
    - over other inputs of the same distribution mrvl is as good as the emulation or better.
    """
    from mrvl.fp16_emulation import fp16_emulation_outputs

    spec = _bmm_bn_constant_linear_bn_conv()
    model = build_model(spec)
    rng = np.random.default_rng(0)
    inputs = [input_array(spec)]
    inputs += [rng.standard_normal(spec.input_shape).astype(np.float32) for _ in range(40)]
    results = _run_compiled(model, inputs)
    assert results[0].tobytes() == _in_documented_order(model, inputs[0]).tobytes()

    def rms(a, b):
        return float(np.sqrt(np.mean(np.square(a.astype(np.float64) - b))))

    ours, emulated = [], []
    for x, result in zip(inputs[1:], results[1:], strict=True):
        reference = harness.reference(model, x)[0]
        ours.append(rms(result, reference))
        emulated.append(rms(fp16_emulation_outputs(model, {"x": x})[0], reference))
    assert np.mean(ours) <= 1.1 * np.mean(emulated), (np.mean(ours), np.mean(emulated))
    assert np.median(np.array(ours) / np.array(emulated)) <= 1.0
