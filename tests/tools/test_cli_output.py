"""What the command lines print: deny options, written files, pass list, elided constants,
progress."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pytest

from mrvl.printing import ELIDED
from mrvl.tools import mrvl_opt, mrvlc


def _placement(out: str) -> dict[str, str]:
    """ONNX node → 'runs on' from mrvlc's placement table."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].startswith("/"):
            rows[parts[0]] = parts[2]
    return rows


def test_deny_ops_and_nodes_keep_nodes_on_the_cpu(mnist_path, tmp_path, capsys):
    argv = [str(mnist_path), "-o", str(tmp_path), "--deny-ops", "MaxPool"]
    assert mrvlc.main([*argv, "--deny-nodes", "/fc2/Gemm,/relu3/Relu"]) == 0
    rows = _placement(capsys.readouterr().out)
    assert rows["/pool1/MaxPool"] == rows["/pool2/MaxPool"] == "cpu"
    assert rows["/fc2/Gemm"] == rows["/relu3/Relu"] == "cpu"
    assert rows["/conv1/Conv"].startswith("mrvl_region_")


def test_require_mac_layer_sends_regions_without_conv_or_fc_back(mnist_path, tmp_path, capsys):
    # Denying the convs and fcs leaves Relu/Flatten regions without a MAC layer.
    deny = ["--deny-ops", "Conv,Gemm"]
    assert mrvlc.main([str(mnist_path), "-o", str(tmp_path / "a"), *deny]) == 0
    without = _placement(capsys.readouterr().out)
    assert any(target != "cpu" for target in without.values())
    argv = [str(mnist_path), "-o", str(tmp_path / "b"), *deny, "--require-mac-layer"]
    assert mrvlc.main(argv) == 0
    assert set(_placement(capsys.readouterr().out).values()) == {"cpu"}


def test_output_lists_every_file_it_wrote(mnist_path, tmp_path, capsys):
    out = tmp_path / "out"
    assert mrvlc.main([str(mnist_path), "-o", str(out), "--deny-ops", "MaxPool"]) == 0
    listed = re.findall(r"^  (\S+)$", capsys.readouterr().out, re.MULTILINE)
    expected = {
        str(out / f"mrvl_region_{i}{suffix}")
        for i in range(3)
        for suffix in ("-nodes.json", "-consts.json", ".bin")
    } | {str(out / "model.so")}
    assert set(listed) == expected
    assert {str(p) for p in out.iterdir()} == expected


def test_mrvl_opt_lists_mrvl_passes_in_order(capsys):
    from mrvl.passes import DEFAULT_PIPELINE

    mrvl_opt.main(["--list-mrvl-passes"])
    out = capsys.readouterr().out
    names = re.findall(r"^    ([a-z0-9-]+)", out, re.MULTILINE)
    assert names == list(DEFAULT_PIPELINE)
    assert "convert-mrvl-to-sched{mcpu=...,num-tiles=...,wb-pin-ocm=...,cascade=...}" in out
    assert "schedule each layer" in out  # each pass has its one-line summary


def test_mrvl_opt_help_shows_mrvl_passes_in_its_epilog(capsys):
    with pytest.raises(SystemExit):
        mrvl_opt.main(["--help"])
    out = capsys.readouterr().out
    assert "--list-mrvl-passes" in out
    tail = out[out.index("mrvl passes, in the order") :]
    assert "convert-sched-to-mlip" in tail


