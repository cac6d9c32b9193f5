// RUN: mrvl-opt %s --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s

// Tensors of rank 5 and 6 (layouts NCDHW and NCTDHW, Relax's own order) print and parse back:
// attention's q/k/v split through [B, T, 3, heads, d] and Swin's window partition through
// [B, H/w, w, W/w, w, C] are strided copies whose inputs and results have those ranks.

func.func @moves(%q: tensor<2x6x24xf16, #mrvl.layout<NCW>>, %x: tensor<1x8x8x6xf16, #mrvl.layout<NHWC>>) {
  %0 = mrvl.strided_copy %q offset 0 strides [8, 144, 4, 24, 1] box [3, 2, 2, 6, 4] : tensor<2x6x24xf16, #mrvl.layout<NCW>> -> tensor<3x2x2x6x4xf16, #mrvl.layout<NCDHW>> loc("/attn/Transpose")
  %1 = mrvl.strided_copy %0 offset 96 strides [1] box [96] : tensor<3x2x2x6x4xf16, #mrvl.layout<NCDHW>> -> tensor<2x2x6x4xf16, #mrvl.layout<NCHW>> loc("/attn/Split")
  %2 = mrvl.reshape %x : tensor<1x8x8x6xf16, #mrvl.layout<NHWC>> -> tensor<1x2x4x2x4x6xf16, #mrvl.layout<NCTDHW>> loc("/win/Reshape")
  func.return
}

// CHECK:      mrvl.strided_copy %q offset 0 strides [8, 144, 4, 24, 1] box [3, 2, 2, 6, 4] : tensor<2x6x24xf16, #mrvl.layout<NCW>> -> tensor<3x2x2x6x4xf16, #mrvl.layout<NCDHW>> loc("/attn/Transpose")
// CHECK-NEXT: mrvl.strided_copy %{{.*}} offset 96 strides [1] box [96] : tensor<3x2x2x6x4xf16, #mrvl.layout<NCDHW>> -> tensor<2x2x6x4xf16, #mrvl.layout<NCHW>> loc("/attn/Split")
// CHECK-NEXT: mrvl.reshape %x : tensor<1x8x8x6xf16, #mrvl.layout<NHWC>> -> tensor<1x2x4x2x4x6xf16, #mrvl.layout<NCTDHW>> loc("/win/Reshape")

// A negative stride walks backwards: the elements it reads (48 down to 0, and up) lie in the input.
func.func @reverse(%s: tensor<2x7x8xf16, #mrvl.layout<NCW>>) {
  %0 = mrvl.strided_copy %s offset 48 strides [56, -8, 1] box [2, 7, 8] : tensor<2x7x8xf16, #mrvl.layout<NCW>> -> tensor<2x7x8xf16, #mrvl.layout<NCW>> loc("/reverse/Slice")
  func.return
}

// CHECK: mrvl.strided_copy %s offset 48 strides [56, -8, 1] box [2, 7, 8] : {{.*}} loc("/reverse/Slice")
