// RUN: mrvl-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The verifiers of the reductions and of the broadcasting elementwise ops name the problem.

func.func @f(%x: tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>) {
  %a = mrvl.reduce "mean" %x axes [1, 3] : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>> -> tensor<1x1x5x1xf16, #mrvl.layout<NCHW>>
  func.return
}
// CHECK: mrvl.reduce: axes [1, 3] must be consecutive and increasing

// -----

func.func @f(%x: tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>) {
  %a = mrvl.reduce "prod" %x axes [1] : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>> -> tensor<1x1x5x7xf16, #mrvl.layout<NCHW>>
  func.return
}
// CHECK: mrvl.reduce: kind 'prod' not in ('sum', 'mean', 'max', 'min', 'argmax', 'l2')

// -----

func.func @f(%x: tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>) {
  %a = mrvl.reduce "sum" %x axes [1] : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>> -> tensor<1x5x7xf16, #mrvl.layout<NCW>>
  func.return
}
// CHECK: mrvl.reduce: the result must be [1, 1, 5, 7] in the input's layout

// -----

func.func @f(%x: tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>, %y: tensor<1x3x2x7xf16, #mrvl.layout<NCHW>>) {
  %a = mrvl.binary "add" %x, %y : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>, tensor<1x3x2x7xf16, #mrvl.layout<NCHW>> -> tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>
  func.return
}
// CHECK: mrvl.binary: [1, 3, 5, 7] and [1, 3, 2, 7] do not broadcast to [1, 3, 5, 7]

// -----

func.func @f(%x: tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>, %y: tensor<1x5x7x3xf16, #mrvl.layout<NHWC>>) {
  %a = mrvl.binary "max" %x, %y : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>, tensor<1x5x7x3xf16, #mrvl.layout<NHWC>> -> tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>
  func.return
}
// CHECK: mrvl.binary: operands and result in layouts ['NCHW', 'NHWC']

// -----

builtin.module {
  %x = sched.alloc tile(0) : !sched.buffer<ocm, 2x8x3xf16>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 2x8xf16>
  %t = sched.reduce tile 0 %x -> %y mode "sum" divisor 8 : !sched.buffer<ocm, 2x8x3xf16> -> !sched.buffer<ocm, 2x8xf16>
}
// CHECK: sched.reduce: the result must be [outer, inner]

// -----

builtin.module {
  %x = sched.alloc tile(0) : !sched.buffer<ocm, 2x8x3xf16>
  %p = sched.alloc tile(0) : !sched.buffer<ocm, 2x3xf32>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 2x3xf32>
  %t = sched.reduce tile 0 %x acc(%p : !sched.buffer<ocm, 2x3xf32>) -> %y mode "argmax" divisor 8 : !sched.buffer<ocm, 2x8x3xf16> -> !sched.buffer<ocm, 2x3xf32>
}
// CHECK: sched.reduce: argmax takes and gives no partials

// -----

builtin.module {
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x1x5xf16>
  %b = sched.alloc tile(0) : !sched.buffer<ocm, 1x1x3x1xf16>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x3x5xf16>
  %t = sched.binary tile 0 %a, %b -> %y mode "div" strides [0, 5, 0, 1], [0, 0, 2, 0] : !sched.buffer<ocm, 1x4x1x5xf16>, !sched.buffer<ocm, 1x1x3x1xf16> -> !sched.buffer<ocm, 1x4x3x5xf16>
}
// CHECK: sched.binary: rhs strides read past its buffer

// -----

builtin.module {
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x1x5xf16>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x3x5xf16>
  %t = sched.binary tile 0 %a, %a -> %y mode "pow" strides [0, 5, 0, 1], [0, 5, 0, 1] : !sched.buffer<ocm, 1x4x1x5xf16>, !sched.buffer<ocm, 1x4x1x5xf16> -> !sched.buffer<ocm, 1x4x3x5xf16>
}
// CHECK: sched.binary: mode 'pow' not in ('add', 'sub', 'mul', 'div', 'max', 'min')

// -----

builtin.module attributes {mlip.program = #mlip.program<target = "cn10ka", tiles = 1, ddr_size = 4096, const_base = 4096>} {
  mlip.reduce tile 0 : in_addr 0, out_addr 128, outer 6, length 8, inner 1, mode argmax, divisor 1, acc_addr -1, acc_out 1
  mlip.end tile 0
}
// CHECK: acc_out=1 breaks `mode != 4 or (acc_out == 0 and acc_addr == -1)`

// -----

func.func @f(%x: tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>) {
  %a = mrvl.reduce "argmax" %x axes [1] : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>> -> tensor<1x1x5x7xf16, #mrvl.layout<NCHW>>
  func.return
}
// CHECK: mrvl.reduce: argmax gives f32 indices
