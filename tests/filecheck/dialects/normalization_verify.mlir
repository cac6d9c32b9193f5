// RUN: mrvl-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The normalization ops' verifiers name the problem.

func.func @f(%x: tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>) {
  %a = mrvl.softmax %x axes [1, 3] : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>
  func.return
}
// CHECK: mrvl.softmax: axes [1, 3] must be consecutive and increasing

// -----

func.func @f(%x: tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>) {
  %a = mrvl.softmax %x axes [4] : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>
  func.return
}
// CHECK: mrvl.softmax: axes [4] outside a rank-4 tensor

// -----

func.func @f(%x: tensor<1x3x5x7xf16>) {
  %a = mrvl.softmax %x axes [1] : tensor<1x3x5x7xf16>
  func.return
}
// CHECK: expected a tensor with a #mrvl.layout encoding

// -----

builtin.module {
  %x = sched.alloc tile(0) : !sched.buffer<ocm, 2x8x3xf16>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 2x8x4xf16>
  %s = sched.softmax tile 0 %x -> %y : !sched.buffer<ocm, 2x8x3xf16> -> !sched.buffer<ocm, 2x8x4xf16>
}
// CHECK: sched.softmax: input and output must be one [outer, length, inner] shape

// -----

builtin.module {
  %x = sched.alloc : !sched.buffer<ddr, 2x8x3xf16>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 2x8x3xf16>
  %s = sched.softmax tile 0 %x -> %y : !sched.buffer<ddr, 2x8x3xf16> -> !sched.buffer<ocm, 2x8x3xf16>
}
// CHECK: sched.softmax: compute operands must be in OCM

// -----

builtin.module attributes {mlip.program = #mlip.program<target = "cn10ka", tiles = 1, ddr_size = 4096, const_base = 4096>} {
  mlip.softmax tile 0 : in_addr 0, out_addr 128, outer 6, length 0, inner 1
}
// CHECK: length >= 1

// -----

func.func @f(%x: tensor<1x5x8xf16, #mrvl.layout<NCW>>, %g: tensor<8xf32, #mrvl.layout<O>>) {
  %y = mrvl.layernorm %x, %g, %g axes [1] epsilon 1.000000e-05 : (tensor<1x5x8xf16, #mrvl.layout<NCW>>, tensor<8xf32, #mrvl.layout<O>>, tensor<8xf32, #mrvl.layout<O>>) -> tensor<1x5x8xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.layernorm: axes [1] must end with the last axis

// -----

func.func @f(%x: tensor<1x5x8xf16, #mrvl.layout<NCW>>, %g: tensor<5xf32, #mrvl.layout<O>>) {
  %y = mrvl.layernorm %x, %g, %g axes [2] epsilon 1.000000e-05 : (tensor<1x5x8xf16, #mrvl.layout<NCW>>, tensor<5xf32, #mrvl.layout<O>>, tensor<5xf32, #mrvl.layout<O>>) -> tensor<1x5x8xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.layernorm: scale must be f32 with 8 elements (a row)

// -----

builtin.module {
  %x = sched.alloc tile(0) : !sched.buffer<ocm, 4x8xf16>
  %g = sched.alloc tile(0) : !sched.buffer<ocm, 4xf32>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 4x8xf16>
  %t = sched.layernorm tile 0 %x, %g, %g -> %y epsilon 1.000000e-05 : !sched.buffer<ocm, 4x8xf16>, !sched.buffer<ocm, 4xf32>, !sched.buffer<ocm, 4xf32> -> !sched.buffer<ocm, 4x8xf16>
}
// CHECK: sched.layernorm: scale must hold 8 values

// -----

builtin.module {
  %x = sched.alloc tile(0) : !sched.buffer<ocm, 2x64xf16>
  %s = sched.alloc tile(0) : !sched.buffer<ocm, 3x2xf32>
  %t = sched.lnstats tile 0 %x -> %s epsilon 1.000000e-05 : !sched.buffer<ocm, 2x64xf16> -> !sched.buffer<ocm, 3x2xf32>
}
// CHECK: sched.lnstats: input [rows, length] and output [rows, 2]

// -----

builtin.module {
  %x = sched.alloc tile(0) : !sched.buffer<ocm, 2x64xf16>
  %s = sched.alloc tile(0) : !sched.buffer<ocm, 2x2xf32>
  %g = sched.alloc tile(0) : !sched.buffer<ocm, 32xf32>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 2x64xf16>
  %t = sched.lnapply tile 0 %x, %s, %g, %g -> %y : !sched.buffer<ocm, 2x64xf16>, !sched.buffer<ocm, 2x2xf32>, !sched.buffer<ocm, 32xf32>, !sched.buffer<ocm, 32xf32> -> !sched.buffer<ocm, 2x64xf16>
}
// CHECK: sched.lnapply: scale must hold 64 values
