// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cnf10kb num-tiles=1}' --print-debuginfo | filecheck %s

// K [16, 4096] (128 KiB of f16) does not fit half a cnf10kb tile: the reduction is cut into
// blocks of 1024, chained on one tile through fp32 partial sums. The first block starts from
// +0.0 and writes f32 (acc_out), the middle ones continue (acc) and write f32, the last
// continues and writes f16.

builtin.module {
  func.func @long(%q: tensor<1x4x4096xf32, #mrvl.layout<NCW>>, %k: tensor<1x16x4096xf32, #mrvl.layout<NCW>>) -> tensor<1x4x16xf32, #mrvl.layout<NCW>> {
    %0 = mrvl.cast %q : tensor<1x4x4096xf32, #mrvl.layout<NCW>> -> tensor<1x4x4096xf16, #mrvl.layout<NCW>> loc("/s/MatMul")
    %1 = mrvl.cast %k : tensor<1x16x4096xf32, #mrvl.layout<NCW>> -> tensor<1x16x4096xf16, #mrvl.layout<NCW>> loc("/s/MatMul")
    %2 = mrvl.bmm %0, %1 trans_b : (tensor<1x4x4096xf16, #mrvl.layout<NCW>>, tensor<1x16x4096xf16, #mrvl.layout<NCW>>) -> tensor<1x4x16xf16, #mrvl.layout<NCW>> loc("/s/MatMul")
    %3 = mrvl.cast %2 : tensor<1x4x16xf16, #mrvl.layout<NCW>> -> tensor<1x4x16xf32, #mrvl.layout<NCW>> loc("/s/MatMul")
    func.return %3 : tensor<1x4x16xf32, #mrvl.layout<NCW>>
  }
}

// CHECK:      sched.dma tile 0 %[[Q:.*]] [0, 0, 0] -> %{{.*}} [0, 0, 0] box [1, 4, 1024]
// CHECK:      sched.dma tile 0 %[[K:.*]] [0, 0, 0] -> %{{.*}} [0, 0, 0] box [1, 16, 1024]
// CHECK:      %[[P0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x16xf32>
// CHECK-NEXT: %[[T0:.*]] = sched.bmm tile 0 %{{.*}}, %{{.*}} -> %[[P0]] trans_b acc_out after({{.*}}) : {{.*}} -> !sched.buffer<ocm, 1x4x16xf32> loc("/s/MatMul")
// CHECK:      sched.dma tile 0 %[[Q]] [0, 0, 1024] -> {{.*}} box [1, 4, 1024]
// CHECK:      sched.dma tile 0 %[[K]] [0, 0, 1024] -> {{.*}} box [1, 16, 1024]
// CHECK:      %[[P1:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x16xf32>
// CHECK-NEXT: %[[T1:.*]] = sched.bmm tile 0 %{{.*}}, %{{.*}} acc(%[[P0]] : !sched.buffer<ocm, 1x4x16xf32>) -> %[[P1]] trans_b acc_out after(%{{.*}}, %{{.*}}, %[[T0]])
// CHECK:      sched.dma tile 0 %[[K]] [0, 0, 2048]
// CHECK:      sched.bmm tile 0 {{.*}} acc(%[[P1]] : {{.*}}) -> %{{.*}} trans_b acc_out after
// CHECK:      sched.dma tile 0 %[[K]] [0, 0, 3072]
// CHECK:      %[[F:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x16xf16>
// CHECK-NEXT: %[[TF:.*]] = sched.bmm tile 0 {{.*}} acc({{.*}}) -> %[[F]] trans_b after
// CHECK-NEXT: sched.dma tile 0 %[[F]] [0, 0, 0] -> %{{.*}} [0, 0, 0] box [1, 4, 16] after(%[[TF]])
// CHECK-NOT:  sched.bmm
