// RUN: mrvl-opt %s --print-debuginfo --split-input-file | mrvl-opt --print-debuginfo --split-input-file | filecheck %s

// The reductions and the broadcasting elementwise ops at every level print and parse back
// unchanged: mrvl.reduce over one axis and a run of axes (the reduced ones kept as 1),
// mrvl.binary of two broadcasting tensors, sched.reduce with and without fp32 partials,
// sched.binary with its operands' strides, and mlip.reduce / mlip.binary with their fields.

func.func @reduce(%x: tensor<2x5x6x8xf16, #mrvl.layout<NHWC>>) -> tensor<2x1x1x8xf16, #mrvl.layout<NHWC>> {
  %a = mrvl.reduce "mean" %x axes [3] : tensor<2x5x6x8xf16, #mrvl.layout<NHWC>> -> tensor<2x5x6x1xf16, #mrvl.layout<NHWC>> loc("/r/ReduceMean")
  %b = mrvl.reduce "max" %x axes [1, 2] : tensor<2x5x6x8xf16, #mrvl.layout<NHWC>> -> tensor<2x1x1x8xf16, #mrvl.layout<NHWC>> loc("/r/ReduceMax")
  func.return %b : tensor<2x1x1x8xf16, #mrvl.layout<NHWC>>
}
// CHECK:      %a = mrvl.reduce "mean" %x axes [3] : tensor<2x5x6x8xf16, #mrvl.layout<NHWC>> -> tensor<2x5x6x1xf16, #mrvl.layout<NHWC>> loc("/r/ReduceMean")
// CHECK-NEXT: %b = mrvl.reduce "max" %x axes [1, 2] : tensor<2x5x6x8xf16, #mrvl.layout<NHWC>> -> tensor<2x1x1x8xf16, #mrvl.layout<NHWC>> loc("/r/ReduceMax")

// -----

func.func @binary(%x: tensor<2x4x9x9xf16, #mrvl.layout<NCHW>>, %m: tensor<2x1x1x9xf16, #mrvl.layout<NCHW>>) -> tensor<2x4x9x9xf16, #mrvl.layout<NCHW>> {
  %a = mrvl.binary "sub" %x, %m : tensor<2x4x9x9xf16, #mrvl.layout<NCHW>>, tensor<2x1x1x9xf16, #mrvl.layout<NCHW>> -> tensor<2x4x9x9xf16, #mrvl.layout<NCHW>> loc("/b/Sub")
  func.return %a : tensor<2x4x9x9xf16, #mrvl.layout<NCHW>>
}
// CHECK: %a = mrvl.binary "sub" %x, %m : tensor<2x4x9x9xf16, #mrvl.layout<NCHW>>, tensor<2x1x1x9xf16, #mrvl.layout<NCHW>> -> tensor<2x4x9x9xf16, #mrvl.layout<NCHW>> loc("/b/Sub")

// -----

builtin.module {
  %x = sched.alloc tile(1) : !sched.buffer<ocm, 2x8x3xf16>
  %p = sched.alloc tile(1) : !sched.buffer<ocm, 2x3xf32>
  %y = sched.alloc tile(1) : !sched.buffer<ocm, 2x3xf16>
  %s = sched.reduce tile 1 %x -> %p mode "sum" divisor 16 acc_out : !sched.buffer<ocm, 2x8x3xf16> -> !sched.buffer<ocm, 2x3xf32> loc("/r/ReduceMean")
  %t = sched.reduce tile 1 %x acc(%p : !sched.buffer<ocm, 2x3xf32>) -> %y mode "mean" divisor 16 after(%s) : !sched.buffer<ocm, 2x8x3xf16> -> !sched.buffer<ocm, 2x3xf16> loc("/r/ReduceMean")
}
// CHECK: %s = sched.reduce tile 1 %x -> %p mode "sum" divisor 16 acc_out : !sched.buffer<ocm, 2x8x3xf16> -> !sched.buffer<ocm, 2x3xf32> loc("/r/ReduceMean")
// CHECK: %t = sched.reduce tile 1 %x acc(%p : !sched.buffer<ocm, 2x3xf32>) -> %y mode "mean" divisor 16 after(%s) : !sched.buffer<ocm, 2x8x3xf16> -> !sched.buffer<ocm, 2x3xf16> loc("/r/ReduceMean")

// -----

builtin.module {
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x1x5xf16>
  %b = sched.alloc tile(0) : !sched.buffer<ocm, 1x1x3x1xf16>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x3x5xf16>
  %t = sched.binary tile 0 %a, %b -> %y mode "div" strides [0, 5, 0, 1], [0, 0, 1, 0] : !sched.buffer<ocm, 1x4x1x5xf16>, !sched.buffer<ocm, 1x1x3x1xf16> -> !sched.buffer<ocm, 1x4x3x5xf16> loc("/b/Div")
}
// CHECK: %t = sched.binary tile 0 %a, %b -> %y mode "div" strides [0, 5, 0, 1], [0, 0, 1, 0] : !sched.buffer<ocm, 1x4x1x5xf16>, !sched.buffer<ocm, 1x1x3x1xf16> -> !sched.buffer<ocm, 1x4x3x5xf16> loc("/b/Div")

// -----

builtin.module attributes {mlip.program = #mlip.program<target = "cn10ka", tiles = 1, ddr_size = 4096, const_base = 4096>} {
  mlip.reduce tile 0 : in_addr 0, out_addr 128, outer 6, length 8, inner 1, mode mean, divisor 8, acc_addr -1, acc_out 0 loc("/r/ReduceMean")
  mlip.reduce tile 0 : in_addr 0, out_addr 256, outer 6, length 8, inner 1, mode argmax, divisor 1, acc_addr -1, acc_out 0 loc("/r/ArgMax")
  mlip.binary tile 0 : a_addr 0, b_addr 64, out_addr 512, shape [1, 2, 3, 4], a_strides [0, 12, 4, 1], b_strides [0, 0, 0, 1], mode max loc("/b/Max")
  mlip.end tile 0
}
// CHECK:      mlip.reduce tile 0 : in_addr 0, out_addr 128, outer 6, length 8, inner 1, mode mean, divisor 8, acc_addr -1, acc_out 0 loc("/r/ReduceMean")
// CHECK-NEXT: mlip.reduce tile 0 : in_addr 0, out_addr 256, outer 6, length 8, inner 1, mode argmax, divisor 1, acc_addr -1, acc_out 0 loc("/r/ArgMax")
// CHECK-NEXT: mlip.binary tile 0 : a_addr 0, b_addr 64, out_addr 512, shape [1, 2, 3, 4], a_strides [0, 12, 4, 1], b_strides [0, 0, 0, 1], mode max loc("/b/Max")
