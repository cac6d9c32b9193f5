#!/usr/bin/env bash
# Install mrvl (if needed) and run the whole test suite: the FileCheck tests (lit), then
# pytest including the model-scale tests marked slow (about 10 minutes on 2 cores).
# `--fast` leaves the slow tests out (about three minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
marker=""
if [ "${1:-}" = "--fast" ]; then marker="not slow"; fi
.venv/bin/lit --order=lexical tests/filecheck
exec .venv/bin/pytest -m "$marker" tests
