// RUN: mrvl-opt %s -p mrvl-fold-qdq,mrvl-canonicalize --print-debuginfo | filecheck %s

// A region of a QDQ model: float layers between dequantize and quantize, as imported. Each
// sandwich folds into the layer on i8 tensors; the conv's float weights (= q * s_w, s_w =
// [0.5, 0.25]) become int8 again and its bias (= b * s_x * s_w, s_x = 0.5) int32. Layout
// conversions move to the float input and the int8 output, so the int8 layers meet directly.

func.func @conv(%x: tensor<1x2x2x2xf32, #mrvl.layout<NCHW>>) -> tensor<1x2x2x2xf32, #mrvl.layout<NCHW>> {
  %q = mrvl.quantize %x quant <0.5, -3> : tensor<1x2x2x2xf32, #mrvl.layout<NCHW>> -> tensor<1x2x2x2xi8, #mrvl.layout<NCHW>> loc("x_QuantizeLinear")
  %d = mrvl.dequantize %q quant <0.5, -3> : tensor<1x2x2x2xi8, #mrvl.layout<NCHW>> -> tensor<1x2x2x2xf32, #mrvl.layout<NCHW>> loc("x_DequantizeLinear")
  %n = mrvl.layout_convert %d : tensor<1x2x2x2xf32, #mrvl.layout<NCHW>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> loc("/conv/Conv")
  %w = mrvl.constant "w" = dense<[[[[0.5, -1.0]]], [[[0.75, 1.0]]]]> : tensor<2x1x1x2xf32> -> tensor<2x1x1x2xf32, #mrvl.layout<OHWI>>
  %b = mrvl.constant "b" = dense<[1.0, -1.0]> : tensor<2xf32> -> tensor<2xf32, #mrvl.layout<O>>
  %c = mrvl.conv2d %n, %w bias %b act relu weight_scales [0.5, 0.25] : (tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>, tensor<2x1x1x2xf32, #mrvl.layout<OHWI>>, tensor<2xf32, #mrvl.layout<O>>) -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> loc("/conv/Conv")
  %cq = mrvl.quantize %c quant <0.25, -128> : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> loc("y_QuantizeLinear")
  %cd = mrvl.dequantize %cq quant <0.25, -128> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> loc("y_DequantizeLinear")
  %y = mrvl.layout_convert %cd : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NCHW>>
  func.return %y : tensor<1x2x2x2xf32, #mrvl.layout<NCHW>>
}

// CHECK-LABEL: func.func @conv
// CHECK:       %[[N:.*]] = mrvl.layout_convert %x : tensor<1x2x2x2xf32, #mrvl.layout<NCHW>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> loc("/conv/Conv")
// CHECK-NEXT:  %[[Q:.*]] = mrvl.quantize %[[N]] quant <0.5, -3> : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> loc("x_QuantizeLinear")
// CHECK-DAG:   %[[W:.*]] = mrvl.constant "w" = dense<{{\[\[\[\[}}1, -2]]], {{\[\[\[}}3, 4]]]]> : tensor<2x1x1x2xi8> -> tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>
// CHECK-DAG:   %[[B:.*]] = mrvl.constant "b" = dense<[4, -8]> : tensor<2xi32> -> tensor<2xi32, #mrvl.layout<O>>
// CHECK:       %[[C:.*]] = mrvl.conv2d %[[Q]], %[[W]] bias %[[B]] act relu in_quant [#mrvl.quant<0.5, -3>] out_quant <0.25, -128> weight_scales [5.000000e-01, 2.500000e-01] : (tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>, tensor<2xi32, #mrvl.layout<O>>) -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> loc("/conv/Conv")
// CHECK-NEXT:  %[[O:.*]] = mrvl.layout_convert %[[C]] : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi8, #mrvl.layout<NCHW>>
// CHECK-NEXT:  %[[Y:.*]] = mrvl.dequantize %[[O]] quant <0.25, -128> : tensor<1x2x2x2xi8, #mrvl.layout<NCHW>> -> tensor<1x2x2x2xf32, #mrvl.layout<NCHW>> loc("y_DequantizeLinear")
// CHECK-NEXT:  func.return %[[Y]]

// A residual add of two tensors at their own scales, then a global average pool: each takes
// its inputs' quantization (in_quant) and its result's (out_quant). An average of a fixed
// number of taps becomes a depthwise conv with weights 1 and the divisor in its weight scale
// (one rounding, from the int32 sum to the output's scale); a padded average whose divisor
// varies stays a pool (qpool).

func.func @add_pool(%a: tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, %b: tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>) -> tensor<1x1x1x2xi8, #mrvl.layout<NHWC>> {
  %da = mrvl.dequantize %a quant <0.5, 1> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
  %db = mrvl.dequantize %b quant <0.25, -2> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
  %s = mrvl.add %da, %db : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> loc("/add/Add")
  %sq = mrvl.quantize %s quant <1.0, 0> : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
  %sd = mrvl.dequantize %sq quant <1.0, 0> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
  %p = mrvl.avgpool2d %sd kernel [2, 2] : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xf32, #mrvl.layout<NHWC>> loc("/pool/GlobalAveragePool")
  %pq = mrvl.quantize %p quant <0.125, -128> : tensor<1x1x1x2xf32, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xi8, #mrvl.layout<NHWC>>
  %pd = mrvl.dequantize %pq quant <0.125, -128> : tensor<1x1x1x2xi8, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xf32, #mrvl.layout<NHWC>>
  %r = mrvl.avgpool2d %pd kernel [2, 2] pads [1, 1, 0, 0] : tensor<1x1x1x2xf32, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xf32, #mrvl.layout<NHWC>> loc("/pool2/AveragePool")
  %rq = mrvl.quantize %r quant <0.125, -128> : tensor<1x1x1x2xf32, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xi8, #mrvl.layout<NHWC>>
  func.return %rq : tensor<1x1x1x2xi8, #mrvl.layout<NHWC>>
}

