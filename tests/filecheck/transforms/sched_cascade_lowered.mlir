// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1 cascade=true},sched-cascade' | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1},sched-cascade' | filecheck %s --check-prefix=OFF

// Two convs at 1 tile: the first one's output (8x8x32 f16, 4 KiB) is planned to stay in OCM
// and the second conv reads it where the first wrote it: no store, no load, no DDR buffer.
// Without the option the tensor goes through DDR.

builtin.module {
  func.func @r(%x: tensor<1x8x8x16xf32, #mrvl.layout<NHWC>>) -> tensor<1x8x8x64xf32, #mrvl.layout<NHWC>> {
    %0 = mrvl.cast %x : tensor<1x8x8x16xf32, #mrvl.layout<NHWC>> -> tensor<1x8x8x16xf16, #mrvl.layout<NHWC>>
    %w1 = mrvl.constant "w1" = dense<0.25> : tensor<32x1x1x16xf16> -> tensor<32x1x1x16xf16, #mrvl.layout<OHWI>>
    %b1 = mrvl.constant "b1" = dense<0.5> : tensor<32xf32> -> tensor<32xf32, #mrvl.layout<O>>
    %1 = mrvl.conv2d %0, %w1 bias %b1 strides [1, 1] pads [0, 0, 0, 0] act relu : (tensor<1x8x8x16xf16, #mrvl.layout<NHWC>>, tensor<32x1x1x16xf16, #mrvl.layout<OHWI>>, tensor<32xf32, #mrvl.layout<O>>) -> tensor<1x8x8x32xf16, #mrvl.layout<NHWC>>
    %w2 = mrvl.constant "w2" = dense<0.125> : tensor<64x3x3x32xf16> -> tensor<64x3x3x32xf16, #mrvl.layout<OHWI>>
    %b2 = mrvl.constant "b2" = dense<0.5> : tensor<64xf32> -> tensor<64xf32, #mrvl.layout<O>>
    %2 = mrvl.conv2d %1, %w2 bias %b2 strides [1, 1] pads [1, 1, 1, 1] act relu : (tensor<1x8x8x32xf16, #mrvl.layout<NHWC>>, tensor<64x3x3x32xf16, #mrvl.layout<OHWI>>, tensor<64xf32, #mrvl.layout<O>>) -> tensor<1x8x8x64xf16, #mrvl.layout<NHWC>>
    %3 = mrvl.cast %2 : tensor<1x8x8x64xf16, #mrvl.layout<NHWC>> -> tensor<1x8x8x64xf32, #mrvl.layout<NHWC>>
    func.return %3 : tensor<1x8x8x64xf32, #mrvl.layout<NHWC>>
  }
}

// CHECK:      sched.program mcpu("cn10ka") tiles(1) symbol("r") cascade {
// CHECK:      %[[C1:.*]] = sched.conv2d tile 0 %{{.*}}, %{{.*}} bias %{{.*}} -> %[[T:[a-z0-9]+]] {{.*}} : !sched.buffer<ocm, 1x8x8x16xf16>
// CHECK-NOT:  sched.dma tile 0 %[[T]]
// CHECK:      sched.conv2d tile 0 %[[T]], %{{.*}} bias %{{.*}} -> %{{.*}} {{.*}} after({{.*}}%[[C1]]{{.*}}) : !sched.buffer<ocm, 1x8x8x32xf16>
// CHECK-NOT:  sched.alloc : !sched.buffer<ddr, 1x8x8x32xf16>

// OFF:      %[[T:.*]] = sched.alloc : !sched.buffer<ddr, 1x8x8x32xf16>
// OFF:      sched.dma tile 0 %{{.*}} [0, 0, 0, 0] -> %[[T]] [0, 0, 0, 0] box [1, 8, 8, 32]
// OFF:      sched.dma tile 0 %[[T]] [0, 0, 0, 0] -> %{{.*}} [0, 0, 0, 0] box [1, 8, 8, 32]
