// RUN: mrvl-opt %s -p 'sched-plan-tiling{mcpu=cn10ka num-tiles=2}' | filecheck %s --check-prefix=KEPT
// RUN: mrvl-opt %s -p 'sched-plan-tiling{mcpu=cn10ka num-tiles=2},convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' | filecheck %s

// A plan written by hand is kept by sched-plan-tiling and lowered by convert-mrvl-to-sched:
// here the conv in bands of 2 rows, each tile taking a contiguous range of them (`rows`), and
// the FC in pieces of 4 features, each tile a contiguous range of features.

builtin.module {
  func.func @region(%in: tensor<1x6x6x1xf32, #mrvl.layout<NHWC>>) -> tensor<1x10xf32, #mrvl.layout<NC>> {
    %x = mrvl.cast %in : tensor<1x6x6x1xf32, #mrvl.layout<NHWC>> -> tensor<1x6x6x1xf16, #mrvl.layout<NHWC>> loc("/in")
    %w = mrvl.constant "region_mrvl_const_0" = dense<0.5> : tensor<3x3x3x1xf16> -> tensor<3x3x3x1xf16, #mrvl.layout<OHWI>> loc("/conv/Conv")
    %y = mrvl.conv2d %x, %w pads [1, 1, 1, 1] {sched.plan = #sched.window_plan<ocs = 3, rows = 2, cols = 6, cbs = 0, split = "rows", strided = 0>} : (tensor<1x6x6x1xf16, #mrvl.layout<NHWC>>, tensor<3x3x3x1xf16, #mrvl.layout<OHWI>>) -> tensor<1x6x6x3xf16, #mrvl.layout<NHWC>> loc("/conv/Conv")
    %f = mrvl.reshape %y : tensor<1x6x6x3xf16, #mrvl.layout<NHWC>> -> tensor<1x108xf16, #mrvl.layout<NC>> loc("/flat")
    %v = mrvl.constant "region_mrvl_const_1" = dense<0.5> : tensor<10x108xf16> -> tensor<10x108xf16, #mrvl.layout<OI>> loc("/fc/Gemm")
    %o = mrvl.fc %f, %v {sched.plan = #sched.fc_plan<os = 4, ns = 1, split = "features">} : (tensor<1x108xf16, #mrvl.layout<NC>>, tensor<10x108xf16, #mrvl.layout<OI>>) -> tensor<1x10xf16, #mrvl.layout<NC>> loc("/fc/Gemm")
    %out = mrvl.cast %o : tensor<1x10xf16, #mrvl.layout<NC>> -> tensor<1x10xf32, #mrvl.layout<NC>> loc("/out")
    func.return %out : tensor<1x10xf32, #mrvl.layout<NC>>
  }
}

// KEPT: #sched.window_plan<ocs = 3, rows = 2, cols = 6, cbs = 0, split = "rows", strided = 0>
// KEPT: #sched.fc_plan<os = 4, ns = 1, split = "features">

// Three bands of 2 rows: tile 0 the first two, tile 1 the last.
// CHECK:      sched.conv2d tile 0 {{.*}} out_row 0 channels 0 of 3
// CHECK:      sched.dma tile 0 {{.*}} [0, 0, 0, 0] box [1, 2, 6, 3]
// CHECK:      sched.conv2d tile 1 {{.*}} out_row 4 channels 0 of 3
// CHECK:      sched.dma tile 1 {{.*}} [0, 4, 0, 0] box [1, 2, 6, 3]
// CHECK:      sched.conv2d tile 0 {{.*}} out_row 2 channels 0 of 3
// CHECK:      sched.dma tile 0 {{.*}} [0, 2, 0, 0] box [1, 2, 6, 3]
// Features 0-3 and 4-7 on tile 0, 8-9 on tile 1.
// CHECK:      sched.fc tile 0 {{.*}} -> !sched.buffer<ocm, 1x4xf16>
// CHECK:      sched.dma tile 0 {{.*}} [0, 0] box [1, 4]
// CHECK:      sched.fc tile 1 {{.*}} -> !sched.buffer<ocm, 1x2xf16>
// CHECK:      sched.dma tile 1 {{.*}} [0, 8] box [1, 2]
// CHECK:      sched.fc tile 0 {{.*}} -> !sched.buffer<ocm, 1x4xf16>
// CHECK:      sched.dma tile 0 {{.*}} [0, 4] box [1, 4]
