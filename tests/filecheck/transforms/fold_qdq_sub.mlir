// RUN: mrvl-opt %s -p mrvl-fold-qdq | filecheck %s

// An int8 Sub of two tensors of one type (passes/graph/fold_qdq_sub.py): b negated exactly by
// a table (-q - 1 at zero point -z - 1), then the int8 add of a and -b.

func.func @sub(%a: tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>, %b: tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>) -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> {
  %da = mrvl.dequantize %a quant <0.5, 1> : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
  %db = mrvl.dequantize %b quant <0.25, -2> : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
  %s = mrvl.binary "sub" %da, %db : tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>, tensor<1x2x2x4xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>> loc("/sub/Sub")
  %q = mrvl.quantize %s quant <0.125, 3> : tensor<1x2x2x4xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
  func.return %q : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
}

// A Sub that broadcasts (or another binary kind) is not folded: the partition keeps it on
// the CPU, and nothing here makes it int8.

func.func @sub_broadcast(%a: tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>, %b: tensor<1x1x1x4xi8, #mrvl.layout<NHWC>>) -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> {
  %da = mrvl.dequantize %a quant <0.5, 1> : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
  %db = mrvl.dequantize %b quant <0.25, -2> : tensor<1x1x1x4xi8, #mrvl.layout<NHWC>> -> tensor<1x1x1x4xf32, #mrvl.layout<NHWC>>
  %s = mrvl.binary "sub" %da, %db : tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>, tensor<1x1x1x4xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
  %q = mrvl.quantize %s quant <0.125, 3> : tensor<1x2x2x4xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
  func.return %q : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
}

// CHECK-LABEL: func.func @sub
// CHECK-NEXT:  %0 = mrvl.int8_table "-x" %b from [#mrvl.quant<0.25, -2>] to <0.25, 1> table <i8, "\7F~}|{
// CHECK-SAME:  \02\01\00\FF\FE\FD
// CHECK-SAME:  \83\82\81\80">
// CHECK-NEXT:  %q = mrvl.add %a, %0 in_quant [#mrvl.quant<0.5, 1>, #mrvl.quant<0.25, 1>] out_quant <0.125, 3> : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
// CHECK-NEXT:  func.return %q

// CHECK-LABEL: func.func @sub_broadcast
// CHECK:       %s = mrvl.binary "sub" %da, %db
// CHECK-NEXT:  %q = mrvl.quantize %s quant <0.125, 3>
