// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cnf10kb num-tiles=1}' --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cnf10kb num-tiles=1}' | mrvl-opt | filecheck %s --check-prefix=ROUND

// 3x3 weights over 4096 channels and the input they read do not fit a cnf10kb tile together:
// the conv is cut into input-channel blocks (multiples of 64) carrying fp32 partial sums.
// The first block starts from the bias and writes f32 (acc_out), the next continues from it
// (acc), the last applies the activation and writes f16.

builtin.module {
  func.func @blocks(%x: tensor<1x3x3x4096xf32, #mrvl.layout<NHWC>>) -> tensor<1x1x1x1xf32, #mrvl.layout<NHWC>> {
    %0 = mrvl.cast %x : tensor<1x3x3x4096xf32, #mrvl.layout<NHWC>> -> tensor<1x3x3x4096xf16, #mrvl.layout<NHWC>> loc("/c/Conv")
    %w = mrvl.constant "blocks_mrvl_const_0" = dense<0.5> : tensor<1x3x3x4096xf16> -> tensor<1x3x3x4096xf16, #mrvl.layout<OHWI>> loc("/c/Conv")
    %b = mrvl.constant "blocks_mrvl_const_1" = dense<1.0> : tensor<1xf32> -> tensor<1xf32, #mrvl.layout<O>> loc("/c/Conv")
    %1 = mrvl.conv2d %0, %w bias %b act "relu" : (tensor<1x3x3x4096xf16, #mrvl.layout<NHWC>>, tensor<1x3x3x4096xf16, #mrvl.layout<OHWI>>, tensor<1xf32, #mrvl.layout<O>>) -> tensor<1x1x1x1xf16, #mrvl.layout<NHWC>> loc("/c/Conv")
    %2 = mrvl.cast %1 : tensor<1x1x1x1xf16, #mrvl.layout<NHWC>> -> tensor<1x1x1x1xf32, #mrvl.layout<NHWC>> loc("/c/Conv")
    func.return %2 : tensor<1x1x1x1xf32, #mrvl.layout<NHWC>>
  }
}

// CHECK:      %[[X0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 1x3x3x2048xf16>
// CHECK-NEXT: sched.dma tile 0 %{{.*}} [0, 0, 0, 0] -> %[[X0]] [0, 0, 0, 0] box [1, 3, 3, 2048]
// CHECK:      %[[P:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 1x1x1x1xf32>
// CHECK-NEXT: %[[T0:.*]] = sched.conv2d tile 0 %[[X0]], %{{.*}} bias %{{.*}} -> %[[P]] acc_out in_row 0 out_row 0 channels 0 of 1 {{.*}} groups 1 after({{.*}}) : {{.*}} -> !sched.buffer<ocm, 1x1x1x1xf32> loc("/c/Conv")
// CHECK-NEXT: %[[X1:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 1x3x3x2048xf16>
// CHECK-NEXT: sched.dma tile 0 %{{.*}} [0, 0, 0, 2048] -> %[[X1]] [0, 0, 0, 0] box [1, 3, 3, 2048]
// CHECK:      sched.dma tile 0 %{{.*}} [0, 0, 0, 2048] -> %{{.*}} [0, 0, 0, 0] box [1, 3, 3, 2048]
// CHECK:      sched.conv2d tile 0 %[[X1]], %{{.*}} acc(%[[P]] : !sched.buffer<ocm, 1x1x1x1xf32>) -> %{{.*}} in_row 0 {{.*}} act relu after(%{{.*}}, %{{.*}}, %[[T0]]) : {{.*}} -> !sched.buffer<ocm, 1x1x1x1xf16> loc("/c/Conv")

// ROUND: sched.conv2d tile 0 {{.*}} -> %{{.*}} acc_out in_row 0
// ROUND: sched.conv2d tile 0 {{.*}} acc(%{{.*}} : !sched.buffer<ocm, 1x1x1x1xf32>) -> %{{.*}} in_row 0