// CHECK-LABEL: func.func @add_pool
// CHECK-NEXT:  %[[S:.*]] = mrvl.add %a, %b in_quant [#mrvl.quant<0.5, 1>, #mrvl.quant<0.25, -2>] out_quant <1.0, 0> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> loc("/add/Add")
// CHECK-NEXT:  %[[ONES:.*]] = mrvl.constant "mrvl_average_/pool/GlobalAveragePool_ones" = dense<1> : tensor<2x2x2x1xi8> -> tensor<2x2x2x1xi8, #mrvl.layout<OHWI>> loc("/pool/GlobalAveragePool")
// CHECK-NEXT:  %[[P:.*]] = mrvl.conv2d %[[S]], %[[ONES]] groups [2] in_quant [#mrvl.quant<1.0, 0>] out_quant <0.125, -128> weight_scales [2.500000e-01, 2.500000e-01] : (tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, tensor<2x2x2x1xi8, #mrvl.layout<OHWI>>) -> tensor<1x1x1x2xi8, #mrvl.layout<NHWC>> loc("/pool/GlobalAveragePool")
// CHECK-NEXT:  %[[R:.*]] = mrvl.avgpool2d %[[P]] kernel [2, 2] pads [1, 1, 0, 0] in_quant [#mrvl.quant<0.125, -128>] out_quant <0.125, -128> : tensor<1x1x1x2xi8, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xi8, #mrvl.layout<NHWC>> loc("/pool2/AveragePool")
// CHECK-NEXT:  func.return %[[R]]

// A conv whose weights are float (kept in fp16 on purpose, `mrvl.quantize(keep_fp16=)`)
// stays a float layer between its dequantize and quantize: mixed precision.

func.func @kept_fp16(%a: tensor<1x1x1x2xi8, #mrvl.layout<NHWC>>) -> tensor<1x1x1x1xi8, #mrvl.layout<NHWC>> {
  %d = mrvl.dequantize %a quant <0.5, 1> : tensor<1x1x1x2xi8, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xf32, #mrvl.layout<NHWC>>
  %w = mrvl.constant "w" = dense<[[[[0.3, 1.0]]]]> : tensor<1x1x1x2xf32> -> tensor<1x1x1x2xf32, #mrvl.layout<OHWI>>
  %c = mrvl.conv2d %d, %w : (tensor<1x1x1x2xf32, #mrvl.layout<NHWC>>, tensor<1x1x1x2xf32, #mrvl.layout<OHWI>>) -> tensor<1x1x1x1xf32, #mrvl.layout<NHWC>> loc("/kept/Conv")
  %q = mrvl.quantize %c quant <0.25, 0> : tensor<1x1x1x1xf32, #mrvl.layout<NHWC>> -> tensor<1x1x1x1xi8, #mrvl.layout<NHWC>>
  func.return %q : tensor<1x1x1x1xi8, #mrvl.layout<NHWC>>
}

// CHECK-LABEL: func.func @kept_fp16
// CHECK-NEXT:  %d = mrvl.dequantize %a quant <0.5, 1>
// CHECK:       %c = mrvl.conv2d %d, %w : (tensor<1x1x1x2xf32, #mrvl.layout<NHWC>>, tensor<1x1x1x2xf32, #mrvl.layout<OHWI>>) -> tensor<1x1x1x1xf32, #mrvl.layout<NHWC>> loc("/kept/Conv")
// CHECK-NEXT:  %q = mrvl.quantize %c quant <0.25, 0>
