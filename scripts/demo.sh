#!/usr/bin/env bash
# Install mrvl (if needed) and run the demo: compile the bundled MNIST model, run it hybrid
# (MLIP simulator + TVM on the CPU), show where each ONNX node ran and the agreement with
# onnxruntime.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/mrvl-demo "$@"
