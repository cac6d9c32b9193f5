// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo --split-input-file | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' --split-input-file | mrvl-opt --split-input-file | filecheck %s --check-prefix=ISA

// A reduction over the channels of an NHWC tensor (rows of C, one per pixel) is cut into whole
// outer slices, one piece per tile, each a load, one sched.reduce and a store of [pixels, 1].
// A mean over a 256x256 plane of 4 channels (one row of 65536 pixels does not fit a tile) is
// one chain on a tile: three bands of the plane, the first writing fp32 partials (acc_out),
// the second continuing and writing them, the last continuing into the f16 result; every band
// divides by the whole plane (divisor 65536), the ISA's order makes it the unsplit bits.
// An argmax writes f32 indices, which leave the region as they are: a sched.convert copy (f32
// to f32) into the output buffer, through the relabelling reshape.

builtin.module {
  func.func @channels(%x: tensor<2x2x3x8xf16, #mrvl.layout<NHWC>>) -> tensor<2x2x3x1xf16, #mrvl.layout<NHWC>> {
    %0 = mrvl.reduce "max" %x axes [3] : tensor<2x2x3x8xf16, #mrvl.layout<NHWC>> -> tensor<2x2x3x1xf16, #mrvl.layout<NHWC>> loc("/r/ReduceMax")
    %1 = mrvl.layout_convert %0 : tensor<2x2x3x1xf16, #mrvl.layout<NHWC>> -> tensor<2x2x3x1xf16, #mrvl.layout<NHWC>> loc("/out")
    func.return %1 : tensor<2x2x3x1xf16, #mrvl.layout<NHWC>>
  }
}

// -----

builtin.module {
  func.func @plane(%x: tensor<1x256x256x4xf16, #mrvl.layout<NHWC>>) -> tensor<1x1x1x4xf16, #mrvl.layout<NHWC>> {
    %0 = mrvl.reduce "mean" %x axes [1, 2] : tensor<1x256x256x4xf16, #mrvl.layout<NHWC>> -> tensor<1x1x1x4xf16, #mrvl.layout<NHWC>> loc("/gap/GlobalAveragePool")
    %1 = mrvl.layout_convert %0 : tensor<1x1x1x4xf16, #mrvl.layout<NHWC>> -> tensor<1x1x1x4xf16, #mrvl.layout<NHWC>> loc("/out")
    func.return %1 : tensor<1x1x1x4xf16, #mrvl.layout<NHWC>>
  }
}

// -----

builtin.module {
  func.func @argmax(%x: tensor<1x2x3x8xf16, #mrvl.layout<NHWC>>) -> tensor<1x1x2x3xf32, #mrvl.layout<NCHW>> {
    %0 = mrvl.reduce "argmax" %x axes [3] : tensor<1x2x3x8xf16, #mrvl.layout<NHWC>> -> tensor<1x2x3x1xf32, #mrvl.layout<NHWC>> loc("/am/ArgMax")
    %1 = mrvl.reshape %0 : tensor<1x2x3x1xf32, #mrvl.layout<NHWC>> -> tensor<1x1x2x3xf32, #mrvl.layout<NCHW>> loc("/am/ArgMax")
    func.return %1 : tensor<1x1x2x3xf32, #mrvl.layout<NCHW>>
  }
}

// CHECK-LABEL: symbol("channels")
// CHECK:      %[[OUT:.*]] = sched.alloc : !sched.buffer<ddr, 2x2x3x1xf16> loc("/r/ReduceMax")
// CHECK:      %[[DST:.*]] = sched.view %[[OUT]] : !sched.buffer<ddr, 2x2x3x1xf16> -> !sched.buffer<ddr, 12x1xf16>
// CHECK:      %[[L0:.*]] = sched.dma tile 0 %{{.*}} [0, 0, 0] -> %{{.*}} [0, 0, 0] box [6, 8, 1]
// CHECK:      %[[R0:.*]] = sched.reduce tile 0 %{{.*}} -> %[[Y0:.*]] mode "max" divisor 8 after(%[[L0]]) : !sched.buffer<ocm, 6x8x1xf16> -> !sched.buffer<ocm, 6x1xf16> loc("/r/ReduceMax")
// CHECK-NEXT: sched.dma tile 0 %[[Y0]] [0, 0] -> %[[DST]] [0, 0] box [6, 1] after(%[[R0]])
// CHECK:      sched.dma tile 1 %{{.*}} [6, 0, 0] -> %{{.*}} [0, 0, 0] box [6, 8, 1]
// CHECK:      sched.reduce tile 1

