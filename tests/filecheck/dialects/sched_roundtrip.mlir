// RUN: mrvl-opt %s --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s

// The program (target, tiles, options, DDR layout), buffers, DMA (one with a mirror on another
// tile), tasks and tokens in their custom forms, locations kept.

builtin.module {
sched.program mcpu("cn10ka") tiles(2) symbol("region") wb_pin_ocm ddr_size(1024) const_base(512) const_end(576) {
  %x = sched.io "x" input offset(0) : !sched.buffer<ddr, 1x1x8x8xf32>
  %y = sched.io "output0" output offset(256) : !sched.buffer<ddr, 1x4xf32>
  %w = sched.const "w" = dense<1.0> : tensor<2x3x3x1xf16> offset(512) : !sched.buffer<ddr, 2x3x3x1xf16> loc("/conv/Conv")
  %a = sched.alloc : !sched.buffer<ddr, 1x8x8x1xf16>
  %t0 = sched.convert tile 0 %x -> %a perm [0, 2, 3, 1] : !sched.buffer<ddr, 1x1x8x8xf32>, !sched.buffer<ddr, 1x8x8x1xf16> loc("/conv/Conv")
  %win = sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 1x5x8x1xf16>
  %t1 = sched.dma tile 0 %a [0, 0, 0, 0] -> %win [0, 0, 0, 0] box [1, 5, 8, 1] after(%t0) : !sched.buffer<ddr, 1x8x8x1xf16>, !sched.buffer<ocm, 1x5x8x1xf16> loc("/conv/Conv")
  %wo = sched.alloc tile(0) : !sched.buffer<ocm, 2x3x3x1xf16>
  %wo1 = sched.alloc tile(1) : !sched.buffer<ocm, 2x3x3x1xf16>
  %t2 = sched.multicast_dma tile 0 %w [0, 0, 0, 0] -> %wo [0, 0, 0, 0] mirrors(%wo1 : !sched.buffer<ocm, 2x3x3x1xf16>) box [2, 3, 3, 1] : !sched.buffer<ddr, 2x3x3x1xf16>, !sched.buffer<ocm, 2x3x3x1xf16>
  %o = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x8x2xf16>
  %t3 = sched.conv2d tile 0 %win, %wo -> %o in_row 0 out_row 0 channels 0 of 2 kernel [3, 3] strides [1, 1] pads [1, 1, 1, 1] dilations [1, 1] groups 1 act relu after(%t1, %t2) : !sched.buffer<ocm, 1x5x8x1xf16>, !sched.buffer<ocm, 2x3x3x1xf16> -> !sched.buffer<ocm, 1x4x8x2xf16> loc("/conv/Conv")
  %p = sched.alloc tile(0) : !sched.buffer<ocm, 1x2x4x2xf16>
  %t4 = sched.pool2d tile 0 avg %o -> %p in_row 0 out_row 0 of [8, 8] kernel [2, 2] strides [2, 2] pads [0, 0, 0, 0] count_include_pad after(%t3) : !sched.buffer<ocm, 1x4x8x2xf16> -> !sched.buffer<ocm, 1x2x4x2xf16> loc("/pool/AveragePool")
  %v = sched.view %a : !sched.buffer<ddr, 1x8x8x1xf16> -> !sched.buffer<ddr, 1x64xf16>
  %e = sched.alloc tile(0) : !sched.buffer<ocm, 16xf16>
  %f = sched.alloc tile(0) : !sched.buffer<ocm, 16xf16>
  %sc = sched.alloc tile(0) : !sched.buffer<ocm, 2xf32>
  %t5 = sched.add tile 0 %e, %f -> %e act relu after(%t4) : !sched.buffer<ocm, 16xf16>, !sched.buffer<ocm, 16xf16> -> !sched.buffer<ocm, 16xf16> loc("/add/Add")
  %t6 = sched.scale tile 0 %e, %sc, %sc -> %f act clip min 0.0 max 6.0 after(%t5) : !sched.buffer<ocm, 16xf16>, !sched.buffer<ocm, 2xf32>, !sched.buffer<ocm, 2xf32> -> !sched.buffer<ocm, 16xf16> loc("/bn/BatchNormalization")
  %t7 = sched.scale tile 0 %e, %sc, %sc -> %f act prelu slopes_in %sc after(%t6) : !sched.buffer<ocm, 16xf16>, !sched.buffer<ocm, 2xf32>, !sched.buffer<ocm, 2xf32>, slopes !sched.buffer<ocm, 2xf32> -> !sched.buffer<ocm, 16xf16> loc("/prelu/PRelu")
  %lut = sched.const "mrvl_lut_silu" = dense<0.0> : tensor<65536xf16> : !sched.buffer<ddr, 65536xf16>
  %t8 = sched.lut tile 0 %lut act silu after(%t7) : !sched.buffer<ddr, 65536xf16> loc("/c/Conv")
  %g = sched.alloc tile(0) : !sched.buffer<ocm, 2xf16>
  %t9 = sched.mul tile 0 %e, %g -> %f channels 2 act silu after(%t8) : !sched.buffer<ocm, 16xf16>, !sched.buffer<ocm, 2xf16> -> !sched.buffer<ocm, 16xf16> loc("/se/Mul")
  %t10 = sched.add tile 0 %e, %f -> %e act prelu slopes_in %sc after(%t9) : !sched.buffer<ocm, 16xf16>, !sched.buffer<ocm, 16xf16>, slopes !sched.buffer<ocm, 2xf32> -> !sched.buffer<ocm, 16xf16> loc("/res/PRelu")
}
}

