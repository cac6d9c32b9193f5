"""Models TVM imports that once ended the build with an internal error or a wrong report,
each built in code and run through the whole flow against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import tvm
from helpers import float_model, onnxruntime_outputs
from onnx import helper, numpy_helper
from tvm import relax

import mrvl
from mrvl.accuracy import fp16_agreement
from mrvl.binary import decode

node = helper.make_node


def _model(nodes, inits, x_shape, y_shape) -> onnx.ModelProto:
    return float_model(
        nodes, inits, [("x", x_shape)], [("y", y_shape)], name="robust", opset=17
    )


def _weights(name, shape, seed=0, scale=0.3):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _run_and_compare(onnx_model, mod, x_shape, **build_options):
    lib = mrvl.build(mod, **build_options)
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    result = relax.VirtualMachine(lib, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    (reference,) = onnxruntime_outputs(onnx_model, {"x": x})
    agreement = fp16_agreement(result, reference)
    assert agreement.passed, str(agreement)
    return lib


def shared_weight_net():
    """Two identical conv+relu layers (one weight initializer) in one region, and two
    identical Mul-by-constant layers on either side of a CPU-only op (Cos; a Softmax was
    this op until the MLIP ran softmax): TVM shares identical
    composite functions, which emitted one constant twice and reported the second call
    site's nodes as folded away."""
    nodes = [
        node("Conv", ["x", "w"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Relu", ["c1"], ["r1"], name="relu1"),
        node("Conv", ["r1", "w"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Relu", ["c2"], ["r2"], name="relu2"),
        node("Mul", ["r2", "s"], ["m1"], name="mul1"),
        node("Cos", ["m1"], ["sm"], name="cpu_op"),
        node("Mul", ["sm", "s"], ["m2"], name="mul2"),
        node("Conv", ["m2", "w"], ["c3"], name="conv3", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Relu", ["c3"], ["y"], name="relu3"),
    ]
    s = numpy_helper.from_array(np.full((1, 4, 1, 1), 0.5, np.float32), "s")
    return _model(nodes, [_weights("w", (4, 4, 3, 3)), s], [1, 4, 6, 6], [1, 4, 6, 6])


def test_reused_composites_compile_once_per_call_site():
    onnx_model = shared_weight_net()
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model), num_tiles=2)
    report = mrvl.partition_report(mod)
    targets = {row.node: row.target for row in report.rows}
    assert targets["cpu_op"] == "cpu"
    assert all(t.startswith("mrvl_region_") for n, t in targets.items() if n != "cpu_op"), targets
    assert targets["conv1"] == targets["conv2"] != targets["conv3"]
    assert all(row.macs == 4 * 6 * 6 * 4 * 9 for row in report.rows if row.op_type == "Conv")

    lib = _run_and_compare(onnx_model, mod, [1, 4, 6, 6])
    # Every call site's instructions name its own ONNX node.
    named = {name for region in lib.mrvl_regions for name in region.program.srcmap}
    assert {"conv1", "conv2", "conv3", "mul1", "mul2"} <= named, named


def _conv_net(x_shape, w_shape, y_shape, **attrs):
    nodes = [node("Conv", ["x", "w", "b"], ["c"], name="conv", **attrs)]
    nodes.append(node("Relu", ["c"], ["y"], name="relu"))
    inits = [_weights("w", w_shape, scale=0.1), _weights("b", (w_shape[0],), seed=2)]
    return _model(nodes, inits, x_shape, y_shape)


# (x, w, y, conv attributes): layers one whole output row of which does not fit a tile.
BIG_LAYERS = {
    # grouped: each piece loads only its groups' input channels (all 480 are 460 KB)
    "depthwise_5x5_480ch": (
        [1, 480, 6, 80], [480, 1, 5, 5], [1, 480, 6, 80],
        {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2], "group": 480},
    ),
    "grouped_3x3_2groups": (
        [1, 96, 5, 500], [64, 48, 3, 3], [1, 64, 5, 500],
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 2},
    ),
    # an 11x11 kernel over a wide input: pieces of a few output columns
    "wide_11x11": (
        [1, 16, 12, 800], [4, 16, 11, 11], [1, 4, 1, 198],
        {"kernel_shape": [11, 11], "strides": [4, 4], "pads": [0, 1, 0, 2]},
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", BIG_LAYERS)
def test_layers_larger_than_a_tile_are_tiled_further(name):
    x_shape, w_shape, y_shape, attrs = BIG_LAYERS[name]
    onnx_model = _conv_net(x_shape, w_shape, y_shape, **attrs)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model), num_tiles=2)
    report = mrvl.partition_report(mod)
    assert [row.target for row in report.rows] == ["mrvl_region_0"] * 2, str(report)
    _run_and_compare(onnx_model, mod, x_shape)


def test_a_layer_that_cannot_fit_stays_on_the_cpu_with_the_bytes_in_the_report():
    """A grouped conv whose weights of one output channel (3x3 over the 8192 channels of its
    group) are 147 KB, more than a cnf10kb tile's 128 KB; only a conv without groups is cut
    into input-channel blocks."""
    onnx_model = _conv_net(
        [1, 16384, 3, 3], [2, 8192, 3, 3], [1, 2, 3, 3],
        kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=2,
    )  # fmt: skip
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model), mcpu="cnf10kb", num_tiles=4)
    rows = {row.node: row for row in mrvl.partition_report(mod).rows}
    assert rows["conv"].target == "cpu"
    assert rows["conv"].reason == (
        "does not fit on chip: one output element needs 294918 bytes of OCM, a tile of "
        "cnf10kb has 131072"
    )
    _run_and_compare(onnx_model, mod, [1, 16384, 3, 3])


