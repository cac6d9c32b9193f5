"""`mrvl.build` follows TVM's convention: the executable it returns saves itself."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tvm
from tvm import relax

import mrvl


@pytest.fixture(scope="module")
def executable(mnist_partitioned):
    return mrvl.build(mnist_partitioned)


def _run(lib_or_executable, x: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(lib_or_executable, tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


def test_export_library_reloads_in_a_fresh_process_with_the_same_bits(executable, tmp_path):
    x = np.random.default_rng(1).standard_normal((1, 1, 28, 28)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    executable.export_library(str(tmp_path / "m.so"))
    script = textwrap.dedent(
        f"""
        import numpy as np, tvm
        from tvm import relax
        import mrvl  # registers the runtime that runs the embedded binaries
        vm = relax.VirtualMachine(tvm.runtime.load_module({str(tmp_path / "m.so")!r}), tvm.cpu())
        x = np.load({str(tmp_path / "x.npy")!r})
        np.save({str(tmp_path / "y.npy")!r}, vm["main"](tvm.runtime.tensor(x)).numpy())
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), _run(executable, x))


def test_the_executable_still_runs_and_carries_its_regions(executable):
    assert isinstance(executable, relax.VMExecutable)
    assert executable.library_path.endswith("model.so")
    assert len(executable.mrvl_regions) == 1
    x = np.zeros((1, 1, 28, 28), np.float32)
    np.testing.assert_array_equal(_run(executable, x), _run(executable.jit(), x))
