// RUN: mrvl-opt %s -p mrvl-fold-qdq | filecheck %s

// A layer with no int8 weights (add, mul, pool) whose fused activation int8 does not run (a
// hard_swish) stays in fp16 between its dequantizes and its quantize, as a layer kept in fp16
// is; it was a CompileError that stopped the build (found by scripts/fuzz.py --precision mixed).

func.func @mul_hard_swish(%a: tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>, %b: tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>) -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> {
  %da = mrvl.dequantize %a quant <0.5, 1> : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
  %db = mrvl.dequantize %b quant <0.25, -2> : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
  %m = mrvl.mul %da, %db act hard_swish : (tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>, tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>) -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>> loc("/mul/Mul")
  %q = mrvl.quantize %m quant <0.125, 3> : tensor<1x2x2x4xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
  func.return %q : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
}

// CHECK-LABEL: func.func @mul_hard_swish
// CHECK-NEXT:  %da = mrvl.dequantize %a quant <0.5, 1>
// CHECK-NEXT:  %db = mrvl.dequantize %b quant <0.25, -2>
// CHECK-NEXT:  %m = mrvl.mul %da, %db act hard_swish : (tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>, tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>) -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
// CHECK-NEXT:  %q = mrvl.quantize %m quant <0.125, 3>
// CHECK-NEXT:  func.return %q

// A quantized softmax (qdq.FP16_BETWEEN_EDGES) stays in fp16 between its dequantize and its
// quantize: no int8 instruction computes it, the region's dequant and quant do its edges.

func.func @softmax(%a: tensor<1x10xi8, #mrvl.layout<NC>>) -> tensor<1x10xi8, #mrvl.layout<NC>> {
  %da = mrvl.dequantize %a quant <0.25, 3> : tensor<1x10xi8, #mrvl.layout<NC>> -> tensor<1x10xf32, #mrvl.layout<NC>>
  %s = mrvl.softmax %da axes [1] : tensor<1x10xf32, #mrvl.layout<NC>> loc("/Softmax")
  %q = mrvl.quantize %s quant <0.00390625, -128> : tensor<1x10xf32, #mrvl.layout<NC>> -> tensor<1x10xi8, #mrvl.layout<NC>>
  func.return %q : tensor<1x10xi8, #mrvl.layout<NC>>
}

// CHECK-LABEL: func.func @softmax
// CHECK-NEXT:  %da = mrvl.dequantize %a quant <0.25, 3>
// CHECK-NEXT:  %s = mrvl.softmax %da axes [1] : tensor<1x10xf32, #mrvl.layout<NC>>
// CHECK-NEXT:  %q = mrvl.quantize %s quant <0.00390625, -128>
// CHECK-NEXT:  func.return %q
