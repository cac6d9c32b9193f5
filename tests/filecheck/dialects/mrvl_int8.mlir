// RUN: mrvl-opt %s | filecheck %s
// RUN: mrvl-opt %s | mrvl-opt | filecheck %s

// int8 is a data type of the layers: i8 tensors, an i32 bias, and the quantization of the
// inputs, the result and the weights as properties; quantize / dequantize at the edges.

func.func @int8(%x: tensor<1x4x4x2xf32, #mrvl.layout<NHWC>>) -> tensor<1x1x1x2xf32, #mrvl.layout<NHWC>> {
  %q = mrvl.quantize %x quant <0.5, -3> : tensor<1x4x4x2xf32, #mrvl.layout<NHWC>> -> tensor<1x4x4x2xi8, #mrvl.layout<NHWC>>
  %w = mrvl.constant "w" = dense<1> : tensor<2x1x1x2xi8> -> tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>
  %b = mrvl.constant "b" = dense<[5, -7]> : tensor<2xi32> -> tensor<2xi32, #mrvl.layout<O>>
  %c = mrvl.conv2d %q, %w bias %b act clip min 0.0 max 6.0 in_quant [#mrvl.quant<0.5, -3>] out_quant <0.25, -128> weight_scales [0.125, 0.25] : (tensor<1x4x4x2xi8, #mrvl.layout<NHWC>>, tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>, tensor<2xi32, #mrvl.layout<O>>) -> tensor<1x4x4x2xi8, #mrvl.layout<NHWC>>
  %s = mrvl.add %c, %q in_quant [#mrvl.quant<0.25, -128>, #mrvl.quant<0.5, -3>] out_quant <0.5, 0> : tensor<1x4x4x2xi8, #mrvl.layout<NHWC>>
  %p = mrvl.maxpool2d %s kernel [4, 4] in_quant [#mrvl.quant<0.5, 0>] out_quant <0.5, 0> : tensor<1x4x4x2xi8, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xi8, #mrvl.layout<NHWC>>
  %y = mrvl.dequantize %p quant <0.5, 0> : tensor<1x1x1x2xi8, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xf32, #mrvl.layout<NHWC>>
  func.return %y : tensor<1x1x1x2xf32, #mrvl.layout<NHWC>>
}

// CHECK:      %q = mrvl.quantize %x quant <0.5, -3> : tensor<1x4x4x2xf32, #mrvl.layout<NHWC>> -> tensor<1x4x4x2xi8, #mrvl.layout<NHWC>>
// CHECK:      %b = mrvl.constant "b" = dense<[5, -7]> : tensor<2xi32> -> tensor<2xi32, #mrvl.layout<O>>
// CHECK-NEXT: %c = mrvl.conv2d %q, %w bias %b act clip min 0.000000e+00 max 6.000000e+00 in_quant [#mrvl.quant<0.5, -3>] out_quant <0.25, -128> weight_scales [1.250000e-01, 2.500000e-01]
// CHECK-NEXT: %s = mrvl.add %c, %q in_quant [#mrvl.quant<0.25, -128>, #mrvl.quant<0.5, -3>] out_quant <0.5, 0> : tensor<1x4x4x2xi8, #mrvl.layout<NHWC>>
// CHECK-NEXT: %p = mrvl.maxpool2d %s kernel [4, 4] in_quant [#mrvl.quant<0.5, 0>] out_quant <0.5, 0>
// CHECK-NEXT: %y = mrvl.dequantize %p quant <0.5, 0> : tensor<1x1x1x2xi8, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xf32, #mrvl.layout<NHWC>>
