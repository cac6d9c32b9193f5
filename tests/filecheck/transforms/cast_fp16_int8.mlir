// RUN: mrvl-opt %s -p mrvl-cast-fp16 | filecheck %s

// int8 code keeps its types, and its edges keep the f32 that QuantizeLinear and
// DequantizeLinear compute in: the region input that only a quantize reads (through a layout
// change), and the dequantized result the region returns. A float (fp16) layer between int8
// layers reads an f16 dequantize and its f16 result is quantized (mixed precision).

func.func @int8(%x: tensor<1x2x2x2xf32, #mrvl.layout<NCHW>>) -> (tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>, tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>) {
  %n = mrvl.layout_convert %x : tensor<1x2x2x2xf32, #mrvl.layout<NCHW>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
  %q = mrvl.quantize %n quant <0.5, -3> : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
  %s = mrvl.add %q, %q in_quant [#mrvl.quant<0.5, -3>, #mrvl.quant<0.5, -3>] out_quant <1.0, 0> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
  %d = mrvl.dequantize %s quant <1.0, 0> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
  %f = mrvl.dequantize %s quant <1.0, 0> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
  %t = mrvl.add %f, %f : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
  %tq = mrvl.quantize %t quant <2.0, 0> : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
  %td = mrvl.dequantize %tq quant <2.0, 0> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
  func.return %d, %td : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>, tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
}

// CHECK-NOT:   mrvl.cast %x
// CHECK:       %n = mrvl.layout_convert %x : tensor<1x2x2x2xf32, #mrvl.layout<NCHW>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
// CHECK-NEXT:  %q = mrvl.quantize %n quant <0.5, -3> : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
// CHECK-NEXT:  %s = mrvl.add %q, %q {{.*}} : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
// CHECK-NEXT:  %d = mrvl.dequantize %s quant <1.0, 0> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
// CHECK-NEXT:  %f = mrvl.dequantize %s quant <1.0, 0> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf16, #mrvl.layout<NHWC>>
// CHECK-NEXT:  %t = mrvl.add %f, %f : tensor<1x2x2x2xf16, #mrvl.layout<NHWC>>
// CHECK-NEXT:  %tq = mrvl.quantize %t quant <2.0, 0> : tensor<1x2x2x2xf16, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
// CHECK-NEXT:  %td = mrvl.dequantize %tq quant <2.0, 0> : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>
// CHECK-NEXT:  func.return %d, %td
