// RUN: mrvl-opt %s -p 'sched-plan-tiling{mcpu=cn10ka num-tiles=8}' | filecheck %s --check-prefix=PLAN
// RUN: mrvl-opt %s -p 'sched-plan-tiling{mcpu=cn10ka num-tiles=8},convert-mrvl-to-sched{mcpu=cn10ka num-tiles=8},sched-pipeline,sched-multicast' | filecheck %s

// At 8 tiles this 1x1 conv (light ResNet-50's 14x14x1024 -> 512) is bound by its DDR bytes:
// the tiles' bursts share one port. sched-multicast reads the bytes that several tiles load
// once, and sched-plan-tiling prices that: it cuts the rows in two and deals 2 bands x 4
// groups of 128 output channels to all 8 tiles. Each input-channel block of a band's window
// is read once for the 4 tiles of that band, and each block of a group's weights once for
// its 2 tiles. (Without multicast, cutting the rows read every weight twice, and one band
// per group on 4 tiles was the faster plan.)

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

// PLAN: #sched.window_plan<ocs = 128, rows = 7, cols = 14, cbs = 64, split = "dealt", strided = 0>

// CHECK:      sched.multicast_dma tile 0 {{.*}} [0, 0, 0, 0] mirrors(%{{[0-9]+}} : !sched.buffer<ocm, 128x1x1x64xf16>) box [128, 1, 1, 64]
// CHECK:      sched.multicast_dma tile 0 {{.*}} [0, 0, 0, 0] mirrors(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} : {{.*}}) box [1, 7, 14, 64]
// CHECK:      sched.conv2d tile 0 {{.*}} out_row 0 channels 0 of 512
// CHECK:      sched.conv2d tile 1 {{.*}} out_row 7 channels 0 of 512
// CHECK:      sched.conv2d tile 2 {{.*}} out_row 0 channels 128 of 512
// CHECK:      sched.conv2d tile 3 {{.*}} out_row 7 channels 128 of 512
// CHECK:      sched.conv2d tile 4 {{.*}} out_row 0 channels 256 of 512
// CHECK:      sched.conv2d tile 5 {{.*}} out_row 7 channels 256 of 512
// CHECK:      sched.conv2d tile 6 {{.*}} out_row 0 channels 384 of 512
// CHECK:      sched.conv2d tile 7 {{.*}} out_row 7 channels 384 of 512
