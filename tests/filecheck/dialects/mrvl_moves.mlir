// RUN: mrvl-opt %s --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s

// The data-movement layers print and parse back: concat on any axis, a strided copy (here an
// NHWC nearest upsample by 2, with zero strides), zero insertion for a transposed conv, and
// the table-driven bilinear resize.

func.func @moves(%x: tensor<1x3x4x2xf16, #mrvl.layout<NHWC>>, %t: tensor<1x4x6xf16, #mrvl.layout<NCW>>) {
  %0 = mrvl.concat %x, %x axis 2 : tensor<1x3x4x2xf16, #mrvl.layout<NHWC>>, tensor<1x3x4x2xf16, #mrvl.layout<NHWC>> -> tensor<1x3x8x2xf16, #mrvl.layout<NHWC>> loc("/cat/Concat")
  %1 = mrvl.concat %t, %t axis 2 : tensor<1x4x6xf16, #mrvl.layout<NCW>>, tensor<1x4x6xf16, #mrvl.layout<NCW>> -> tensor<1x4x12xf16, #mrvl.layout<NCW>> loc("/head/Concat")
  %2 = mrvl.strided_copy %x offset 0 strides [8, 0, 2, 0, 1] box [3, 2, 4, 2, 2] : tensor<1x3x4x2xf16, #mrvl.layout<NHWC>> -> tensor<1x6x8x2xf16, #mrvl.layout<NHWC>> loc("/up/Resize")
  %3 = mrvl.dilate %x strides [2, 3] : tensor<1x3x4x2xf16, #mrvl.layout<NHWC>> -> tensor<1x5x10x2xf16, #mrvl.layout<NHWC>> loc("/up/ConvTranspose")
  %yt = mrvl.constant "rows" = dense<0.0> : tensor<24xf32> -> tensor<24xf32, #mrvl.layout<O>>
  %xt = mrvl.constant "cols" = dense<0.0> : tensor<32xf32> -> tensor<32xf32, #mrvl.layout<O>>
  %4 = mrvl.resize %x, %yt, %xt mode align_corners : (tensor<1x3x4x2xf16, #mrvl.layout<NHWC>>, tensor<24xf32, #mrvl.layout<O>>, tensor<32xf32, #mrvl.layout<O>>) -> tensor<1x6x8x2xf16, #mrvl.layout<NHWC>> loc("/up/Resize_1")
  func.return
}

// CHECK:      mrvl.concat %x, %x axis 2 : {{.*}} -> tensor<1x3x8x2xf16, #mrvl.layout<NHWC>> loc("/cat/Concat")
// CHECK-NEXT: mrvl.concat %t, %t axis 2 : {{.*}} -> tensor<1x4x12xf16, #mrvl.layout<NCW>> loc("/head/Concat")
// CHECK-NEXT: mrvl.strided_copy %x offset 0 strides [8, 0, 2, 0, 1] box [3, 2, 4, 2, 2] : tensor<1x3x4x2xf16, #mrvl.layout<NHWC>> -> tensor<1x6x8x2xf16, #mrvl.layout<NHWC>> loc("/up/Resize")
// CHECK-NEXT: mrvl.dilate %x strides [2, 3] : tensor<1x3x4x2xf16, #mrvl.layout<NHWC>> -> tensor<1x5x10x2xf16, #mrvl.layout<NHWC>> loc("/up/ConvTranspose")
// CHECK:      mrvl.resize %x, %yt, %xt mode align_corners : ({{.*}}) -> tensor<1x6x8x2xf16, #mrvl.layout<NHWC>> loc("/up/Resize_1")
