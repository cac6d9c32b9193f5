// RUN: mrvl-opt %s -p sched-pin-weights | filecheck %s
// RUN: sed -e 's/ wb_pin_ocm//' %s | mrvl-opt -p sched-pin-weights | filecheck %s --check-prefix=OFF

// With wb_pin_ocm, tile 0's second piece reads the weights its first piece loaded: the
// repeated load and its buffer go; the second fc waits for the first load. Tile 1 loads its
// own copy. Without the option nothing changes.

builtin.module {
sched.program mcpu("cn10ka") tiles(2) wb_pin_ocm {
  %x = sched.io "x" input : !sched.buffer<ddr, 3x8xf16>
  %y = sched.io "y" output : !sched.buffer<ddr, 3x8xf16>
  %w = sched.const "w" = dense<1.0> : tensor<8x8xf16> : !sched.buffer<ddr, 8x8xf16>
  %a0 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %l0 = sched.dma tile 0 %x [0, 0] -> %a0 [0, 0] box [1, 8] : !sched.buffer<ddr, 3x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %w0 = sched.alloc tile(0) : !sched.buffer<ocm, 8x8xf16>
  %lw0 = sched.dma tile 0 %w [0, 0] -> %w0 [0, 0] box [8, 8] : !sched.buffer<ddr, 8x8xf16>, !sched.buffer<ocm, 8x8xf16>
  %o0 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %c0 = sched.fc tile 0 %a0, %w0 -> %o0 after(%l0, %lw0) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
  %s0 = sched.dma tile 0 %o0 [0, 0] -> %y [0, 0] box [1, 8] after(%c0) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ddr, 3x8xf16>
  %a1 = sched.alloc tile(1) : !sched.buffer<ocm, 1x8xf16>
  %l1 = sched.dma tile 1 %x [1, 0] -> %a1 [0, 0] box [1, 8] : !sched.buffer<ddr, 3x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %w1 = sched.alloc tile(1) : !sched.buffer<ocm, 8x8xf16>
  %lw1 = sched.dma tile 1 %w [0, 0] -> %w1 [0, 0] box [8, 8] : !sched.buffer<ddr, 8x8xf16>, !sched.buffer<ocm, 8x8xf16>
  %o1 = sched.alloc tile(1) : !sched.buffer<ocm, 1x8xf16>
  %c1 = sched.fc tile 1 %a1, %w1 -> %o1 after(%l1, %lw1) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
  %s1 = sched.dma tile 1 %o1 [0, 0] -> %y [1, 0] box [1, 8] after(%c1) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ddr, 3x8xf16>
  %a2 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %l2 = sched.dma tile 0 %x [2, 0] -> %a2 [0, 0] box [1, 8] : !sched.buffer<ddr, 3x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %w2 = sched.alloc tile(0) : !sched.buffer<ocm, 8x8xf16>
  %lw2 = sched.dma tile 0 %w [0, 0] -> %w2 [0, 0] box [8, 8] : !sched.buffer<ddr, 8x8xf16>, !sched.buffer<ocm, 8x8xf16>
  %o2 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %c2 = sched.fc tile 0 %a2, %w2 -> %o2 after(%l2, %lw2) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
  %s2 = sched.dma tile 0 %o2 [0, 0] -> %y [2, 0] box [1, 8] after(%c2) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ddr, 3x8xf16>
}
}

// CHECK:      %[[W0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 8x8xf16>
// CHECK-NEXT: %[[LW0:.*]] = sched.dma tile 0 %{{.*}} [0, 0] -> %[[W0]] [0, 0] box [8, 8]
// CHECK:      sched.dma tile 1 %{{.*}} [0, 0] -> %{{.*}} [0, 0] box [8, 8]
// CHECK:      %[[A2:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
// CHECK-NEXT: %[[L2:.*]] = sched.dma tile 0 %{{.*}} [2, 0] -> %[[A2]]
// CHECK-NEXT: sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
// CHECK-NEXT: sched.fc tile 0 %[[A2]], %[[W0]] -> %{{.*}} after(%[[L2]], %[[LW0]])
// CHECK-NOT:  box [8, 8]

// OFF-COUNT-3: box [8, 8]
