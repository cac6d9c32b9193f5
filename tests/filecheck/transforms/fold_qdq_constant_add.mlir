// RUN: mrvl-opt %s -p mrvl-fold-qdq | filecheck %s

// An int8 Add of a constant (passes/graph/fold_qdq_constant_add.py): a transformer's bias
// after its MatMul, the dequantize of an int8 tensor at scale 0.25, zero point -1
// (mrvl.constant_quant, set by the importer), added to a dequantized activation: the bias's
// int8 values (0.5 -> 1, -0.25 -> -2, 0.0 -> -1), broadcast to the activation's shape, are the
// second operand of the int8 add, a qadd of two tensors of their own quantization.

func.func @bias(%x: tensor<1x2x3xi8, #mrvl.layout<NCW>>) -> tensor<1x2x3xi8, #mrvl.layout<NCW>> {
  %b = mrvl.constant "bias" = dense<[[[0.5, -0.25, 0.0]]]> : tensor<1x1x3xf32> {"mrvl.constant_quant" = #mrvl.quant<0.25, -1>} -> tensor<1x1x3xf32, #mrvl.layout<NCW>>
  %dx = mrvl.dequantize %x quant <0.5, 3> : tensor<1x2x3xi8, #mrvl.layout<NCW>> -> tensor<1x2x3xf32, #mrvl.layout<NCW>>
  %s = mrvl.binary "add" %b, %dx : tensor<1x1x3xf32, #mrvl.layout<NCW>>, tensor<1x2x3xf32, #mrvl.layout<NCW>> -> tensor<1x2x3xf32, #mrvl.layout<NCW>> loc("/fc/Add")
  %q = mrvl.quantize %s quant <0.125, 2> : tensor<1x2x3xf32, #mrvl.layout<NCW>> -> tensor<1x2x3xi8, #mrvl.layout<NCW>>
  func.return %q : tensor<1x2x3xi8, #mrvl.layout<NCW>>
}

// A float constant (no int8 origin) is not folded: the partition keeps such an Add on the
// CPU, and nothing here makes it int8.

func.func @float_bias(%x: tensor<1x2x3xi8, #mrvl.layout<NCW>>) -> tensor<1x2x3xi8, #mrvl.layout<NCW>> {
  %b = mrvl.constant "bias" = dense<[[[0.5, -0.25, 0.0]]]> : tensor<1x1x3xf32> -> tensor<1x1x3xf32, #mrvl.layout<NCW>>
  %dx = mrvl.dequantize %x quant <0.5, 3> : tensor<1x2x3xi8, #mrvl.layout<NCW>> -> tensor<1x2x3xf32, #mrvl.layout<NCW>>
  %s = mrvl.binary "add" %dx, %b : tensor<1x2x3xf32, #mrvl.layout<NCW>>, tensor<1x1x3xf32, #mrvl.layout<NCW>> -> tensor<1x2x3xf32, #mrvl.layout<NCW>>
  %q = mrvl.quantize %s quant <0.125, 2> : tensor<1x2x3xf32, #mrvl.layout<NCW>> -> tensor<1x2x3xi8, #mrvl.layout<NCW>>
  func.return %q : tensor<1x2x3xi8, #mrvl.layout<NCW>>
}

// CHECK-LABEL: func.func @bias
// CHECK-NEXT:  %[[C:.*]] = mrvl.constant "bias" = dense<{{\[\[\[}}1, -2, -1], [1, -2, -1]]]> : tensor<1x2x3xi8> -> tensor<1x2x3xi8, #mrvl.layout<NCW>>
// CHECK-NEXT:  %q = mrvl.add %x, %[[C]] in_quant [#mrvl.quant<0.5, 3>, #mrvl.quant<0.25, -1>] out_quant <0.125, 2> : tensor<1x2x3xi8, #mrvl.layout<NCW>>
// CHECK-NEXT:  func.return %q

// CHECK-LABEL: func.func @float_bias
// CHECK:       %s = mrvl.binary "add" %dx, %b
// CHECK-NEXT:  %q = mrvl.quantize %s quant <0.125, 2>
