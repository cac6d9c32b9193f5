// RUN: not mrvl-opt %s -p mrvl-fold-qdq 2>&1 | filecheck %s

// A layer whose weights dequantize int8 ones but that no dequantize/quantize surrounds would
// run in fp16: the pass stops instead.

func.func @float_io(%x: tensor<1x1x1x2xf32, #mrvl.layout<NHWC>>) -> tensor<1x1x1x1xf32, #mrvl.layout<NHWC>> {
  %w = mrvl.constant "w" = dense<[[[[0.5, 1.0]]]]> : tensor<1x1x1x2xf32> -> tensor<1x1x1x2xf32, #mrvl.layout<OHWI>>
  %c = mrvl.conv2d %x, %w weight_scales [0.5] : (tensor<1x1x1x2xf32, #mrvl.layout<NHWC>>, tensor<1x1x1x2xf32, #mrvl.layout<OHWI>>) -> tensor<1x1x1x1xf32, #mrvl.layout<NHWC>> loc("/conv2/Conv")
  func.return %c : tensor<1x1x1x1xf32, #mrvl.layout<NHWC>>
}

// CHECK: mrvl.conv2d at /conv2/Conv: its weights are int8 but it is not between a dequantize and a quantize (it would run in fp16)
