// RUN: mrvl-opt %s --split-input-file --verify-diagnostics | filecheck %s

// sched.bmm round-trips (a block of a reduction: partial sums in, fp32 out) and its verifier
// names the problem.

builtin.module {
  %a = sched.alloc tile(1) : !sched.buffer<ocm, 2x3x4xf16>
  %b = sched.alloc tile(1) : !sched.buffer<ocm, 1x6x4xf16>
  %p = sched.alloc tile(1) : !sched.buffer<ocm, 2x3x6xf32>
  %o = sched.alloc tile(1) : !sched.buffer<ocm, 2x3x6xf32>
  %t = sched.bmm tile 1 %a, %b acc(%p : !sched.buffer<ocm, 2x3x6xf32>) -> %o trans_b acc_out : !sched.buffer<ocm, 2x3x4xf16>, !sched.buffer<ocm, 1x6x4xf16> -> !sched.buffer<ocm, 2x3x6xf32>
}
// CHECK: %t = sched.bmm tile 1 %a, %b acc(%p : !sched.buffer<ocm, 2x3x6xf32>) -> %o trans_b acc_out : !sched.buffer<ocm, 2x3x4xf16>, !sched.buffer<ocm, 1x6x4xf16> -> !sched.buffer<ocm, 2x3x6xf32>

// -----

builtin.module {
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 2x3x4xf16>
  %b = sched.alloc tile(0) : !sched.buffer<ocm, 2x4x6xf16>
  %o = sched.alloc tile(0) : !sched.buffer<ocm, 2x3x5xf16>
  %t = sched.bmm tile 0 %a, %b -> %o : !sched.buffer<ocm, 2x3x4xf16>, !sched.buffer<ocm, 2x4x6xf16> -> !sched.buffer<ocm, 2x3x5xf16>
}
// CHECK: sched.bmm: result matrices are [3, 5] but the operands make [3, 6]

// -----

builtin.module {
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 2x3x4xf16>
  %b = sched.alloc : !sched.buffer<ddr, 2x4x6xf16>
  %o = sched.alloc tile(0) : !sched.buffer<ocm, 2x3x6xf16>
  %t = sched.bmm tile 0 %a, %b -> %o : !sched.buffer<ocm, 2x3x4xf16>, !sched.buffer<ddr, 2x4x6xf16> -> !sched.buffer<ocm, 2x3x6xf16>
}
// CHECK: sched.bmm: compute operands must be in OCM, got !sched.buffer<ddr, 2x4x6xf16>

// -----

builtin.module {
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 2x3x4xf16>
  %b = sched.alloc tile(0) : !sched.buffer<ocm, 2x4x6xf16>
  %p = sched.alloc tile(0) : !sched.buffer<ocm, 2x3x5xf32>
  %o = sched.alloc tile(0) : !sched.buffer<ocm, 2x3x6xf16>
  %t = sched.bmm tile 0 %a, %b acc(%p : !sched.buffer<ocm, 2x3x5xf32>) -> %o : !sched.buffer<ocm, 2x3x4xf16>, !sched.buffer<ocm, 2x4x6xf16> -> !sched.buffer<ocm, 2x3x6xf16>
}
// CHECK: sched.bmm: partial sums must have the result's shape

// -----

builtin.module {
  %a = sched.alloc tile(1) : !sched.buffer<ocm, 2x3x4xf16>
  %b = sched.alloc tile(0) : !sched.buffer<ocm, 2x4x6xf16>
  %o = sched.alloc tile(0) : !sched.buffer<ocm, 2x3x6xf16>
  %t = sched.bmm tile 0 %a, %b -> %o : !sched.buffer<ocm, 2x3x4xf16>, !sched.buffer<ocm, 2x4x6xf16> -> !sched.buffer<ocm, 2x3x6xf16>
}
// CHECK: sched.bmm: runs on tile 0 but uses a buffer of tile 1
