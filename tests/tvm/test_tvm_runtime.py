"""The TVM glue without the compiler: a hand-written model binary in a region module.

A region module (`mrvl.byoc.region_module`) embeds a binary and calls
`mrvl.runtime.run_region`, which decodes it and runs it on the simulator. These tests drive
that path through a real Relax VM with a binary that copies its input to its output.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax

import mrvl
from mrvl import binary
from mrvl.binary import BinaryFormatError
from mrvl.byoc import region_module
from mrvl.isa import DType, Instruction, IOEntry, MemSpace, Program
from mrvl.runtime import RegionRuntimeError
from mrvl.sim import SimulatorError

SHAPE = (1, 4)


def copy_program(shape=SHAPE, *, const_bytes: int = 0, src_addr: int | None = None) -> Program:
    """y = x for f32 tensors: one DDR-to-DDR DMA. `const_bytes` pads the constant pool."""
    nbytes = int(np.prod(shape)) * 4
    dma = Instruction(
        "dma",
        tile=0,
        fields=dict(
            src_space=int(MemSpace.DDR), src_addr=0 if src_addr is None else src_addr,
            src_strides=(0, 0, 0, 1), dst_space=int(MemSpace.DDR), dst_addr=nbytes,
            dst_strides=(0, 0, 0, 1), box=(1, 1, 1, nbytes), elem_bytes=1,
        ),
    )  # fmt: skip
    consts = np.arange(const_bytes, dtype=np.uint8).tobytes()
    return Program(
        target="cn10ka",
        num_tiles=1,
        ddr_size=2 * nbytes + const_bytes,
        io=[IOEntry("x", True, shape, DType.F32, 0), IOEntry("y", False, shape, DType.F32, nbytes)],
        code=[dma, Instruction("end", tile=0)],
        const_base=2 * nbytes,
        consts=consts,
        srcmap=[],
    )


def export_region_model(blob: bytes, path, symbol: str = "copy_region", shape=SHAPE):
    """main(x) = region(x) * 2, with the region as an external module, exported to `path`."""
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.call_dps_packed(symbol, [x], relax.TensorType(shape, "float32")))
            out = bb.emit_output(relax.op.add(y, y))
        bb.emit_func_output(out)
    mod = bb.get().with_attr("external_mods", [region_module(symbol, blob)])
    relax.build(mod, target="llvm").export_library(str(path))
    return str(path)


def run_exported(path, x: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


def test_region_runs_its_binary(tmp_path):
    path = export_region_model(binary.encode(copy_program()), tmp_path / "m.so")
    x = np.arange(4, dtype=np.float32).reshape(SHAPE)
    np.testing.assert_array_equal(run_exported(path, x), 2 * x)


def test_exported_library_runs_in_a_fresh_process(tmp_path):
    path = export_region_model(binary.encode(copy_program()), tmp_path / "m.so")
    script = textwrap.dedent(
        f"""
        import numpy as np, tvm
        from tvm import relax
        import mrvl  # registers mrvl.runtime.run_region
        vm = relax.VirtualMachine(tvm.runtime.load_module({path!r}), tvm.cpu())
        x = np.array([[1.5, -2.0, 3.25, 0.0]], dtype=np.float32)
        print(vm["main"](tvm.runtime.tensor(x)).numpy().tolist())
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[[3.0, -4.0, 6.5, 0.0]]"


def test_without_import_mrvl_the_error_says_what_to_do(tmp_path):
    path = export_region_model(binary.encode(copy_program()), tmp_path / "m.so")
    script = textwrap.dedent(
        f"""
        import numpy as np, tvm
        from tvm import relax
        vm = relax.VirtualMachine(tvm.runtime.load_module({path!r}), tvm.cpu())
        vm["main"](tvm.runtime.tensor(np.zeros((1, 4), np.float32)))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode != 0
    assert "'mrvl.runtime.run_region' is not registered" in result.stderr
    assert "import mrvl" in result.stderr


def test_simulator_fault_surfaces_as_simulator_error(tmp_path):
    faulty = copy_program(src_addr=1 << 20)  # reads outside DDR
    path = export_region_model(binary.encode(faulty), tmp_path / "m.so")
    with pytest.raises(SimulatorError, match=r"instruction 0 \(dma, no ONNX node\).*outside DDR"):
        run_exported(path, np.zeros(SHAPE, np.float32))


def test_corrupt_binary_surfaces_as_binary_format_error(tmp_path):
    path = export_region_model(b"not a model binary", tmp_path / "m.so")
    with pytest.raises(BinaryFormatError, match="not an MLIP model binary"):
        run_exported(path, np.zeros(SHAPE, np.float32))


def test_tensor_count_must_match_the_io_table():
    blob = binary.encode(copy_program())
    buffer = ctypes.create_string_buffer(blob, len(blob))
    run_region = tvm_ffi.get_global_func("mrvl.runtime.run_region")
    x = tvm.runtime.tensor(np.zeros(SHAPE, np.float32))
    with pytest.raises(RegionRuntimeError, match="called with 1 tensors.*1 inputs and 1 outputs"):
        run_region(ctypes.cast(buffer, ctypes.c_void_p), len(blob), x)


def test_output_shape_must_match_the_io_table():
    blob = binary.encode(copy_program())
    buffer = ctypes.create_string_buffer(blob, len(blob))
    run_region = tvm_ffi.get_global_func("mrvl.runtime.run_region")
    x = tvm.runtime.tensor(np.zeros(SHAPE, np.float32))
    y = tvm.runtime.tensor(np.zeros((4, 1), np.float32))
    with pytest.raises(
        RegionRuntimeError, match=r"output 'y' has shape \(1, 4\), TVM allocated \(4, 1\)"
    ):
        run_region(ctypes.cast(buffer, ctypes.c_void_p), len(blob), x, y)


def test_large_binary_embeds_quickly(tmp_path):
    """A 30 MB binary (ResNet-50 class weights) is embedded by the assembler, not parsed as C."""
    blob = binary.encode(copy_program(const_bytes=30 << 20))
    start = time.perf_counter()
    region_module("big_region", blob)
    assert time.perf_counter() - start < 5.0
    path = export_region_model(blob, tmp_path / "big.so", symbol="big_region")
    x = np.full(SHAPE, 0.5, np.float32)
    np.testing.assert_array_equal(run_exported(path, x), 2 * x)


def test_bad_symbol_is_rejected():
    with pytest.raises(mrvl.CompileError, match="not a C identifier"):
        region_module("bad-symbol; rm -rf /", b"")
