// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' | mrvl-opt | filecheck %s --check-prefix=ROUND

// Q·Kᵀ over 4 heads at 2 tiles: the product fits a tile whole, so it is cut into pieces of
// batch, one per tile: each loads its heads of Q ([2, 5, 8]) and of K as stored ([2, 7, 8],
// read transposed), computes f16 and stores its heads of the result.

builtin.module {
  func.func @attn(%q: tensor<4x5x8xf32, #mrvl.layout<NCW>>, %k: tensor<4x7x8xf32, #mrvl.layout<NCW>>) -> tensor<4x5x7xf32, #mrvl.layout<NCW>> {
    %0 = mrvl.cast %q : tensor<4x5x8xf32, #mrvl.layout<NCW>> -> tensor<4x5x8xf16, #mrvl.layout<NCW>> loc("/attn/MatMul")
    %1 = mrvl.cast %k : tensor<4x7x8xf32, #mrvl.layout<NCW>> -> tensor<4x7x8xf16, #mrvl.layout<NCW>> loc("/attn/MatMul")
    %2 = mrvl.bmm %0, %1 trans_b : (tensor<4x5x8xf16, #mrvl.layout<NCW>>, tensor<4x7x8xf16, #mrvl.layout<NCW>>) -> tensor<4x5x7xf16, #mrvl.layout<NCW>> loc("/attn/MatMul")
    %3 = mrvl.cast %2 : tensor<4x5x7xf16, #mrvl.layout<NCW>> -> tensor<4x5x7xf32, #mrvl.layout<NCW>> loc("/attn/MatMul")
    func.return %3 : tensor<4x5x7xf32, #mrvl.layout<NCW>>
  }
}

// CHECK:      %[[A0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 2x5x8xf16>
// CHECK-NEXT: %[[TA0:.*]] = sched.dma tile 0 %[[Q:.*]] [0, 0, 0] -> %[[A0]] [0, 0, 0] box [2, 5, 8]
// CHECK:      %[[B0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 2x7x8xf16>
// CHECK-NEXT: %[[TB0:.*]] = sched.dma tile 0 %[[K:.*]] [0, 0, 0] -> %[[B0]] [0, 0, 0] box [2, 7, 8]
// CHECK:      %[[O0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 2x5x7xf16>
// CHECK-NEXT: %[[T0:.*]] = sched.bmm tile 0 %[[A0]], %[[B0]] -> %[[O0]] trans_b after(%[[TA0]], %[[TB0]]) : !sched.buffer<ocm, 2x5x8xf16>, !sched.buffer<ocm, 2x7x8xf16> -> !sched.buffer<ocm, 2x5x7xf16> loc("/attn/MatMul")
// CHECK-NEXT: sched.dma tile 0 %[[O0]] [0, 0, 0] -> %[[Y:.*]] [0, 0, 0] box [2, 5, 7] after(%[[T0]])
// CHECK:      sched.dma tile 1 %[[Q]] [2, 0, 0] -> %{{.*}} [0, 0, 0] box [2, 5, 8]
// CHECK:      sched.dma tile 1 %[[K]] [2, 0, 0] -> %{{.*}} [0, 0, 0] box [2, 7, 8]
// CHECK:      sched.bmm tile 1 {{.*}} trans_b after
// CHECK-NEXT: sched.dma tile 1 %{{.*}} [0, 0, 0] -> %[[Y]] [2, 0, 0] box [2, 5, 7]
// CHECK-NOT:  sched.bmm

// ROUND: sched.bmm tile 0 %{{.*}}, %{{.*}} -> %{{.*}} trans_b after
// ROUND: sched.bmm tile 1 %{{.*}}, %{{.*}} -> %{{.*}} trans_b after
