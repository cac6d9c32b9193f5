#!/usr/bin/env bash
# Create .venv (Python 3.11, 3.12 or 3.13) and install mrvl with its pinned dependencies.
# Idempotent. PYTHON=/path/to/python3.13 picks the interpreter of a new .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
if ! "$PYTHON" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))'; then
  echo "mrvl needs Python 3.11, 3.12 or 3.13 (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.1x" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.mrvl-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  # setuptools' editable finder (mrvl maps onto mrvl_ir/) always says "Editable installation"
  # in a 10-line box, as a warning; it is information only, and the one warning muted here.
  PYTHONWARNINGS="ignore:Editable installation.:UserWarning" \
    .venv/bin/python -m pip install --quiet -c constraints.txt -e '.[test,plot]'
  touch "$stamp"
fi
