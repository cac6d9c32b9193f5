#!/usr/bin/env bash
# Install mrvl (if needed) and run the whole test suite: the FileCheck tests (lit), then
# pytest including the model-scale tests marked slow (about 9 minutes on 2 cores).
# `--fast` leaves the slow tests out (about three minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
marker=""
if [ "${1:-}" = "--fast" ]; then marker="not slow"; fi
.venv/bin/lit --order=lexical tests/filecheck
# Two workers (CI has 2 cores), each test file on one worker so that a file's shared builds
# (tests/models, tests/zoo) are made once.
exec .venv/bin/pytest -n 2 --dist loadfile -m "$marker" tests
