// RUN: mrvl-opt %s --split-input-file -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s --split-input-file -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1}' | filecheck %s --check-prefix=ONE

// A conv is cut into bands of output rows, one per tile; each band loads its input window
// (with the rows the 3x3 kernel needs), its weights and bias, computes, and stores its rows.
// Loads wait for the conversion that wrote the input; the layer keeps its ONNX location.

builtin.module {
  func.func @region(%x: tensor<1x1x6x6xf32, #mrvl.layout<NCHW>>) -> tensor<1x3x6x6xf32, #mrvl.layout<NCHW>> {
    %0 = mrvl.cast %x : tensor<1x1x6x6xf32, #mrvl.layout<NCHW>> -> tensor<1x1x6x6xf16, #mrvl.layout<NCHW>> loc("/conv/Conv")
    %1 = mrvl.layout_convert %0 : tensor<1x1x6x6xf16, #mrvl.layout<NCHW>> -> tensor<1x6x6x1xf16, #mrvl.layout<NHWC>> loc("/conv/Conv")
    %w = mrvl.constant "region_mrvl_const_0" = dense<0.5> : tensor<3x3x3x1xf16> -> tensor<3x3x3x1xf16, #mrvl.layout<OHWI>> loc("/conv/Conv")
    %b = mrvl.constant "region_mrvl_const_1" = dense<1.0> : tensor<3xf32> -> tensor<3xf32, #mrvl.layout<O>> loc("/conv/Conv")
    %2 = mrvl.conv2d %1, %w bias %b pads [1, 1, 1, 1] act relu : (tensor<1x6x6x1xf16, #mrvl.layout<NHWC>>, tensor<3x3x3x1xf16, #mrvl.layout<OHWI>>, tensor<3xf32, #mrvl.layout<O>>) -> tensor<1x6x6x3xf16, #mrvl.layout<NHWC>> loc("/conv/Conv")
    %3 = mrvl.layout_convert %2 : tensor<1x6x6x3xf16, #mrvl.layout<NHWC>> -> tensor<1x3x6x6xf16, #mrvl.layout<NCHW>> loc("/conv/Conv")
    %4 = mrvl.cast %3 : tensor<1x3x6x6xf16, #mrvl.layout<NCHW>> -> tensor<1x3x6x6xf32, #mrvl.layout<NCHW>> loc("/conv/Conv")
    func.return %4 : tensor<1x3x6x6xf32, #mrvl.layout<NCHW>>
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   sched.program mcpu("cn10ka") tiles(2) symbol("region") {
// CHECK-NEXT:   %[[IN:.*]] = sched.io "x" input : !sched.buffer<ddr, 1x1x6x6xf32>
// CHECK-NEXT:   %[[OUT:.*]] = sched.io "output0" output : !sched.buffer<ddr, 1x3x6x6xf32>
// CHECK-NEXT:   %[[H:.*]] = sched.alloc : !sched.buffer<ddr, 1x1x6x6xf16> loc("/conv/Conv")
// CHECK-NEXT:   %[[T0:.*]] = sched.convert tile 0 %[[IN]] -> %[[H]] perm [0, 1, 2, 3] : {{.*}} loc("/conv/Conv")
// CHECK-NEXT:   %[[NHWC:.*]] = sched.alloc : !sched.buffer<ddr, 1x6x6x1xf16>
// CHECK-NEXT:   %[[T1:.*]] = sched.convert tile 0 %[[H]] -> %[[NHWC]] perm [0, 2, 3, 1] after(%[[T0]])
// CHECK-NEXT:   %[[W:.*]] = sched.const "region_mrvl_const_0" = {{.*}} : !sched.buffer<ddr, 3x3x3x1xf16>
// CHECK-NEXT:   %[[B:.*]] = sched.const "region_mrvl_const_1" = {{.*}} : !sched.buffer<ddr, 3xf32>
// CHECK-NEXT:   %[[Y:.*]] = sched.alloc : !sched.buffer<ddr, 1x6x6x3xf16>
//   band 1: output rows 0-2 need input rows 0-3 (row -1 is padding)
//   the constants first (they wait for nothing), then the window
// CHECK-NEXT:   %[[W0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 3x3x3x1xf16>
// CHECK-NEXT:   %[[LW0:.*]] = sched.dma tile 0 %[[W]] [0, 0, 0, 0] -> %[[W0]] [0, 0, 0, 0] box [3, 3, 3, 1] :
// CHECK-NEXT:   %[[B0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 3xf32>
// CHECK-NEXT:   %[[LB0:.*]] = sched.dma tile 0 %[[B]] [0] -> %[[B0]] [0] box [3] :
// CHECK-NEXT:   %[[WIN0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x6x1xf16>
// CHECK-NEXT:   %[[L0:.*]] = sched.dma tile 0 %[[NHWC]] [0, 0, 0, 0] -> %[[WIN0]] [0, 0, 0, 0] box [1, 4, 6, 1] after(%[[T1]])
// CHECK-NEXT:   %[[O0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 1x3x6x3xf16>
// CHECK-NEXT:   %[[C0:.*]] = sched.conv2d tile 0 %[[WIN0]], %[[W0]] bias %[[B0]] -> %[[O0]] in_row 0 out_row 0 channels 0 of 3 kernel [3, 3] strides [1, 1] pads [1, 1, 1, 1] dilations [1, 1] groups 1 act relu after(%[[L0]], %[[LW0]], %[[LB0]]) {{.*}} loc("/conv/Conv")
// CHECK-NEXT:   %[[S0:.*]] = sched.dma tile 0 %[[O0]] [0, 0, 0, 0] -> %[[Y]] [0, 0, 0, 0] box [1, 3, 6, 3] after(%[[C0]])
//   band 2: output rows 3-5 need input rows 2-5, on tile 1
// CHECK:        %[[WIN1:.*]] = sched.alloc tile(1) : !sched.buffer<ocm, 1x4x6x1xf16>
// CHECK-NEXT:   %{{.*}} = sched.dma tile 1 %[[NHWC]] [0, 2, 0, 0] -> %[[WIN1]] [0, 0, 0, 0] box [1, 4, 6, 1] after(%[[T1]])
// CHECK:        sched.conv2d tile 1 {{.*}} in_row 2 out_row 3 channels 0 of 3
// CHECK-NEXT:   %[[S1:.*]] = sched.dma tile 1 %{{.*}} [0, 0, 0, 0] -> %[[Y]] [0, 3, 0, 0] box [1, 3, 6, 3]
//   the output conversion waits for both bands and writes the region output directly
// CHECK:        sched.convert tile {{.*}} -> %[[OUT]] perm [0, 1, 2, 3] after(%{{.*}})

// ONE-COUNT-1: sched.conv2d tile 0
// ONE-NOT:     sched.conv2d

// -----

// An FC layer's output features are split across the tiles.

builtin.module {
  func.func @fc(%x: tensor<1x16xf32, #mrvl.layout<NC>>) -> tensor<1x10xf32, #mrvl.layout<NC>> {
    %0 = mrvl.cast %x : tensor<1x16xf32, #mrvl.layout<NC>> -> tensor<1x16xf16, #mrvl.layout<NC>> loc("/fc/Gemm")
    %w = mrvl.constant "fc_mrvl_const_0" = dense<0.25> : tensor<10x16xf16> -> tensor<10x16xf16, #mrvl.layout<OI>> loc("/fc/Gemm")
    %1 = mrvl.fc %0, %w act relu : (tensor<1x16xf16, #mrvl.layout<NC>>, tensor<10x16xf16, #mrvl.layout<OI>>) -> tensor<1x10xf16, #mrvl.layout<NC>> loc("/fc/Gemm")
    %2 = mrvl.cast %1 : tensor<1x10xf16, #mrvl.layout<NC>> -> tensor<1x10xf32, #mrvl.layout<NC>> loc("/fc/Gemm")
    func.return %2 : tensor<1x10xf32, #mrvl.layout<NC>>
  }
}

// CHECK:      sched.dma tile 0 %{{.*}} [0, 0] -> %{{.*}} [0, 0] box [5, 16]
// CHECK:      sched.fc tile 0 {{.*}} act relu {{.*}} loc("/fc/Gemm")
// CHECK:      sched.dma tile 0 {{.*}} [0, 0] box [1, 5]
// CHECK:      sched.dma tile 1 %{{.*}} [5, 0] -> %{{.*}} [0, 0] box [5, 16]
// CHECK:      sched.fc tile 1
// CHECK:      sched.dma tile 1 {{.*}} [0, 5] box [1, 5]
