// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | filecheck %s

// The residual add runs on flat chunks, one per tile; concat is two DDR-to-DDR copies into the
// channel slices of the result; a global pool is a pool whose window is the whole plane.

builtin.module {
  func.func @region(%x: tensor<1x4x4x8xf32, #mrvl.layout<NHWC>>) -> tensor<1x1x1x16xf32, #mrvl.layout<NHWC>> {
    %0 = mrvl.cast %x : tensor<1x4x4x8xf32, #mrvl.layout<NHWC>> -> tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> loc("/in")
    %1 = mrvl.add %0, %0 act relu : tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> loc("/add/Add")
    %2 = mrvl.concat %1, %0 : tensor<1x4x4x8xf16, #mrvl.layout<NHWC>>, tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> -> tensor<1x4x4x16xf16, #mrvl.layout<NHWC>> loc("/cat/Concat")
    %3 = mrvl.avgpool2d %2 kernel [4, 4] : tensor<1x4x4x16xf16, #mrvl.layout<NHWC>> -> tensor<1x1x1x16xf16, #mrvl.layout<NHWC>> loc("/gap/GlobalAveragePool")
    %4 = mrvl.cast %3 : tensor<1x1x1x16xf16, #mrvl.layout<NHWC>> -> tensor<1x1x1x16xf32, #mrvl.layout<NHWC>> loc("/gap/GlobalAveragePool")
    func.return %4 : tensor<1x1x1x16xf32, #mrvl.layout<NHWC>>
  }
}

// CHECK:      %[[X:.*]] = sched.alloc : !sched.buffer<ddr, 1x4x4x8xf16> loc("/in")
// CHECK:      %[[S:.*]] = sched.alloc : !sched.buffer<ddr, 1x4x4x8xf16> loc("/add/Add")
// CHECK:      %[[SF:.*]] = sched.view %[[S]] : !sched.buffer<ddr, 1x4x4x8xf16> -> !sched.buffer<ddr, 128xf16>
// CHECK:      sched.dma tile 0 %{{.*}} [0] -> %{{.*}} [0] box [64]
// CHECK:      sched.dma tile 0 %{{.*}} [0] -> %{{.*}} [0] box [64]
// CHECK:      %[[A0:.*]] = sched.add tile 0 %{{.*}}, %{{.*}} -> %{{.*}} act relu after(%{{.*}}, %{{.*}}) : !sched.buffer<ocm, 64xf16>, !sched.buffer<ocm, 64xf16> -> !sched.buffer<ocm, 64xf16> loc("/add/Add")
// CHECK-NEXT: sched.dma tile 0 %{{.*}} [0] -> %[[SF]] [0] box [64] after(%[[A0]])
// CHECK:      sched.add tile 1
// CHECK-NEXT: sched.dma tile 1 %{{.*}} [0] -> %[[SF]] [64] box [64]
// CHECK:      %[[C:.*]] = sched.alloc : !sched.buffer<ddr, 1x4x4x16xf16> loc("/cat/Concat")
// CHECK-NEXT: sched.dma tile 0 %[[S]] [0, 0, 0, 0] -> %[[C]] [0, 0, 0, 0] box [1, 4, 4, 8] after({{.*}}) : {{.*}} loc("/cat/Concat")
// CHECK-NEXT: sched.dma tile 1 %[[X]] [0, 0, 0, 0] -> %[[C]] [0, 0, 0, 8] box [1, 4, 4, 8] after({{.*}}) : {{.*}} loc("/cat/Concat")
// CHECK:      sched.pool2d tile 0 avg %{{.*}} -> %{{.*}} in_row 0 out_row 0 of [4, 4] kernel [4, 4] strides [1, 1] pads [0, 0, 0, 0] {{.*}} loc("/gap/GlobalAveragePool")
