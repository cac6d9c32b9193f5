// RUN: mrvl-opt %s --print-debuginfo --split-input-file --verify-diagnostics | filecheck %s

// mrvl.pad prints and parses back unchanged (pads before, then after, each dimension, in the
// operand's layout; its value), and its verifier names a bad pad count and a wrong result.

func.func @pad(%x: tensor<2x5x6x8xf16, #mrvl.layout<NHWC>>) -> tensor<2x8x7x8xf16, #mrvl.layout<NHWC>> {
  %a = mrvl.pad %x pads [0, 1, 0, 0, 0, 2, 1, 0] value -1.500000e+00 : tensor<2x5x6x8xf16, #mrvl.layout<NHWC>> -> tensor<2x8x7x8xf16, #mrvl.layout<NHWC>> loc("/pad/Pad")
  func.return %a : tensor<2x8x7x8xf16, #mrvl.layout<NHWC>>
}
// CHECK: %a = mrvl.pad %x pads [0, 1, 0, 0, 0, 2, 1, 0] value -1.500000e+00 : tensor<2x5x6x8xf16, #mrvl.layout<NHWC>> -> tensor<2x8x7x8xf16, #mrvl.layout<NHWC>> loc("/pad/Pad")

// -----

func.func @f(%x: tensor<2x5xf16, #mrvl.layout<NC>>) {
  %a = mrvl.pad %x pads [0, 1, 0] value 0.000000e+00 : tensor<2x5xf16, #mrvl.layout<NC>> -> tensor<2x6xf16, #mrvl.layout<NC>>
  func.return
}
// CHECK: mrvl.pad: pads [0, 1, 0] must be 4 values >= 0 (before, after)

// -----

func.func @f(%x: tensor<2x5xf16, #mrvl.layout<NC>>) {
  %a = mrvl.pad %x pads [0, 1, 0, 1] value 0.000000e+00 : tensor<2x5xf16, #mrvl.layout<NC>> -> tensor<2x6xf16, #mrvl.layout<NC>>
  func.return
}
// CHECK: mrvl.pad: the result must be [2, 7] in the input's layout
