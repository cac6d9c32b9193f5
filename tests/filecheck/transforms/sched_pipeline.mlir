// RUN: mrvl-opt %s -p sched-pipeline | filecheck %s

// Two pieces on tile 0: the load of the second moves (with its alloc) before the first's
// compute, so the DMA engine fetches it while the MAC array works. The load of %mid cannot
// move above the store that writes %mid.

builtin.module {
sched.program mcpu("cn10ka") tiles(1) {
  %x = sched.io "x" input : !sched.buffer<ddr, 2x8xf16>
  %w = sched.const "w" = dense<1.0> : tensor<8x8xf16> : !sched.buffer<ddr, 8x8xf16>
  %mid = sched.alloc : !sched.buffer<ddr, 2x8xf16>
  %a0 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %l0 = sched.dma tile 0 %x [0, 0] -> %a0 [0, 0] box [1, 8] : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %w0 = sched.alloc tile(0) : !sched.buffer<ocm, 8x8xf16>
  %lw0 = sched.dma tile 0 %w [0, 0] -> %w0 [0, 0] box [8, 8] : !sched.buffer<ddr, 8x8xf16>, !sched.buffer<ocm, 8x8xf16>
  %o0 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %c0 = sched.fc tile 0 %a0, %w0 -> %o0 after(%l0, %lw0) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
  %s0 = sched.dma tile 0 %o0 [0, 0] -> %mid [0, 0] box [1, 8] after(%c0) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ddr, 2x8xf16>
  %a1 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %l1 = sched.dma tile 0 %x [1, 0] -> %a1 [0, 0] box [1, 8] : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %o1 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %c1 = sched.fc tile 0 %a1, %w0 -> %o1 after(%l1) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
  %s1 = sched.dma tile 0 %o1 [0, 0] -> %mid [1, 0] box [1, 8] after(%c1) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ddr, 2x8xf16>
  %a2 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %l2 = sched.dma tile 0 %mid [0, 0] -> %a2 [0, 0] box [1, 8] after(%s0, %s1) : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %o2 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %c2 = sched.fc tile 0 %a2, %w0 -> %o2 after(%l2) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
}
}

// CHECK:      %[[L0:.*]] = sched.dma tile 0 %{{.*}} [0, 0] -> %{{.*}} [0, 0] box [1, 8]
// CHECK:      sched.dma tile 0 %{{.*}} [0, 0] -> %{{.*}} [0, 0] box [8, 8]
// CHECK-NEXT: sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
// CHECK-NEXT: sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
// CHECK-NEXT: sched.dma tile 0 %{{.*}} [1, 0] -> %{{.*}} [0, 0] box [1, 8]
// CHECK-NEXT: sched.fc tile 0
// CHECK:      sched.fc tile 0
// CHECK-NEXT: sched.dma tile 0 {{.*}} -> %{{.*}} [1, 0] box [1, 8]
// CHECK-NEXT: sched.alloc tile(0)
// CHECK-NEXT: sched.dma tile 0 {{.*}} after(
// CHECK-NEXT: sched.alloc tile(0)
// CHECK-NEXT: sched.fc tile 0
