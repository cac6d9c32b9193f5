#!/usr/bin/env bash
# Install mrvl (if needed) and run the whole test suite: FileCheck tests (lit), then pytest.
# `--all` also runs the model-scale tests marked slow.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
marker="not slow"
if [ "${1:-}" = "--all" ]; then marker=""; fi
.venv/bin/lit --order=lexical tests/filecheck
exec .venv/bin/pytest -m "$marker" tests
