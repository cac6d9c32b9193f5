// RUN: mrvl-opt %s -p sched-allocate | filecheck %s

// DDR: I/O first, then the constant pool (contiguous, at the program's const_base), then intermediates,
// each 64-byte aligned. OCM: per tile, by live range; a buffer whose last use has passed gives
// its space to the next one.

builtin.module {
sched.program mcpu("cn10ka") tiles(2) {
  %in = sched.io "x" input : !sched.buffer<ddr, 1x10xf32>
  %out = sched.io "output0" output : !sched.buffer<ddr, 1x10xf32>
  %tmp = sched.alloc : !sched.buffer<ddr, 1x10xf16>
  %w = sched.const "w" = dense<1.0> : tensor<10x10xf16> : !sched.buffer<ddr, 10x10xf16>
  %t0 = sched.convert tile 0 %in -> %tmp perm [0, 1] : !sched.buffer<ddr, 1x10xf32>, !sched.buffer<ddr, 1x10xf16>
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 1x10xf16>
  %t1 = sched.dma tile 0 %tmp [0, 0] -> %a [0, 0] box [1, 10] after(%t0) : !sched.buffer<ddr, 1x10xf16>, !sched.buffer<ocm, 1x10xf16>
  %b = sched.alloc tile(0) : !sched.buffer<ocm, 10x10xf16>
  %t2 = sched.dma tile 0 %w [0, 0] -> %b [0, 0] box [10, 10] : !sched.buffer<ddr, 10x10xf16>, !sched.buffer<ocm, 10x10xf16>
  %c = sched.alloc tile(0) : !sched.buffer<ocm, 1x10xf16>
  %t3 = sched.fc tile 0 %a, %b -> %c after(%t1, %t2) : !sched.buffer<ocm, 1x10xf16>, !sched.buffer<ocm, 10x10xf16> -> !sched.buffer<ocm, 1x10xf16>
  %t4 = sched.dma tile 0 %c [0, 0] -> %tmp [0, 0] box [1, 10] after(%t3) : !sched.buffer<ocm, 1x10xf16>, !sched.buffer<ddr, 1x10xf16>
  %d = sched.alloc tile(0) : !sched.buffer<ocm, 1x10xf16>
  %t5 = sched.dma tile 0 %tmp [0, 0] -> %d [0, 0] box [1, 10] after(%t4) : !sched.buffer<ddr, 1x10xf16>, !sched.buffer<ocm, 1x10xf16>
  %e = sched.alloc tile(1) : !sched.buffer<ocm, 1x10xf16>
  %t6 = sched.dma tile 1 %tmp [0, 0] -> %e [0, 0] box [1, 10] after(%t4) : !sched.buffer<ddr, 1x10xf16>, !sched.buffer<ocm, 1x10xf16>
  %t7 = sched.convert tile 0 %tmp -> %out perm [0, 1] after(%t5, %t6) : !sched.buffer<ddr, 1x10xf16>, !sched.buffer<ddr, 1x10xf32>
}
}

// CHECK:      sched.program mcpu("cn10ka") tiles(2) ddr_size(448) const_base(128) const_end(328) {
// CHECK-NEXT:   sched.io "x" input offset(0)
// CHECK-NEXT:   sched.io "output0" output offset(64)
// CHECK-NEXT:   sched.alloc offset(384) : !sched.buffer<ddr, 1x10xf16>
// CHECK-NEXT:   sched.const "w" = {{.*}} offset(128)
//   a, b and c are live together; d reuses a's space once a is dead; tile 1 starts at 0
// CHECK:        sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 1x10xf16>
// CHECK:        sched.alloc tile(0) offset(64) : !sched.buffer<ocm, 10x10xf16>
// CHECK:        sched.alloc tile(0) offset(320) : !sched.buffer<ocm, 1x10xf16>
// CHECK:        sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 1x10xf16>
// CHECK:        sched.alloc tile(1) offset(0) : !sched.buffer<ocm, 1x10xf16>
