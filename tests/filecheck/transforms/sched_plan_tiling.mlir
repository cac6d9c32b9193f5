// RUN: mrvl-opt %s -p 'sched-plan-tiling{mcpu=cn10ka num-tiles=2}' --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s -p 'sched-plan-tiling{mcpu=cn10ka num-tiles=2}' | mrvl-opt | filecheck %s --check-prefix=ROUND
// RUN: mrvl-opt %s -p 'sched-plan-tiling{mcpu=cn10ka num-tiles=2},convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' > %t.planned
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' > %t.direct
// RUN: diff %t.planned %t.direct

// sched-plan-tiling records each conv, pool and FC layer's plan on it (`sched.plan`): the
// pieces' output channels, rows and columns, input channels per block (0: none), how the
// pieces go to the tiles, and whether a strided 1x1 conv loads only what it reads. The
// conversion lowers the recorded plan: the same IR as when it plans the layer itself.

builtin.module {
  func.func @region(%in: tensor<1x6x6x1xf32, #mrvl.layout<NHWC>>) -> tensor<1x10xf32, #mrvl.layout<NC>> {
    %x = mrvl.cast %in : tensor<1x6x6x1xf32, #mrvl.layout<NHWC>> -> tensor<1x6x6x1xf16, #mrvl.layout<NHWC>> loc("/in")
    %w = mrvl.constant "region_mrvl_const_0" = dense<0.5> : tensor<3x3x3x1xf16> -> tensor<3x3x3x1xf16, #mrvl.layout<OHWI>> loc("/conv/Conv")
    %b = mrvl.constant "region_mrvl_const_1" = dense<0.25> : tensor<3xf32> -> tensor<3xf32, #mrvl.layout<O>> loc("/conv/Conv")
    %y = mrvl.conv2d %x, %w bias %b pads [1, 1, 1, 1] act relu : (tensor<1x6x6x1xf16, #mrvl.layout<NHWC>>, tensor<3x3x3x1xf16, #mrvl.layout<OHWI>>, tensor<3xf32, #mrvl.layout<O>>) -> tensor<1x6x6x3xf16, #mrvl.layout<NHWC>> loc("/conv/Conv")
    %p = mrvl.maxpool2d %y kernel [2, 2] strides [2, 2] : tensor<1x6x6x3xf16, #mrvl.layout<NHWC>> -> tensor<1x3x3x3xf16, #mrvl.layout<NHWC>> loc("/pool/MaxPool")
    %f = mrvl.reshape %p : tensor<1x3x3x3xf16, #mrvl.layout<NHWC>> -> tensor<1x27xf16, #mrvl.layout<NC>> loc("/flat")
    %v = mrvl.constant "region_mrvl_const_2" = dense<0.5> : tensor<10x27xf16> -> tensor<10x27xf16, #mrvl.layout<OI>> loc("/fc/Gemm")
    %o = mrvl.fc %f, %v : (tensor<1x27xf16, #mrvl.layout<NC>>, tensor<10x27xf16, #mrvl.layout<OI>>) -> tensor<1x10xf16, #mrvl.layout<NC>> loc("/fc/Gemm")
    %out = mrvl.cast %o : tensor<1x10xf16, #mrvl.layout<NC>> -> tensor<1x10xf32, #mrvl.layout<NC>> loc("/out")
    func.return %out : tensor<1x10xf32, #mrvl.layout<NC>>
  }
}

// CHECK:      mrvl.conv2d {{.*}} {sched.plan = #sched.window_plan<ocs = 3, rows = 3, cols = 6, cbs = 0, split = "dealt", strided = 0>} {{.*}} loc("/conv/Conv")
// CHECK:      mrvl.maxpool2d {{.*}} {sched.plan = #sched.window_plan<ocs = 3, rows = 2, cols = 3, cbs = 0, split = "dealt", strided = 0>} {{.*}} loc("/pool/MaxPool")
// CHECK:      mrvl.fc {{.*}} {sched.plan = #sched.fc_plan<os = 5, ns = 1, split = "dealt">} {{.*}} loc("/fc/Gemm")

// The plans print and parse back unchanged.
// ROUND: #sched.window_plan<ocs = 3, rows = 3, cols = 6, cbs = 0, split = "dealt", strided = 0>
// ROUND: #sched.window_plan<ocs = 3, rows = 2, cols = 3, cbs = 0, split = "dealt", strided = 0>
// ROUND: #sched.fc_plan<os = 5, ns = 1, split = "dealt">
