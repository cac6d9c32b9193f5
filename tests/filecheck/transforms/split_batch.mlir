// RUN: mrvl-opt %s -p mrvl-split-batch --print-debuginfo --split-input-file | filecheck %s

// A pool over 10 images becomes a pool over the first 8 and one over the last 2, each on a
// strided copy of its images (offsets 0 and 8 images of 4x4x8), and a concat of the two on
// the batch axis; every new op keeps the layer's location. A conv's weight and bias stay
// the operands of each group's conv. A layer over at most 8 images is left as it is.

func.func @pool(%x: tensor<10x4x4x8xf16, #mrvl.layout<NHWC>>) -> tensor<10x2x2x8xf16, #mrvl.layout<NHWC>> {
  %0 = mrvl.maxpool2d %x kernel [2, 2] strides [2, 2] : tensor<10x4x4x8xf16, #mrvl.layout<NHWC>> -> tensor<10x2x2x8xf16, #mrvl.layout<NHWC>> loc("/p/MaxPool")
  func.return %0 : tensor<10x2x2x8xf16, #mrvl.layout<NHWC>>
}
// CHECK-LABEL: func.func @pool
// CHECK-NEXT: %[[A:.*]] = mrvl.strided_copy %x offset 0 strides [128, 32, 8, 1] box [8, 4, 4, 8] : tensor<10x4x4x8xf16, #mrvl.layout<NHWC>> -> tensor<8x4x4x8xf16, #mrvl.layout<NHWC>> loc("/p/MaxPool")
// CHECK-NEXT: %[[P:.*]] = mrvl.maxpool2d %[[A]] kernel [2, 2] strides [2, 2] : tensor<8x4x4x8xf16, #mrvl.layout<NHWC>> -> tensor<8x2x2x8xf16, #mrvl.layout<NHWC>> loc("/p/MaxPool")
// CHECK-NEXT: %[[B:.*]] = mrvl.strided_copy %x offset 1024 strides [128, 32, 8, 1] box [2, 4, 4, 8] : tensor<10x4x4x8xf16, #mrvl.layout<NHWC>> -> tensor<2x4x4x8xf16, #mrvl.layout<NHWC>> loc("/p/MaxPool")
// CHECK-NEXT: %[[Q:.*]] = mrvl.maxpool2d %[[B]] kernel [2, 2] strides [2, 2] : tensor<2x4x4x8xf16, #mrvl.layout<NHWC>> -> tensor<2x2x2x8xf16, #mrvl.layout<NHWC>> loc("/p/MaxPool")
// CHECK-NEXT: %[[C:.*]] = mrvl.concat %[[P]], %[[Q]] axis 0 : tensor<8x2x2x8xf16, #mrvl.layout<NHWC>>, tensor<2x2x2x8xf16, #mrvl.layout<NHWC>> -> tensor<10x2x2x8xf16, #mrvl.layout<NHWC>> loc("/p/MaxPool")
// CHECK-NEXT: func.return %[[C]]

// -----

func.func @conv(%x: tensor<9x3x3x4xf16, #mrvl.layout<NHWC>>, %w: tensor<4x1x1x4xf16, #mrvl.layout<OHWI>>, %b: tensor<4xf32, #mrvl.layout<O>>) -> tensor<9x3x3x4xf16, #mrvl.layout<NHWC>> {
  %0 = mrvl.conv2d %x, %w bias %b act relu : (tensor<9x3x3x4xf16, #mrvl.layout<NHWC>>, tensor<4x1x1x4xf16, #mrvl.layout<OHWI>>, tensor<4xf32, #mrvl.layout<O>>) -> tensor<9x3x3x4xf16, #mrvl.layout<NHWC>> loc("/c/Conv")
  func.return %0 : tensor<9x3x3x4xf16, #mrvl.layout<NHWC>>
}
// CHECK-LABEL: func.func @conv
// CHECK:      mrvl.conv2d %{{.*}}, %w bias %b act relu : (tensor<8x3x3x4xf16, #mrvl.layout<NHWC>>, {{.*}}) -> tensor<8x3x3x4xf16, #mrvl.layout<NHWC>> loc("/c/Conv")
// CHECK:      mrvl.strided_copy %x offset 288 strides [36, 12, 4, 1] box [1, 3, 3, 4]
// CHECK:      mrvl.conv2d %{{.*}}, %w bias %b act relu : (tensor<1x3x3x4xf16, #mrvl.layout<NHWC>>, {{.*}}) -> tensor<1x3x3x4xf16, #mrvl.layout<NHWC>> loc("/c/Conv")
// CHECK:      mrvl.concat {{.*}} axis 0

// -----

func.func @small(%x: tensor<8x4x4x8xf16, #mrvl.layout<NHWC>>) -> tensor<8x2x2x8xf16, #mrvl.layout<NHWC>> {
  %0 = mrvl.maxpool2d %x kernel [2, 2] strides [2, 2] : tensor<8x4x4x8xf16, #mrvl.layout<NHWC>> -> tensor<8x2x2x8xf16, #mrvl.layout<NHWC>>
  func.return %0 : tensor<8x2x2x8xf16, #mrvl.layout<NHWC>>
}
// CHECK-LABEL: func.func @small
// CHECK-NEXT: mrvl.maxpool2d %x kernel [2, 2] strides [2, 2] : tensor<8x4x4x8xf16, #mrvl.layout<NHWC>> -> tensor<8x2x2x8xf16, #mrvl.layout<NHWC>>
// CHECK-NEXT: func.return
