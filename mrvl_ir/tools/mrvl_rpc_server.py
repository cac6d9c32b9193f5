"""mrvl-rpc-server: TVM's RPC server with mrvl's runtime registered.

mrvl-rpc-server --host 0.0.0.0 --port 9090         # mrvl-eval --rpc HOST:9090 runs here
mrvl-rpc-server --tracker HOST:9190 --key mlip     # offer this device to an RPC tracker

The libraries that `mrvl-eval --rpc` uploads run on the simulator here (on a board, on the
driver). The first line on stdout says where it listens. It serves until it is stopped.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mrvl-rpc-server", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=9090, help="first port to try (default: 9090)")
    p.add_argument("--port-end", type=int, default=9199, help="last port to try, exclusive")
    p.add_argument("--tracker", metavar="HOST:PORT", help="register with this RPC tracker")
    p.add_argument("--key", default="mlip", help="device key at the tracker (default: mlip)")
    p.add_argument(
        "--target-file",
        action="append",
        default=[],
        metavar="FILE.json",
        help="a custom part the uploaded libraries may be compiled for",
    )
    args = p.parse_args(argv)
    from mrvl.distributed.rpc import parse_address, serve
    from mrvl.errors import MrvlError
    from mrvl.target import load_target_file

    try:
        tracker = parse_address(args.tracker, "--tracker") if args.tracker else None
        targets = [load_target_file(path) for path in args.target_file]
        server = serve(
            args.host,
            args.port,
            max(args.port_end, args.port + 1),
            tracker=tracker,
            key=args.key if tracker else "",
            targets=targets,
        )
    except (MrvlError, OSError, ValueError) as err:
        print(f"mrvl-rpc-server: error: {err}", file=sys.stderr)
        return 1
    print(f"mrvl-rpc-server: listening on {args.host}:{server.port}", flush=True)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
