"""Remote boards over TVM RPC: the exported library runs where the RPC server is.

`serve` is TVM's RPC server with mrvl's runtime registered (on a board, `run_region` would call
the driver; here the simulator stands in for it). `RpcSession` connects to a server, directly
or through a tracker, and `RpcRunner` uploads the library, loads it there and runs samples
through the Relax VM's stateful API: in TVM 0.27 a VM over RPC cannot be called directly
(`vm["main"](...)` fails on the DLTensor-typed arguments), but `set_input`,
`invoke_stateful` and `get_outputs` work. The server's `tvm.rpc.server.workpath` says where
the upload went.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mrvl.errors import MrvlError
from mrvl.target import Target, register_target

from .runner import Batch, first_line, run_batch

STATS_FUNCTION = "mrvl.rpc.take_stats"
"""On an mrvl server: "SATURATED NANS" counted by the runs since the last call."""


class RpcError(MrvlError):
    """The RPC server cannot be reached or cannot run the library."""


def parse_address(text: str, option: str = "--rpc") -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{option} {text}: want HOST:PORT")
    return host, int(port)


@dataclass(frozen=True)
class RpcSession:
    """Where the remote is: a server (`host`, `port`), or a tracker and the device `key`."""

    host: str | None = None
    port: int | None = None
    tracker: tuple[str, int] | None = None
    key: str | None = None

    def connect(self):
        from tvm import rpc

        try:
            if self.tracker is not None:
                return rpc.connect_tracker(*self.tracker).request(self.key or "", priority=1)
            return rpc.connect(self.host, self.port)
        except Exception as err:  # noqa: BLE001 - TVM raises plain errors for a refused socket
            where = f"tracker {self.tracker}" if self.tracker else f"{self.host}:{self.port}"
            raise RpcError(f"cannot reach the RPC server at {where}: {first_line(err)}") from None


class RpcRunner:
    """`LocalRunner`'s rows, from a VM on the remote; onnxruntime's reference runs here."""

    def __init__(self, remote, library: bytes, model: bytes, classifier: bool | None = None):
        from tvm import relax

        from mrvl.accuracy import reference_session

        name = f"mrvl-{hashlib.sha256(library).hexdigest()[:16]}.so"
        with tempfile.TemporaryDirectory(prefix="mrvl-rpc-") as work:
            local = os.path.join(work, name)
            with open(local, "wb") as f:
                f.write(library)
            try:
                remote.upload(local, target=name)
                self.remote_path = str(remote.get_function("tvm.rpc.server.workpath")(name))
                lib = remote.load_module(name)
            except Exception as err:  # noqa: BLE001 - the remote's errors arrive as RPCError
                raise RpcError(
                    f"the RPC server cannot load the library: {first_line(err)}"
                ) from None
        self._remote = remote
        self._device = remote.cpu()
        self._vm = relax.VirtualMachine(lib, self._device)
        try:
            self._take_stats = remote.get_function(STATS_FUNCTION)
            self._take_stats()  # counts from before this session's runs are not ours
        except Exception:  # noqa: BLE001 - a server without mrvl's functions counts nothing
            self._take_stats = None
        self._session = reference_session(model)
        self._classifier = classifier

    def pid(self) -> int:
        return 0

    def close(self) -> None:
        """End the RPC session: the server serves one session at a time, and ends a session
        when the last handle on it (the VM, the device, a remote function) is gone."""
        import gc

        self._vm = self._device = self._take_stats = self._remote = None
        gc.collect()  # TVM's VM objects keep the session in reference cycles

    def _run(self, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], int | None, int | None]:
        import tvm

        tensors = [tvm.runtime.tensor(x, self._device) for x in feeds.values()]
        self._vm.set_input("main", *tensors)
        self._vm.invoke_stateful("main")
        result = self._vm.get_outputs("main")
        outputs = [result] if isinstance(result, tvm.runtime.Tensor) else list(result)
        saturated = nans = None
        if self._take_stats is not None:
            saturated, nans = (int(n) for n in str(self._take_stats()).split())
        return [o.numpy() for o in outputs], saturated, nans

    def run(self, batch: Batch) -> list[dict[str, Any]]:
        return run_batch(batch, self._run, self._session, self._classifier, self.remote_path)


_stack = contextlib.ExitStack()


def register_server_functions(targets: Sequence[Target] = ()) -> None:
    """What an mrvl RPC server adds to TVM's: mrvl's runtime, the custom parts its libraries
    may name, and the saturation counts of its runs (`STATS_FUNCTION`)."""
    import tvm_ffi

    import mrvl  # noqa: F401 - registers mrvl.runtime.run_region
    from mrvl.runtime import recording
    from mrvl.sim import SaturationWarning

    for target in targets:
        register_target(target)
    warnings.simplefilter("ignore", SaturationWarning)  # the client counts them
    recorder = _stack.enter_context(recording())

    @tvm_ffi.register_global_func(STATS_FUNCTION, override=True)
    def take_stats() -> str:
        runs, recorder.runs[:] = list(recorder.runs), []
        saturated = sum(int(stats.saturated.sum()) for _, _, stats in runs)
        nans = sum(int(stats.nans.sum()) for _, _, stats in runs)
        return f"{saturated} {nans}"


def serve(
    host: str = "127.0.0.1",
    port: int = 9090,
    port_end: int = 9199,
    *,
    tracker: tuple[str, int] | None = None,
    key: str = "",
    targets: Sequence[Target] = (),
    silent: bool = True,
):
    """Start TVM's RPC server in this process (a thread that listens; each session runs in a
    forked process, which inherits the registrations); returns the server state, whose
    `port` is the one bound and whose `thread` serves until the process ends."""
    from tvm.rpc.server import PopenRPCServerState

    register_server_functions(targets)
    return PopenRPCServerState(
        host, port, port_end, False, tracker, key, None, None, silent, True, None
    )
