// RUN: mrvl-opt %s -p mrvl-canonicalize --print-debuginfo | filecheck %s

// A conversion followed by its inverse, identity data ops and reshape chains disappear.

func.func @inverse(%x: tensor<1x2x3x4xf16, #mrvl.layout<NHWC>>) -> tensor<1x2x3x4xf16, #mrvl.layout<NHWC>> {
  %0 = mrvl.layout_convert %x : tensor<1x2x3x4xf16, #mrvl.layout<NHWC>> -> tensor<1x4x2x3xf16, #mrvl.layout<NCHW>> loc("/a")
  %1 = mrvl.layout_convert %0 : tensor<1x4x2x3xf16, #mrvl.layout<NCHW>> -> tensor<1x2x3x4xf16, #mrvl.layout<NHWC>> loc("/b")
  func.return %1 : tensor<1x2x3x4xf16, #mrvl.layout<NHWC>>
}
// CHECK-LABEL: func.func @inverse
// CHECK-NEXT:    func.return %x

func.func @identity(%x: tensor<1x24xf16, #mrvl.layout<NC>>) -> tensor<1x24xf16, #mrvl.layout<NC>> {
  %0 = mrvl.reshape %x : tensor<1x24xf16, #mrvl.layout<NC>> -> tensor<1x24xf16, #mrvl.layout<NC>>
  %1 = mrvl.cast %0 : tensor<1x24xf16, #mrvl.layout<NC>> -> tensor<1x24xf16, #mrvl.layout<NC>>
  func.return %1 : tensor<1x24xf16, #mrvl.layout<NC>>
}
// CHECK-LABEL: func.func @identity
// CHECK-NEXT:    func.return %x

func.func @chain(%x: tensor<1x2x3x4xf16, #mrvl.layout<NCHW>>) -> tensor<2x12xf16, #mrvl.layout<NC>> {
  %0 = mrvl.reshape %x : tensor<1x2x3x4xf16, #mrvl.layout<NCHW>> -> tensor<1x24xf16, #mrvl.layout<NC>> loc("/flatten/Flatten")
  %1 = mrvl.reshape %0 : tensor<1x24xf16, #mrvl.layout<NC>> -> tensor<2x12xf16, #mrvl.layout<NC>> loc("/reshape/Reshape")
  func.return %1 : tensor<2x12xf16, #mrvl.layout<NC>>
}
// CHECK-LABEL: func.func @chain
// CHECK-NEXT:    %{{.*}} = mrvl.reshape %x : tensor<1x2x3x4xf16, #mrvl.layout<NCHW>> -> tensor<2x12xf16, #mrvl.layout<NC>> loc("/reshape/Reshape")
// CHECK-NEXT:    func.return

func.func @kept(%x: tensor<1x2x3x4xf16, #mrvl.layout<NHWC>>) -> tensor<1x4x2x3xf16, #mrvl.layout<NCHW>> {
  %0 = mrvl.layout_convert %x : tensor<1x2x3x4xf16, #mrvl.layout<NHWC>> -> tensor<1x4x2x3xf16, #mrvl.layout<NCHW>> loc("/a")
  func.return %0 : tensor<1x4x2x3xf16, #mrvl.layout<NCHW>>
}
// CHECK-LABEL: func.func @kept
// CHECK-NEXT:    mrvl.layout_convert %x {{.*}} loc("/a")

func.func @unit_dims(%x: tensor<1x1x1x8xf16, #mrvl.layout<NHWC>>) -> tensor<1x8xf16, #mrvl.layout<NC>> {
  %0 = mrvl.layout_convert %x : tensor<1x1x1x8xf16, #mrvl.layout<NHWC>> -> tensor<1x8x1x1xf16, #mrvl.layout<NCHW>> loc("/gap/GlobalAveragePool")
  %1 = mrvl.reshape %0 : tensor<1x8x1x1xf16, #mrvl.layout<NCHW>> -> tensor<1x8xf16, #mrvl.layout<NC>> loc("/squeeze/Squeeze")
  func.return %1 : tensor<1x8xf16, #mrvl.layout<NC>>
}
// A conversion that moves only unit dimensions moves no bytes: it becomes a reshape, and the
// reshape chain collapses.
// CHECK-LABEL: func.func @unit_dims
// CHECK-NEXT:    %{{.*}} = mrvl.reshape %x : tensor<1x1x1x8xf16, #mrvl.layout<NHWC>> -> tensor<1x8xf16, #mrvl.layout<NC>> loc("/squeeze/Squeeze")
// CHECK-NEXT:    func.return
