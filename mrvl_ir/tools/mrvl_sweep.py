"""mrvl-sweep: design points (models x parts x options) compiled and measured on the cycle model.

mrvl-sweep sweep.toml -o results.csv                      # local Ray, one task per CPU
mrvl-sweep sweep.toml -o results.csv --plot pareto.svg    # and latency's Pareto front
mrvl-sweep sweep.toml -o results.csv --address HOST:6379  # on an existing Ray cluster

sweep.toml:
    target = "cn10ka"                       # or target_file = "part.json"
    models = ["zoo:mobilenet_v2", "my.onnx"]
    [grid]                                  # every combination, for every model
    max_tiles = [2, 4, 8]                   # any number of the part (mrvl_ir/target.py)
    ocm_bytes_per_tile = [131072, 262144]
    ddr_bytes_per_cycle = [32, 64]
    wb_pin_ocm = [false, true]              # compile options: num_tiles, wb_pin_ocm, cascade
    [[points]]                              # and/or an explicit list of points
    model = "zoo:resnet18"
    max_tiles = 4

Results are cached (~/.cache/mrvl/sweep; --cache-dir, --no-cache): a re-run of unchanged
points compiles nothing. Errors end with one `mrvl-sweep: error:` line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="mrvl-sweep",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("spec", help="the sweep spec (TOML)")
    p.add_argument("-o", "--output", required=True, help="results, one CSV row per point")
    p.add_argument(
        "--workers", type=int, help="Ray tasks at a time (default: one per CPU; 0: serially here)"
    )
    p.add_argument("--address", help="join this Ray cluster instead of starting one here")
    p.add_argument(
        "--plot",
        metavar="FILE.svg|png",
        help="latency against OCM per tile, with each model's Pareto front",
    )
    p.add_argument(
        "--plot-x", choices=("ocm_bytes_per_tile", "num_tiles"), default="ocm_bytes_per_tile"
    )
    p.add_argument(
        "--cache-dir", help="where point results are kept (default: ~/.cache/mrvl/sweep)"
    )
    p.add_argument("--no-cache", action="store_true", help="run every point, keep nothing")
    args = p.parse_args(argv)
    from tabulate import tabulate

    from mrvl.distributed.sweep import plot_pareto, sweep, write_csv
    from mrvl.errors import MrvlError
    from mrvl.profiling import check_plot_path

    try:
        if args.workers is not None and args.workers < 0:
            raise ValueError(f"--workers must be >= 0, got {args.workers}")
        if args.plot:
            check_plot_path(args.plot)
        result = sweep(
            args.spec,
            workers=args.workers,
            address=args.address,
            cache_dir=args.cache_dir,
            cache=not args.no_cache,
        )
        write_csv(result, args.output)
        if args.plot:
            plot_pareto(result, args.plot, args.plot_x)
    except (MrvlError, OSError, ValueError) as err:
        print(f"mrvl-sweep: error: {err}", file=sys.stderr)
        return 1
    columns = [
        "model",
        "num_tiles",
        *result.swept,
        "total_cycles",
        "latency_us",
        "roofline_ratio",
        "error",
    ]
    columns = list(dict.fromkeys(columns))
    print(tabulate([[row.get(c) for c in columns] for row in result.rows], headers=columns))
    print(
        f"{len(result.rows)} points ({result.cached} from the cache) in {result.seconds:.1f} s; "
        f"wrote {args.output}" + (f" and {args.plot}" if args.plot else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
