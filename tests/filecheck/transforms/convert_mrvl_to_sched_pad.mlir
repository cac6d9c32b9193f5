// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' | mrvl-opt | filecheck %s --check-prefix=ISA

// A standalone pad of an NHWC tensor (1 before and 2 after on H, 1 after on W, value -1.5) is
// two DMA passes: the result filled with the value (one f16 constant repeated with source
// stride 0, half the result per tile), then the input copied into its interior; W and C,
// unpadded together, merge into one dimension of 48 (a W of 6 in a row of 7 columns does
// not, its row stride is 56). Each interior copy, one image per tile, waits for both fills.

builtin.module {
  func.func @pad(%x: tensor<2x5x6x8xf16, #mrvl.layout<NHWC>>) -> tensor<2x8x7x8xf16, #mrvl.layout<NHWC>> {
    %0 = mrvl.pad %x pads [0, 1, 0, 0, 0, 2, 1, 0] value -1.500000e+00 : tensor<2x5x6x8xf16, #mrvl.layout<NHWC>> -> tensor<2x8x7x8xf16, #mrvl.layout<NHWC>> loc("/pad/Pad")
    %1 = mrvl.layout_convert %0 : tensor<2x8x7x8xf16, #mrvl.layout<NHWC>> -> tensor<2x8x7x8xf16, #mrvl.layout<NHWC>> loc("/out")
    func.return %1 : tensor<2x8x7x8xf16, #mrvl.layout<NHWC>>
  }
}

// CHECK:      %[[OUT:.*]] = sched.view %{{.*}} : !sched.buffer<ddr, 2x8x7x8xf16> -> !sched.buffer<ddr, 896xf16>
// CHECK:      %[[V:.*]] = sched.const "mrvl_pad_value_0" = dense<-1.500000e+00> : tensor<1xf16> : !sched.buffer<ddr, 1xf16>
// CHECK:      %[[F0:.*]] = sched.dma tile 0 %[[V]] [0] strides [0] -> %[[OUT]] [0] strides [1] box [448]
// CHECK:      %[[F1:.*]] = sched.dma tile 1 %[[V]] [0] strides [0] -> %[[OUT]] [448] strides [1] box [448]
// CHECK:      %[[X:.*]] = sched.view %{{.*}} : !sched.buffer<ddr, 2x5x6x8xf16> -> !sched.buffer<ddr, 480xf16>
// CHECK:      sched.dma tile 0 %[[X]] [0] strides [240, 48, 1] -> %[[OUT]] [56] strides [448, 56, 1] box [1, 5, 48] after(%[[F0]], %[[F1]])
// CHECK:      sched.dma tile 1 %[[X]] [240] strides [240, 48, 1] -> %[[OUT]] [504] strides [448, 56, 1] box [1, 5, 48] after(%[[F0]], %[[F1]])

// ISA: mlip.dma tile 0 {{.*}} src_strides [0, 0, 0, 0], dst_space ddr, {{.*}} dst_strides [0, 0, 0, 2], box [1, 1, 1, 448], elem_bytes 2
// ISA: mlip.dma tile 1 {{.*}} src_strides [0, 0, 0, 0], dst_space ddr, {{.*}} dst_strides [0, 0, 0, 2], box [1, 1, 1, 448], elem_bytes 2
// ISA: mlip.dma tile 0 {{.*}} src_strides [0, 480, 96, 2], {{.*}} dst_strides [0, 896, 112, 2], box [1, 1, 5, 48], elem_bytes 2