def test_mrvl_opt_runs_every_pass_without_importing_tvm():
    """Each lit RUN line starts mrvl-opt: the IR passes and the pass list must not import
    TVM (3 s of CPU a start under load, when the int8 fold imported the partition's
    Relax helpers); only `tvm_ffi`, which `import mrvl` needs for its hooks, is loaded."""
    script = (
        "import sys\n"
        "from mrvl.passes import ALL_PASSES\n"
        "from mrvl.tools import mrvl_opt\n"
        "for name, load in ALL_PASSES.items():\n"
        "    load()\n"
        "    assert 'tvm' not in sys.modules, name\n"
        "mrvl_opt.mrvl_passes_text()\n"
        "assert 'tvm' not in sys.modules, 'the pass list'\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("stage", ["mrvl", "sched", "mlip", "asm"])
def test_emit_elides_large_constants(mnist_path, capsys, stage):
    assert mrvlc.main([str(mnist_path), "--emit", stage]) == 0
    out = capsys.readouterr().out
    assert ELIDED in out
    assert re.search(r"^// \d+ constants of more than 16 elements elided", out, re.MULTILINE)
    assert max(len(line) for line in out.splitlines()) < 1000
    assert len(out) < 100_000


def test_emit_json_elides_constant_data(mnist_path, capsys):
    assert mrvlc.main([str(mnist_path), "--emit", "json"]) == 0
    out = capsys.readouterr().out
    assert "<elided: " in out and len(out) < 200_000


@pytest.mark.parametrize("stage", ["mrvl", "sched", "mlip"])
def test_full_constants_round_trip_through_mrvl_opt(mnist_path, tmp_path, capsys, stage):
    assert mrvlc.main([str(mnist_path), "--emit", stage, "--full-constants"]) == 0
    full = capsys.readouterr().out.split("\n", 1)[1]  # drop the region banner
    assert ELIDED not in full
    (tmp_path / "full.mlir").write_text(full)
    mrvl_opt.main([str(tmp_path / "full.mlir"), "--print-debuginfo"])
    assert capsys.readouterr().out.rstrip("\n") == full.rstrip("\n")


def test_elided_text_is_refused_by_mrvl_opt(mnist_path, tmp_path, capsys):
    assert mrvlc.main([str(mnist_path), "--emit", "mrvl"]) == 0
    (tmp_path / "elided.mlir").write_text(capsys.readouterr().out.split("\n", 1)[1])
    with pytest.raises(SystemExit) as exit:
        mrvl_opt.main([str(tmp_path / "elided.mlir"), "-p", "mrvl-cast-fp16"])
    assert exit.value.code == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.match(r"mrvl-opt: error: \S+elided\.mlir:\d+: .*elided.*--full-constants", err)


def test_dump_dir_elides_unless_asked(mnist_path, tmp_path):
    argv = [str(mnist_path), "-o", str(tmp_path / "o"), "--dump-dir"]
    assert mrvlc.main([*argv, str(tmp_path / "elided")]) == 0
    assert mrvlc.main([*argv, str(tmp_path / "full"), "--full-constants"]) == 0
    elided = {p.name: p.read_text() for p in (tmp_path / "elided").glob("*.mlir")}
    full = {p.name: p.read_text() for p in (tmp_path / "full").glob("*.mlir")}
    assert elided.keys() == full.keys() and len(elided) > 3
    assert all(ELIDED in text for text in elided.values())
    assert not any(ELIDED in text for text in full.values())
    assert sum(map(len, elided.values())) * 10 < sum(map(len, full.values()))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_and_quiet_otherwise(mnist_model, monkeypatch, capsys):
    import mrvl

    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(mnist_model), deny_ops=["MaxPool"])
    mrvl.build(mod)
    assert capsys.readouterr().err == ""  # not a terminal: nothing
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    mrvl.build(mod)
    # tqdm redraws at most every 0.1 s, so which counts appear depends on timing; the total does not
    assert "compiling regions" in terminal.getvalue() and "/3 [" in terminal.getvalue()


def test_num_tiles_defaults_to_what_the_part_has(mnist_path, tmp_path, capsys):
    from mrvl.binary import read_header

    assert mrvlc.main([str(mnist_path), "-o", str(tmp_path), "--mcpu", "cnf10kb"]) == 0
    header = read_header((tmp_path / "mrvl_region_0.bin").read_bytes())
    assert (header.target, header.num_tiles) == ("cnf10kb", 4)