@pytest.mark.parametrize(
    "stage",
    [
        "mrvl.relax_import._LAYERS.mrvl.conv2d",
        "mrvl.passes.sched.lowering.window._LowerWindowLayer.lower",
        "mrvl.passes.isa.convert_sched_to_mlip.SelectionState.window_fields",
    ],
)
def test_an_internal_error_becomes_an_mrvl_error_naming_the_layer(stage, monkeypatch, tmp_path):
    """A bug inside one layer's compilation reaches `mrvl.build` and `mrvlc` as an
    `InternalCompilerError` (an `MrvlError`) naming the layer's ONNX node."""
    import importlib

    from mrvl.errors import InternalCompilerError
    from mrvl.tools import mrvlc

    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    if "._LAYERS." in stage:  # the importer's table of layer handlers
        module_name, kind = stage.split("._LAYERS.")
        monkeypatch.setitem(importlib.import_module(module_name)._LAYERS, kind, broken)
    else:
        module_name, cls_name, method = stage.rsplit(".", 2)
        monkeypatch.setattr(getattr(importlib.import_module(module_name), cls_name), method, broken)
    onnx_model = _conv_net([1, 4, 6, 6], [4, 4, 3, 3], [1, 4, 6, 6], kernel_shape=[3, 3])
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model))
    with pytest.raises(InternalCompilerError, match=r"ZeroDivisionError: boom") as caught:
        mrvl.build(mod)
    assert caught.value.node == "conv"
    assert "(ONNX node 'conv')" in str(caught.value)

    path = tmp_path / "m.onnx"
    onnx.save(onnx_model, path)
    assert mrvlc.main([str(path), "-o", str(tmp_path / "out")]) == 1


def test_mrvlc_writes_the_json_files_it_streams(tmp_path):
    import json

    from mrvl import json_schema
    from mrvl.tools import mrvlc

    onnx_model = _conv_net([1, 4, 6, 6], [4, 4, 3, 3], [1, 4, 6, 6], kernel_shape=[3, 3])
    path = tmp_path / "m.onnx"
    onnx.save(onnx_model, path)
    assert mrvlc.main([str(path), "-o", str(tmp_path / "out")]) == 0
    nodes = json.loads((tmp_path / "out" / "mrvl_region_0-nodes.json").read_text())
    consts = json.loads((tmp_path / "out" / "mrvl_region_0-consts.json").read_text())
    json_schema.validate(nodes, consts)
    assert len(consts) == 2  # the conv's weights and bias


