#!/usr/bin/env python3
"""The long differential fuzz run: random CNN graphs through mrvl against onnxruntime.

    .venv/bin/python scripts/fuzz.py --examples 2000 [--seed N] [--out fuzz-out]

Example i is `tests/fuzz/grammar.random_spec(seed * 1000003 + i)` checked by
`tests/fuzz/harness.check` (see there for what passes). The first failure of each distinct
signature (stage, exception type, innermost mrvl function; or an accuracy mismatch), and of
each kind of rejection at build time (which issue 6 wants decided at partition time), is shrunk
and written to `--out` as `<k>.onnx` plus `<k>.txt` (one-line description, the error, and the
`Spec` to paste into `tests/fuzz/test_regressions.py`). At the end it prints the counts:
generated, discarded, rejected, passed, failed, offloaded layers.

`--precision int8` quantizes each generated float graph with `mrvl.quantize` (seeded
calibration) and judges it by the int8 rule and engine identity; `--precision mixed` also
keeps a seeded choice of its layers in fp16 (`tests/fuzz/harness_int8.py`). The graphs are
the same as the float run's for the same seed.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

import grammar  # noqa: E402
import harness  # noqa: E402
import harness_int8  # noqa: E402


def example_seed(seed: int, index: int) -> int:
    return seed * 1_000_003 + index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="first example index (resume)")
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"))
    parser.add_argument("--max-layers", type=int, default=8)
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument(
        "--avoid",
        action="append",
        default=[],
        choices=sorted(grammar.AVOIDABLE),
        help="leave out a feature whose known bug would hide others (repeatable)",
    )
    parser.add_argument(
        "--precision",
        choices=("float", "int8", "mixed"),
        default="float",
        help="int8: each graph quantized by mrvl.quantize; mixed: some layers kept in fp16",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="one line per example")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    try:  # onnxruntime's warnings go to stderr through its own logger
        import onnxruntime

        onnxruntime.set_default_logger_severity(3)
    except ImportError:
        pass
    args.out.mkdir(parents=True, exist_ok=True)
    check = checker(args.precision)

    counts: collections.Counter[str] = collections.Counter()
    rejections: collections.Counter[str] = collections.Counter()
    offloaded = 0
    signatures: dict[str, int] = {}
    occurrences: collections.Counter[str] = collections.Counter()
    start = time.time()

    def log(line: str) -> None:
        print(line, flush=True)

    for index in range(args.start, args.start + args.examples):
        if index > args.start and (index - args.start) % 50 == 0:
            _summary(counts, offloaded, occurrences, signatures, rejections, start, log)
        spec = None
        counts["generated"] += 1
        try:
            spec = grammar.random_spec(
                example_seed(args.seed, index), args.max_layers, frozenset(args.avoid)
            )
            outcome = check(spec)
        except Exception as exc:  # noqa: BLE001 - a generator bug: report, keep going
            counts["invalid"] += 1
            log(f"[{index}] INVALID (generator bug) {type(exc).__name__}: {exc}")
            log(f"    {spec.describe() if spec else 'while generating'}")
            continue
        counts[outcome.status] += 1
        offloaded += outcome.offloaded
        if args.verbose:
            log(f"[{index}] {outcome.status} {outcome.offloaded} | {spec.describe()[:200]}")
        if outcome.status == harness.REJECTED:
            rejections[_reason(outcome.detail)] += 1
        # A rejection at build time is allowed by the property, but issue 6 wants every
        # layer that cannot be placed decided at partition time: shrink and keep those too.
        worth_keeping = outcome.status == harness.FAILED or (
            outcome.status == harness.REJECTED and outcome.signature.startswith("rejected:build")
        )
        if not worth_keeping:
            continue
        occurrences[outcome.signature] += 1
        if outcome.signature in signatures:
            continue
        number = len(signatures) + 1
        signatures[outcome.signature] = number
        what = "FAILURE" if outcome.status == harness.FAILED else "REJECTED AT BUILD"
        log(f"[{index}] {what} #{number} {outcome.signature}")
        log(f"    {outcome.detail}")
        log(f"    {spec.describe()}")
        small, small_outcome = (
            (spec, outcome)
            if args.no_shrink
            else harness.shrink(spec, outcome, log=log, check=check)
        )
        _write(args.out, number, index, small, small_outcome, args.precision)
        log(f"    minimal: {small.describe()}  -> {args.out}/{number}.onnx")
    _summary(counts, offloaded, occurrences, signatures, rejections, start, log, final=True)
    return 1 if counts[harness.FAILED] or counts["invalid"] else 0


def checker(precision: str):
    """The property of one example for a `--precision`."""
    if precision == "float":
        return harness.check
    return functools.partial(harness_int8.check_quantized, mixed=precision == "mixed")


def _reason(detail: str) -> str:
    """A rejection's message with numbers and node names blanked, to count kinds."""
    import re

    text = re.sub(r"L\d+_\w+", "<node>", detail)
    return re.sub(r"\d+", "#", text)[:140]


def _write(out: Path, number: int, index: int, spec, outcome, precision: str) -> None:
    import onnx

    onnx.save(grammar.build_model(spec), out / f"{number}.onnx")
    if precision != "float":  # the QDQ model that was judged, beside its float source
        try:
            qdq, _ = harness_int8.quantized_model(spec, precision == "mixed")
            onnx.save(qdq, out / f"{number}.qdq.onnx")
        except Exception:  # noqa: BLE001 - the failure was in the quantization itself
            pass
    (out / f"{number}.txt").write_text(
        f"{spec.describe()} ({precision})\n"
        f"signature: {outcome.signature}\n"
        f"error: {outcome.detail}\n"
        f"first seen at example {index}\n"
        f"spec: {spec!r}\n"
    )


def _summary(counts, offloaded, occurrences, signatures, rejections, start, log, final=False):
    elapsed = time.time() - start
    head = "FINAL" if final else "so far"
    log(
        f"== {head} ({elapsed:.0f} s): generated {counts['generated']}, "
        f"discarded {counts[harness.DISCARDED]}, rejected {counts[harness.REJECTED]}, "
        f"passed {counts[harness.PASSED]}, failed {counts[harness.FAILED]} "
        f"({sum(not s.startswith('rejected') for s in signatures)} distinct), invalid {counts['invalid']}, "
        f"offloaded layers {offloaded}"
    )
    if final:
        for signature, number in signatures.items():
            log(f"   #{number} x{occurrences[signature]}: {signature}")
        for reason, count in rejections.most_common():
            log(f"   rejected x{count}: {reason}")


if __name__ == "__main__":
    sys.exit(main())
