"""Write the QDQ form of YOLOv5's decode head on one map (`tests/e2e/test_int8_unit_rank5.py`,
`mrvl.quantize`) with a batch of argv[2] to argv[1], for the FileCheck tests of its rank-5
tensors computed on rank-4 views (`mrvl.qdq_unit_axis`)."""

import sys
from pathlib import Path

tests = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(tests), str(tests / "e2e")]
import onnx  # noqa: E402
from test_int8_unit_rank5 import _quantized, decode_head  # noqa: E402

onnx.save(_quantized(decode_head(batch=int(sys.argv[2]))), sys.argv[1])
