// RUN: mrvl-opt %s --split-input-file --verify-diagnostics | filecheck %s

builtin.module {
  %a = sched.alloc : !sched.buffer<ddr, 1x8x8x1xf16>
  %b = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x8x1xf16>
  %t = sched.dma tile 0 %a [0, 6, 0, 0] -> %b [0, 0, 0, 0] box [1, 4, 8, 1] : !sched.buffer<ddr, 1x8x8x1xf16>, !sched.buffer<ocm, 1x4x8x1xf16>
}
// CHECK: sched.dma: box [1, 4, 8, 1] at [0, 6, 0, 0] exceeds the source buffer [1, 8, 8, 1]

// -----

builtin.module {
  %b = sched.alloc : !sched.buffer<ocm, 1x4x8x1xf16>
}
// CHECK: sched.alloc: an OCM buffer names its tile, a DDR one does not

// -----

builtin.module {
  %x = sched.alloc : !sched.buffer<ddr, 1x4xf16>
  %w = sched.alloc tile(0) : !sched.buffer<ocm, 2x4xf16>
  %o = sched.alloc tile(0) : !sched.buffer<ocm, 1x2xf16>
  %t = sched.fc tile 0 %x, %w -> %o : !sched.buffer<ddr, 1x4xf16>, !sched.buffer<ocm, 2x4xf16> -> !sched.buffer<ocm, 1x2xf16>
}
// CHECK: sched.fc: compute operands must be in OCM, got !sched.buffer<ddr, 1x4xf16>

// -----

builtin.module {
  %x = sched.alloc tile(1) : !sched.buffer<ocm, 1x4xf16>
  %w = sched.alloc tile(0) : !sched.buffer<ocm, 2x4xf16>
  %o = sched.alloc tile(0) : !sched.buffer<ocm, 1x2xf16>
  %t = sched.fc tile 0 %x, %w -> %o : !sched.buffer<ocm, 1x4xf16>, !sched.buffer<ocm, 2x4xf16> -> !sched.buffer<ocm, 1x2xf16>
}
// CHECK: sched.fc: runs on tile 0 but uses a buffer of tile 1

// -----

builtin.module {
  %x = sched.alloc : !sched.buffer<ddr, 1x2x3x4xf32>
  %y = sched.alloc : !sched.buffer<ddr, 1x2x3x4xf16>
  %t = sched.convert tile 0 %x -> %y perm [0, 2, 3, 1] : !sched.buffer<ddr, 1x2x3x4xf32>, !sched.buffer<ddr, 1x2x3x4xf16>
}
// CHECK: sched.convert: destination shape is not the permuted source

// -----


builtin.module {
  %t = sched.const "t" = dense<0.0> : tensor<65536xf16> : !sched.buffer<ddr, 65536xf16>
  %l = sched.lut tile 0 %t act relu : !sched.buffer<ddr, 65536xf16>
}
// CHECK: sched.lut: act must name a table activation

// -----

builtin.module {
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 16xf16>
  %s = sched.alloc tile(0) : !sched.buffer<ocm, 2xf32>
  %t = sched.scale tile 0 %a, %s, %s -> %a act relu slopes_in %s : !sched.buffer<ocm, 16xf16>, !sched.buffer<ocm, 2xf32>, !sched.buffer<ocm, 2xf32>, slopes !sched.buffer<ocm, 2xf32> -> !sched.buffer<ocm, 16xf16>
}
// CHECK: sched.scale: a slopes buffer goes with act prelu only

// -----

builtin.module {
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 15xf16>
  %g = sched.alloc tile(0) : !sched.buffer<ocm, 2xf16>
  %t = sched.mul tile 0 %a, %g -> %a channels 2 : !sched.buffer<ocm, 15xf16>, !sched.buffer<ocm, 2xf16> -> !sched.buffer<ocm, 15xf16>
}
// CHECK: sched.mul: 15 elements are not whole pixels of 2

// -----

builtin.module {
  // CHECK: sched.program: tiles(16) is not valid for cn10ka (1, 2, 4 or 8, at most 8)
  sched.program mcpu("cn10ka") tiles(16) {
    %x = sched.io "x" input : !sched.buffer<ddr, 4xf32>
  }
}

// -----

builtin.module {
  // CHECK: sched.program: unknown mcpu 'cn99': known targets are cn10ka, cnf10kb
  sched.program mcpu("cn99") tiles(1) {
    %x = sched.io "x" input : !sched.buffer<ddr, 4xf32>
  }
}


// -----

builtin.module {
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 16xf16>
  %s = sched.alloc tile(0) : !sched.buffer<ocm, 3xf32>
  %t = sched.add tile 0 %a, %a -> %a act prelu slopes_in %s : !sched.buffer<ocm, 16xf16>, !sched.buffer<ocm, 16xf16>, slopes !sched.buffer<ocm, 3xf32> -> !sched.buffer<ocm, 16xf16>
}
// CHECK: sched.add: 16 elements are not whole pixels of 3

// -----

builtin.module {
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 16xf16>
  %t = sched.add tile 0 %a, %a -> %a act prelu : !sched.buffer<ocm, 16xf16>, !sched.buffer<ocm, 16xf16> -> !sched.buffer<ocm, 16xf16>
}
// CHECK: sched.add: a slopes buffer goes with act prelu only

// -----

builtin.module {
  %x = sched.alloc : !sched.buffer<ddr, 1x8xf16>
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %b = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %t = sched.multicast_dma tile 0 %x [0, 0] -> %a [0, 0] mirrors(%b : !sched.buffer<ocm, 1x8xf16>) box [1, 8] : !sched.buffer<ddr, 1x8xf16>, !sched.buffer<ocm, 1x8xf16>
}
// CHECK: sched.multicast_dma: mirrors on tiles [0, 0]: each on its own tile

// -----

builtin.module {
  %x = sched.alloc : !sched.buffer<ddr, 1x8xf16>
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 1x8xf16>
  %b = sched.alloc tile(1) : !sched.buffer<ocm, 2x8xf16>
  %t = sched.multicast_dma tile 0 %x [0, 0] -> %a [0, 0] mirrors(%b : !sched.buffer<ocm, 2x8xf16>) box [1, 8] : !sched.buffer<ddr, 1x8xf16>, !sched.buffer<ocm, 1x8xf16>
}
// CHECK: sched.multicast_dma: a mirror has the type of the dest

// -----

builtin.module {
  %x = sched.alloc tile(2) : !sched.buffer<ocm, 1x8xf16>
  %a = sched.alloc tile(2) : !sched.buffer<ocm, 1x8xf16>
  %b = sched.alloc tile(1) : !sched.buffer<ocm, 1x8xf16>
  %t = sched.multicast_dma tile 2 %x [0, 0] -> %a [0, 0] mirrors(%b : !sched.buffer<ocm, 1x8xf16>) box [1, 8] : !sched.buffer<ocm, 1x8xf16>, !sched.buffer<ocm, 1x8xf16>
}
// CHECK: sched.multicast_dma: only a DMA from DDR writes mirrors
