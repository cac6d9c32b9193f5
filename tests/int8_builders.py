"""What the int8 end-to-end tests (tests/e2e/test_int8_*.py) share (importable as
`int8_builders`: tests/ is on pytest's path): a QDQ model partitioned and built once, how many
quantization steps its build is off onnxruntime running the same QDQ model, and its region run
on both simulator engines."""

from __future__ import annotations

import numpy as np
import onnx
import tvm
from onnx import numpy_helper
from tvm import relax

import mrvl
from mrvl.accuracy import reference_session


def qdq_build(qdq: onnx.ModelProto, num_tiles: int):
    """(partition report, built library) of the QDQ model `qdq` for `num_tiles` tiles (its
    host code for llvm)."""
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(qdq), num_tiles=num_tiles)
    return mrvl.partition_report(mod, qdq), mrvl.build(mod, target="llvm")


class QdqBuilds:
    """One QDQ model's builds, one per tile count, each made on first use: a module fixture
    of it shares them among a file's tests (a build is most of a small int8 test's time)."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self._builds: dict[int, tuple] = {}

    def __call__(self, num_tiles: int):
        """`qdq_build(self.model, num_tiles)`, once."""
        if num_tiles not in self._builds:
            self._builds[num_tiles] = qdq_build(self.model, num_tiles)
        return self._builds[num_tiles]


def output_scale(qdq: onnx.ModelProto) -> float:
    """The scale of the DequantizeLinear that makes the model's (first) output."""
    out = qdq.graph.output[0].name
    inits = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    dq = next(n for n in qdq.graph.node if out in n.output)
    assert dq.op_type == "DequantizeLinear"
    return float(inits[dq.input[1]])


def steps_off_onnxruntime(qdq: onnx.ModelProto, lib, feeds, scale: float) -> np.ndarray:
    """How many steps of `scale` the build `lib` of `qdq` is off onnxruntime running `qdq`,
    per element of the first output, on every feed of `feeds` (one array, flat)."""
    vm = relax.VirtualMachine(lib, tvm.cpu())
    session = reference_session(qdq)
    steps = []
    for feed in feeds:
        got = vm["main"](*[tvm.runtime.tensor(v) for v in feed.values()]).numpy()
        steps.append(np.rint(np.abs(got - session.run(None, feed)[0]) / scale).ravel())
    return np.concatenate(steps)


def assert_region_engines_agree(lib, inputs: list[np.ndarray]) -> None:
    """The one MLIP region of `lib` gives the same bytes on the reference interpreter and on
    the Numba engine, on `inputs`."""
    from mrvl.sim import run

    (region,) = lib.mrvl_regions
    by_interp = run(region.binary, inputs, engine="interp")
    by_numba = run(region.binary, inputs, engine="numba")
    assert len(by_interp) == len(by_numba)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(by_interp, by_numba))
