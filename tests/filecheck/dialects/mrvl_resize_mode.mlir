// RUN: not mrvl-opt %s 2>&1 | filecheck %s

// mrvl.resize's mode is a mrvl.resize_coordinates enumeration: a mode it does not know is a
// parse error at the word, listing those it knows.

func.func @f(%x: tensor<1x3x4x2xf16, #mrvl.layout<NHWC>>, %t: tensor<24xf32, #mrvl.layout<O>>) {
  %y = mrvl.resize %x, %t, %t mode tf_crop_and_resize : (tensor<1x3x4x2xf16, #mrvl.layout<NHWC>>, tensor<24xf32, #mrvl.layout<O>>, tensor<24xf32, #mrvl.layout<O>>) -> tensor<1x6x6x2xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl_resize_mode.mlir:7:{{[0-9]+}}
// CHECK: Expected `half_pixel`, `pytorch_half_pixel`, `align_corners`, or `asymmetric`.
