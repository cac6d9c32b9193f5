// RUN: mrvl-opt %s -p mrvl-fold-qdq,mrvl-canonicalize | filecheck %s

// SiLU as a QDQ model writes it, x * sigmoid(x) with the sigmoid quantized on its own, is one
// int8 table of x: the table activation and the int8 product of the same-shape tensors fold
// into `mrvl.int8_table "x * sigmoid"` (entry q + 128: fp32(q / 8) * fp32(T[q] / 256), quantized
// at 1/16: round(q * sigmoid(q / 8) / 2), to an fp32 rounding of the gate).

func.func @silu(%a: tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>) -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> {
  %da = mrvl.dequantize %a quant <0.125, 0> : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
  %s = mrvl.constant "one" = dense<1.0> : tensor<4xf32> -> tensor<4xf32, #mrvl.layout<O>>
  %b = mrvl.constant "zero" = dense<0.0> : tensor<4xf32> -> tensor<4xf32, #mrvl.layout<O>>
  %g = mrvl.scale_shift %da, %s, %b act sigmoid : (tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>, tensor<4xf32, #mrvl.layout<O>>, tensor<4xf32, #mrvl.layout<O>>) -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
  %gq = mrvl.quantize %g quant <0.00390625, -128> : tensor<1x2x2x4xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
  %dg = mrvl.dequantize %gq quant <0.00390625, -128> : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
  %m = mrvl.mul %da, %dg : (tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>, tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>) -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
  %mq = mrvl.quantize %m quant <0.0625, 0> : tensor<1x2x2x4xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
  func.return %mq : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
}

// CHECK-LABEL: func.func @silu
// CHECK-NEXT:  %[[T:.*]] = mrvl.int8_table "x * sigmoid" %a from [#mrvl.quant<0.125, 0>] to <0.0625, 0> table <i8, "{{.*}}"> : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
// CHECK-NEXT:  func.return %[[T]]
// CHECK-NOT:   mrvl.mul
