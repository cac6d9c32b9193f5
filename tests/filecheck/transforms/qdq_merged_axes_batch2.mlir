// YOLOv5's decode head on one map with a batch of two (tests/e2e/test_int8_unit_rank5.py):
// its rank-5 tensors [2, 3, 7, 8, 8] -> [2, 3, 8, 8, 7] lead with the batch, so no unit axis
// drops; `mrvl.qdq_unit_axis` computes them on the views with H and W merged ([2, 3, 64, 7],
// NHWC 2x64x7x3), the pair the Transpose keeps together and the grid constants
// [1, 3, 8, 8, 2] broadcast along as one axis. All in int8 in one region, named as in the
// model; the Split and Concat stay along the last axis.
// RUN: python %S/../inputs/decode_head_qdq.py %t.onnx 2
// RUN: mrvlc %t.onnx --emit mrvl | filecheck %s

// CHECK:      // ----- region mrvl_region_0
// CHECK-NOT:  // ----- region
// CHECK:      func.func @mrvl_region_0(%x: tensor<2x16x8x8xf32, #mrvl.layout<NCHW>>
// CHECK:      mrvl.conv2d {{.*}} -> tensor<2x8x8x21xi8, #mrvl.layout<NHWC>> loc("/detect/Conv")
// CHECK:      mrvl.strided_copy {{.*}} -> tensor<2x64x7x3xi8, #mrvl.layout<NHWC>> loc("/detect/Transpose")
// CHECK:      mrvl.int8_table "sigmoid" {{.*}} : tensor<2x64x7x3xi8, #mrvl.layout<NHWC>> -> tensor<2x64x7x3xi8, #mrvl.layout<NHWC>> loc("/detect/Sigmoid")
// CHECK:      mrvl.strided_copy {{.*}} -> tensor<2x64x2x3xi8, #mrvl.layout<NHWC>> loc("/detect/Split")
// CHECK:      mrvl.int8_table "identity(x * 2.0 + 0.0)" {{.*}} -> tensor<2x64x2x3xi8, #mrvl.layout<NHWC>> loc("/detect/Mul")
// CHECK:      mrvl.add {{.*}} : tensor<2x64x2x3xi8, #mrvl.layout<NHWC>> loc("/detect/Add")
// CHECK:      mrvl.int8_table "pow" {{.*}} -> tensor<2x64x2x3xi8, #mrvl.layout<NHWC>> loc("/detect/Pow")
// CHECK:      mrvl.binary "mul" {{.*}}, tensor<1x64x2x3xf16, #mrvl.layout<NHWC>> -> tensor<2x64x2x3xf16, #mrvl.layout<NHWC>> loc("/detect/Mul_3")
// CHECK:      mrvl.concat {{.*}} axis 2 : {{.*}} -> tensor<2x64x4x3xi8, #mrvl.layout<NHWC>> loc("/detect/Concat")
// CHECK:      func.return {{.*}} : tensor<2x192x4xf32, #mrvl.layout<NCW>>, tensor<2x192x3xf32, #mrvl.layout<NCW>>
// CHECK-NOT:  // ----- region
