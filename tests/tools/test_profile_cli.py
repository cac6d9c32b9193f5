"""`mrvlc --profile/--trace/--plot` (and `mrvl.profile`) on MNIST: one run, both files, the
printed summary, and one-line errors."""

from __future__ import annotations

import contextlib
import io
import json
import sys

import pytest

from mrvl.sim.profile import check_profile
from mrvl.tools import mrvlc


@pytest.fixture(scope="module")
def profiled(mnist_path, tmp_path_factory):
    """One profiled run of MNIST on 2 tiles, with --run: (directory, stdout)."""
    out = tmp_path_factory.mktemp("profile")
    argv = [
        str(mnist_path),
        "--num-tiles",
        "2",
        "--run",
        "--profile",
        str(out / "profile.json"),
        "--trace",
        str(out / "trace.json"),
        "--plot",
        str(out / "layers.svg"),
    ]
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        assert mrvlc.main(argv) == 0
    return out, text.getvalue()


def test_profile_json_has_every_mac_layer_and_follows_the_schema(profiled):
    out, _ = profiled
    document = json.loads((out / "profile.json").read_text())
    check_profile(document)
    layers = {x["onnx_node"]: x for x in document["layers"]}
    assert {"/conv1/Conv", "/conv2/Conv", "/fc1/Gemm", "/fc2/Gemm"} <= set(layers)
    # MACs of the model's own layers: fc1 1568->256, fc2 256->10
    assert layers["/fc1/Gemm"]["macs"] == 1568 * 256
    assert layers["/fc2/Gemm"]["macs"] == 256 * 10
    assert all(x["cycles"] >= x["roofline_cycles"] > 0 for x in layers.values() if x["macs"])
    assert document["regions"][0]["num_tiles"] == 2
    assert document["total_cycles"] >= document["roofline_cycles"] > 0


def test_summary_prints_totals_and_the_top_layers(profiled):
    out, text = profiled
    assert "output 0 vs onnxruntime" in text  # --run ran, and the profile came from that run
    total = json.loads((out / "profile.json").read_text())["total_cycles"]
    assert f"total: {total} cycles = {total / 1000:.1f} us at 1000 MHz" in text
    assert "MAC util %" in text and "x roofline" in text and "/fc1/Gemm" in text
    assert f"wrote the trace to {out / 'trace.json'}" in text


def test_trace_opens_as_chrome_trace_events(profiled):
    out, _ = profiled
    events = json.loads((out / "trace.json").read_text())["traceEvents"]
    processes = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert processes == {"tile 0", "tile 1"}
    slices = [e for e in events if e["ph"] == "X"]
    assert {e["name"] for e in slices} >= {"/conv1/Conv", "/fc1/Gemm"}
    assert all(e["dur"] > 0 and e["tid"] in (0, 1, 2) for e in slices)
    assert any(e["ph"] == "C" for e in events)


def test_plot_is_an_svg(profiled):
    out, _ = profiled
    assert (out / "layers.svg").read_text().lstrip().startswith(("<?xml", "<svg"))


def test_profile_without_output_directory_writes_only_the_profile(mnist_path, tmp_path, capsys):
    assert (
        mrvlc.main([str(mnist_path), "--num-tiles", "1", "--profile", str(tmp_path / "p.json")])
        == 0
    )
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]
    assert "total:" in capsys.readouterr().out


def _error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("mrvlc: error: "), err
    return lines[0]


def test_plot_needs_svg_or_png(mnist_path, tmp_path, capsys):
    assert mrvlc.main([str(mnist_path), "--plot", str(tmp_path / "x.pdf")]) == 2
    assert ".svg or .png" in _error(capsys)


def test_plot_without_matplotlib_is_one_line(mnist_path, tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    monkeypatch.delitem(sys.modules, "matplotlib", raising=False)
    assert mrvlc.main([str(mnist_path), "--plot", str(tmp_path / "x.svg")]) == 1
    assert "pip install 'mrvl[plot]'" in _error(capsys)


def test_profile_with_emit_is_refused(mnist_path, tmp_path, capsys):
    assert mrvlc.main([str(mnist_path), "--emit", "mlip", "--trace", str(tmp_path / "t")]) == 2
    assert "--emit" in _error(capsys)


def test_profile_into_a_missing_directory_is_refused(mnist_path, tmp_path, capsys):
    path = tmp_path / "no" / "p.json"
    assert mrvlc.main([str(mnist_path), "--profile", str(path)]) == 2
    assert "no directory" in _error(capsys)


def test_profile_needs_fixed_input_shapes(conv_relu, tmp_path, capsys):
    import onnx

    path = tmp_path / "dyn.onnx"
    onnx.save(conv_relu("N"), path)
    assert mrvlc.main([str(path), "--profile", str(tmp_path / "p.json")]) == 2
    assert "dynamic dimension" in _error(capsys)
    assert (
        mrvlc.main([str(path), "--input-shape", "x=2,1,8,8", "--trace", str(tmp_path / "t.json")])
        == 0
    )
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert {e["name"] for e in events if e["ph"] == "X"} >= {"conv"}


def test_mrvl_profile_from_python(mnist_model):
    import mrvl

    profile = mrvl.profile(mnist_model, num_tiles=1)
    assert profile.regions[0].num_tiles == 1
    assert profile.total_cycles > 0 and profile.to_json()["layers"]


def test_run_names_the_layers_that_saturated(mnist_path, tmp_path, capsys, monkeypatch):
    """The engines count saturated values and NaNs into the run's RunStats; --run reports
    them per layer (counts forced here, on the first conv, by wrapping the simulator)."""
    import mrvl.runtime

    real = mrvl.runtime.sim.run

    def counting_run(valid, inputs, **kwargs):
        outputs = real(valid, inputs, **kwargs)
        stats = kwargs.get("stats")
        if stats is not None:
            conv = next(i for i, ins in enumerate(valid.code) if ins.opcode == "conv")
            stats.saturated[conv], stats.nans[conv] = 3, 1
        return outputs

    monkeypatch.setattr(mrvl.runtime.sim, "run", counting_run)
    assert mrvlc.main([str(mnist_path), "-o", str(tmp_path), "--run"]) == 0
    err = capsys.readouterr().err
    assert err.strip() == (
        "mrvlc: warning: layer '/conv1/Conv' saturated 3 values at +-65504 and produced 1 NaNs"
    )


def test_a_hybrid_model_profiles_each_region_and_sums_them(mnist_path, tmp_path, capsys):
    path = tmp_path / "p.json"
    argv = [str(mnist_path), "--deny-nodes", "/pool1/MaxPool", "--num-tiles", "1"]
    assert mrvlc.main([*argv, "--profile", str(path)]) == 0
    document = json.loads(path.read_text())
    check_profile(document)
    regions = document["regions"]
    assert len(regions) == 2
    assert document["total_cycles"] == sum(r["total_cycles"] for r in regions)
    assert document["roofline_cycles"] == sum(x["roofline_cycles"] for x in document["layers"])
    where = {x["onnx_node"]: x["region"] for x in document["layers"]}
    assert where["/conv1/Conv"] != where["/conv2/Conv"]
    assert "/pool1/MaxPool" not in where  # on the CPU
