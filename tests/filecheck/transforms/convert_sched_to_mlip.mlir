// RUN: mrvl-opt %s -p convert-sched-to-mlip --print-debuginfo | filecheck %s

// One instruction per DMA / conversion / task: buffers become byte addresses with row-major
// byte strides padded to 4-D, tokens become numbers (signalled only when waited for), the
// constant pool collects the constants' bytes from the program's const_base, and 'end' closes the program.

builtin.module {
sched.program mcpu("cn10ka") tiles(2) ddr_size(448) const_base(128) const_end(328) {
  %in = sched.io "x" input offset(0) : !sched.buffer<ddr, 1x10xf32>
  %out = sched.io "output0" output offset(64) : !sched.buffer<ddr, 1x10xf32>
  %tmp = sched.alloc offset(384) : !sched.buffer<ddr, 1x10xf16>
  %w = sched.const "w" = dense<1.000000e+00> : tensor<10x10xf16> offset(128) : !sched.buffer<ddr, 10x10xf16>
  %t0 = sched.convert tile 0 %in -> %tmp perm [0, 1] : !sched.buffer<ddr, 1x10xf32>, !sched.buffer<ddr, 1x10xf16>
  %a = sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 1x10xf16>
  %t1 = sched.dma tile 0 %tmp [0, 0] -> %a [0, 0] box [1, 10] after(%t0) : !sched.buffer<ddr, 1x10xf16>, !sched.buffer<ocm, 1x10xf16>
  %b = sched.alloc tile(0) offset(64) : !sched.buffer<ocm, 10x10xf16>
  %t2 = sched.dma tile 0 %w [0, 0] -> %b [0, 0] box [10, 10] : !sched.buffer<ddr, 10x10xf16>, !sched.buffer<ocm, 10x10xf16>
  %c = sched.alloc tile(0) offset(320) : !sched.buffer<ocm, 1x10xf16>
  %t3 = sched.fc tile 0 %a, %b -> %c act clip min 0.0 max 6.0 after(%t1, %t2) : !sched.buffer<ocm, 1x10xf16>, !sched.buffer<ocm, 10x10xf16> -> !sched.buffer<ocm, 1x10xf16> loc("/fc/Gemm")
  %t4 = sched.dma tile 0 %c [0, 0] -> %tmp [0, 0] box [1, 10] after(%t3) : !sched.buffer<ocm, 1x10xf16>, !sched.buffer<ddr, 1x10xf16>
  %d = sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 1x10xf16>
  %t5 = sched.dma tile 0 %tmp [0, 0] -> %d [0, 0] box [1, 10] after(%t4) : !sched.buffer<ddr, 1x10xf16>, !sched.buffer<ocm, 1x10xf16>
  %e = sched.alloc tile(1) offset(0) : !sched.buffer<ocm, 1x10xf16>
  %t6 = sched.dma tile 1 %tmp [0, 0] -> %e [0, 0] box [1, 10] after(%t4) : !sched.buffer<ddr, 1x10xf16>, !sched.buffer<ocm, 1x10xf16>
  %t7 = sched.convert tile 0 %tmp -> %out perm [0, 1] after(%t5, %t6) : !sched.buffer<ddr, 1x10xf16>, !sched.buffer<ddr, 1x10xf32>
}
}


// CHECK:      builtin.module attributes {mlip.program = #mlip.program<target = "cn10ka", tiles = 2, ddr_size = 448, const_base = 128>} {
// CHECK-NEXT:   mlip.io "x" input [1, 10] f32 at 0
// CHECK-NEXT:   mlip.io "output0" output [1, 10] f32 at 64
// CHECK-NEXT:   mlip.consts dense<"0x003C{{(003C)+}}"> : tensor<200xui8>
// CHECK-NEXT:   mlip.cvt tile 0 signal 1 : src_addr 0, src_dtype f32, src_shape [1, 1, 1, 10], dst_addr 384, dst_dtype f16, perm [0, 1, 2, 3]
// CHECK-NEXT:   mlip.dma tile 0 signal 2 wait [1] : src_space ddr, src_addr 384, src_strides [0, 0, 20, 2], dst_space ocm, dst_addr 0, dst_strides [0, 0, 20, 2], box [1, 1, 1, 10], elem_bytes 2
// CHECK-NEXT:   mlip.dma tile 0 signal 3 : src_space ddr, src_addr 128, {{.*}} dst_addr 64, {{.*}} box [1, 1, 10, 10], elem_bytes 2
// CHECK-NEXT:   mlip.fc tile 0 signal 4 wait [2, 3] : in_addr 0, n 1, k 10, o 10, w_addr 64, b_addr -1, out_addr 320, act clip, act_a 0.0, act_b 6.0, act_addr -1 loc("/fc/Gemm")
// CHECK-NEXT:   mlip.dma tile 0 signal 5 wait [4] : src_space ocm, src_addr 320,
// CHECK-NEXT:   mlip.dma tile 0 signal 6 wait [5]
// CHECK-NEXT:   mlip.dma tile 1 signal 7 wait [5]
// CHECK-NEXT:   mlip.cvt tile 0 wait [6, 7] : src_addr 384, src_dtype f16, src_shape [1, 1, 1, 10], dst_addr 64, dst_dtype f32, perm [0, 1, 2, 3]
// CHECK-NEXT:   mlip.end tile 0
// CHECK-NEXT: }
