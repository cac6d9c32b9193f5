"""The compile-time half of the BYOC backend: `relax.ext.mrvl` and `build`.

TVM's RunCodegen calls `relax.ext.mrvl` once with every region function (`Codegen="mrvl"`).
Each region is compiled by `mrvl.compile_region` to a model binary, and the binary is wrapped
in a real external module: `csrc/region.c`, compiled with gcc into an object that embeds
the binary and defines the region's TVM-FFI symbol, loaded with
`tvm.runtime.load_static_library`. The object is linked into the library `export_library`
writes, so an exported model needs nothing but `import mrvl` to run (see `mrvl.runtime`).

TVM itself is imported inside the functions that need it, so that `import mrvl` (which
registers the hook) stays cheap for the simulator and the xDSL tools.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import shutil
import subprocess
import tempfile
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

import tvm_ffi
import tvm_ffi.libinfo

from .errors import (
    CompileError,
    InternalCompilerError,
    ModelImportError,
    MrvlError,
    UnsupportedOpError,
    layer_boundary,
)
from .target import region_target

if TYPE_CHECKING:
    import tvm
    from tvm import relax

    from .compiler import CompiledRegion

__all__ = ["build", "region_module"]

_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Without this, TVM's FFI would turn each into a plain RuntimeError on the way out of RunCodegen.
for _error in (
    MrvlError,
    ModelImportError,
    UnsupportedOpError,
    CompileError,
    InternalCompilerError,
):
    tvm_ffi.register_error(_error)


@dataclass
class _BuildSession:
    """What one `build` learns from the hook: the compiled regions, and the error that stopped
    it (the FFI re-creates the exception from its message, losing attributes such as
    `UnsupportedOpError.node`; `build` re-raises the original)."""

    regions: list[CompiledRegion] = field(default_factory=list)
    constant_names: set[str] = field(default_factory=set)
    error: BaseException | None = None


_session: contextvars.ContextVar[_BuildSession | None] = contextvars.ContextVar(
    "mrvl_build_session", default=None
)


@tvm_ffi.register_global_func("relax.ext.mrvl")
def _relax_ext_mrvl(functions, options, constant_names) -> list:
    """Compile each region and wrap its binary in an external runtime module."""
    from tqdm import tqdm

    from .compiler import compile_region
    from .partition import validate_target_options

    options = dict(options) if options is not None else {}
    # `build(mcpu=..., num_tiles=...)` overrides what the regions were partitioned for.
    mcpu_override, tiles_override = options.pop("mcpu", None), options.pop("num_tiles", None)
    session = _session.get()
    if session is not None and constant_names is not None:
        session.constant_names.update(str(name) for name in constant_names.values())
    modules = []
    # A bar on a terminal (stderr) when there is more than one region; nothing otherwise.
    progress = tqdm(
        functions,
        desc="mrvl: compiling regions",
        unit="region",
        leave=False,
        disable=None if len(functions) > 1 else True,
    )
    try:
        for func in progress:
            attrs = func.attrs if func.attrs is not None else {}
            symbol = str(attrs["global_symbol"])
            mcpu, num_tiles = region_target(attrs, mcpu_override, tiles_override)
            validate_target_options(mcpu, num_tiles)
            region = compile_region(
                func, mcpu=mcpu, num_tiles=num_tiles, constant_names=constant_names, **options
            )
            if region.symbol != symbol:
                raise CompileError(
                    f"region {symbol}: compile_region named it {region.symbol!r}; "
                    "TVM calls it by its global_symbol"
                )
            if session is not None:
                session.regions.append(region)
            modules.append(region_module(symbol, region.binary))
    except Exception as err:
        if session is not None:
            session.error = err
        raise
    return modules


def region_module(symbol: str, binary: bytes) -> tvm.runtime.Module:
    """A static-library module defining `symbol` as a TVM-FFI function that runs `binary`."""
    import tvm

    if not _C_IDENTIFIER.match(symbol):
        raise CompileError(f"region symbol {symbol!r} is not a C identifier")
    with tempfile.TemporaryDirectory(prefix="mrvl-region-") as work:
        with open(os.path.join(work, "region.bin"), "wb") as f:
            f.write(binary)
        obj = os.path.join(work, "region.o")
        template = resources.files(__package__).joinpath("csrc", "region.c")
        with resources.as_file(template) as source:
            command = [
                "gcc", "-O2", "-fPIC", "-c", "-std=gnu11",
                f"-I{tvm_ffi.libinfo.find_include_path()}",
                f"-DMRVL_ENTRY=__tvm_ffi_{symbol}",
                # Relative to `work`, the compiler's working directory: no path quoting.
                '-DMRVL_BLOB_FILE="region.bin"',
                str(source), "-o", obj,
            ]  # fmt: skip
            try:
                subprocess.run(command, cwd=work, check=True, capture_output=True, text=True)
            except FileNotFoundError as err:
                raise CompileError("gcc not found: the mrvl backend needs a C compiler") from err
            except subprocess.CalledProcessError as err:
                raise CompileError(
                    f"gcc failed on the runtime stub of region {symbol}:\n{err.stderr}"
                ) from err
        # The module keeps the object's bytes, so the work directory can go.
        return tvm.runtime.load_static_library(obj, [symbol])


@contextlib.contextmanager
def _build_session() -> Iterator[_BuildSession]:
    session = _BuildSession()
    token = _session.set(session)
    try:
        yield session
    finally:
        _session.reset(token)


def _drop_region_constants(mod: tvm.IRModule, names: set[str]) -> tvm.IRModule:
    """Remove our regions' weights from `const_name_to_constant`.

    RunCodegen records every region constant there for runtimes that receive weights at load
    time; relax.build would store them in the library as VM parameters. The MLIP binary
    already holds them (in fp16), so keeping them would only double the library's size.
    """
    constants = mod.attrs.get("const_name_to_constant") if mod.attrs else None
    if not constants or not names:
        return mod
    kept = {name: value for name, value in constants.items() if name not in names}
    return mod.with_attr("const_name_to_constant", kept)


def build(
    mod: tvm.IRModule,
    target: Any = "llvm",
    *,
    mcpu: str | None = None,
    num_tiles: int | None = None,
    export_dir: str | os.PathLike | None = None,
    **options: Any,
) -> relax.VMExecutable:
    """Compile a partitioned module: regions for the MLIP, the rest for `target`.

    Returns the `relax.VMExecutable` that `relax.build` made, as TVM's own `tvm.compile` does:
    `ex.export_library("model.so")` saves it, and `relax.VirtualMachine(ex, dev)` runs it. It
    also carries `library_path` (the `.so` it runs from) and `mrvl_regions` (the
    `CompiledRegion`s, for writing their JSONs and binaries). `mcpu`/`num_tiles` override the
    values the regions were partitioned for; other `options` go to `mrvl.compile_region`
    (e.g. `dump_dir`).

    A static-library module only runs once linked, so the library is exported and reloaded
    here, and the executable's `jit()` returns that reloaded library. Without `export_dir`
    the library lives in a temporary directory removed with the returned object.
    """
    import tvm
    from tvm import relax

    # Options cross TVM's FFI, which knows str but not pathlib.Path.
    codegen_options: dict[str, Any] = {
        key: os.fspath(value) if isinstance(value, os.PathLike) else value
        for key, value in options.items()
    }
    if mcpu is not None:
        codegen_options["mcpu"] = mcpu
    if num_tiles is not None:
        codegen_options["num_tiles"] = num_tiles

    with _build_session() as session:
        try:
            mod = relax.transform.RunCodegen(target_options={"mrvl": codegen_options})(mod)
        except Exception:
            if session.error is not None:
                raise session.error from None
            raise
    mod = _drop_region_constants(mod, session.constant_names)
    with layer_boundary("TVM's build of the host part"):
        executable = relax.build(mod, target=target)

    temporary = export_dir is None
    directory = tempfile.mkdtemp(prefix="mrvl-build-") if temporary else os.fspath(export_dir)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "model.so")
    with layer_boundary(f"exporting the library to {path}"):
        executable.export_library(path)
        # What `Executable.jit()` would do on first use (export to a temporary file, load it,
        # cache it in `_jitted_mod`), done once here with a path the caller can see.
        executable._jitted_mod = tvm.runtime.load_module(path)
    executable.library_path = path
    executable.mrvl_regions = session.regions
    if temporary:
        weakref.finalize(executable, shutil.rmtree, directory, ignore_errors=True)
    return executable
