"""The command-line options that choose the part and how a model is laid out on it, shared by
the tools that compile (`mrvlc`, `mrvl-eval`) so that they take them alike."""

from __future__ import annotations

import argparse


def add_target_options(p: argparse.ArgumentParser) -> None:
    """--mcpu, --target-file, --num-tiles, --wb-pin-ocm and --cascade."""
    p.add_argument("--mcpu", default="cn10ka", help="target part (default: cn10ka)")
    p.add_argument(
        "--target-file",
        metavar="FILE.json",
        help="a custom part (schema: mrvl_ir/schemas/target.schema.json); replaces --mcpu",
    )
    p.add_argument(
        "--num-tiles",
        type=int,
        help="MLIP tiles to use: 1, 2, 4 or 8, at most what the part has (default: all of them)",
    )
    p.add_argument(
        "--wb-pin-ocm",
        action="store_true",
        help="keep each layer's weights and biases in OCM when they fit (upstream's option)",
    )
    p.add_argument(
        "--cascade",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="keep intermediate tensors in OCM between layers when they fit (default: off; it "
        "saves DDR bytes but costs cycles under the priced tiling)",
    )
