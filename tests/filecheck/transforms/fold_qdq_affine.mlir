// RUN: mrvl-opt %s -p mrvl-fold-qdq,mrvl-canonicalize | filecheck %s

// A per-channel affine between a dequantize and a quantize (a BatchNormalization after a
// concat) becomes a depthwise 1x1 int8 conv: weights sign(a) * 127 at scales |a| / 127, the
// shift as the int32 bias b / (s_x * s_w) (here 0.5 / (0.5 * 2/127) = 63.5 -> 64, half to
// even; -1 / (0.5 * 1/127) = -254), a zero scale a weight 0 at scale s_y / s_x; the ReLU
// stays the conv's.

func.func @batch_norm(%a: tensor<1x2x2x3xi8, #mrvl.layout<NHWC>>) -> tensor<1x2x2x3xi8, #mrvl.layout<NHWC>> {
  %da = mrvl.dequantize %a quant <0.5, 3> : tensor<1x2x2x3xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x3xf32, #mrvl.layout<NHWC>>
  %s = mrvl.constant "scale" = dense<[2.0, -1.0, 0.0]> : tensor<3xf32> -> tensor<3xf32, #mrvl.layout<O>>
  %b = mrvl.constant "shift" = dense<[0.5, -1.0, 0.25]> : tensor<3xf32> -> tensor<3xf32, #mrvl.layout<O>>
  %y = mrvl.scale_shift %da, %s, %b act relu : (tensor<1x2x2x3xf32, #mrvl.layout<NHWC>>, tensor<3xf32, #mrvl.layout<O>>, tensor<3xf32, #mrvl.layout<O>>) -> tensor<1x2x2x3xf32, #mrvl.layout<NHWC>> loc("/bn")
  %yq = mrvl.quantize %y quant <0.25, -128> : tensor<1x2x2x3xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x3xi8, #mrvl.layout<NHWC>>
  func.return %yq : tensor<1x2x2x3xi8, #mrvl.layout<NHWC>>
}

// CHECK-LABEL: func.func @batch_norm
// CHECK-DAG:   %[[W:.*]] = mrvl.constant "mrvl_affine_/bn_weights" = dense<[{{\[\[\[}}127]]], {{\[\[\[}}-127]]], {{\[\[\[}}0]]]]> : tensor<3x1x1x1xi8> -> tensor<3x1x1x1xi8, #mrvl.layout<OHWI>>
// CHECK-DAG:   %[[B:.*]] = mrvl.constant "mrvl_affine_/bn_bias" = dense<[64, -254, 1]> : tensor<3xi32> -> tensor<3xi32, #mrvl.layout<O>>
// CHECK:       %[[C:.*]] = mrvl.conv2d %a, %[[W]] bias %[[B]] groups [3] act relu in_quant [#mrvl.quant<0.5, 3>] out_quant <0.25, -128> weight_scales [{{.*}}, {{.*}}, 5.000000e-01] : (tensor<1x2x2x3xi8, #mrvl.layout<NHWC>>, tensor<3x1x1x1xi8, #mrvl.layout<OHWI>>, tensor<3xi32, #mrvl.layout<O>>) -> tensor<1x2x2x3xi8, #mrvl.layout<NHWC>>
// CHECK-NEXT:  func.return %[[C]]

// A rank-2 [N, C] affine (MobileFaceNet's BatchNormalization after its embedding) is the
// same conv of the [N, 1, 1, C] view of its bytes, reshaped back.

func.func @batch_norm_rank_2(%a: tensor<1x3xi8, #mrvl.layout<NC>>) -> tensor<1x3xi8, #mrvl.layout<NC>> {
  %da = mrvl.dequantize %a quant <0.5, 3> : tensor<1x3xi8, #mrvl.layout<NC>> -> tensor<1x3xf32, #mrvl.layout<NC>>
  %s = mrvl.constant "scale" = dense<[2.0, -1.0, 0.0]> : tensor<3xf32> -> tensor<3xf32, #mrvl.layout<O>>
  %b = mrvl.constant "shift" = dense<[0.5, -1.0, 0.25]> : tensor<3xf32> -> tensor<3xf32, #mrvl.layout<O>>
  %y = mrvl.scale_shift %da, %s, %b : (tensor<1x3xf32, #mrvl.layout<NC>>, tensor<3xf32, #mrvl.layout<O>>, tensor<3xf32, #mrvl.layout<O>>) -> tensor<1x3xf32, #mrvl.layout<NC>> loc("/bn2")
  %yq = mrvl.quantize %y quant <0.25, -128> : tensor<1x3xf32, #mrvl.layout<NC>> -> tensor<1x3xi8, #mrvl.layout<NC>>
  func.return %yq : tensor<1x3xi8, #mrvl.layout<NC>>
}

// CHECK-LABEL: func.func @batch_norm_rank_2
// CHECK-DAG:   %[[W:.*]] = mrvl.constant "mrvl_affine_/bn2_weights" = dense<[{{\[\[\[}}127]]], {{\[\[\[}}-127]]], {{\[\[\[}}0]]]]> : tensor<3x1x1x1xi8> -> tensor<3x1x1x1xi8, #mrvl.layout<OHWI>>
// CHECK-DAG:   %[[B:.*]] = mrvl.constant "mrvl_affine_/bn2_bias" = dense<[64, -254, 1]> : tensor<3xi32> -> tensor<3xi32, #mrvl.layout<O>>
// CHECK:       %[[V:.*]] = mrvl.reshape %a : tensor<1x3xi8, #mrvl.layout<NC>> -> tensor<1x1x1x3xi8, #mrvl.layout<NHWC>>
// CHECK-NEXT:  %[[C:.*]] = mrvl.conv2d %[[V]], %[[W]] bias %[[B]] groups [3] in_quant [#mrvl.quant<0.5, 3>] out_quant <0.25, -128> {{.*}} -> tensor<1x1x1x3xi8, #mrvl.layout<NHWC>>
// CHECK-NEXT:  %[[Y:.*]] = mrvl.reshape %[[C]] : tensor<1x1x1x3xi8, #mrvl.layout<NHWC>> -> tensor<1x3xi8, #mrvl.layout<NC>>
// CHECK-NEXT:  func.return %[[Y]]
