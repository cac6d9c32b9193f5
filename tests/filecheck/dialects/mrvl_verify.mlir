// RUN: mrvl-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Each mrvl verifier names the problem.

func.func @f(%x: tensor<1x8x8x1xf16, #mrvl.layout<NHWC>>) {
  %p = mrvl.maxpool2d %x kernel [2, 2] strides [2, 2] : tensor<1x8x8x1xf16, #mrvl.layout<NHWC>> -> tensor<1x3x4x1xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.maxpool2d: output shape [1, 3, 4, 1] does not match the computed [1, 4, 4, 1]

// -----

func.func @f(%x: tensor<1x1x8x8xf16, #mrvl.layout<NCHW>>, %w: tensor<4x3x3x1xf16, #mrvl.layout<OHWI>>) {
  %c = mrvl.conv2d %x, %w : (tensor<1x1x8x8xf16, #mrvl.layout<NCHW>>, tensor<4x3x3x1xf16, #mrvl.layout<OHWI>>) -> tensor<1x6x6x4xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.conv2d: input must have layout NHWC, got NCHW

// -----

func.func @f(%x: tensor<1x8x8x2xf16, #mrvl.layout<NHWC>>, %w: tensor<4x3x3x1xf16, #mrvl.layout<OHWI>>) {
  %c = mrvl.conv2d %x, %w : (tensor<1x8x8x2xf16, #mrvl.layout<NHWC>>, tensor<4x3x3x1xf16, #mrvl.layout<OHWI>>) -> tensor<1x6x6x4xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.conv2d: weight input channels 1 must equal input channels 2 / groups 1

// -----

func.func @f(%x: tensor<1x8x8x1xf16, #mrvl.layout<NHWC>>, %w: tensor<4x3x3x1xf16, #mrvl.layout<OHWI>>, %b: tensor<4xf16, #mrvl.layout<O>>) {
  %c = mrvl.conv2d %x, %w bias %b : (tensor<1x8x8x1xf16, #mrvl.layout<NHWC>>, tensor<4x3x3x1xf16, #mrvl.layout<OHWI>>, tensor<4xf16, #mrvl.layout<O>>) -> tensor<1x6x6x4xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.conv2d: bias must be f32 (the MLIP adds it in fp32)

// -----

func.func @f(%x: tensor<1x16xf16, #mrvl.layout<NC>>, %w: tensor<10x15xf16, #mrvl.layout<OI>>) {
  %y = mrvl.fc %x, %w act relu : (tensor<1x16xf16, #mrvl.layout<NC>>, tensor<10x15xf16, #mrvl.layout<OI>>) -> tensor<1x10xf16, #mrvl.layout<NC>>
  func.return
}
// CHECK: mrvl.fc: weight has 15 input features but the input has 16

// -----

func.func @f(%x: tensor<1x16xf16, #mrvl.layout<NC>>, %w: tensor<10x16xf16, #mrvl.layout<OI>>) {
  %y = mrvl.fc %x, %w act clip min 0.0 : (tensor<1x16xf16, #mrvl.layout<NC>>, tensor<10x16xf16, #mrvl.layout<OI>>) -> tensor<1x10xf16, #mrvl.layout<NC>>
  func.return
}
// CHECK: mrvl.fc: activation clip takes act_max, act_min, got act_min

// -----

func.func @f(%x: tensor<1x16xf16, #mrvl.layout<NC>>, %w: tensor<3x16xf16, #mrvl.layout<OI>>) {
  %y = mrvl.fc %x, %w act prelu slopes [0.25, 0.5] : (tensor<1x16xf16, #mrvl.layout<NC>>, tensor<3x16xf16, #mrvl.layout<OI>>) -> tensor<1x3xf16, #mrvl.layout<NC>>
  func.return
}
// CHECK: mrvl.fc: prelu has 2 slopes for 3 channels

// -----

func.func @f(%x: tensor<1x4x4x3xf16, #mrvl.layout<NHWC>>) {
  %y = mrvl.add %x, %x act prelu slopes [0.25, 0.5] : tensor<1x4x4x3xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.add: prelu has 2 slopes for 3 channels

// -----

func.func @f(%x: tensor<1x4x4x3xf16, #mrvl.layout<NHWC>>, %s: tensor<1x1x1x2xf16, #mrvl.layout<NHWC>>) {
  %y = mrvl.mul %x, %s act sigmoid : (tensor<1x4x4x3xf16, #mrvl.layout<NHWC>>, tensor<1x1x1x2xf16, #mrvl.layout<NHWC>>) -> tensor<1x4x4x3xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.mul: rhs must have the type of lhs or be [N, 1, 1, C] NHWC

// -----

func.func @f(%x: tensor<1x2x3x4xf16, #mrvl.layout<NCHW>>) {
  %y = mrvl.layout_convert %x : tensor<1x2x3x4xf16, #mrvl.layout<NCHW>> -> tensor<1x2x3x4xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.layout_convert: NCHW->NHWC of [1, 2, 3, 4] gives [1, 3, 4, 2], not [1, 2, 3, 4]

// -----

func.func @f(%x: tensor<1x2x3x4xf16, #mrvl.layout<NCHW>>) {
  %y = mrvl.reshape %x : tensor<1x2x3x4xf16, #mrvl.layout<NCHW>> -> tensor<1x25xf16, #mrvl.layout<NC>>
  func.return
}
// CHECK: mrvl.reshape: [1, 2, 3, 4] and [1, 25] hold different numbers of elements

// -----

func.func @f() {
  %w = mrvl.constant "c" = dense<1.0> : tensor<4xf32> -> tensor<5xf32, #mrvl.layout<O>>
  func.return
}
// CHECK: mrvl.constant 'c': value type tensor<4xf32> does not match the result type tensor<5xf32, #mrvl.layout<O>>

// -----

func.func @f(%x: tensor<1x2xf16, #mrvl.layout<NCD>>) {
  func.return
}
// CHECK: unknown layout 'NCD'

// -----

func.func @f(%a: tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>, %b: tensor<1x5x5x3xf16, #mrvl.layout<NHWC>>) {
  %c = mrvl.concat %a, %b : tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>, tensor<1x5x5x3xf16, #mrvl.layout<NHWC>> -> tensor<1x5x5x8xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.concat: inputs hold 7 along dimension 3, the result 8

// -----

func.func @f(%a: tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>, %b: tensor<1x5x4x4xf16, #mrvl.layout<NHWC>>) {
  %c = mrvl.concat %a, %b : tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>, tensor<1x5x4x4xf16, #mrvl.layout<NHWC>> -> tensor<1x5x5x8xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.concat: input 1 [1, 5, 4, 4] differs from the result [1, 5, 5, 8] outside dimension 3

// -----

func.func @f(%x: tensor<1x5x5x8xf16, #mrvl.layout<NHWC>>) {
  %p = mrvl.maxpool2d %x kernel [2, 2] strides [2, 2] : tensor<1x5x5x8xf16, #mrvl.layout<NHWC>> -> tensor<1x3x3x8xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.maxpool2d: output shape [1, 3, 3, 8] does not match the computed [1, 2, 2, 8]

// -----

func.func @f(%x: tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>, %s: tensor<3xf32, #mrvl.layout<O>>) {
  %y = mrvl.scale_shift %x, %s, %s : (tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>, tensor<3xf32, #mrvl.layout<O>>, tensor<3xf32, #mrvl.layout<O>>) -> tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.scale_shift: scale must be f32 with 4 elements

// -----

func.func @f(%a: tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>) {
  %c = mrvl.concat %a, %a axis 4 : tensor<1x5x5x4xf16, #mrvl.layout<NHWC>>, tensor<1x5x5x4xf16, #mrvl.layout<NHWC>> -> tensor<1x5x5x8xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.concat: axis 4 is outside rank 4

// -----

func.func @f(%x: tensor<1x4x6xf16, #mrvl.layout<NCW>>) {
  %y = mrvl.strided_copy %x offset 1 strides [6, 1] box [4, 6] : tensor<1x4x6xf16, #mrvl.layout<NCW>> -> tensor<1x4x6xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.strided_copy: elements 1 to 24 are outside the input's 24 elements

// -----

func.func @f(%x: tensor<1x4x6xf16, #mrvl.layout<NCW>>) {
  %y = mrvl.strided_copy %x offset 17 strides [-6, 1] box [4, 6] : tensor<1x4x6xf16, #mrvl.layout<NCW>> -> tensor<1x4x6xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.strided_copy: elements -1 to 22 are outside the input's 24 elements

// -----

func.func @f(%x: tensor<1x4x6xf16, #mrvl.layout<NCW>>) {
  %y = mrvl.strided_copy %x offset 0 strides [1, 1, 1, 1, 1, 1, 1] box [1, 1, 1, 1, 1, 4, 6] : tensor<1x4x6xf16, #mrvl.layout<NCW>> -> tensor<1x4x6xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.strided_copy: box and strides need one value per dimension, 1 to 6 dimensions

// -----

func.func @f(%x: tensor<1x4x6xf16, #mrvl.layout<NCW>>) {
  %y = mrvl.strided_copy %x offset 0 strides [6, 1] box [2, 6] : tensor<1x4x6xf16, #mrvl.layout<NCW>> -> tensor<1x4x6xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.strided_copy: box [2, 6] does not hold the 24 elements of the result

// -----

func.func @f(%x: tensor<1x3x3x2xf16, #mrvl.layout<NHWC>>) {
  %y = mrvl.dilate %x strides [2, 2] : tensor<1x3x3x2xf16, #mrvl.layout<NHWC>> -> tensor<1x6x6x2xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.dilate: result shape [1, 6, 6, 2] is not [1, 5, 5, 2]

// -----

func.func @f(%x: tensor<1x3x4x2xf16, #mrvl.layout<NHWC>>, %t: tensor<24xf32, #mrvl.layout<O>>) {
  %y = mrvl.resize %x, %t, %t mode half_pixel : (tensor<1x3x4x2xf16, #mrvl.layout<NHWC>>, tensor<24xf32, #mrvl.layout<O>>, tensor<24xf32, #mrvl.layout<O>>) -> tensor<1x6x8x2xf16, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.resize: xtab must be f32 with 4 values per output index (32)

// -----

// Every move but a cast keeps the element type (one rule, `verify_element_type_kept`).
func.func @f(%x: tensor<1x2x3x4xf16, #mrvl.layout<NCHW>>) {
  %y = mrvl.reshape %x : tensor<1x2x3x4xf16, #mrvl.layout<NCHW>> -> tensor<1x24xf32, #mrvl.layout<NC>>
  func.return
}
// CHECK: mrvl.reshape: element type must not change

// -----

func.func @f(%x: tensor<1x3x3x2xf16, #mrvl.layout<NHWC>>) {
  %y = mrvl.dilate %x strides [2, 2] : tensor<1x3x3x2xf16, #mrvl.layout<NHWC>> -> tensor<1x5x5x2xf32, #mrvl.layout<NHWC>>
  func.return
}
// CHECK: mrvl.dilate: element type must not change
