// RUN: mrvl-opt %s --split-input-file --verify-diagnostics | filecheck %s

// mrvl.bmm's verifier names the problem.

func.func @f(%a: tensor<2x3x4xf16, #mrvl.layout<NCW>>, %b: tensor<2x5x6xf16, #mrvl.layout<NCW>>) {
  %y = mrvl.bmm %a, %b : (tensor<2x3x4xf16, #mrvl.layout<NCW>>, tensor<2x5x6xf16, #mrvl.layout<NCW>>) -> tensor<2x3x6xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.bmm: lhs reduces over 4 elements but rhs over 5

// -----

func.func @f(%a: tensor<2x3x4xf16, #mrvl.layout<NCW>>, %b: tensor<2x4x6xf16, #mrvl.layout<NCW>>) {
  %y = mrvl.bmm %a, %b trans_b : (tensor<2x3x4xf16, #mrvl.layout<NCW>>, tensor<2x4x6xf16, #mrvl.layout<NCW>>) -> tensor<2x3x6xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.bmm: lhs reduces over 4 elements but rhs over 6

// -----

func.func @f(%a: tensor<2x3x4xf16, #mrvl.layout<NCW>>, %b: tensor<2x4x6xf16, #mrvl.layout<NCW>>) {
  %y = mrvl.bmm %a, %b : (tensor<2x3x4xf16, #mrvl.layout<NCW>>, tensor<2x4x6xf16, #mrvl.layout<NCW>>) -> tensor<2x6x3xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.bmm: result matrices are [6, 3] but the operands make [3, 6]

// -----

func.func @f(%a: tensor<3x3x4xf16, #mrvl.layout<NCW>>, %b: tensor<2x4x6xf16, #mrvl.layout<NCW>>) {
  %y = mrvl.bmm %a, %b : (tensor<3x3x4xf16, #mrvl.layout<NCW>>, tensor<2x4x6xf16, #mrvl.layout<NCW>>) -> tensor<2x3x6xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.bmm: lhs holds 3 matrices; the result has 2 (1 broadcasts)

// -----

func.func @f(%a: tensor<1x2x3x4xf16, #mrvl.layout<NCHW>>, %b: tensor<2x4x6xf16, #mrvl.layout<NCW>>) {
  %y = mrvl.bmm %a, %b : (tensor<1x2x3x4xf16, #mrvl.layout<NCHW>>, tensor<2x4x6xf16, #mrvl.layout<NCW>>) -> tensor<2x3x6xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.bmm: lhs must have rank 3

// -----

func.func @f(%a: tensor<2x3x4xf16, #mrvl.layout<NCW>>, %b: tensor<2x4x6xf32, #mrvl.layout<NCW>>) {
  %y = mrvl.bmm %a, %b : (tensor<2x3x4xf16, #mrvl.layout<NCW>>, tensor<2x4x6xf32, #mrvl.layout<NCW>>) -> tensor<2x3x6xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.bmm: operands and result must have one element type
