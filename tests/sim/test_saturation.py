"""Saturation and NaN counts (docs/isa.md §4, "Counted"): exact per instruction on both
engines, and a run that saturated says so with a SaturationWarning naming the ONNX nodes,
through `mrvl.sim.run`, the TVM runtime, `mrvl-sim` and `mrvlc --run`."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sim_builders import Staging, add, cvt, instruction, layer_program

from mrvl.act_tables import activation_table
from mrvl.binary import encode
from mrvl.isa import Activation, DType, IOEntry, Program
from mrvl.sim import RunStats, SaturationWarning, prepare, run

ENGINES = ["interp", "numba"]
F16_MAX = 65504.0


def counted(program, inputs=(), engine="interp") -> RunStats:
    stats = RunStats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SaturationWarning)
        run(prepare(program), list(inputs), engine=engine, stats=stats)
    return stats


def add_program(a, b, act=Activation.NONE, act_a=0.0, act_b=0.0) -> Program:
    """out = f16(act(a + b)) for f16 vectors, one `add` (after a `lut` for a table)."""
    staging = Staging()
    a_addr = staging.add(np.asarray(a, np.float16))
    b_addr = staging.add(np.asarray(b, np.float16))
    count = len(a)
    out_addr = staging.reserve(2 * count)
    fields = dict(act=int(act), act_a=act_a, act_b=act_b)
    code = []
    if act in (Activation.SIGMOID, Activation.SILU):
        code.append(
            instruction("lut", src_addr=staging.add(activation_table(act, act_a, act_b)), **fields)
        )
    code.append(add(a_addr, b_addr, out_addr, count, loc=0, **fields))
    return layer_program(staging, code, out_addr, (count,), srcmap=["/net/Add"])


@pytest.mark.parametrize("engine", ENGINES)
def test_add_counts_values_beyond_the_f16_range_and_nans(engine):
    inf = np.inf
    a = [65504, 65504, -65504, inf, np.nan, 1, 60000, 1e-3, inf, 32752]
    b = [65504, 0, -65504, 0, 0, 1, 5000, 0, -inf, 32752]
    # sums: 131008 (sat), 65504 (exactly the max: not counted), -131008 (sat), inf (sat),
    # NaN, 2, 65000 (rounds inside the range), 0.001, inf - inf = NaN, 65504 (not counted)
    stats = counted(add_program(a, b), engine=engine)
    assert stats.saturated.tolist() == [0, 3, 0, 0]  # dma in, add, dma out, end
    assert stats.nans.tolist() == [0, 2, 0, 0]
    assert stats.by_node(prepare(add_program(a, b)).program) == {"/net/Add": (3, 2)}


@pytest.mark.parametrize("engine", ENGINES)
def test_activation_acts_before_the_count(engine):
    """RELU makes -131008 a zero: only what is stored counts."""
    stats = counted(add_program([-65504, 65504], [-65504, 65504], Activation.RELU), engine=engine)
    assert stats.saturated.sum() == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_a_table_activation_counts_what_reaches_its_output(engine):
    """The index f16(acc) saturates for both; SILU's entry is then 65504 (counted), SIGMOID's
    is 1.0 (the right answer, not counted). A NaN accumulator gives a NaN entry."""
    a, b = [65504, -65504, np.nan, 1], [65504, -65504, 0, 0]
    silu = counted(add_program(a, b, Activation.SILU), engine=engine)
    sigmoid = counted(add_program(a, b, Activation.SIGMOID), engine=engine)
    # SILU(-65504) is -0.0: the saturated negative input does not reach the output
    assert (silu.saturated.sum(), silu.nans.sum()) == (1, 1)
    assert (sigmoid.saturated.sum(), sigmoid.nans.sum()) == (0, 1)


@pytest.mark.parametrize("engine", ENGINES)
def test_cvt_to_f16_counts(engine):
    x = np.array([[[[1e6, -1e6, np.inf, np.nan, 65504, 3.0]]]], np.float32)
    program = Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=64,
        io=[IOEntry("x", True, x.shape, DType.F32, 0), IOEntry("y", False, x.shape, DType.F16, 32)],
        code=[
            cvt(0, DType.F32, x.shape, 32, DType.F16, (0, 1, 2, 3)),
            instruction("end"),
        ],
        const_base=0,
        consts=b"",
        srcmap=[],
    )
    stats = counted(program, [x], engine=engine)
    assert (stats.saturated.tolist(), stats.nans.tolist()) == ([3, 0], [1, 0])
    assert stats.by_node(program) == {"cvt (no ONNX node)": (3, 1)}


def test_run_warns_naming_the_node_even_without_stats():
    program = add_program([65504, 1], [65504, 1])
    with pytest.warns(SaturationWarning) as caught:
        run(program, [], engine="numba")
    (message,) = [str(w.message) for w in caught]
    assert message == (
        "the simulated run stored 1 values saturated at +-65504, so its outputs may be wrong; "
        "in 1 layer: '/net/Add' (1 saturated)"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at all for a run that stays in range
        run(add_program([1, 2], [3, 4]), [], engine="numba")


# ------------------------------------------------------------------- a model, end to end


@pytest.fixture(scope="module")
def mnist_lib(mnist_model):
    import mrvl

    return mrvl.build(mrvl.partition_for_mrvl(mrvl.from_onnx(mnist_model)))


def vm_run(lib, x):
    import tvm
    from tvm import relax

    vm = relax.VirtualMachine(lib, tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_model_run_on_a_scaled_input_names_the_saturated_layers(mnist_lib, engine):
    from mrvl.sim import use_engine

    x = np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32)
    with use_engine(engine), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vm_run(mnist_lib, x)
        assert [w for w in caught if issubclass(w.category, SaturationWarning)] == []
        vm_run(mnist_lib, x * 1e6)
    (warning,) = [w for w in caught if issubclass(w.category, SaturationWarning)]
    message = str(warning.message)
    assert "values saturated at +-65504" in message
    assert "'/conv1/Conv' (" in message and "'/conv2/Conv' (" in message


def test_the_counts_agree_between_engines_on_a_model(mnist_lib):
    (region,) = mnist_lib.mrvl_regions
    valid = prepare(region.program)
    x = np.random.default_rng(1).standard_normal((1, 1, 28, 28)).astype(np.float32) * 1e5
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, 1e30]
    interp, compiled = counted(valid, [x], "interp"), counted(valid, [x], "numba")
    assert interp.saturated.sum() > 0 and interp.nans.sum() > 0
    np.testing.assert_array_equal(compiled.saturated, interp.saturated)
    np.testing.assert_array_equal(compiled.nans, interp.nans)


def test_a_saturation_warning_filtered_into_an_error_crosses_the_vm(mnist_lib):
    x = np.full((1, 1, 28, 28), 1e6, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SaturationWarning)
        with pytest.raises(SaturationWarning, match="/conv1/Conv"):
            vm_run(mnist_lib, x)


def test_mrvl_sim_prints_the_warning_as_one_line(mnist_lib, tmp_path, capsys):
    from mrvl.tools.mrvl_sim import main

    (region,) = mnist_lib.mrvl_regions
    path = tmp_path / "mnist.bin"
    path.write_bytes(encode(region.program))
    x = np.random.default_rng(0).standard_normal((1, 1, 28, 28)).astype(np.float32)
    for name, value in (("x", x), ("big", x * 1e6)):
        np.save(tmp_path / f"{name}.npy", value)
    assert main([str(path), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "a")]) == 0
    assert capsys.readouterr().err == ""
    assert main([str(path), "-i", str(tmp_path / "big.npy"), "-o", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert err.startswith("mrvl-sim: warning: the simulated run stored ")
    assert err.count("\n") == 1 and "'/conv1/Conv'" in err


def test_mrvlc_run_prints_the_warning_as_one_line(tmp_path, capsys):
    """A 1x1 conv with weights of 3e4 on a random input: most sums lie beyond the f16 range."""
    import onnx
    from onnx import TensorProto, helper

    from mrvl.models.mnist import ONNX_IR_VERSION
    from mrvl.tools import mrvlc

    weights = helper.make_tensor("w", TensorProto.FLOAT, (4, 8, 1, 1), [3e4] * 32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="/big/Conv")],
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 4, 4))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4, 4, 4))],
        [weights],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=ONNX_IR_VERSION
    )
    onnx.save(model, tmp_path / "big.onnx")
    mrvlc.main([str(tmp_path / "big.onnx"), "-o", str(tmp_path / "out"), "--run"])
    warned = [ln for ln in capsys.readouterr().err.splitlines() if "saturated" in ln]
    assert len(warned) == 1
    assert warned[0].startswith("mrvlc: warning: the simulated run stored ")
    assert warned[0].endswith(" saturated)") and "in 1 layer: '/big/Conv' (" in warned[0]