// CHECK-LABEL: symbol("plane")
// CHECK:      sched.view %{{.*}} : !sched.buffer<ddr, 1x256x256x4xf16> -> !sched.buffer<ddr, 1x65536x4xf16>
// CHECK:      sched.dma tile 0 %{{.*}} [0, 0, 0] -> %{{.*}} [0, 0, 0] box [1, 21846, 4]
// CHECK:      %[[B0:.*]] = sched.reduce tile 0 %{{.*}} -> %[[P0:.*]] mode "mean" divisor 65536 acc_out after(%{{.*}}) : !sched.buffer<ocm, 1x21846x4xf16> -> !sched.buffer<ocm, 1x4xf32> loc("/gap/GlobalAveragePool")
// CHECK:      sched.dma tile 0 %{{.*}} [0, 21846, 0] -> %{{.*}} [0, 0, 0] box [1, 21846, 4]
// CHECK:      %[[B1:.*]] = sched.reduce tile 0 %{{.*}} acc(%[[P0]] : !sched.buffer<ocm, 1x4xf32>) -> %[[P1:.*]] mode "mean" divisor 65536 acc_out after(%{{.*}}, %[[B0]])
// CHECK:      sched.dma tile 0 %{{.*}} [0, 43692, 0] -> %{{.*}} [0, 0, 0] box [1, 21844, 4]
// CHECK:      %[[B2:.*]] = sched.reduce tile 0 %{{.*}} acc(%[[P1]] : !sched.buffer<ocm, 1x4xf32>) -> %[[Y:.*]] mode "mean" divisor 65536 after(%{{.*}}, %[[B1]]) : !sched.buffer<ocm, 1x21844x4xf16> -> !sched.buffer<ocm, 1x4xf16>
// CHECK-NEXT: sched.dma tile 0 %[[Y]] [0, 0] -> %{{.*}} [0, 0] box [1, 4] after(%[[B2]])
// CHECK-NOT:  sched.reduce

// CHECK-LABEL: symbol("argmax")
// CHECK:      %[[IO:.*]] = sched.io "output0" output : !sched.buffer<ddr, 1x1x2x3xf32>
// CHECK:      %[[OUT:.*]] = sched.alloc : !sched.buffer<ddr, 1x2x3x1xf32> loc("/am/ArgMax")
// CHECK:      %[[T:.*]] = sched.reduce tile 0 %{{.*}} -> %{{.*}} mode "argmax" divisor 8 after(%{{.*}}) : !sched.buffer<ocm, 3x8x1xf16> -> !sched.buffer<ocm, 3x1xf32>
// CHECK:      %[[V:.*]] = sched.view %[[OUT]] : !sched.buffer<ddr, 1x2x3x1xf32> -> !sched.buffer<ddr, 1x1x2x3xf32>
// CHECK-NEXT: sched.convert tile 0 %[[V]] -> %[[IO]] perm [0, 1, 2, 3] after(%{{.*}}, %{{.*}}) : !sched.buffer<ddr, 1x1x2x3xf32>, !sched.buffer<ddr, 1x1x2x3xf32>

// ISA:      mlip.reduce tile 0 signal {{[0-9]+}} wait [{{[0-9]+}}] : in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, outer 6, length 8, inner 1, mode max, divisor 8, acc_addr -1, acc_out 0
// ISA:      mlip.reduce tile 1 signal {{[0-9]+}} wait [{{[0-9]+}}] : in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, outer 6, length 8, inner 1, mode max, divisor 8, acc_addr -1, acc_out 0
// ISA:      mlip.reduce tile 0 signal {{[0-9]+}} wait [{{[0-9]+}}] : in_addr {{[0-9]+}}, out_addr [[P0:[0-9]+]], outer 1, length 21846, inner 4, mode mean, divisor 65536, acc_addr -1, acc_out 1
// ISA:      mlip.reduce tile 0 signal {{[0-9]+}} wait [{{[0-9]+}}, {{[0-9]+}}] : in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, outer 1, length 21846, inner 4, mode mean, divisor 65536, acc_addr [[P0]], acc_out 1
// ISA:      mlip.reduce tile 0 {{.*}} outer 1, length 21844, inner 4, mode mean, divisor 65536, acc_addr {{[0-9]+}}, acc_out 0
// ISA:      mlip.reduce tile 0 {{.*}} outer 3, length 8, inner 1, mode argmax, divisor 8, acc_addr -1, acc_out 0
// ISA:      mlip.cvt tile 0 {{.*}} src_dtype f32, {{.*}} dst_dtype f32
