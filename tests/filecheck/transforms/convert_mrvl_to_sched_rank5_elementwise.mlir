// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1}' | filecheck %s

// YOLOv5's decode at rank 5 ([N, anchors, H, W, 5 + classes] in Relax's order): a Sigmoid
// (and a Mul by a scalar, a Pow by a constant) is a scale_shift on the 1-channel NHWC view
// [N, anchors·H·W, 5 + classes, 1] of the same bytes, so the reshapes around it are views
// (no copy), and the two halves of the box meet again in a Concat at rank 5.

func.func @decode(%x: tensor<1x3x5x5x4xf16, #mrvl.layout<NCDHW>>) -> tensor<1x3x5x5x6xf16, #mrvl.layout<NCDHW>> {
  %v = mrvl.reshape %x : tensor<1x3x5x5x4xf16, #mrvl.layout<NCDHW>> -> tensor<1x75x4x1xf16, #mrvl.layout<NHWC>> loc("sigmoid")
  %s = mrvl.constant "scale" = dense<2.0> : tensor<1xf32> -> tensor<1xf32, #mrvl.layout<O>>
  %b = mrvl.constant "shift" = dense<0.0> : tensor<1xf32> -> tensor<1xf32, #mrvl.layout<O>>
  %g = mrvl.scale_shift %v, %s, %b act sigmoid : (tensor<1x75x4x1xf16, #mrvl.layout<NHWC>>, tensor<1xf32, #mrvl.layout<O>>, tensor<1xf32, #mrvl.layout<O>>) -> tensor<1x75x4x1xf16, #mrvl.layout<NHWC>> loc("sigmoid")
  %r = mrvl.reshape %g : tensor<1x75x4x1xf16, #mrvl.layout<NHWC>> -> tensor<1x3x5x5x4xf16, #mrvl.layout<NCDHW>> loc("sigmoid")
  %w = mrvl.strided_copy %r offset 0 strides [4, 1] box [75, 2] : tensor<1x3x5x5x4xf16, #mrvl.layout<NCDHW>> -> tensor<1x3x5x5x2xf16, #mrvl.layout<NCDHW>> loc("split")
  %c = mrvl.concat %r, %w axis 4 : tensor<1x3x5x5x4xf16, #mrvl.layout<NCDHW>>, tensor<1x3x5x5x2xf16, #mrvl.layout<NCDHW>> -> tensor<1x3x5x5x6xf16, #mrvl.layout<NCDHW>> loc("concat")
  %o = mrvl.layout_convert %c : tensor<1x3x5x5x6xf16, #mrvl.layout<NCDHW>> -> tensor<1x3x5x5x6xf16, #mrvl.layout<NCDHW>> loc("out")
  func.return %o : tensor<1x3x5x5x6xf16, #mrvl.layout<NCDHW>>
}

// CHECK:      %[[X:.*]] = sched.io "x" input : !sched.buffer<ddr, 1x3x5x5x4xf16>
// CHECK:      %[[V:.*]] = sched.view %[[X]] : !sched.buffer<ddr, 1x3x5x5x4xf16> -> !sched.buffer<ddr, 1x75x4x1xf16>
// CHECK:      sched.view %[[V]] : !sched.buffer<ddr, 1x75x4x1xf16> -> !sched.buffer<ddr, 300xf16>
// CHECK:      %[[Y:.*]] = sched.alloc : !sched.buffer<ddr, 1x75x4x1xf16>
// CHECK:      sched.scale tile 0 {{.*}} act sigmoid {{.*}} : !sched.buffer<ocm, 300xf16>, !sched.buffer<ocm, 1xf32>, !sched.buffer<ocm, 1xf32> -> !sched.buffer<ocm, 300xf16>
// CHECK:      %[[R:.*]] = sched.view %[[Y]] : !sched.buffer<ddr, 1x75x4x1xf16> -> !sched.buffer<ddr, 1x3x5x5x4xf16>
// CHECK:      %[[C:.*]] = sched.alloc : !sched.buffer<ddr, 1x3x5x5x6xf16>
// CHECK:      sched.dma tile 0 %[[R]] [0, 0, 0, 0, 0] -> %[[C]] [0, 0, 0, 0, 0] box [1, 3, 5, 5, 4]
// CHECK:      sched.dma tile 0 %{{.*}} [0, 0, 0, 0, 0] -> %[[C]] [0, 0, 0, 0, 4] box [1, 3, 5, 5, 2]
