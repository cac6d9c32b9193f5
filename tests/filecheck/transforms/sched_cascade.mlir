// RUN: mrvl-opt %s -p sched-cascade | filecheck %s
// RUN: sed -e 's/ cascade {/ {/' %s | mrvl-opt -p sched-cascade | filecheck %s --check-prefix=OFF

// Three fc layers on tile 0, then one on tile 1. %t is written whole by one piece: the piece's
// output is the tensor, its store goes, and the two row loads copy from it in OCM. %u is
// written by two pieces and loaded whole: it becomes an OCM buffer of tile 0 that the pieces
// copy into and the third layer reads in place. %v is read on tile 1, which cannot read tile
// 0's OCM: it stays in DDR. A removed DMA's waiters wait for what it waited for. Without the
// program's cascade option nothing changes.

builtin.module {
sched.program mcpu("cn10ka") tiles(2) cascade {
  %x = sched.io "x" input : !sched.buffer<ddr, 2x8xf16>
  %y = sched.io "y" output : !sched.buffer<ddr, 2x8xf16>
  %w = sched.const "w" = dense<1.0> : tensor<8x8xf16> : !sched.buffer<ddr, 8x8xf16>
  %t = sched.alloc : !sched.buffer<ddr, 2x8xf16>
  %a0 = sched.alloc tile(0) : !sched.buffer<ocm, 2x8xf16>
  %l0 = sched.dma tile 0 %x [0, 0] -> %a0 [0, 0] box [2, 8] : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 2x8xf16>
  %w0 = sched.alloc tile(0) : !sched.buffer<ocm, 8x8xf16>
  %lw0 = sched.dma tile 0 %w [0, 0] -> %w0 [0, 0] box [8, 8] : !sched.buffer<ddr, 8x8xf16>, !sched.buffer<ocm, 8x8xf16>
  %o0 = sched.alloc tile(0) : !sched.buffer<ocm, 2x8xf16>
  %c0 = sched.fc tile 0 %a0, %w0 -> %o0 after(%l0, %lw0) : !sched.buffer<ocm, 2x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 2x8xf16>
  %s0 = sched.dma tile 0 %o0 [0, 0] -> %t [0, 0] box [2, 8] after(%c0) : !sched.buffer<ocm, 2x8xf16>, !sched.buffer<ddr, 2x8xf16>
  %u = sched.alloc : !sched.buffer<ddr, 2x8xf16>
  %a1 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %l1 = sched.dma tile 0 %t [0, 0] -> %a1 [0, 0] box [1, 8] after(%s0) : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %o1 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %c1 = sched.fc tile 0 %a1, %w0 -> %o1 after(%l1, %lw0) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
  %s1 = sched.dma tile 0 %o1 [0, 0] -> %u [0, 0] box [1, 8] after(%c1) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ddr, 2x8xf16>
  %a2 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %l2 = sched.dma tile 0 %t [1, 0] -> %a2 [0, 0] box [1, 8] after(%s0) : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 1x8xf16>
  %o2 = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %c2 = sched.fc tile 0 %a2, %w0 -> %o2 after(%l2, %lw0) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 1x8xf16>
  %s2 = sched.dma tile 0 %o2 [0, 0] -> %u [1, 0] box [1, 8] after(%c2, %s1) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ddr, 2x8xf16>
  %v = sched.alloc : !sched.buffer<ddr, 2x8xf16>
  %a3 = sched.alloc tile(0) : !sched.buffer<ocm, 2x8xf16>
  %l3 = sched.dma tile 0 %u [0, 0] -> %a3 [0, 0] box [2, 8] after(%s2) : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 2x8xf16>
  %o3 = sched.alloc tile(0) : !sched.buffer<ocm, 2x8xf16>
  %c3 = sched.fc tile 0 %a3, %w0 -> %o3 after(%l3, %lw0) : !sched.buffer<ocm, 2x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 2x8xf16>
  %s3 = sched.dma tile 0 %o3 [0, 0] -> %v [0, 0] box [2, 8] after(%c3) : !sched.buffer<ocm, 2x8xf16>, !sched.buffer<ddr, 2x8xf16>
  %a4 = sched.alloc tile(1) : !sched.buffer<ocm, 2x8xf16>
  %l4 = sched.dma tile 1 %v [0, 0] -> %a4 [0, 0] box [2, 8] after(%s3) : !sched.buffer<ddr, 2x8xf16>, !sched.buffer<ocm, 2x8xf16>
  %w4 = sched.alloc tile(1) : !sched.buffer<ocm, 8x8xf16>
  %lw4 = sched.dma tile 1 %w [0, 0] -> %w4 [0, 0] box [8, 8] : !sched.buffer<ddr, 8x8xf16>, !sched.buffer<ocm, 8x8xf16>
  %o4 = sched.alloc tile(1) : !sched.buffer<ocm, 2x8xf16>
  %c4 = sched.fc tile 1 %a4, %w4 -> %o4 after(%l4, %lw4) : !sched.buffer<ocm, 2x8xf16>, !sched.buffer<ocm, 8x8xf16> -> !sched.buffer<ocm, 2x8xf16>
  %s4 = sched.dma tile 1 %o4 [0, 0] -> %y [0, 0] box [2, 8] after(%c4) : !sched.buffer<ocm, 2x8xf16>, !sched.buffer<ddr, 2x8xf16>
}
}

// CHECK:      %[[C0:.*]] = sched.fc tile 0 %{{.*}}, %{{.*}} -> %[[O0:[a-z0-9]+]] after
// CHECK-NEXT: %[[U:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 2x8xf16>
// CHECK:      sched.dma tile 0 %[[O0]] [0, 0] -> %{{.*}} [0, 0] box [1, 8] after(%[[C0]]) : !sched.buffer<ocm, 2x8xf16>, !sched.buffer<ocm, 1x8xf16>
// CHECK:      %[[C1:.*]] = sched.fc tile 0
// CHECK-NEXT: %[[S1:.*]] = sched.dma tile 0 %{{.*}} [0, 0] -> %[[U]] [0, 0] box [1, 8] after(%[[C1]]) : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 2x8xf16>
// CHECK:      sched.dma tile 0 %[[O0]] [1, 0] -> %{{.*}} [0, 0] box [1, 8] after(%[[C0]])
// CHECK:      %[[S2:.*]] = sched.dma tile 0 %{{.*}} [0, 0] -> %[[U]] [1, 0] box [1, 8]
// CHECK-NEXT: %[[V:.*]] = sched.alloc : !sched.buffer<ddr, 2x8xf16>
// CHECK-NEXT: %[[O3:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 2x8xf16>
// CHECK-NEXT: %[[C3:.*]] = sched.fc tile 0 %[[U]], %{{.*}} -> %[[O3]] after(%{{.*}}, %[[S2]])
// CHECK-NEXT: sched.dma tile 0 %[[O3]] [0, 0] -> %[[V]] [0, 0] box [2, 8] after(%[[C3]]) : !sched.buffer<ocm, 2x8xf16>, !sched.buffer<ddr, 2x8xf16>
// CHECK:      sched.dma tile 1 %[[V]] [0, 0]
// CHECK-NOT:  sched.alloc : !sched.buffer<ddr

// OFF-COUNT-3: sched.alloc : !sched.buffer<ddr, 2x8xf16>
