#!/usr/bin/env bash
# Install mrvl (if needed) and run the whole test suite: the FileCheck tests (lit), then
# pytest including the model-scale tests marked slow (about 20 minutes on 2 cores, measured
# before the units of work reached pytest-xdist again on 2026-11-27: less since, see README).
# `--fast` leaves the slow tests out (about three minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
marker=""
if [ "${1:-}" = "--fast" ]; then marker="not slow"; fi
# The simulator's Numba kernels compile once, next to lit, into Numba's on-disk cache; the
# pytest workers then load them instead of each compiling them (a minute of CPU each).
.venv/bin/python -c 'import sys; sys.path.insert(0, "tests"); import helpers; helpers.warm_simulator()' &
warm=$!
.venv/bin/lit --order=lexical tests/filecheck
wait "$warm" || echo "test.sh: the simulator warm-up failed; the pytest workers compile it" >&2
# Two workers (CI has 2 cores), each running the simulator on one thread: a run's second
# thread waits for the first between the convs they share, which would take the other
# worker's core (tests/sim/test_engine_threads.py runs 1, 2 and 3 threads on purpose).
export MRVL_SIM_THREADS="${MRVL_SIM_THREADS:-1}"
# Two workers (CI has 2 cores). Each unit of work (a test file, or one model of the
# model-scale files: tests/conftest.py) runs on one worker, so that its shared builds are made
# once.
# --durations: the slowest tests are listed at the end, where trimming the suite starts.
# --no-loadscope-reorder: units go out longest first, as tests/conftest.py orders them.
exec .venv/bin/pytest -n 2 --dist loadgroup --no-loadscope-reorder --durations=25 -m "$marker" tests
