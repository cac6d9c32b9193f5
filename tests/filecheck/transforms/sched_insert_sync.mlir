// RUN: mrvl-opt %s -p sched-insert-sync | filecheck %s

// After allocation, %w1 reuses the OCM bytes of %w0, which the MAC array (conv %c0) may still
// be reading when tile 0's DMA engine loads %w1 (pipelined, before the store of %o0): the load
// must wait for the conv (WAR).
// %y reuses the DDR bytes of %mid, which tile 1 reads: tile 0's write of %y waits for that read
// (WAR across tiles). Tokens already implied are not repeated: the store after the conv waits
// for it already, and the second load on tile 0's DMA queue follows the first.

builtin.module {
sched.program mcpu("cn10ka") tiles(2) ddr_size(4096) const_base(0) const_end(1152) {
  %w = sched.const "w" = dense<1.0> : tensor<2x3x3x4xf16> offset(0) : !sched.buffer<ddr, 2x3x3x4xf16>
  %x = sched.io "x" input offset(2048) : !sched.buffer<ddr, 1x4x4x4xf16>
  %out = sched.io "y" output offset(3072) : !sched.buffer<ddr, 1x2x2x2xf16>
  %mid = sched.alloc offset(1280) : !sched.buffer<ddr, 1x2x2x2xf16>
  %y = sched.alloc offset(1280) : !sched.buffer<ddr, 1x2x2x2xf16>
  %in0 = sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 1x4x4x4xf16>
  %l0 = sched.dma tile 0 %x [0, 0, 0, 0] -> %in0 [0, 0, 0, 0] box [1, 4, 4, 4] : !sched.buffer<ddr, 1x4x4x4xf16>, !sched.buffer<ocm, 1x4x4x4xf16>
  %w0 = sched.alloc tile(0) offset(128) : !sched.buffer<ocm, 2x3x3x4xf16>
  %lw0 = sched.dma tile 0 %w [0, 0, 0, 0] -> %w0 [0, 0, 0, 0] box [2, 3, 3, 4] : !sched.buffer<ddr, 2x3x3x4xf16>, !sched.buffer<ocm, 2x3x3x4xf16>
  %o0 = sched.alloc tile(0) offset(448) : !sched.buffer<ocm, 1x2x2x2xf16>
  %c0 = sched.conv2d tile 0 %in0, %w0 -> %o0 in_row 0 out_row 0 channels 0 of 2 kernel [3, 3] strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 after(%l0, %lw0) : !sched.buffer<ocm, 1x4x4x4xf16>, !sched.buffer<ocm, 2x3x3x4xf16> -> !sched.buffer<ocm, 1x2x2x2xf16>
  %w1 = sched.alloc tile(0) offset(128) : !sched.buffer<ocm, 2x3x3x4xf16>
  %lw1 = sched.dma tile 0 %w [0, 0, 0, 0] -> %w1 [0, 0, 0, 0] box [2, 3, 3, 4] : !sched.buffer<ddr, 2x3x3x4xf16>, !sched.buffer<ocm, 2x3x3x4xf16>
  %s0 = sched.dma tile 0 %o0 [0, 0, 0, 0] -> %mid [0, 0, 0, 0] box [1, 2, 2, 2] after(%c0) : !sched.buffer<ocm, 1x2x2x2xf16>, !sched.buffer<ddr, 1x2x2x2xf16>
  %r1 = sched.alloc tile(1) offset(0) : !sched.buffer<ocm, 1x2x2x2xf16>
  %l1 = sched.dma tile 1 %mid [0, 0, 0, 0] -> %r1 [0, 0, 0, 0] box [1, 2, 2, 2] after(%s0) : !sched.buffer<ddr, 1x2x2x2xf16>, !sched.buffer<ocm, 1x2x2x2xf16>
  %st1 = sched.dma tile 1 %r1 [0, 0, 0, 0] -> %out [0, 0, 0, 0] box [1, 2, 2, 2] after(%l1) : !sched.buffer<ocm, 1x2x2x2xf16>, !sched.buffer<ddr, 1x2x2x2xf16>
  %o1 = sched.alloc tile(0) offset(512) : !sched.buffer<ocm, 1x2x2x2xf16>
  %c1 = sched.conv2d tile 0 %in0, %w1 -> %o1 in_row 0 out_row 0 channels 0 of 2 kernel [3, 3] strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 after(%lw1) : !sched.buffer<ocm, 1x4x4x4xf16>, !sched.buffer<ocm, 2x3x3x4xf16> -> !sched.buffer<ocm, 1x2x2x2xf16>
  %s1 = sched.dma tile 0 %o1 [0, 0, 0, 0] -> %y [0, 0, 0, 0] box [1, 2, 2, 2] after(%c1) : !sched.buffer<ocm, 1x2x2x2xf16>, !sched.buffer<ddr, 1x2x2x2xf16>
}
}

// CHECK:      %[[C0:.*]] = sched.conv2d tile 0 {{.*}} after(%{{.*}}, %{{.*}}) :
//   the load of %w1 waits for the conv still reading %w0's bytes
// CHECK-NEXT: sched.alloc tile(0)
// CHECK-NEXT: sched.dma tile 0 {{.*}} box [2, 3, 3, 4] after(%[[C0]]) :
// CHECK-NEXT: %[[S0:.*]] = sched.dma tile 0 {{.*}} after(%[[C0]]) :
// CHECK-NEXT: sched.alloc tile(1)
// CHECK-NEXT: %[[L1:.*]] = sched.dma tile 1 {{.*}} after(%[[S0]]) :
//   the write of %y waits for tile 1's read of %mid (and for nothing already ordered)
// CHECK:      sched.dma tile 0 {{.*}} box [1, 2, 2, 2] after(%{{[^,]*}}, %[[L1]]) :
