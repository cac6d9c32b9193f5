// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' --print-debuginfo | filecheck %s --check-prefix=ISA

// A table activation loads its table (a compiler-made DDR constant) into a tile's table memory
// with `lut` before the first task that needs it there, and again only when the tile's table
// changes; table users on a tile are chained, so the next lut waits for the last one. PRELU's
// slopes are a constant loaded like a bias. A squeeze-excitation gate is `mul` per image with
// the image's C gate values (`channels 8`).

builtin.module {
  func.func @region(%x: tensor<1x4x4x8xf32, #mrvl.layout<NHWC>>) -> tensor<1x4x4x8xf32, #mrvl.layout<NHWC>> {
    %0 = mrvl.cast %x : tensor<1x4x4x8xf32, #mrvl.layout<NHWC>> -> tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> loc("/in")
    %w = mrvl.constant "w" = dense<0.5> : tensor<8x1x1x8xf16> -> tensor<8x1x1x8xf16, #mrvl.layout<OHWI>>
    %1 = mrvl.conv2d %0, %w act silu : (tensor<1x4x4x8xf16, #mrvl.layout<NHWC>>, tensor<8x1x1x8xf16, #mrvl.layout<OHWI>>) -> tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> loc("/c1/Conv")
    %2 = mrvl.conv2d %1, %w act silu : (tensor<1x4x4x8xf16, #mrvl.layout<NHWC>>, tensor<8x1x1x8xf16, #mrvl.layout<OHWI>>) -> tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> loc("/c2/Conv")
    %3 = mrvl.avgpool2d %2 kernel [4, 4] : tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> -> tensor<1x1x1x8xf16, #mrvl.layout<NHWC>> loc("/gap/GlobalAveragePool")
    %4 = mrvl.conv2d %3, %w act hard_sigmoid alpha 0.2 beta 0.5 : (tensor<1x1x1x8xf16, #mrvl.layout<NHWC>>, tensor<8x1x1x8xf16, #mrvl.layout<OHWI>>) -> tensor<1x1x1x8xf16, #mrvl.layout<NHWC>> loc("/se/Conv")
    %5 = mrvl.mul %2, %4 : (tensor<1x4x4x8xf16, #mrvl.layout<NHWC>>, tensor<1x1x1x8xf16, #mrvl.layout<NHWC>>) -> tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> loc("/se/Mul")
    %6 = mrvl.conv2d %5, %w act prelu slopes [0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5] : (tensor<1x4x4x8xf16, #mrvl.layout<NHWC>>, tensor<8x1x1x8xf16, #mrvl.layout<OHWI>>) -> tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> loc("/c3/Conv")
    %7 = mrvl.add %6, %5 act prelu slopes [0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25] : tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> loc("/res/Add")
    %8 = mrvl.cast %7 : tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> -> tensor<1x4x4x8xf32, #mrvl.layout<NHWC>>
    func.return %8 : tensor<1x4x4x8xf32, #mrvl.layout<NHWC>>
  }
}

// CHECK:      %[[T:.*]] = sched.const "mrvl_lut_silu" = dense<{{.*}}> : !sched.buffer<ddr, 65536xf16> loc("/c1/Conv")
// CHECK-NEXT: %[[L0:.*]] = sched.lut tile 0 %[[T]] act silu : !sched.buffer<ddr, 65536xf16> loc("/c1/Conv")
// CHECK-NEXT: %[[C0:.*]] = sched.conv2d tile 0 {{.*}} act silu after(%{{.*}}, %{{.*}}, %[[L0]]) {{.*}} loc("/c1/Conv")
// CHECK:      %[[L1:.*]] = sched.lut tile 1 %[[T]] act silu : {{.*}} loc("/c1/Conv")
// CHECK-NEXT: %[[C1:.*]] = sched.conv2d tile 1 {{.*}} act silu after(%{{.*}}, %{{.*}}, %[[L1]])
// The second SiLU conv reuses the loaded tables, chained after the previous users.
// CHECK-NOT:  sched.lut
// CHECK:      sched.conv2d tile 0 {{.*}} act silu after(%{{.*}}, %{{.*}}, %[[L0]], %[[C0]]) {{.*}} loc("/c2/Conv")
// CHECK:      %[[C3:.*]] = sched.conv2d tile 1 {{.*}} act silu after(%{{.*}}, %{{.*}}, %[[L1]], %[[C1]]) {{.*}} loc("/c2/Conv")
// CHECK:      sched.const "mrvl_lut_hard_sigmoid_3e4ccccd_3f000000"
// CHECK-NEXT: sched.lut tile 0 %{{.*}} act hard_sigmoid alpha 2.000000e-01 beta 5.000000e-01 after(%{{.*}}) : {{.*}} loc("/se/Conv")
// CHECK:      sched.mul tile 0 %{{.*}}, %{{.*}} -> %{{.*}} channels 8 after({{.*}}) : !sched.buffer<ocm, 64xf16>, !sched.buffer<ocm, 8xf16> -> !sched.buffer<ocm, 64xf16> loc("/se/Mul")
// CHECK:      sched.mul tile 1 %{{.*}}, %{{.*}} -> %{{.*}} channels 8
// CHECK:      %[[S:.*]] = sched.const "mrvl_prelu_slopes_{{[0-9]+}}" = dense<[2.500000e-01, 5.000000e-01, {{.*}}]> : tensor<8xf32> : !sched.buffer<ddr, 8xf32> loc("/c3/Conv")
// CHECK:      sched.dma tile 0 %[[S]] [0] -> %[[SO:.*]] [0] box [8]
// CHECK:      sched.conv2d tile 0 %{{.*}}, %{{.*}} -> %{{.*}} {{.*}} act prelu slopes_in %[[SO]] after({{.*}}) : {{.*}}, slopes !sched.buffer<ocm, 8xf32> -> !sched.buffer<ocm, 1x2x4x8xf16>
// A residual sum with PRelu: chunks of whole pixels, each tile with the 8 slopes.
// CHECK:      %[[RS:.*]] = sched.const "mrvl_prelu_slopes_{{[0-9]+}}" = dense<[5.000000e-01, 2.500000e-01, {{.*}}]> : tensor<8xf32> : !sched.buffer<ddr, 8xf32> loc("/res/Add")
// CHECK:      sched.dma tile 0 %[[RS]] [0] -> %[[RSO:.*]] [0] box [8]
// CHECK:      sched.add tile 0 %{{.*}}, %{{.*}} -> %{{.*}} act prelu slopes_in %[[RSO]] after({{.*}}) : !sched.buffer<ocm, 64xf16>, !sched.buffer<ocm, 64xf16>, slopes !sched.buffer<ocm, 8xf32> -> !sched.buffer<ocm, 64xf16> loc("/res/Add")
// CHECK:      sched.add tile 1 {{.*}} act prelu slopes_in

// ISA:      mlip.lut tile 0 signal [[L:[0-9]+]] : src_addr {{[0-9]+}}, act silu, act_a 0.0, act_b 0.0 loc("/c1/Conv")
// ISA:      mlip.conv tile 0 {{.*}}wait [{{.*}}[[L]]] : {{.*}} act silu, act_a 0.0, act_b 0.0, act_addr -1, acc_addr -1, acc_out 0 loc("/c1/Conv")
// ISA:      mlip.lut tile 0 {{.*}}: src_addr {{[0-9]+}}, act hard_sigmoid, act_a 0.20000000298023224, act_b 0.5 loc("/se/Conv")
// ISA:      mlip.mul tile 0 {{.*}}: a_addr {{[0-9]+}}, b_addr {{[0-9]+}}, out_addr {{[0-9]+}}, count 64, channels 8, act none
// ISA:      mlip.conv tile 0 {{.*}} act prelu, act_a 0.0, act_b 0.0, act_addr {{[0-9]+}}, acc_addr -1, acc_out 0 loc("/c3/Conv")
// ISA:      mlip.add tile 0 {{.*}}: a_addr {{[0-9]+}}, b_addr {{[0-9]+}}, out_addr {{[0-9]+}}, count 64, channels 8, act prelu, act_a 0.0, act_b 0.0, act_addr {{[0-9]+}} loc("/res/Add")
