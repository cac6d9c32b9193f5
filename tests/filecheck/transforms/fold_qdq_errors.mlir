// RUN: not mrvl-opt %s -p mrvl-fold-qdq 2>&1 | filecheck %s

// A quantized layer is never left to run in fp16: weights that are not int8 at the scales
// they claim, or int8 weights outside a dequantize/quantize sandwich, stop the compile.

func.func @not_int8(%x: tensor<1x1x1x2xi8, #mrvl.layout<NHWC>>) -> tensor<1x1x1x1xi8, #mrvl.layout<NHWC>> {
  %d = mrvl.dequantize %x quant <0.5, 0> : tensor<1x1x1x2xi8, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xf32, #mrvl.layout<NHWC>>
  %w = mrvl.constant "w" = dense<[[[[0.3, 1.0]]]]> : tensor<1x1x1x2xf32> -> tensor<1x1x1x2xf32, #mrvl.layout<OHWI>>
  %c = mrvl.conv2d %d, %w weight_scales [0.5] : (tensor<1x1x1x2xf32, #mrvl.layout<NHWC>>, tensor<1x1x1x2xf32, #mrvl.layout<OHWI>>) -> tensor<1x1x1x1xf32, #mrvl.layout<NHWC>> loc("/conv/Conv")
  %q = mrvl.quantize %c quant <0.25, 0> : tensor<1x1x1x1xf32, #mrvl.layout<NHWC>> -> tensor<1x1x1x1xi8, #mrvl.layout<NHWC>>
  func.return %q : tensor<1x1x1x1xi8, #mrvl.layout<NHWC>>
}

// CHECK: mrvl.conv2d at /conv/Conv: its weights are not int8 at its scales

