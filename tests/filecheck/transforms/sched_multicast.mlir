// RUN: mrvl-opt %s -p sched-multicast | filecheck %s
// RUN: mrvl-opt %s -p sched-multicast,sched-multicast | filecheck %s
// RUN: mrvl-opt %s -p sched-multicast,sched-allocate,sched-verify-allocation,sched-insert-sync | filecheck %s --check-prefix=ALLOC

// Three tiles compute output-channel groups of one fc from the same input row: each loads
// the row. The loads become one DMA from tile 0 that also writes tile 1's and tile 2's
// buffers (their allocs move up to it), and the fc on tiles 1 and 2 wait for it; the same
// for the weights. Tile 2's second load reads %mid, which tile 0 writes in between: it keeps
// its own load. A second run changes nothing: a buffer a multicast writes is not a load.

builtin.module {
sched.program mcpu("cn10ka") tiles(4) {
  %x = sched.io "x" input : !sched.buffer<ddr, 2x8xf16>
  %w = sched.const "w" = dense<1.0> : tensor<8x8xf16> : !sched.buffer<ddr, 8x8xf16>
  %mid = sched.alloc : !sched.buffer<ddr, 2x8xf16>
  %a0 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %l0 = sched.dma tile 0 %x [0, 0] -> %a0 [0, 0] box [1, 8] : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %w0 = sched.alloc tile(0) : !sched.buffer<ocm, 8x8xf16>
  %lw0 = sched.dma tile 0 %w [0, 0] -> %w0 [0, 0] box [8, 8] : !sched.buffer<ddr, 8x8xf16>, !sched.buffer<ocm, 8x8xf16>
  %o0 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %c0 = sched.fc tile 0 %a0, %w0 -> %o0 after(%l0, %lw0) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
  %a1 = sched.alloc tile(1) : !sched.buffer<ocm, 1x8xf16>
  %l1 = sched.dma tile 1 %x [0, 0] -> %a1 [0, 0] box [1, 8] : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %w1 = sched.alloc tile(1) : !sched.buffer<ocm, 8x8xf16>
  %lw1 = sched.dma tile 1 %w [0, 0] -> %w1 [0, 0] box [8, 8] : !sched.buffer<ddr, 8x8xf16>, !sched.buffer<ocm, 8x8xf16>
  %o1 = sched.alloc tile(1) : !sched.buffer<ocm, 1x8xf16>
  %c1 = sched.fc tile 1 %a1, %w1 -> %o1 after(%l1, %lw1) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
  %a2 = sched.alloc tile(2) : !sched.buffer<ocm, 1x8xf16>
  %l2 = sched.dma tile 2 %x [0, 0] -> %a2 [0, 0] box [1, 8] : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %w2 = sched.alloc tile(2) : !sched.buffer<ocm, 8x8xf16>
  %lw2 = sched.dma tile 2 %w [0, 0] -> %w2 [0, 0] box [8, 8] : !sched.buffer<ddr, 8x8xf16>, !sched.buffer<ocm, 8x8xf16>
  %o2 = sched.alloc tile(2) : !sched.buffer<ocm, 1x8xf16>
  %c2 = sched.fc tile 2 %a2, %w2 -> %o2 after(%l2, %lw2) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
  %s0 = sched.dma tile 0 %o0 [0, 0] -> %mid [0, 0] box [1, 8] after(%c0) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ddr, 2x8xf16>
  %s1 = sched.dma tile 1 %o1 [0, 0] -> %mid [1, 0] box [1, 8] after(%c1) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ddr, 2x8xf16>
  %b0 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %m0 = sched.dma tile 0 %mid [0, 0] -> %b0 [0, 0] box [1, 8] after(%s0) : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %p0 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %d0 = sched.fc tile 0 %b0, %w0 -> %p0 after(%m0) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
  %s2 = sched.dma tile 0 %p0 [0, 0] -> %mid [0, 0] box [1, 8] after(%d0) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ddr, 2x8xf16>
  %b2 = sched.alloc tile(2) : !sched.buffer<ocm, 1x8xf16>
  %m2 = sched.dma tile 2 %mid [0, 0] -> %b2 [0, 0] box [1, 8] after(%s2) : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %p2 = sched.alloc tile(2) : !sched.buffer<ocm, 1x8xf16>
  %d2 = sched.fc tile 2 %b2, %w2 -> %p2 after(%m2) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
}
}

// CHECK:      %[[A0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
// CHECK-NEXT: %[[A1:.*]] = sched.alloc tile(1) : !sched.buffer<ocm, 1x8xf16>
// CHECK-NEXT: %[[A2:.*]] = sched.alloc tile(2) : !sched.buffer<ocm, 1x8xf16>
// CHECK-NEXT: %[[L:.*]] = sched.multicast_dma tile 0 %x [0, 0] -> %[[A0]] [0, 0] mirrors(%[[A1]], %[[A2]] : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 1x8xf16>) box [1, 8]
// CHECK-NEXT: %[[W0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 8x8xf16>
// CHECK-NEXT: %[[W1:.*]] = sched.alloc tile(1) : !sched.buffer<ocm, 8x8xf16>
// CHECK-NEXT: %[[W2:.*]] = sched.alloc tile(2) : !sched.buffer<ocm, 8x8xf16>
// CHECK-NEXT: %[[LW:.*]] = sched.multicast_dma tile 0 %w [0, 0] -> %[[W0]] [0, 0] mirrors(%[[W1]], %[[W2]] : !sched.buffer<ocm, 8x8xf16>, !sched.buffer<ocm, 8x8xf16>) box [8, 8]
// CHECK:      sched.fc tile 0 %[[A0]], %[[W0]] -> %{{.*}} after(%[[L]], %[[LW]])
// CHECK-NOT:  sched.{{(multicast_)?}}dma tile 1 %x
// CHECK:      sched.fc tile 1 %[[A1]], %[[W1]] -> %{{.*}} after(%[[L]], %[[LW]])
// CHECK-NOT:  sched.{{(multicast_)?}}dma tile 2 %x
// CHECK:      sched.fc tile 2 %[[A2]], %[[W2]] -> %{{.*}} after(%[[L]], %[[LW]])
// CHECK:      sched.dma tile 0 %mid [0, 0] -> %{{.*}} [0, 0] box [1, 8]
// CHECK:      sched.dma tile 2 %mid [0, 0] -> %{{.*}} [0, 0] box [1, 8]

// One offset for the buffers of a multicast DMA, on every tile it writes.
// ALLOC:      sched.alloc tile(0) offset([[OFF:[0-9]+]]) : !sched.buffer<ocm, 1x8xf16>
// ALLOC-NEXT: sched.alloc tile(1) offset([[OFF]]) : !sched.buffer<ocm, 1x8xf16>
// ALLOC-NEXT: sched.alloc tile(2) offset([[OFF]]) : !sched.buffer<ocm, 1x8xf16>
// ALLOC-NEXT: sched.multicast_dma tile 0 %x [0, 0] -> %{{.*}} [0, 0] mirrors(
// ALLOC-NEXT: sched.alloc tile(0) offset([[WOFF:[0-9]+]]) : !sched.buffer<ocm, 8x8xf16>
// ALLOC-NEXT: sched.alloc tile(1) offset([[WOFF]]) : !sched.buffer<ocm, 8x8xf16>
// ALLOC-NEXT: sched.alloc tile(2) offset([[WOFF]]) : !sched.buffer<ocm, 8x8xf16>
