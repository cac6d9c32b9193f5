"""mrvl-eval: a compiled model over a data set, each sample scored against onnxruntime.

mrvl-eval model.onnx data.npy -o results.jsonl                  # local Ray, one worker per CPU
mrvl-eval model.onnx images/ -o r.jsonl --preprocess spec.json  # PNG/JPEG with a spec
mrvl-eval model.onnx data/ -o r.jsonl --address HOST:6379       # an existing Ray cluster
mrvl-eval model.onnx data/ -o r.jsonl --rpc HOST:9090           # on a remote TVM RPC server
mrvl-eval model.onnx data/ -o r.jsonl --resume                  # skip the samples done

One JSONL row per sample (an unreadable sample is an error row naming its file), a progress
bar, and a summary table at the end. Every failure a user can cause ends with one
`mrvl-eval: error:` line (exit status 2 for a bad command line, 1 otherwise).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mrvl.tools.target_options import add_target_options


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrvl-eval", description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="ONNX model file")
    p.add_argument(
        "data", help=".npy/.npz file (batch axis first), or a folder of them or of images"
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        help="results, one row per sample: JSONL, or Parquet for a .parquet name",
    )
    p.add_argument(
        "--workers", type=int, help="Ray workers (default: one per CPU; 0: serially here)"
    )
    p.add_argument("--address", help="join this Ray cluster instead of starting one here")
    add_target_options(p)
    p.add_argument(
        "--preprocess",
        metavar="SPEC.json",
        help="how images become inputs: resize, mean, std, scale, layout",
    )
    p.add_argument(
        "--classifier",
        action=argparse.BooleanOptionalAction,
        help="score top-1/top-5 on the first output (default: when it is (1, C))",
    )
    p.add_argument("--batch-size", type=int, default=4, help="samples per task (default: 4)")
    p.add_argument("--resume", action="store_true", help="keep the rows in -o, run the rest")
    p.add_argument("--engine", choices=("numba", "interp"), help="simulator engine")
    p.add_argument(
        "--rpc", metavar="HOST:PORT", help="run on this TVM RPC server (mrvl-rpc-server)"
    )
    p.add_argument("--rpc-tracker", metavar="HOST:PORT", help="ask this RPC tracker for a device")
    p.add_argument("--rpc-key", help="the device key to ask the tracker for")
    return p


def _rpc_session(args):
    from mrvl.distributed.rpc import RpcSession, parse_address

    if args.rpc and args.rpc_tracker:
        raise ValueError("give --rpc or --rpc-tracker, not both")
    if args.rpc:
        return RpcSession(*parse_address(args.rpc))
    if args.rpc_tracker:
        if not args.rpc_key:
            raise ValueError("--rpc-tracker needs --rpc-key")
        return RpcSession(
            tracker=parse_address(args.rpc_tracker, "--rpc-tracker"), key=args.rpc_key
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from mrvl.errors import MrvlError

    try:
        if args.workers is not None and args.workers < 0:
            raise ValueError(f"--workers must be >= 0, got {args.workers}")
        rpc = _rpc_session(args)
        if rpc is not None and (args.workers or args.address):
            raise ValueError("--rpc runs on the RPC server: no --workers or --address")
        from mrvl.distributed.data import Preprocess
        from mrvl.distributed.evaluate import evaluate

        preprocess = Preprocess.load(args.preprocess) if args.preprocess else None
    except ValueError as err:
        print(f"mrvl-eval: error: {err}", file=sys.stderr)
        return 2
    try:
        summary = evaluate(
            args.model,
            args.data,
            output=args.output,
            workers=args.workers,
            address=args.address,
            mcpu=args.mcpu,
            target_file=args.target_file,
            num_tiles=args.num_tiles,
            preprocess=preprocess,
            classifier=args.classifier,
            resume=args.resume,
            batch_size=args.batch_size,
            rpc=rpc,
            engine=args.engine,
            wb_pin_ocm=args.wb_pin_ocm,
            cascade=args.cascade,
        )
    except (MrvlError, OSError, ValueError) as err:
        print(f"mrvl-eval: error: {err}", file=sys.stderr)
        return 1
    print(summary.table())
    print(f"wrote {summary.new_samples} rows to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
