// RUN: mrvl-opt %s | filecheck %s
// RUN: mrvl-opt %s | mrvl-opt | filecheck %s

// mrvl.bmm round-trips: plain, a transposed right operand (Q·Kᵀ), a transposed left one, and a
// left operand shared by every batch.

func.func @f(%q: tensor<6x5x8xf16, #mrvl.layout<NCW>>, %k: tensor<6x7x8xf16, #mrvl.layout<NCW>>, %v: tensor<6x7x4xf16, #mrvl.layout<NCW>>, %w: tensor<1x5x8xf16, #mrvl.layout<NCW>>) {
  %s = mrvl.bmm %q, %k trans_b : (tensor<6x5x8xf16, #mrvl.layout<NCW>>, tensor<6x7x8xf16, #mrvl.layout<NCW>>) -> tensor<6x5x7xf16, #mrvl.layout<NCW>>
  %o = mrvl.bmm %s, %v : (tensor<6x5x7xf16, #mrvl.layout<NCW>>, tensor<6x7x4xf16, #mrvl.layout<NCW>>) -> tensor<6x5x4xf16, #mrvl.layout<NCW>>
  %t = mrvl.bmm %w, %q trans_a : (tensor<1x5x8xf16, #mrvl.layout<NCW>>, tensor<6x5x8xf16, #mrvl.layout<NCW>>) -> tensor<6x8x8xf16, #mrvl.layout<NCW>>
  func.return
}

// CHECK:      %s = mrvl.bmm %q, %k trans_b : (tensor<6x5x8xf16, #mrvl.layout<NCW>>, tensor<6x7x8xf16, #mrvl.layout<NCW>>) -> tensor<6x5x7xf16, #mrvl.layout<NCW>>
// CHECK-NEXT: %o = mrvl.bmm %s, %v : (tensor<6x5x7xf16, #mrvl.layout<NCW>>, tensor<6x7x4xf16, #mrvl.layout<NCW>>) -> tensor<6x5x4xf16, #mrvl.layout<NCW>>
// CHECK-NEXT: %t = mrvl.bmm %w, %q trans_a : (tensor<1x5x8xf16, #mrvl.layout<NCW>>, tensor<6x5x8xf16, #mrvl.layout<NCW>>) -> tensor<6x8x8xf16, #mrvl.layout<NCW>>
