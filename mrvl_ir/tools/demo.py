"""mrvl-demo: the bundled MNIST model through the whole flow, run hybrid, checked.

It is `mrvlc <bundled mnist.onnx> -o out/mnist --run`: the region goes to the MLIP simulator,
the softmax stays on the CPU, and the result is compared with onnxruntime.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from mrvl.models import bundled_model_path
from mrvl.tools import mrvlc


def main(argv: Sequence[str] | None = None) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    model = bundled_model_path("mnist")
    print(f"mrvl demo: compiling {model.name} for the MLIP (cn10ka, 8 tiles) + TVM llvm")
    return mrvlc.main([str(model), "-o", "out/mnist", "--run", *extra])


if __name__ == "__main__":
    sys.exit(main())
