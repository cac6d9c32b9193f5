// RUN: mrvl-opt %s -p mrvl-cast-fp16 --print-debuginfo | filecheck %s

// Weights become f16, the bias stays f32, layer results become f16, and casts appear at the
// region boundary, located at the layer that uses / produces the value.

func.func @region(%x: tensor<1x8x8x1xf32, #mrvl.layout<NHWC>>) -> tensor<1x8x8x4xf32, #mrvl.layout<NHWC>> {
  %w = mrvl.constant "region_mrvl_const_0" = dense<0.5> : tensor<4x3x3x1xf32> -> tensor<4x3x3x1xf32, #mrvl.layout<OHWI>> loc("/conv/Conv")
  %b = mrvl.constant "region_mrvl_const_1" = dense<1.0> : tensor<4xf32> -> tensor<4xf32, #mrvl.layout<O>> loc("/conv/Conv")
  %c = mrvl.conv2d %x, %w bias %b pads [1, 1, 1, 1] act relu : (tensor<1x8x8x1xf32, #mrvl.layout<NHWC>>, tensor<4x3x3x1xf32, #mrvl.layout<OHWI>>, tensor<4xf32, #mrvl.layout<O>>) -> tensor<1x8x8x4xf32, #mrvl.layout<NHWC>> loc("/conv/Conv")
  func.return %c : tensor<1x8x8x4xf32, #mrvl.layout<NHWC>>
}

// CHECK:      func.func @region(%x: tensor<1x8x8x1xf32, #mrvl.layout<NHWC>> {{.*}}) -> tensor<1x8x8x4xf32, #mrvl.layout<NHWC>> {
// CHECK-NEXT:   %x_1 = mrvl.cast %x : tensor<1x8x8x1xf32, #mrvl.layout<NHWC>> -> tensor<1x8x8x1xf16, #mrvl.layout<NHWC>> loc("/conv/Conv")
// CHECK-NEXT:   %w = mrvl.constant "region_mrvl_const_0" = dense<5.000000e-01> : tensor<4x3x3x1xf16> -> tensor<4x3x3x1xf16, #mrvl.layout<OHWI>> loc("/conv/Conv")
// CHECK-NEXT:   %b = mrvl.constant "region_mrvl_const_1" = dense<1.000000e+00> : tensor<4xf32> -> tensor<4xf32, #mrvl.layout<O>> loc("/conv/Conv")
// CHECK-NEXT:   %c = mrvl.conv2d %x_1, %w bias %b {{.*}} -> tensor<1x8x8x4xf16, #mrvl.layout<NHWC>> loc("/conv/Conv")
// CHECK-NEXT:   %0 = mrvl.cast %c : tensor<1x8x8x4xf16, #mrvl.layout<NHWC>> -> tensor<1x8x8x4xf32, #mrvl.layout<NHWC>> loc("/conv/Conv")
// CHECK-NEXT:   func.return %0 : tensor<1x8x8x4xf32, #mrvl.layout<NHWC>>
