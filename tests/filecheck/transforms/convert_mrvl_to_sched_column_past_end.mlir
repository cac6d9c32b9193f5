// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=8},sched-allocate,convert-sched-to-mlip' | filecheck %s

// A 1x1 conv, stride 2, pad 1, over an input one column wide: its second output column's tap
// (input column 1) falls past the input's right end, so that column piece reads a 1-wide
// dummy window and its tap is leading padding (`WindowLayer.piece_pad_left`): pad [1, 1]
// not a negative column pad, which the mlip.conv verifier rejects. Tiles 0 and 1 take the
// two output columns of the first 18 channels, tiles 2 and 3 those of the other 17.

builtin.module {
  func.func @past_end(%x: tensor<1x7x1x11xf32, #mrvl.layout<NHWC>>) -> tensor<1x5x2x35xf32, #mrvl.layout<NHWC>> {
    %0 = mrvl.cast %x : tensor<1x7x1x11xf32, #mrvl.layout<NHWC>> -> tensor<1x7x1x11xf16, #mrvl.layout<NHWC>> loc("/in")
    %w = mrvl.constant "w" = dense<0.5> : tensor<35x1x1x11xf16> -> tensor<35x1x1x11xf16, #mrvl.layout<OHWI>> loc("/p/Conv")
    %b = mrvl.constant "b" = dense<0.25> : tensor<35xf32> -> tensor<35xf32, #mrvl.layout<O>> loc("/p/Conv")
    %1 = mrvl.conv2d %0, %w bias %b strides [2, 2] pads [1, 1, 1, 1] act relu : (tensor<1x7x1x11xf16, #mrvl.layout<NHWC>>, tensor<35x1x1x11xf16, #mrvl.layout<OHWI>>, tensor<35xf32, #mrvl.layout<O>>) -> tensor<1x5x2x35xf16, #mrvl.layout<NHWC>> loc("/p/Conv")
    %2 = mrvl.cast %1 : tensor<1x5x2x35xf16, #mrvl.layout<NHWC>> -> tensor<1x5x2x35xf32, #mrvl.layout<NHWC>> loc("/out")
    func.return %2 : tensor<1x5x2x35xf32, #mrvl.layout<NHWC>>
  }
}

// CHECK: mlip.conv tile 0 {{.*}} in_shape [1, 3, 1, 11], {{.*}} out_shape [1, 5, 1, 18], {{.*}} stride [1, 2], pad [1, 1], {{.*}} oc0 0, oc_total 35
// CHECK: mlip.conv tile 1 {{.*}} in_shape [1, 3, 1, 11], {{.*}} out_shape [1, 5, 1, 18], {{.*}} stride [1, 2], pad [1, 1], {{.*}} oc0 0, oc_total 35
// CHECK: mlip.conv tile 2 {{.*}} out_shape [1, 5, 1, 17], {{.*}} pad [1, 1], {{.*}} oc0 18, oc_total 35
// CHECK: mlip.conv tile 3 {{.*}} out_shape [1, 5, 1, 17], {{.*}} pad [1, 1], {{.*}} oc0 18, oc_total 35
