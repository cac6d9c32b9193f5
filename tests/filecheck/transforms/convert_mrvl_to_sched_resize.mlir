// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' | mrvl-opt | filecheck %s --check-prefix=ISA

// A bilinear resize is cut into bands of output rows, one per tile. Each band loads the input
// rows its slice of the row table reads (here rows 0-1 for both bands), its slice of the row
// table (a strided DMA from the flat f32 constant) and the whole column table, then one
// sched.resize. It selects to one mlip.resize per band, which prints and parses back.

builtin.module {
  func.func @region(%x: tensor<1x2x3x2xf16, #mrvl.layout<NHWC>>) -> tensor<1x4x6x2xf16, #mrvl.layout<NHWC>> {
    %yt = mrvl.constant "rows" = dense<[0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.75, 0.25, 0.0, 1.0, 0.25, 0.75, 1.0, 1.0, 1.0, 0.0]> : tensor<16xf32> -> tensor<16xf32, #mrvl.layout<O>>
    %xt = mrvl.constant "cols" = dense<[0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.75, 0.25, 0.0, 1.0, 0.25, 0.75, 1.0, 2.0, 0.75, 0.25, 1.0, 2.0, 0.25, 0.75, 2.0, 2.0, 1.0, 0.0]> : tensor<24xf32> -> tensor<24xf32, #mrvl.layout<O>>
    %0 = mrvl.resize %x, %yt, %xt mode half_pixel : (tensor<1x2x3x2xf16, #mrvl.layout<NHWC>>, tensor<16xf32, #mrvl.layout<O>>, tensor<24xf32, #mrvl.layout<O>>) -> tensor<1x4x6x2xf16, #mrvl.layout<NHWC>> loc("/up/Resize")
    %1 = mrvl.layout_convert %0 : tensor<1x4x6x2xf16, #mrvl.layout<NHWC>> -> tensor<1x4x6x2xf16, #mrvl.layout<NHWC>> loc("/out")
    func.return %1 : tensor<1x4x6x2xf16, #mrvl.layout<NHWC>>
  }
}

// CHECK:      %[[OUT:.*]] = sched.alloc : !sched.buffer<ddr, 1x4x6x2xf16> loc("/up/Resize")
// CHECK:      %[[W0:.*]] = sched.dma tile 0 %{{.*}} [0, 0, 0, 0] -> %{{.*}} [0, 0, 0, 0] box [1, 2, 3, 2]
// CHECK:      %[[Y0:.*]] = sched.dma tile 0 %[[YT:.*]] [0] strides [4, 1] -> %{{.*}} [0, 0] box [2, 4] : !sched.buffer<ddr, 16xf32>, !sched.buffer<ocm, 2x4xf32>
// CHECK:      %[[X0:.*]] = sched.dma tile 0 %[[XT:.*]] [0] strides [4, 1] -> %{{.*}} [0, 0] box [6, 4] : !sched.buffer<ddr, 24xf32>, !sched.buffer<ocm, 6x4xf32>
// CHECK:      %[[R0:.*]] = sched.resize tile 0 %{{.*}}, %{{.*}}, %{{.*}} -> %[[T0:.*]] in_row 0 after(%[[W0]], %[[Y0]], %[[X0]]) : {{.*}} -> !sched.buffer<ocm, 1x2x6x2xf16> loc("/up/Resize")
// CHECK-NEXT: sched.dma tile 0 %[[T0]] [0, 0, 0, 0] -> %[[OUT]] [0, 0, 0, 0] box [1, 2, 6, 2] after(%[[R0]])
// CHECK:      sched.dma tile 1 %[[YT]] [8] strides [4, 1] -> %{{.*}} [0, 0] box [2, 4]
// CHECK:      sched.resize tile 1 %{{.*}}, %{{.*}}, %{{.*}} -> %[[T1:.*]] in_row 0
// CHECK-NEXT: sched.dma tile 1 %[[T1]] [0, 0, 0, 0] -> %[[OUT]] [0, 2, 0, 0] box [1, 2, 6, 2]

// ISA:      mlip.dma tile 0 signal 2 : src_space ddr, src_addr {{[0-9]+}}, src_strides [0, 0, 16, 4], dst_space ocm, dst_addr {{[0-9]+}}, dst_strides [0, 0, 16, 4], box [1, 1, 2, 4], elem_bytes 4
// ISA:      mlip.resize tile 0 signal 4 wait [1, 2, 3] : in_addr 0, in_shape [1, 2, 3, 2], row0 0, out_addr {{[0-9]+}}, out_shape [1, 2, 6, 2], ytab_addr {{[0-9]+}}, xtab_addr {{[0-9]+}}
// ISA:      mlip.resize tile 1
