// RUN: mrvl-opt %s -p sched-fuse-converts --print-debuginfo | filecheck %s

// cast-then-reorder of a region input becomes one conversion (the permutations compose, the
// intermediate buffer goes); a chain that would round twice is left alone.

builtin.module {
  %x = sched.io "x" input : !sched.buffer<ddr, 1x2x3x4xf32>
  %a = sched.alloc : !sched.buffer<ddr, 1x2x3x4xf16>
  %t0 = sched.convert tile 0 %x -> %a perm [0, 1, 2, 3] : !sched.buffer<ddr, 1x2x3x4xf32>, !sched.buffer<ddr, 1x2x3x4xf16> loc("/conv/Conv")
  %b = sched.alloc : !sched.buffer<ddr, 1x3x4x2xf16>
  %t1 = sched.convert tile 0 %a -> %b perm [0, 2, 3, 1] after(%t0) : !sched.buffer<ddr, 1x2x3x4xf16>, !sched.buffer<ddr, 1x3x4x2xf16> loc("/conv/Conv")
  %c = sched.alloc : !sched.buffer<ddr, 1x2x3x4xf32>
  %t2 = sched.convert tile 0 %b -> %c perm [0, 3, 1, 2] after(%t1) : !sched.buffer<ddr, 1x3x4x2xf16>, !sched.buffer<ddr, 1x2x3x4xf32> loc("/out")
  %d = sched.alloc : !sched.buffer<ddr, 1x2x3x4xf16>
  %t3 = sched.convert tile 0 %c -> %d perm [0, 1, 2, 3] after(%t2) : !sched.buffer<ddr, 1x2x3x4xf32>, !sched.buffer<ddr, 1x2x3x4xf16> loc("/twice")
}

// CHECK:      %x = sched.io "x" input
// CHECK-NEXT: %b = sched.alloc : !sched.buffer<ddr, 1x3x4x2xf16>
// CHECK-NEXT: %[[T:.*]] = sched.convert tile 0 %x -> %b perm [0, 2, 3, 1] : !sched.buffer<ddr, 1x2x3x4xf32>, !sched.buffer<ddr, 1x3x4x2xf16> loc("/conv/Conv")
//   f16 -> f32 -> f16 would round twice: kept as two conversions
// CHECK-NEXT: %c = sched.alloc : !sched.buffer<ddr, 1x2x3x4xf32>
// CHECK-NEXT: %[[T2:.*]] = sched.convert tile 0 %b -> %c perm [0, 3, 1, 2] after(%[[T]])
// CHECK-NEXT: %d = sched.alloc
// CHECK-NEXT: sched.convert tile 0 %c -> %d perm [0, 1, 2, 3] after(%[[T2]])
