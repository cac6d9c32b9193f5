// RUN: mrvl-opt %s -p convert-sched-to-mlip | filecheck %s

// A conversion of a rank-5 region input or output (f32 <-> f16, no reordering) is one `cvt`
// over the same bytes: source dimensions that stay together in the permutation are merged
// until 4 are left. A rank-6 one with a reordering keeps its moved dimensions apart.

builtin.module {
sched.program mcpu("cn10ka") tiles(1) ddr_size(4096) const_base(4096) const_end(4096) {
  %in = sched.io "x" "input" offset(0) : !sched.buffer<ddr, 2x3x4x5x6xf32>
  %tmp = sched.alloc offset(2944) : !sched.buffer<ddr, 2x3x4x5x6xf16>
  %t0 = sched.convert tile 0 %in -> %tmp perm [0, 1, 2, 3, 4] : !sched.buffer<ddr, 2x3x4x5x6xf32>, !sched.buffer<ddr, 2x3x4x5x6xf16>
  %six = sched.alloc offset(0) : !sched.buffer<ddr, 1x2x2x3x2x2xf16>
  %moved = sched.alloc offset(64) : !sched.buffer<ddr, 1x3x2x2x2x2xf16>
  %t1 = sched.convert tile 0 %six -> %moved perm [0, 3, 1, 2, 4, 5] after(%t0) : !sched.buffer<ddr, 1x2x2x3x2x2xf16>, !sched.buffer<ddr, 1x3x2x2x2x2xf16>
}
}

// CHECK:      mlip.cvt tile 0 signal 1 : src_addr 0, src_dtype f32, src_shape [1, 1, 1, 720], dst_addr 2944, dst_dtype f16, perm [0, 1, 2, 3]
// CHECK-NEXT: mlip.cvt tile 0 wait [1] : src_addr 0, src_dtype f16, src_shape [1, 4, 3, 4], dst_addr 64, dst_dtype f16, perm [0, 2, 1, 3]
