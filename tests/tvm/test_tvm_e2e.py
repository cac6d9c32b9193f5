"""ONNX → partition → build → VirtualMachine, checked against onnxruntime.

The MLIP computes in fp16, so outputs are compared the way Marvell's tooling does (DESIGN §9):
elements below max|ref|/100 are ignored, the rest must be within 3 % relative.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import onnxruntime as ort
import pytest
import tvm
from tvm import relax

import mrvl
from mrvl import binary


def assert_fp16_accepted(actual: np.ndarray, reference: np.ndarray) -> None:
    assert actual.shape == reference.shape
    significant = np.abs(reference) >= np.abs(reference).max() / 100
    relative = np.abs(actual - reference)[significant] / np.abs(reference)[significant]
    worst = int(np.argmax(relative))
    assert relative.max() <= 0.03, (
        f"{relative.max():.2%} relative error at significant element {worst}: "
        f"{actual[significant][worst]} vs {reference[significant][worst]}"
    )


def onnxruntime_output(model, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {model.graph.input[0].name: x})[0]


def run(executable, x: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(executable, tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


@pytest.fixture(scope="module")
def mnist_input() -> np.ndarray:
    return np.random.default_rng(1).random((1, 1, 28, 28), dtype=np.float32)


@pytest.fixture(scope="module")
def mnist_built(mnist_partitioned, tmp_path_factory):
    return mrvl.build(mnist_partitioned, export_dir=tmp_path_factory.mktemp("mnist"))


def test_mnist_hybrid_matches_onnxruntime(mnist_model, mnist_built, mnist_input):
    actual = run(mnist_built, mnist_input)
    reference = onnxruntime_output(mnist_model, mnist_input)
    assert_fp16_accepted(actual, reference)
    assert actual.argmax() == reference.argmax()


def test_build_exposes_the_compiled_regions(mnist_partitioned, mnist_built):
    (region,) = mnist_built.mrvl_regions
    (symbol,) = [
        gv.name_hint for gv, f in mnist_partitioned.functions_items() if f.attrs.get("Codegen")
    ]
    assert region.symbol == symbol
    program = binary.decode(region.binary)
    assert (program.target, program.num_tiles) == ("cn10ka", 8)
    assert region.nodes_json and region.consts_json is None  # the binary holds the weights
    assert mnist_built.library_path.endswith(".so")


def test_exported_library_gives_the_same_output_in_a_fresh_process(
    mnist_built, mnist_input, tmp_path
):
    np.save(tmp_path / "x.npy", mnist_input)
    script = textwrap.dedent(
        f"""
        import numpy as np, tvm
        from tvm import relax
        import mrvl  # registers mrvl.runtime.run_region
        vm = relax.VirtualMachine(tvm.runtime.load_module({mnist_built.library_path!r}), tvm.cpu())
        x = np.load({str(tmp_path / "x.npy")!r})
        np.save({str(tmp_path / "y.npy")!r}, vm["main"](tvm.runtime.tensor(x)).numpy())
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), run(mnist_built, mnist_input))


def test_build_overrides_the_partition_target(mnist_partitioned, mnist_model, mnist_input):
    executable = mrvl.build(mnist_partitioned, mcpu="cnf10kb", num_tiles=4)
    (region,) = executable.mrvl_regions
    program = binary.decode(region.binary)
    assert (program.target, program.num_tiles) == ("cnf10kb", 4)
    assert_fp16_accepted(run(executable, mnist_input), onnxruntime_output(mnist_model, mnist_input))


def test_build_rejects_a_bad_override(mnist_partitioned):
    with pytest.raises(ValueError, match="num_tiles must be one of"):
        mrvl.build(mnist_partitioned, num_tiles=3)


def test_partition_target_reaches_the_compiler(mnist_relax):
    executable = mrvl.build(mrvl.partition_for_mrvl(mnist_relax, mcpu="cnf10kb", num_tiles=2))
    (region,) = executable.mrvl_regions
    program = binary.decode(region.binary)
    assert (program.target, program.num_tiles) == ("cnf10kb", 2)


def test_compiler_error_keeps_its_type_and_node(onnx_model):
    """An error inside the codegen hook crosses TVM's FFI; `build` re-raises the original."""
    from onnx import helper

    relu = helper.make_node("Relu", ["x"], ["y"], name="/act/Relu")
    imported = mrvl.from_onnx(onnx_model([relu], {"x": [1, 4]}, {"y": [1, 4]}))
    # A hand-made region holding a bare relu, which no MLIP layer pattern covers.
    region = imported["main"].with_attr("Codegen", "mrvl").with_attr("global_symbol", "relu_region")
    bb = relax.BlockBuilder()
    region_var = bb.add_func(region, "relu_region")
    x = relax.Var("x", relax.TensorType((1, 4), "float32"))
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(relax.Call(region_var, [x])))
    with pytest.raises(mrvl.UnsupportedOpError, match="relax.nn.relu") as raised:
        mrvl.build(bb.get())
    assert raised.value.node == "/act/Relu"
