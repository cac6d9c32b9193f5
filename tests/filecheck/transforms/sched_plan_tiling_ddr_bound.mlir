// RUN: mrvl-opt %s -p 'sched-plan-tiling{mcpu=cn10ka num-tiles=8}' | filecheck %s --check-prefix=PLAN
// RUN: mrvl-opt %s -p 'sched-plan-tiling{mcpu=cn10ka num-tiles=8},convert-mrvl-to-sched{mcpu=cn10ka num-tiles=8}' | filecheck %s

// At 8 tiles this 1x1 conv (light ResNet-50's 14x14x1024 -> 512) is bound by its DDR bytes:
// the tiles' bursts share one port. sched-plan-tiling prices it so and takes one piece of all
// 14 rows per group of 128 output channels, on 4 tiles, each loading its weights once (2.9
// MB), rather than cutting the rows in two to use all 8 tiles, which loads every weight twice
// (3.9 MB; the plan the lock-step pricing chose: rows = 7).

builtin.module {
  func.func @region(%in: tensor<1x14x14x1024xf32, #mrvl.layout<NHWC>>) -> tensor<1x14x14x512xf32, #mrvl.layout<NHWC>> {
    %x = mrvl.cast %in : tensor<1x14x14x1024xf32, #mrvl.layout<NHWC>> -> tensor<1x14x14x1024xf16, #mrvl.layout<NHWC>> loc("/in")
    %w = mrvl.constant "region_mrvl_const_0" = dense<0.5> : tensor<512x1x1x1024xf16> -> tensor<512x1x1x1024xf16, #mrvl.layout<OHWI>> loc("/conv/Conv")
    %b = mrvl.constant "region_mrvl_const_1" = dense<0.25> : tensor<512xf32> -> tensor<512xf32, #mrvl.layout<O>> loc("/conv/Conv")
    %y = mrvl.conv2d %x, %w bias %b : (tensor<1x14x14x1024xf16, #mrvl.layout<NHWC>>, tensor<512x1x1x1024xf16, #mrvl.layout<OHWI>>, tensor<512xf32, #mrvl.layout<O>>) -> tensor<1x14x14x512xf16, #mrvl.layout<NHWC>> loc("/conv/Conv")
    %out = mrvl.cast %y : tensor<1x14x14x512xf16, #mrvl.layout<NHWC>> -> tensor<1x14x14x512xf32, #mrvl.layout<NHWC>> loc("/out")
    func.return %out : tensor<1x14x14x512xf32, #mrvl.layout<NHWC>>
  }
}

// PLAN: #sched.window_plan<ocs = 128, rows = 14, cols = 14, cbs = 64, split = "dealt", strided = 0>

// CHECK:     sched.conv2d tile 0 {{.*}} out_row 0 channels 0 of 512
// CHECK:     sched.conv2d tile 1 {{.*}} out_row 0 channels 128 of 512
// CHECK:     sched.conv2d tile 2 {{.*}} out_row 0 channels 256 of 512
// CHECK:     sched.conv2d tile 3 {{.*}} out_row 0 channels 384 of 512
// CHECK-NOT: sched.conv2d tile {{[4-7]}}
