"""`mrvl.sweep` and `mrvl-sweep` on the bundled MNIST model: a grid over the part's numbers
gives the same rows serially and on Ray workers; a re-run is served from the cache; a bad
spec is one clear line."""

from __future__ import annotations

import csv

import pytest

from mrvl.distributed import sweep as sweep_module
from mrvl.distributed.sweep import SweepSpecError, design_points, sweep
from mrvl.tools import mrvl_sweep


@pytest.fixture(scope="module")
def spec(mnist_path):
    return {
        "models": [str(mnist_path)],
        "grid": {"max_tiles": [1, 2], "ocm_bytes_per_tile": [65536, 262144], "wb_pin_ocm": [True]},
    }


@pytest.fixture(scope="module")
def serial(spec, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    result = sweep(spec, workers=0, cache_dir=cache, progress=False)
    return result, cache


def test_points_are_measured(serial):
    result, _ = serial
    assert result.cached == 0 and len(result.rows) == 4
    assert [(r["max_tiles"], r["ocm_bytes_per_tile"]) for r in result.rows] == [
        (1, 65536),
        (1, 262144),
        (2, 65536),
        (2, 262144),
    ]
    for row in result.rows:
        assert row["error"] is None and row["num_tiles"] == row["max_tiles"]
        assert row["total_cycles"] >= row["roofline_cycles"] > 0
        assert row["latency_us"] == pytest.approx(row["total_cycles"] / row["clock_mhz"], abs=1e-3)
        assert len(row["costliest_layers"].split("; ")) == 3
        assert 0 < row["ocm_peak_bytes"] <= row["ocm_bytes_per_tile"] * row["num_tiles"]
    assert result.rows[3]["mcpu"] == "cn10ka-" + result.rows[3]["mcpu"][7:]
    # more tiles: fewer cycles
    assert result.rows[2]["total_cycles"] < result.rows[0]["total_cycles"]


def test_a_rerun_is_served_from_the_cache(serial, spec, monkeypatch):
    result, cache = serial

    def no_compile(*args):
        raise AssertionError("a cached point was compiled again")

    monkeypatch.setattr(sweep_module, "run_point", no_compile)
    again = sweep(spec, workers=0, cache_dir=cache, progress=False)
    assert again.cached == 4 and again.rows == result.rows


def test_a_change_to_mrvl_misses_the_cache(spec, monkeypatch):
    """The cache is keyed by mrvl's code, not its version: other code, other key."""
    base, points = design_points(spec)
    digest = sweep_module._model_digest(points[0].model)
    key = sweep_module.cache_key(points[0], base, digest)
    monkeypatch.setattr(sweep_module, "compiler_digest", lambda: "another compiler")
    assert sweep_module.cache_key(points[0], base, digest) != key


def test_compiler_digest_reads_every_source(tmp_path, monkeypatch):
    import mrvl.sim

    (tmp_path / "kernel.py").write_text("A = 1\n")
    monkeypatch.setattr(mrvl.sim, "__path__", [*mrvl.sim.__path__, str(tmp_path)])
    sweep_module.compiler_digest.cache_clear()
    before = sweep_module.compiler_digest()
    (tmp_path / "kernel.py").write_text("A = 2\n")
    sweep_module.compiler_digest.cache_clear()
    after = sweep_module.compiler_digest()
    monkeypatch.undo()
    sweep_module.compiler_digest.cache_clear()
    assert before != after


def test_ray_workers_give_the_serial_rows(serial, spec, tmp_path):
    ray = pytest.importorskip("ray")
    ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        result = sweep(spec, workers=2, cache_dir=tmp_path, progress=False)
    finally:
        ray.shutdown()
    assert result.cached == 0 and result.rows == serial[0].rows


def test_cli_writes_csv_and_plot(serial, spec, mnist_path, tmp_path, capsys):
    _, cache = serial
    toml = tmp_path / "sweep.toml"
    toml.write_text(
        f'models = ["{mnist_path}"]\n[grid]\nmax_tiles = [1, 2]\n'
        "ocm_bytes_per_tile = [65536, 262144]\nwb_pin_ocm = [true]\n"
    )
    out, plot = tmp_path / "r.csv", tmp_path / "p.svg"
    argv = [str(toml), "-o", str(out), "--cache-dir", str(cache), "--plot", str(plot)]
    assert mrvl_sweep.main(argv) == 0
    assert "4 points (4 from the cache)" in capsys.readouterr().out
    rows = list(csv.DictReader(out.open()))
    assert [int(r["total_cycles"]) for r in rows] == [r["total_cycles"] for r in serial[0].rows]
    assert plot.read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize(
    "text, message",
    [
        ('models = ["zoo:mobilenet_v2"]\n[grid]\nocm = [1]\n', "grid: unknown key(s) ocm"),
        ('models = ["zoo:mobilenet_v2"]\n[grid]\nmax_tiles = ["many"]\n', "max_tiles = 'many': want a positive integer"),
        ('models = ["zoo:mobilenet_v2"]\ntarget = "cn99"\n', "target: unknown mcpu 'cn99'"),
        ('modles = ["zoo:mobilenet_v2"]\n', "unknown key(s) modles"),
        ('models = [\n', "not TOML"),
        ('models = ["zoo:mobilenet_v2"]\n[grid]\nmax_tiles = [3]\n', "max_tiles: 3 is not one of [1, 2, 4, 8]"),
    ],
)  # fmt: skip
def test_bad_specs_are_one_line(tmp_path, capsys, text, message):
    toml = tmp_path / "sweep.toml"
    toml.write_text(text)
    assert mrvl_sweep.main([str(toml), "-o", str(tmp_path / "r.csv"), "--workers", "0",
                            "--cache-dir", str(tmp_path)]) == 1  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert err.startswith("mrvl-sweep: error:") and message in err and "\n" not in err, err


def test_explicit_points_and_target_file(tmp_path):
    (tmp_path / "part.json").write_text(
        '{"name": "slow-ddr", "base": "cn10ka", "ddr_bytes_per_cycle": 16}'
    )
    base, points = design_points({
        "target_file": "part.json", "base_dir": str(tmp_path),
        "points": [{"model": "zoo:resnet18", "max_tiles": 4}, {"model": "a.onnx", "cascade": True}],
    })  # fmt: skip
    assert base.name == "slow-ddr" and base.ddr_bytes_per_cycle == 16
    assert points[0].overrides == (("max_tiles", 4),)
    assert points[1].cascade and points[1].model == str(tmp_path / "a.onnx")
    with pytest.raises(SweepSpecError, match="no model"):
        design_points({"points": [{"max_tiles": 4}]})