def test_region_inputs_of_one_ssa_name_get_distinct_io_names():
    """ONNX inputs `a/b` and `a:b` are both `a_b` as SSA names (and a partitioned module can
    pass a region two parameters TVM named alike: EfficientNet-B0 with its Sigmoids denied,
    `lv9` twice): the program's inputs were both named so and the build failed ('mlip.io:
    the name ... is used twice'). They are `a_b` and `a_b.1` now, bound in order."""
    shape = [1, 4, 2, 2]
    nodes = [helper.make_node("Sub", ["a/b", "a:b"], ["y"], name="sub")]
    model = float_model(
        nodes, [], [("a/b", shape), ("a:b", shape)], [("y", shape)], name="names", opset=17
    )
    lib = mrvl.build(mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=1), num_tiles=1)
    (region,) = lib.mrvl_regions
    assert [e.name for e in region.program.inputs] == ["a_b", "a_b.1"]
    a, b = (np.random.default_rng(s).standard_normal(shape).astype(np.float32) for s in (0, 1))
    main = relax.VirtualMachine(lib, tvm.cpu())["main"]
    result = main(tvm.runtime.tensor(a), tvm.runtime.tensor(b))
    (reference,) = onnxruntime_outputs(model, {"a/b": a, "a:b": b})
    assert fp16_agreement(result.numpy(), reference).passed


def test_input_channel_blocks_continue_the_accumulation_bit_exactly():
    """A 3x3 conv over 4096 channels: one output channel's weights (73 KB) and input (73 KB)
    do not fit a cnf10kb tile (128 KB) together, so the conv is cut into blocks of input
    channels carrying fp32 partial sums; on cn10ka (256 KB) the priced plan chooses its own
    cut (blocks of other sizes, or none). Both binaries give the same bits, and the model
    matches onnxruntime."""
    from helpers import region_functions

    from mrvl import sim
    from mrvl.compiler import compile_region

    onnx_model = _conv_net(
        [1, 4096, 3, 3], [4, 4096, 3, 3], [1, 4, 3, 3], kernel_shape=[3, 3], pads=[1, 1, 1, 1]
    )
    x = np.random.default_rng(3).standard_normal([1, 4096, 3, 3]).astype(np.float32)
    outputs = {}
    for mcpu in ("cn10ka", "cnf10kb"):
        mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model), mcpu=mcpu, num_tiles=2)
        ((_, func),) = region_functions(mod)
        region = compile_region(func, keep_stages=True)
        if mcpu == "cnf10kb":
            assert "acc_out" in region.stages["sched"]
        (outputs[mcpu],) = sim.run(region.binary, [x])
    assert outputs["cn10ka"].tobytes() == outputs["cnf10kb"].tobytes()
    _run_and_compare(onnx_model, mod, [1, 4096, 3, 3])


def test_a_global_pool_too_large_for_a_tile_is_split_into_bands():
    """A squeeze-excitation gate over a 400x400 plane (an EfficientNet U-Net at high
    resolution): the global pool's one output row needs the whole plane in a tile's OCM
    (320,002 bytes a channel, cn10ka has 262,144), so the window pool cannot take it (the
    build once ended with the tiler's DoesNotFit, then kept it on the CPU); the reduction
    takes it, in bands of the plane with fp32 partials, and the whole gate is one region."""
    x_shape = [1, 2, 400, 400]
    nodes = [
        node("GlobalAveragePool", ["x"], ["g"], name="gap"),
        node("Sigmoid", ["g"], ["s"], name="gate"),
        node("Mul", ["x", "s"], ["y"], name="scale"),
    ]
    model = _model(nodes, [], x_shape, x_shape)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), mcpu="cn10ka")
    rows = {row.node: row for row in mrvl.partition_report(mod).rows}
    assert {rows[n].target for n in ("gap", "gate", "scale")} == {"mrvl_region_0"}
    lib = _run_and_compare(model, mod, x_shape)
    (region,) = lib.mrvl_regions
    reduces = [i for i in decode(region.binary).code if i.opcode == "reduce"]
    # each channel's plane in bands: all but the last write fp32 partials
    assert len(reduces) > 2 and [i.fields["acc_out"] for i in reduces].count(0) == 2
