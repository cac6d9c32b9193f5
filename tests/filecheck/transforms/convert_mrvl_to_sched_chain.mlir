// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cnf10kb num-tiles=1}' | filecheck %s

// A layer cut into many pieces: each store waits for its compute and for the previous store
// of the same tile, so the next layer's loads wait for one token per tile, not one per piece.

builtin.module {
  func.func @fc(%x: tensor<1x16384xf32, #mrvl.layout<NC>>) -> tensor<1x4xf32, #mrvl.layout<NC>> {
    %0 = mrvl.cast %x : tensor<1x16384xf32, #mrvl.layout<NC>> -> tensor<1x16384xf16, #mrvl.layout<NC>>
    %w = mrvl.constant "w" = dense<0.25> : tensor<4x16384xf16> -> tensor<4x16384xf16, #mrvl.layout<OI>>
    %1 = mrvl.fc %0, %w : (tensor<1x16384xf16, #mrvl.layout<NC>>, tensor<4x16384xf16, #mrvl.layout<OI>>) -> tensor<1x4xf16, #mrvl.layout<NC>>
    %2 = mrvl.cast %1 : tensor<1x4xf16, #mrvl.layout<NC>> -> tensor<1x4xf32, #mrvl.layout<NC>>
    func.return %2 : tensor<1x4xf32, #mrvl.layout<NC>>
  }
}

// CHECK:      %[[C0:.*]] = sched.fc tile 0
// CHECK-NEXT: %[[S0:.*]] = sched.dma tile 0 %{{.*}} [0, 0] -> %[[Y:.*]] [0, 0] box [1, 2] after(%[[C0]])
// CHECK:      %[[C1:.*]] = sched.fc tile 0
// CHECK-NEXT: %[[S1:.*]] = sched.dma tile 0 %{{.*}} [0, 0] -> %[[Y]] [0, 2] box [1, 2] after(%[[C1]], %[[S0]])
// CHECK-NEXT: sched.convert tile 0 %[[Y]] -> %{{.*}} perm [0, 1] after(%[[S1]])
