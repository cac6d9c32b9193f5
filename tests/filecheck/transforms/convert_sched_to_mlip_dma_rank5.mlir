// RUN: mrvl-opt %s -p convert-sched-to-mlip | filecheck %s

// A DMA of more than 4 dimensions (a part of a rank-5 concat, found by the fuzzer as
// Gather -> Tile) is one `dma` over the same elements: dimensions of extent 1 go, and a
// dimension both sides walk contiguously into the next is merged with it, until 4 are left.
// A rank-4 DMA keeps its dimensions as they are.

builtin.module {
sched.program mcpu("cn10ka") tiles(1) ddr_size(4096) const_base(4096) const_end(4096) {
  %part = sched.alloc offset(0) : !sched.buffer<ddr, 1x1x2x3x1xf16>
  %whole = sched.alloc offset(64) : !sched.buffer<ddr, 1x1x5x3x1xf16>
  %t0 = sched.dma tile 0 %part [0, 0, 0, 0, 0] -> %whole [0, 0, 2, 0, 0] box [1, 1, 2, 3, 1] : !sched.buffer<ddr, 1x1x2x3x1xf16>, !sched.buffer<ddr, 1x1x5x3x1xf16>
  %big = sched.alloc offset(128) : !sched.buffer<ddr, 2x2x2x2x2xf16>
  %out = sched.alloc offset(256) : !sched.buffer<ddr, 2x2x2x2x4xf16>
  %t1 = sched.dma tile 0 %big [0, 0, 0, 0, 0] -> %out [0, 0, 0, 0, 2] box [2, 2, 2, 2, 2] after(%t0) : !sched.buffer<ddr, 2x2x2x2x2xf16>, !sched.buffer<ddr, 2x2x2x2x4xf16>
  %four = sched.alloc offset(512) : !sched.buffer<ddr, 1x1x2x3xf16>
  %t2 = sched.dma tile 0 %four [0, 0, 0, 0] -> %four [0, 0, 0, 0] box [1, 1, 2, 3] after(%t1) : !sched.buffer<ddr, 1x1x2x3xf16>, !sched.buffer<ddr, 1x1x2x3xf16>
}
}

// CHECK:      mlip.dma tile 0 signal 1 : src_space ddr, src_addr 0, src_strides [0, 0, 6, 2], dst_space ddr, dst_addr 76, dst_strides [0, 0, 6, 2], box [1, 1, 2, 3], elem_bytes 2
// CHECK-NEXT: mlip.dma tile 0 signal 2 wait [1] : src_space ddr, src_addr 128, src_strides [32, 16, 4, 2], dst_space ddr, dst_addr 260, dst_strides [64, 32, 8, 2], box [2, 2, 4, 2], elem_bytes 2
// CHECK-NEXT: mlip.dma tile 0 wait [2] : src_space ddr, src_addr 512, src_strides [12, 12, 6, 2], dst_space ddr, dst_addr 512, dst_strides [12, 12, 6, 2], box [1, 1, 2, 3], elem_bytes 2
