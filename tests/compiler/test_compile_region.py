"""compile_region on real Relax regions: the binary, its round trip, and its numbers."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import onnxruntime_outputs, region_functions, truncated_at

from mrvl import binary
from mrvl.accuracy import fp16_agreement
from mrvl.assembler import assemble, disassemble
from mrvl.compiler import compile_region
from mrvl.errors import CompileError, UnsupportedOpError
from mrvl.sim import run


@pytest.fixture(scope="module")
def mnist_region(mnist_partitioned):
    regions = list(region_functions(mnist_partitioned))
    assert len(regions) == 1, "the MNIST model should be one region (all but the softmax)"
    return regions[0][1]


@pytest.fixture(scope="module")
def compiled(mnist_region):
    return compile_region(mnist_region, keep_stages=True, verify_each_pass=True)


def test_region_matches_onnxruntime_logits(compiled, mnist_model):
    x = np.random.default_rng(3).standard_normal((1, 1, 28, 28)).astype(np.float32)
    (logits,) = run(compiled.binary, [x])
    (reference,) = onnxruntime_outputs(truncated_at(mnist_model, "logits"), {"input": x})
    agreement = fp16_agreement(logits, reference)
    assert agreement.passed, str(agreement)


def test_binary_disassembles_and_reassembles_byte_identical(compiled):
    module = disassemble(binary.decode(compiled.binary))
    module.verify()
    assert binary.encode(assemble(module)) == compiled.binary


def test_every_instruction_carries_its_onnx_node(compiled):
    program = compiled.program
    names = {program.srcmap[i.loc] for i in program.code if i.opcode in ("conv", "pool", "fc")}
    assert names == {
        "/conv1/Conv",
        "/pool1/MaxPool",
        "/conv2/Conv",
        "/pool2/MaxPool",
        "/fc1/Gemm",
        "/fc2/Gemm",
    }


def test_stages_are_kept_with_locations(compiled):
    assert (
        "mrvl.conv2d" in compiled.stages["mrvl"] and 'loc("/conv1/Conv")' in compiled.stages["mrvl"]
    )
    assert (
        "sched.dma" in compiled.stages["sched"] and 'loc("/fc1/Gemm")' in compiled.stages["sched"]
    )
    assert "mlip.conv tile 0" in compiled.stages["mlip"]


def test_large_fc_is_tiled_over_output_features(compiled):
    # fc1's 256x1568 f16 weights (800 KB) exceed one tile's 256 KiB of OCM
    fc1 = [
        i
        for i in compiled.program.code
        if i.opcode == "fc" and compiled.program.srcmap[i.loc] == "/fc1/Gemm"
    ]
    assert len(fc1) > 1
    assert sum(i.fields["o"] for i in fc1) == 256


@pytest.mark.parametrize("num_tiles", [1, 2])
def test_num_tiles_bounds_the_tiles_used(mnist_region, num_tiles):
    region = compile_region(mnist_region, num_tiles=num_tiles)
    assert {i.tile for i in region.program.code} == set(range(num_tiles))
    assert region.program.num_tiles == num_tiles


def test_target_and_options_are_the_sched_programs_properties(mnist_region, compiled):
    assert 'sched.program mcpu("cn10ka") tiles(8) symbol(' in compiled.stages["sched"]
    assert "wb_pin_ocm" not in compiled.stages["sched"]
    pinned = compile_region(
        mnist_region, num_tiles=2, wb_pin_ocm=True, cascade=True, keep_stages=True
    )
    assert 'mcpu("cn10ka") tiles(2)' in pinned.stages["sched"]
    assert ") wb_pin_ocm cascade ddr_size(" in pinned.stages["sched"]
    plain = compile_region(mnist_region, num_tiles=2, keep_stages=True)  # cascade off by default
    assert ") ddr_size(" in plain.stages["sched"]


def test_dump_dir_has_one_file_per_pass(mnist_region, tmp_path):
    compile_region(mnist_region, dump_dir=tmp_path)
    names = sorted(p.name.split(".", 1)[1] for p in tmp_path.iterdir())
    assert names == [
        "00-import.mlir",
        "01-mrvl-fold-qdq.mlir",
        "02-mrvl-verify-int8.mlir",
        "03-mrvl-cast-fp16.mlir",
        "04-mrvl-canonicalize.mlir",
        "05-mrvl-fold-flatten-into-fc.mlir",
        "06-mrvl-split-batch.mlir",
        "07-sched-plan-tiling.mlir",
        "08-convert-mrvl-to-sched.mlir",
        "09-sched-fuse-converts.mlir",
        "10-sched-pin-weights.mlir",
        "11-sched-cascade.mlir",
        "12-sched-pipeline.mlir",
        "13-sched-multicast.mlir",
        "14-sched-allocate.mlir",
        "15-sched-verify-allocation.mlir",
        "16-sched-insert-sync.mlir",
        "17-convert-sched-to-mlip.mlir",
    ]


def test_unknown_mcpu_is_a_clear_error(mnist_region):
    with pytest.raises(ValueError, match="unknown mcpu 'cn99'"):
        compile_region(mnist_region, mcpu="cn99")


def test_bad_num_tiles_is_a_compile_error(mnist_region):
    with pytest.raises(CompileError, match="num_tiles=3"):
        compile_region(mnist_region, num_tiles=3)


def test_op_outside_an_mlip_layer_names_its_onnx_node(mnist_model):
    """A region that (wrongly) holds a composite no MLIP layer reads fails with the node's
    name (mrvl.softmax is a layer now: the composite here has another name)."""
    import tvm
    from tvm import relax
    from tvm.relax.dpl import is_op, wildcard

    import mrvl

    mod = relax.transform.FoldConstant()(mrvl.from_onnx(mnist_model))
    pattern = relax.transform.FusionPattern("mrvl.log_softmax", is_op("relax.nn.softmax")(wildcard()))
    mod = tvm.transform.Sequential(
        [
            relax.transform.FuseOpsByPattern(
                [pattern], bind_constants=True, annotate_codegen=False
            ),
            relax.transform.MergeCompositeFunctions(),
        ]
    )(mod)
    ((_, region),) = region_functions(mod)
    with pytest.raises(UnsupportedOpError, match="/softmax/Softmax") as info:
        compile_region(region)
    assert info.value.node == "/softmax/Softmax"


def test_mrvlc_wb_pin_ocm_reaches_the_sched_program(mnist_model, tmp_path, capsys):
    import onnx

    from mrvl.tools import mrvlc

    path = tmp_path / "mnist.onnx"
    onnx.save(mnist_model, path)
    assert mrvlc.main([str(path), "--emit", "sched", "--num-tiles", "2", "--wb-pin-ocm"]) == 0
    out = capsys.readouterr().out
    assert 'sched.program mcpu("cn10ka") tiles(2) symbol("mrvl_region_0") wb_pin_ocm' in out
