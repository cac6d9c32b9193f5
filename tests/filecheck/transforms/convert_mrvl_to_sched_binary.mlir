// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' | mrvl-opt | filecheck %s --check-prefix=ISA

// Attention scores [2, 4, 9, 9] minus a mask [2, 1, 1, 9]: the mask repeats over heads and
// rows, which merge into one dimension (the result is seen as [2, 36, 9], padded to 4-D).
// Pieces are boxes of the result, one batch per tile: each loads its box of the scores and
// the one mask row it reads, and sched.binary steps the mask with stride 0 over the rows.

builtin.module {
  func.func @masked(%x: tensor<2x4x9x9xf16, #mrvl.layout<NCHW>>, %m: tensor<2x1x1x9xf16, #mrvl.layout<NCHW>>) -> tensor<2x4x9x9xf16, #mrvl.layout<NCHW>> {
    %0 = mrvl.binary "sub" %x, %m : tensor<2x4x9x9xf16, #mrvl.layout<NCHW>>, tensor<2x1x1x9xf16, #mrvl.layout<NCHW>> -> tensor<2x4x9x9xf16, #mrvl.layout<NCHW>> loc("/mask/Sub")
    %1 = mrvl.layout_convert %0 : tensor<2x4x9x9xf16, #mrvl.layout<NCHW>> -> tensor<2x4x9x9xf16, #mrvl.layout<NCHW>> loc("/out")
    func.return %1 : tensor<2x4x9x9xf16, #mrvl.layout<NCHW>>
  }
}

// CHECK:      %[[X:.*]] = sched.view %{{.*}} : !sched.buffer<ddr, 2x4x9x9xf16> -> !sched.buffer<ddr, 1x2x36x9xf16>
// CHECK:      %[[M:.*]] = sched.view %{{.*}} : !sched.buffer<ddr, 2x1x1x9xf16> -> !sched.buffer<ddr, 1x2x1x9xf16>
// CHECK:      %[[OUT:.*]] = sched.view %{{.*}} : !sched.buffer<ddr, 2x4x9x9xf16> -> !sched.buffer<ddr, 1x2x36x9xf16>
// CHECK:      %[[A0:.*]] = sched.dma tile 0 %[[X]] [0, 0, 0, 0] -> %{{.*}} [0, 0, 0, 0] box [1, 1, 36, 9]
// CHECK:      %[[B0:.*]] = sched.dma tile 0 %[[M]] [0, 0, 0, 0] -> %{{.*}} [0, 0, 0, 0] box [1, 1, 1, 9]
// CHECK:      %[[T0:.*]] = sched.binary tile 0 %{{.*}}, %{{.*}} -> %[[Y0:.*]] mode "sub" strides [324, 324, 9, 1], [9, 9, 0, 1] after(%[[A0]], %[[B0]]) : !sched.buffer<ocm, 1x1x36x9xf16>, !sched.buffer<ocm, 1x1x1x9xf16> -> !sched.buffer<ocm, 1x1x36x9xf16> loc("/mask/Sub")
// CHECK-NEXT: sched.dma tile 0 %[[Y0]] [0, 0, 0, 0] -> %[[OUT]] [0, 0, 0, 0] box [1, 1, 36, 9] after(%[[T0]])
// CHECK:      sched.dma tile 1 %[[X]] [0, 1, 0, 0] -> %{{.*}} [0, 0, 0, 0] box [1, 1, 36, 9]
// CHECK:      sched.dma tile 1 %[[M]] [0, 1, 0, 0] -> %{{.*}} [0, 0, 0, 0] box [1, 1, 1, 9]
// CHECK:      sched.binary tile 1

// ISA: mlip.binary tile 0 signal {{[0-9]+}} wait [{{[0-9]+}}, {{[0-9]+}}] : a_addr {{[0-9]+}}, b_addr {{[0-9]+}}, out_addr {{[0-9]+}}, shape [1, 1, 36, 9], a_strides [324, 324, 9, 1], b_strides [9, 9, 0, 1], mode sub
// ISA: mlip.binary tile 1
