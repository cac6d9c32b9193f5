#!/usr/bin/env python3
"""Record or check the engine paths each engine-identity build runs.

    .venv/bin/python scripts/engine_features.py --check
    .venv/bin/python scripts/engine_features.py --record                    # every entry
    .venv/bin/python scripts/engine_features.py --record light:resnet50     # one entry
    .venv/bin/python scripts/engine_features.py --record zoo:yolov5n

The suite runs a build on both simulator engines only where it exercises engine code that no
other identity build does (the interpreter costs minutes on the large models). A build left
off the interpreter must run only paths (`helpers.instruction_features`) that some identity
build runs. Checking that used to mean building every identity model in the process that
asked; the pins in `tests/fixtures/engine_features.json` answer it without a build, and each
pin is checked, equal, by the test that runs its build on both engines, so none goes stale.

Entries: "corpus" (the union over `helpers.ENGINE_CORPUS`), "light:<name>" (a light model
of `ENGINE_IDENTITY_MODELS` in tests/models/test_light_models.py, built as that file builds
it: seeded weights, 8 tiles) and "zoo:<name>" (a zoo model of `ENGINE_IDENTITY_MODELS` in
tests/zoo/test_zoo.py, built as `scripts/zoo_report.py` builds it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import helpers  # noqa: E402 - tests/helpers.py, the features' one definition

LIGHT_TILES = 8
LIGHT_SEED = 0


def entries() -> list[str]:
    sys.path.insert(0, str(ROOT / "tests" / "models"))
    sys.path.insert(0, str(ROOT / "tests" / "zoo"))
    from test_light_models import ENGINE_IDENTITY_MODELS as LIGHT
    from test_zoo import ENGINE_IDENTITY_MODELS as ZOO

    return [
        "corpus",
        *(f"light:{name}" for name in sorted(LIGHT)),
        *(f"zoo:{name}" for name in sorted(ZOO)),
    ]


def features(key: str) -> set[tuple]:
    if key == "corpus":
        return helpers.corpus_features()
    import mrvl
    from mrvl.models.light import load_light_model

    kind, name = key.split(":", 1)
    if kind == "zoo":
        zoo_report = helpers.load_module("mrvl_zoo_report", ROOT / "scripts" / "zoo_report.py")
        run = zoo_report.run_model(name, build_only=True, probe=helpers.lib_features)
        if run.failure:
            raise SystemExit(f"engine_features: {key}: {run.failure}")
        return run.probed
    if kind != "light":
        raise SystemExit(
            f"engine_features: unknown entry {key!r} (corpus, light:<name> or zoo:<name>)"
        )
    model = load_light_model(name, seed=LIGHT_SEED)
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), num_tiles=LIGHT_TILES)
    return helpers.lib_features(mrvl.build(mod, num_tiles=LIGHT_TILES))


def _dump(pinned: dict[str, list]) -> str:
    """The pins as JSON, one feature per line (reviewable in a diff)."""
    entries = []
    for key, found in sorted(pinned.items()):
        rows = ",\n".join(f"  {json.dumps(f)}" for f in found)
        entries.append(f" {json.dumps(key)}: [\n{rows}\n ]")
    return "{\n" + ",\n".join(entries) + "\n}\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", action="store_true", help="write the pins")
    mode.add_argument("--check", action="store_true", help="compare with the pins")
    parser.add_argument("keys", nargs="*", help="entries (default: all)")
    args = parser.parse_args(argv)
    keys = args.keys or entries()
    fixture = helpers.FEATURE_FIXTURE
    pinned = json.loads(fixture.read_text()) if fixture.exists() else {}
    if args.record and not args.keys:
        pinned = {}  # a full record drops entries of models no longer on both engines
    differ = []
    for key in keys:
        found = sorted(features(key))
        print(f"{key}: {len(found)} features", flush=True)
        if args.record:
            pinned[key] = [list(f) for f in found]
        elif [tuple(f) for f in pinned.get(key, [])] != found:
            differ.append(key)
    if args.record:
        fixture.write_text(_dump(pinned))
        print(f"wrote {fixture.relative_to(ROOT)}")
    for key in differ:
        print(f"{key}: differs from the pin", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
