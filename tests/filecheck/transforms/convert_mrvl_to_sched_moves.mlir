// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | filecheck %s

// A strided copy is DDR-to-DDR DMA over flat views with explicit element strides: an NHWC
// nearest upsample has 5 dimensions, so the smallest (the repeated rows) is walked one DMA
// per index and the outermost of the other 4 is cut across the tiles. Zero insertion fills
// the result from one zero element (source stride 0), then scatters the input into it.

builtin.module {
  func.func @region(%x: tensor<1x3x4x2xf16, #mrvl.layout<NHWC>>) -> (tensor<1x6x8x2xf16, #mrvl.layout<NHWC>>, tensor<1x5x7x2xf16, #mrvl.layout<NHWC>>) {
    %0 = mrvl.strided_copy %x offset 0 strides [8, 0, 2, 0, 1] box [3, 2, 4, 2, 2] : tensor<1x3x4x2xf16, #mrvl.layout<NHWC>> -> tensor<1x6x8x2xf16, #mrvl.layout<NHWC>> loc("/up/Resize")
    %1 = mrvl.layout_convert %0 : tensor<1x6x8x2xf16, #mrvl.layout<NHWC>> -> tensor<1x6x8x2xf16, #mrvl.layout<NHWC>> loc("/out")
    %2 = mrvl.dilate %x strides [2, 2] : tensor<1x3x4x2xf16, #mrvl.layout<NHWC>> -> tensor<1x5x7x2xf16, #mrvl.layout<NHWC>> loc("/up/ConvTranspose")
    %3 = mrvl.layout_convert %2 : tensor<1x5x7x2xf16, #mrvl.layout<NHWC>> -> tensor<1x5x7x2xf16, #mrvl.layout<NHWC>> loc("/out")
    func.return %1, %3 : tensor<1x6x8x2xf16, #mrvl.layout<NHWC>>, tensor<1x5x7x2xf16, #mrvl.layout<NHWC>>
  }
}

// CHECK:      %[[U:.*]] = sched.alloc : !sched.buffer<ddr, 1x6x8x2xf16> loc("/up/Resize")
// CHECK-NEXT: %[[UF:.*]] = sched.view %[[U]] : !sched.buffer<ddr, 1x6x8x2xf16> -> !sched.buffer<ddr, 96xf16> loc("/up/Resize")
// CHECK-NEXT: sched.dma tile 0 %[[XF:.*]] [0] strides [8, 2, 0, 1] -> %[[UF]] [0] strides [32, 4, 2, 1] box [2, 4, 2, 2] : {{.*}} loc("/up/Resize")
// CHECK-NEXT: sched.dma tile 1 %[[XF]] [16] strides [8, 2, 0, 1] -> %[[UF]] [64] strides [32, 4, 2, 1] box [1, 4, 2, 2]
// CHECK-NEXT: sched.dma tile 0 %[[XF]] [0] strides [8, 2, 0, 1] -> %[[UF]] [16] strides [32, 4, 2, 1] box [2, 4, 2, 2]
// CHECK-NEXT: sched.dma tile 1 %[[XF]] [16] strides [8, 2, 0, 1] -> %[[UF]] [80] strides [32, 4, 2, 1] box [1, 4, 2, 2]
// CHECK:      %[[D:.*]] = sched.alloc : !sched.buffer<ddr, 1x5x7x2xf16> loc("/up/ConvTranspose")
// CHECK-NEXT: %[[DF:.*]] = sched.view %[[D]]
// CHECK-NEXT: %[[Z:.*]] = sched.const "mrvl_zero_float16" = dense<0.000000e+00> : tensor<1xf16> : !sched.buffer<ddr, 1xf16>
// CHECK-NEXT: %[[T:.*]] = sched.dma tile 0 %[[Z]] [0] strides [0] -> %[[DF]] [0] strides [1] box [70]
// CHECK-NEXT: sched.dma tile 0 %{{.*}} [0, 0, 0, 0] -> %[[DF]] [0] strides [70, 28, 4, 1] box [1, 3, 4, 2] after(%[[T]])
