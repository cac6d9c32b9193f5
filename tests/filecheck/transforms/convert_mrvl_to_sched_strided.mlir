// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1}' | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1}' | mrvl-opt | filecheck %s --check-prefix=ROUND

// A 1x1 conv with strides 2 reads one row and one column in two: its window load takes
// only those (DMA strides over a flat view of the input: element strides H*W*C, 2*W*C,
// 2*C, 1), and the conv runs with strides 1 over them.

builtin.module {
  func.func @down(%x: tensor<1x8x8x64xf32, #mrvl.layout<NHWC>>) -> tensor<1x4x4x32xf32, #mrvl.layout<NHWC>> {
    %0 = mrvl.cast %x : tensor<1x8x8x64xf32, #mrvl.layout<NHWC>> -> tensor<1x8x8x64xf16, #mrvl.layout<NHWC>> loc("/d/Conv")
    %w = mrvl.constant "down_mrvl_const_0" = dense<0.5> : tensor<32x1x1x64xf16> -> tensor<32x1x1x64xf16, #mrvl.layout<OHWI>> loc("/d/Conv")
    %1 = mrvl.conv2d %0, %w strides [2, 2] pads [0, 0, 0, 0] : (tensor<1x8x8x64xf16, #mrvl.layout<NHWC>>, tensor<32x1x1x64xf16, #mrvl.layout<OHWI>>) -> tensor<1x4x4x32xf16, #mrvl.layout<NHWC>> loc("/d/Conv")
    %2 = mrvl.cast %1 : tensor<1x4x4x32xf16, #mrvl.layout<NHWC>> -> tensor<1x4x4x32xf32, #mrvl.layout<NHWC>> loc("/d/Conv")
    func.return %2 : tensor<1x4x4x32xf32, #mrvl.layout<NHWC>>
  }
}

// CHECK:      %[[FLAT:.*]] = sched.view %{{.*}} : !sched.buffer<ddr, 1x8x8x64xf16> -> !sched.buffer<ddr, 4096xf16>
// CHECK:      %[[X:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x4x64xf16>
// CHECK-NEXT: sched.dma tile 0 %[[FLAT]] [0] strides [4096, 1024, 128, 1] -> %[[X]] [0, 0, 0, 0] box [1, 4, 4, 64]
// CHECK:      sched.conv2d tile 0 %[[X]], %{{.*}} -> %{{.*}} in_row 0 out_row 0 channels 0 of 32 kernel [1, 1] strides [1, 1] pads [0, 0, 0, 0]

// ROUND: sched.dma tile 0 %{{.*}} [0] strides [4096, 1024, 128, 1] -> %{{.*}} [0, 0, 0, 0] box [1, 4, 4, 64]
