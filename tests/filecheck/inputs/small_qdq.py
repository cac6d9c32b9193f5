"""Write the QDQ form of `qdq_models.small_cnn` (onnxruntime's `quantize_static`, per channel)
to argv[1], for the FileCheck tests of `mrvlc --emit` on an int8 model."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "quantization"))
import onnx  # noqa: E402
from qdq_models import quantize_static_qdq, small_cnn  # noqa: E402

onnx.save(quantize_static_qdq(small_cnn()), sys.argv[1])
