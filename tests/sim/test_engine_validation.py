"""Validation stops a bad program before either engine runs (or a corrupt one runs the same on
both), and the engine is chosen as documented."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sim_builders import (
    copy_bytes,
    corrupt_and_run_both,
    dma,
    multicast_program,
    valid_conv_program,
)

import mrvl.sim.engines.numba as numba_engine
from mrvl.isa import (
    MemSpace,
)
from mrvl.sim import (
    ENGINE_ENV,
    SimulatorError,
    SimulatorInputError,
    run,
    simulator_wall_time,
    use_engine,
    validate,
)

# The generated programs saturate and make NaNs on purpose; the warning is tested on its own.
pytestmark = pytest.mark.filterwarnings("ignore::mrvl.sim.SaturationWarning")


# ------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("w_addr", 1 << 18, r"weights \[0x40000, .* outside tile 0's OCM"),
        ("in_addr", -2, "input window .* outside"),
        ("out_addr", (1 << 18) - 2, "output tile .* outside"),
        ("b_addr", (1 << 18) - 4, "bias .* outside"),
        ("kernel", (0, 3), r"kernel=\[0, 3\] breaks `kernel\[d\] >= 1` \(d = 0\)"),
        ("groups", 3, r"groups=3 breaks `in_shape\[3\] % groups == 0`"),
        ("act", 99, "act=99 is not a valid Activation"),
        ("in_shape", (1, 3, 3), "field in_shape must hold 4 integers"),
        ("oc0", 1, r"oc0=1 breaks `0 <= oc0 <= oc_total - out_shape\[3\]`"),
        ("stride", (1, 2**31), "field stride must hold 32-bit integers"),
    ],
)
@pytest.mark.parametrize("engine", ["numba", "interp"])
def test_a_corrupt_instruction_fails_validation_before_any_engine_runs(
    field, value, message, engine
):
    program = valid_conv_program()
    program.code[1].fields[field] = value
    pattern = rf"instruction 1 \(conv, ONNX node '/c/Conv'\): {message}"
    with pytest.raises(SimulatorError, match=pattern):
        validate(program)
    with simulator_wall_time() as spent, pytest.raises(SimulatorError, match=pattern):
        run(program, [], engine=engine)
    assert spent.calls == 0  # no run was recorded: nothing executed


def test_dma_outside_ddr_and_overlapping_writes_fail_validation():
    bad = copy_bytes(MemSpace.OCM, 0, MemSpace.DDR, (1 << 20) - 4, 8, loc=0)
    program = valid_conv_program()
    program.code.insert(1, bad)
    with pytest.raises(
        SimulatorError, match=r"instruction 1 \(dma.*destination box .* outside DDR"
    ):
        validate(program)
    overlap = dma(MemSpace.DDR, 0, (0, 0, 2, 1), MemSpace.OCM, 0, (0, 0, 1, 1), (1, 1, 4, 2), 1)
    program = valid_conv_program()
    program.code.insert(1, overlap)
    with pytest.raises(SimulatorError, match="overlap"):
        validate(program)


@pytest.mark.parametrize(
    "tile, mask, spaces, nbytes, message",
    [
        (0, 0b110, "DDR OCM", 8, r"dst_tiles=0x6 does not include the instruction's own tile 0"),
        (1, 0b1010, "DDR OCM", 8, r"dst_tiles=0xa names tile 3 >= num_tiles 3"),
        (2, -1, "DDR OCM", 8, r"dst_tiles=0xffffffff names tile 3 >= num_tiles 3"),
        (0, 0b11, "DDR DDR", 8, r"dst_tiles=0x3: only a dma from DDR to OCM .* from DDR to DDR"),
        (0, 0b11, "OCM OCM", 8, r"dst_tiles=0x3: only a dma from DDR to OCM .* from OCM to OCM"),
        (0, 0b11, "OCM DDR", 0, r"dst_tiles=0x3: only a dma from DDR to OCM .* from OCM to DDR"),
    ],
)
def test_a_bad_multicast_fails_validation(tile, mask, spaces, nbytes, message):
    """dst_tiles must include the dma's own tile, name only tiles < num_tiles, and copy from
    DDR to OCM; an empty box is no exception."""
    src, dst = (MemSpace[name] for name in spaces.split())
    program = multicast_program(True)
    program.code[0] = copy_bytes(src, 0, dst, 0x800, nbytes, tile=tile, dst_tiles=mask, loc=0)
    pattern = rf"instruction 0 \(dma, ONNX node '/m/Load'\): {message}"
    with pytest.raises(SimulatorError, match=pattern):
        validate(program)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(data=st.data())
def test_random_corruption_is_rejected_or_runs_the_same_on_both_engines(data):
    """Any integer field of the conv program set to an arbitrary value: validation rejects it
    with SimulatorError, or both engines run it to the same bytes (and neither crashes)."""
    program = valid_conv_program()
    index = data.draw(st.integers(0, len(program.code) - 1))
    corrupt_and_run_both(data, program, program.code[index])


# --------------------------------------------------------------------------- engine choice


def test_engine_choice_environment_context_and_argument(monkeypatch):
    program = valid_conv_program()
    with simulator_wall_time() as spent:
        monkeypatch.setenv(ENGINE_ENV, "interp")
        run(program, [])
        monkeypatch.delenv(ENGINE_ENV)
        run(program, [])  # the default
        with use_engine("interp"):
            run(program, [])
            run(program, [], engine="numba")  # an explicit argument wins
    assert spent.calls == 4
    assert set(spent.by_engine) == {"interp", "numba"}
    monkeypatch.setenv(ENGINE_ENV, "fast")
    with pytest.raises(SimulatorInputError, match=r"\$MRVL_SIM_ENGINE='fast' is not a simulator"):
        run(program, [])
    with pytest.raises(SimulatorInputError, match="engine='gpu'"):
        run(program, [], engine="gpu")


def test_numba_cache_lives_in_the_users_cache_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert numba_engine.cache_dir().parent == tmp_path / "mrvl" / "numba"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert numba_engine.cache_dir().parent == tmp_path / "elsewhere"


def test_interpreter_progress_bar_is_silent_off_a_terminal(capfd):
    """The tqdm bar of long interpreter runs goes to stderr only when it is a terminal."""
    from mrvl.sim.engines import reference

    assert reference._progress(10).disable  # pytest's stderr is not a terminal
    run(valid_conv_program(), [], engine="interp")
    assert capfd.readouterr().err == ""


def test_a_validated_program_keeps_its_target():
    from mrvl.sim import prepare

    valid = prepare(valid_conv_program())
    with pytest.raises(SimulatorInputError, match="already validated for cn10ka"):
        run(valid, [], target="cnf10kb")
