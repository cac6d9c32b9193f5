// RUN: mrvl-opt %s --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s

// The residual add, channel concat and pooling with ceil_mode round-trip.

func.func @layers(%a: tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>, %b: tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>) -> tensor<1x3x3x8xf16, #mrvl.layout<NHWC>> {
  %s = mrvl.add %a, %b act relu : tensor<1x5x5x4xf16, #mrvl.layout<NHWC>> loc("/add/Add")
  %c = mrvl.concat %s, %a : tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>, tensor<1x5x5x4xf16, #mrvl.layout<NHWC>> -> tensor<1x5x5x8xf16, #mrvl.layout<NHWC>> loc("/cat/Concat")
  %p = mrvl.maxpool2d %c kernel [2, 2] strides [2, 2] ceil_mode : tensor<1x5x5x8xf16, #mrvl.layout<NHWC>> -> tensor<1x3x3x8xf16, #mrvl.layout<NHWC>> loc("/pool/MaxPool")
  %q = mrvl.avgpool2d %c kernel [3, 3] strides [2, 2] pads [1, 1, 1, 1] ceil_mode count_include_pad : tensor<1x5x5x8xf16, #mrvl.layout<NHWC>> -> tensor<1x3x3x8xf16, #mrvl.layout<NHWC>>
  func.return %p : tensor<1x3x3x8xf16, #mrvl.layout<NHWC>>
}

// CHECK:      %s = mrvl.add %a, %b act relu : tensor<1x5x5x4xf16, #mrvl.layout<NHWC>> loc("/add/Add")
// CHECK-NEXT: %c = mrvl.concat %s, %a : tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>, tensor<1x5x5x4xf16, #mrvl.layout<NHWC>> -> tensor<1x5x5x8xf16, #mrvl.layout<NHWC>> loc("/cat/Concat")
// CHECK-NEXT: %p = mrvl.maxpool2d %c kernel [2, 2] strides [2, 2] ceil_mode : {{.*}} loc("/pool/MaxPool")
// CHECK-NEXT: %q = mrvl.avgpool2d %c kernel [3, 3] strides [2, 2] pads [1, 1, 1, 1] ceil_mode count_include_pad :

func.func @scale_shift(%x: tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>) -> tensor<1x5x5x4xf16, #mrvl.layout<NHWC>> {
  %s = mrvl.constant "s" = dense<[1.0, 2.0, 0.5, -1.0]> : tensor<4xf32> -> tensor<4xf32, #mrvl.layout<O>>
  %b = mrvl.constant "b" = dense<0.25> : tensor<4xf32> -> tensor<4xf32, #mrvl.layout<O>>
  %y = mrvl.scale_shift %x, %s, %b act relu : (tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>, tensor<4xf32, #mrvl.layout<O>>, tensor<4xf32, #mrvl.layout<O>>) -> tensor<1x5x5x4xf16, #mrvl.layout<NHWC>> loc("/bn/BatchNormalization")
  func.return %y : tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>
}
// CHECK-LABEL: func.func @scale_shift
// CHECK:         %y = mrvl.scale_shift %x, %s, %b act relu : {{.*}} loc("/bn/BatchNormalization")
