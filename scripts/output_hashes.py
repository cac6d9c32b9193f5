#!/usr/bin/env python3
"""Record or check the sha256 of everything the compiler produces for the zoo and light models.

    .venv/bin/python scripts/output_hashes.py --record            # every model, every config
    .venv/bin/python scripts/output_hashes.py --check             # compare with the fixture
    .venv/bin/python scripts/output_hashes.py --check --models zoo:resnet18 --configs 8

A reshape of the compiler must change no output (issue 18). For each model (the 17 zoo models
and the light models, seeded weights as everywhere else), each tile count (1 and 8) and
`wb_pin_ocm` off and on, every MLIP region is compiled (`mrvl.compile_region`) and the
region's model binary, Nodes-JSON and Constants-JSON (weights included) are hashed, and its
modelled cycles (`mrvl.sim.profile`) recorded. The fixture is
`tests/fixtures/output_hashes.json`; `tests/compiler/test_output_hashes.py` checks a part of
it at every run. The zoo's own builds (weights re-drawn by seed, 8 tiles) are pinned as well,
in `tests/fixtures/zoo_run_hashes.json`, which `scripts/zoo_report.py --record-hashes` writes
and `tests/zoo/test_zoo.py` checks on the build it runs anyway. A change that moves a hash is a behaviour change: make it in its own commit,
say why, and re-record (`--record --models ...` updates only the models named).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "output_hashes.json"
MCPU = "cn10ka"
CONFIGS = {"1": (1, False), "1-pin": (1, True), "8": (8, False), "8-pin": (8, True)}


def all_models() -> list[str]:
    from mrvl.models.light import LIGHT_MODELS
    from mrvl.models.zoo import ZOO_MODELS

    return [f"zoo:{name}" for name in ZOO_MODELS] + [f"light:{name}" for name in LIGHT_MODELS]


def load(name: str):
    kind, _, model = name.partition(":")
    if kind == "zoo":
        from mrvl.models.zoo import load_zoo_model

        return load_zoo_model(model, calibrate=False)
    from mrvl.models.light import load_light_model

    return load_light_model(model, calibrate=False)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json_sha(obj) -> str:
    return _sha(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())


def region_hashes(model, num_tiles: int, wb_pin_ocm: bool) -> dict[str, dict]:
    """symbol -> {bin, nodes, consts, cycles} of every MLIP region of `model`."""
    from tvm import relax

    import mrvl
    from mrvl.compiler import compile_region

    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), mcpu=MCPU, num_tiles=num_tiles)
    out = {}
    for gv, func in mod.functions.items():
        attrs = func.attrs if isinstance(func, relax.Function) and func.attrs else {}
        if "Codegen" not in attrs or str(attrs["Codegen"]) != "mrvl":
            continue
        func = func.with_attr("global_symbol", gv.name_hint)
        region = compile_region(
            func, mcpu=MCPU, num_tiles=num_tiles, wb_pin_ocm=wb_pin_ocm, constants_json=True
        )
        out[region.symbol] = region_digest(region)
    return dict(sorted(out.items()))


def region_digest(region) -> dict:
    """{bin, nodes, [consts,] cycles} of one `mrvl.compiler.CompiledRegion`: the sha256 of its
    binary, Nodes-JSON and (when it was asked for) Constants-JSON, and its modelled cycles."""
    from mrvl.sim import prepare
    from mrvl.sim.profile import profile_regions

    digest = {"bin": _sha(region.binary), "nodes": _json_sha(region.nodes_json)}
    if region.consts_json is not None:
        digest["consts"] = _json_sha(region.consts_json)
    digest["cycles"] = profile_regions([(region.symbol, prepare(region.binary), None)]).total_cycles
    return digest


def model_hashes(name: str, configs) -> dict[str, dict]:
    model = load(name)
    return {config: region_hashes(model, *CONFIGS[config]) for config in configs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", action="store_true", help="write the fixture")
    mode.add_argument("--check", action="store_true", help="compare with the fixture")
    parser.add_argument("--models", nargs="+", help="zoo:NAME or light:NAME (default: all)")
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    args = parser.parse_args()

    from tqdm import tqdm

    recorded = json.loads(args.fixture.read_text()) if args.fixture.exists() else {}
    names = args.models or all_models()
    moved = []
    for name in tqdm(names, desc="models", unit="model", file=sys.stderr):
        start = time.perf_counter()
        got = model_hashes(name, args.configs)
        tqdm.write(f"{name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
        if args.record:
            recorded.setdefault(name, {}).update(got)
            args.fixture.parent.mkdir(parents=True, exist_ok=True)
            args.fixture.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
            continue
        for config, regions in got.items():
            want = recorded.get(name, {}).get(config)
            if want != regions:
                moved.append(f"{name} [{config}]: {_diff(want, regions)}")
    if args.check:
        for line in moved:
            print(line)
        print(f"{len(names) * len(args.configs) - len(moved)} passed, {len(moved)} failed")
        return 1 if moved else 0
    return 0


def _diff(want: dict | None, got: dict) -> str:
    if want is None:
        return "not recorded"
    if set(want) != set(got):
        return f"regions {sorted(want)} -> {sorted(got)}"
    parts = []
    for symbol, hashes in got.items():
        for key, value in hashes.items():
            if want[symbol].get(key) != value:
                parts.append(f"{symbol}.{key}")
    return "moved: " + ", ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
