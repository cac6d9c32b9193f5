// RUN: not mrvl-opt %s -p mrvl-fold-qdq,mrvl-verify-int8 2>&1 | filecheck %s

// A layer the partition reported int8 that the fold leaves in float is a bug in mrvl: the
// old bug of YOLOv5n's decode, a Sigmoid whose result's quantize went to the CPU (a rank-5
// tensor), so the region computed it in fp16 and returned floats. The check stops the compile,
// naming the region, the op and its ONNX node.

builtin.module attributes {mrvl.int8_nodes = ["/detect/Sigmoid", "/detect/Sigmoid_input_DequantizeLinear"]} {
  func.func @decode(%x: tensor<1x3x4x6xi8, #mrvl.layout<NHWC>>) -> tensor<1x3x4x6xf32, #mrvl.layout<NHWC>> {
    %d = mrvl.dequantize %x quant <0.125, 0> : tensor<1x3x4x6xi8, #mrvl.layout<NHWC>> -> tensor<1x3x4x6xf32, #mrvl.layout<NHWC>> loc("/detect/Sigmoid_input_DequantizeLinear")
    %s = mrvl.constant "one" = dense<1.0> : tensor<6xf32> -> tensor<6xf32, #mrvl.layout<O>> loc("/detect/Sigmoid")
    %b = mrvl.constant "zero" = dense<0.0> : tensor<6xf32> -> tensor<6xf32, #mrvl.layout<O>> loc("/detect/Sigmoid")
    %y = mrvl.scale_shift %d, %s, %b act sigmoid : (tensor<1x3x4x6xf32, #mrvl.layout<NHWC>>, tensor<6xf32, #mrvl.layout<O>>, tensor<6xf32, #mrvl.layout<O>>) -> tensor<1x3x4x6xf32, #mrvl.layout<NHWC>> loc("/detect/Sigmoid")
    func.return %y : tensor<1x3x4x6xf32, #mrvl.layout<NHWC>>
  }
}

// CHECK: region decode: mrvl.scale_shift at /detect/Sigmoid was reported int8 by the partition but computes in float (tensor<1x3x4x6xf32, #mrvl.layout<NHWC>>) after mrvl-fold-qdq