// CHECK:      sched.program mcpu("cn10ka") tiles(2) symbol("region") wb_pin_ocm ddr_size(1024) const_base(512) const_end(576) {
// CHECK-NEXT: %x = sched.io "x" input offset(0) : !sched.buffer<ddr, 1x1x8x8xf32>
// CHECK-NEXT: %y = sched.io "output0" output offset(256) : !sched.buffer<ddr, 1x4xf32>
// CHECK-NEXT: %w = sched.const "w" = dense<1.000000e+00> : tensor<2x3x3x1xf16> offset(512) : !sched.buffer<ddr, 2x3x3x1xf16> loc("/conv/Conv")
// CHECK-NEXT: %a = sched.alloc : !sched.buffer<ddr, 1x8x8x1xf16>
// CHECK-NEXT: %t0 = sched.convert tile 0 %x -> %a perm [0, 2, 3, 1] : {{.*}} loc("/conv/Conv")
// CHECK-NEXT: %win = sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 1x5x8x1xf16>
// CHECK-NEXT: %t1 = sched.dma tile 0 %a [0, 0, 0, 0] -> %win [0, 0, 0, 0] box [1, 5, 8, 1] after(%t0) : {{.*}} loc("/conv/Conv")
// CHECK-NEXT: %wo = sched.alloc tile(0) : !sched.buffer<ocm, 2x3x3x1xf16>
// CHECK-NEXT: %wo1 = sched.alloc tile(1) : !sched.buffer<ocm, 2x3x3x1xf16>
// CHECK-NEXT: %t2 = sched.multicast_dma tile 0 %w [0, 0, 0, 0] -> %wo [0, 0, 0, 0] mirrors(%wo1 : !sched.buffer<ocm, 2x3x3x1xf16>) box [2, 3, 3, 1] : {{.*}}
// CHECK:      %t3 = sched.conv2d tile 0 %win, %wo -> %o in_row 0 out_row 0 channels 0 of 2 kernel [3, 3] strides [1, 1] pads [1, 1, 1, 1] dilations [1, 1] groups 1 act relu after(%t1, %t2) : {{.*}} loc("/conv/Conv")
// CHECK:      %t4 = sched.pool2d tile 0 avg %o -> %p in_row 0 out_row 0 of [8, 8] kernel [2, 2] strides [2, 2] pads [0, 0, 0, 0] count_include_pad after(%t3) : {{.*}} loc("/pool/AveragePool")
// CHECK-NEXT: %v = sched.view %a : !sched.buffer<ddr, 1x8x8x1xf16> -> !sched.buffer<ddr, 1x64xf16>
// CHECK:      %t5 = sched.add tile 0 %e, %f -> %e act relu after(%t4) : {{.*}} loc("/add/Add")
// CHECK-NEXT: %t6 = sched.scale tile 0 %e, %sc, %sc -> %f act clip min 0.000000e+00 max 6.000000e+00 after(%t5) : {{.*}} loc("/bn/BatchNormalization")
// CHECK-NEXT: %t7 = sched.scale tile 0 %e, %sc, %sc -> %f act prelu slopes_in %sc after(%t6) : {{.*}}, slopes !sched.buffer<ocm, 2xf32> -> !sched.buffer<ocm, 16xf16> loc("/prelu/PRelu")
// CHECK:      %t8 = sched.lut tile 0 %lut act silu after(%t7) : !sched.buffer<ddr, 65536xf16> loc("/c/Conv")
// CHECK:      %t9 = sched.mul tile 0 %e, %g -> %f channels 2 act silu after(%t8) : !sched.buffer<ocm, 16xf16>, !sched.buffer<ocm, 2xf16> -> !sched.buffer<ocm, 16xf16> loc("/se/Mul")
// CHECK:      %t10 = sched.add tile 0 %e, %f -> %e act prelu slopes_in %sc after(%t9) : {{.*}}, slopes !sched.buffer<ocm, 2xf32> -> !sched.buffer<ocm, 16xf16> loc("/res/PRelu")
