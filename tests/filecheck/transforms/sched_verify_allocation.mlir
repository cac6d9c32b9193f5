// RUN: not mrvl-opt %s --split-input-file -p sched-verify-allocation 2>&1 | filecheck %s

// An allocation where two OCM buffers share bytes only when one is dead passes unchanged.

builtin.module {
sched.program mcpu("cn10ka") tiles(1) ddr_size(192) const_base(128) const_end(128) {
  %in = sched.io "x" input offset(0) : !sched.buffer<ddr, 1x10xf16>
  %out = sched.io "output0" output offset(64) : !sched.buffer<ddr, 1x10xf16>
  %a = sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 1x10xf16>
  %t1 = sched.dma tile 0 %in [0, 0] -> %a [0, 0] box [1, 10] : !sched.buffer<ddr, 1x10xf16>, !sched.buffer<ocm, 1x10xf16>
  %b = sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 1x10xf16>
  %t2 = sched.dma tile 0 %b [0, 0] -> %out [0, 0] box [1, 10] after(%t1) : !sched.buffer<ocm, 1x10xf16>, !sched.buffer<ddr, 1x10xf16>
}
}

// CHECK: sched.program mcpu("cn10ka") tiles(1)

// -----

builtin.module {
sched.program mcpu("cn10ka") tiles(1) ddr_size(192) const_base(128) const_end(128) {
  %in = sched.io "x" input offset(0) : !sched.buffer<ddr, 10xf16>
  %out = sched.io "output0" output offset(64) : !sched.buffer<ddr, 10xf16>
  %a = sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 10xf16> loc("/a/Conv")
  %t1 = sched.dma tile 0 %in [0] -> %a [0] box [10] : !sched.buffer<ddr, 10xf16>, !sched.buffer<ocm, 10xf16> loc("/a/Conv")
  %b = sched.alloc tile(0) offset(16) : !sched.buffer<ocm, 10xf16> loc("/b/Relu")
  %t2 = sched.dma tile 0 %in [0] -> %b [0] box [10] : !sched.buffer<ddr, 10xf16>, !sched.buffer<ocm, 10xf16> loc("/b/Relu")
  %t3 = sched.add tile 0 %a, %b -> %b after(%t1, %t2) : !sched.buffer<ocm, 10xf16>, !sched.buffer<ocm, 10xf16> -> !sched.buffer<ocm, 10xf16>
  %t4 = sched.dma tile 0 %b [0] -> %out [0] box [10] after(%t3) : !sched.buffer<ocm, 10xf16>, !sched.buffer<ddr, 10xf16>
}
}

// CHECK: the 20-byte buffer of layer /a/Conv in OCM of tile 0 and the 20-byte buffer of layer /b/Relu in OCM of tile 0 overlap at byte 16 while both are live
