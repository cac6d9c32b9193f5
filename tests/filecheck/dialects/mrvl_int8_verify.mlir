// RUN: mrvl-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Each int8 verifier names the problem.

func.func @f(%x: tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, %w: tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>) {
  %c = mrvl.conv2d %x, %w out_quant <0.25, 0> weight_scales [0.5, 0.5] : (tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>) -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.conv2d: an int8 layer needs in_quant and out_quant

// -----

func.func @f(%x: tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, %w: tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>) {
  %c = mrvl.conv2d %x, %w in_quant [#mrvl.quant<0.5, 0>] out_quant <0.25, 0> weight_scales [0.5] : (tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>) -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.conv2d: 1 weight scales for 2 output channels

// -----

func.func @f(%x: tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, %w: tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>, %b: tensor<2xf32, #mrvl.layout<O>>) {
  %c = mrvl.conv2d %x, %w bias %b in_quant [#mrvl.quant<0.5, 0>] out_quant <0.25, 0> weight_scales [0.5, 0.5] : (tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>, tensor<2xf32, #mrvl.layout<O>>) -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.conv2d: an int8 layer's bias is i32 (at s_x * s_w)

// -----

func.func @f(%x: tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, %w: tensor<2x1x1x2xf16, #mrvl.layout<OHWI>>) {
  %c = mrvl.conv2d %x, %w : (tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, tensor<2x1x1x2xf16, #mrvl.layout<OHWI>>) -> tensor<1x2x2x2xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.conv2d: an int8 layer has int8 inputs and result

// -----

func.func @f(%x: tensor<1x2x2x2xf16, #mrvl.layout<NHWC>>) {
  %s = mrvl.add %x, %x in_quant [#mrvl.quant<0.5, 0>, #mrvl.quant<0.5, 0>] out_quant <0.5, 0> : tensor<1x2x2x2xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.add: in_quant / out_quant on a float layer

// -----

func.func @f(%x: tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>) {
  %s = mrvl.add %x, %x in_quant [#mrvl.quant<0.5, 0>] out_quant <0.5, 0> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.add: 1 in_quant for 2 inputs

// -----

func.func @f(%x: tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>) {
  %q = mrvl.quantize %x quant <0.5, 200> : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: #mrvl.quant: zero point 200 outside [-128, 127]

// -----

func.func @f(%x: tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>) {
  %q = mrvl.quantize %x quant <-0.5, 0> : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: #mrvl.quant: scale -0.5 must be positive and finite

// -----

func.func @f(%x: tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>) {
  %q = mrvl.quantize %x quant <0.5, 0> : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.quantize: the result is i8

// -----

func.func @f(%x: tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>) {
  %q = mrvl.dequantize %x quant <0.5, 0> : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.dequantize: the input is i8

// -----

func.func @f(%x: tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>) {
  %q = mrvl.dequantize %x quant <0.5, 0> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NCHW>>
  func.return
}
// CHECK: mrvl.dequantize: only the element type may change

// -----

func.func @f(%x: tensor<1x2x3x2xi8, #mrvl.layout<NHWC>>, %yt: tensor<16xf32, #mrvl.layout<O>>, %xt: tensor<24xf32, #mrvl.layout<O>>) {
  %r = mrvl.resize %x, %yt, %xt mode half_pixel in_quant [#mrvl.quant<0.5, 3>] out_quant <0.5, 3> : (tensor<1x2x3x2xi8, #mrvl.layout<NHWC>>, tensor<16xf32, #mrvl.layout<O>>, tensor<24xf32, #mrvl.layout<O>>) -> tensor<1x4x6x2xi8, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.resize: ytab must be i32 with 3 values per output index (12)

// -----

func.func @f(%x: tensor<1x2x3x2xi8, #mrvl.layout<NHWC>>, %yt: tensor<12xi32, #mrvl.layout<O>>, %xt: tensor<18xi32, #mrvl.layout<O>>) {
  %r = mrvl.resize %x, %yt, %xt mode half_pixel : (tensor<1x2x3x2xi8, #mrvl.layout<NHWC>>, tensor<12xi32, #mrvl.layout<O>>, tensor<18xi32, #mrvl.layout<O>>) -> tensor<1x4x6x2xi8, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.resize: an int8 layer needs in_quant and out_quant
