"""scripts/conformance.py shows progress on a terminal and nothing otherwise."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _harness():
    name = "mrvl_conformance_harness"  # the name tests/conformance loads it under
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "conformance.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_a_terminal_only():
    conformance = _harness()
    cases = conformance.node_cases(("Relu",))
    quiet, terminal = io.StringIO(), _Terminal()
    conformance.run_all(cases, stream=quiet)
    assert quiet.getvalue() == ""
    conformance.run_all(cases, stream=terminal)
    assert "conformance: 100%" in terminal.getvalue()
    assert f"{len(cases)}/{len(cases)}" in terminal.getvalue()
