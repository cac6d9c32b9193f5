// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1},sched-fuse-converts' --print-debuginfo | filecheck %s

// The edges of int8 code: a region input reordered, quantized and reordered back, and an
// int8 result reordered and dequantized, are one sched.quantize and one sched.dequantize
// each (the reorders are their permutation): one DDR pass instead of two or three.

func.func @edges(%x: tensor<1x2x2x3xf32, #mrvl.layout<NCHW>>, %y: tensor<1x2x2x3xi8, #mrvl.layout<NHWC>>) -> (tensor<1x2x2x3xi8, #mrvl.layout<NCHW>>, tensor<1x3x2x2xf32, #mrvl.layout<NCHW>>) {
  %n = mrvl.layout_convert %x : tensor<1x2x2x3xf32, #mrvl.layout<NCHW>> -> tensor<1x2x3x2xf32, #mrvl.layout<NHWC>> loc("/conv/Conv")
  %q = mrvl.quantize %n quant <0.5, -3> : tensor<1x2x3x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x3x2xi8, #mrvl.layout<NHWC>> loc("x_QuantizeLinear")
  %t = mrvl.layout_convert %q : tensor<1x2x3x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x3xi8, #mrvl.layout<NCHW>>
  %o = mrvl.layout_convert %y : tensor<1x2x2x3xi8, #mrvl.layout<NHWC>> -> tensor<1x3x2x2xi8, #mrvl.layout<NCHW>>
  %d = mrvl.dequantize %o quant <0.25, 0> : tensor<1x3x2x2xi8, #mrvl.layout<NCHW>> -> tensor<1x3x2x2xf32, #mrvl.layout<NCHW>> loc("y_DequantizeLinear")
  func.return %t, %d : tensor<1x2x2x3xi8, #mrvl.layout<NCHW>>, tensor<1x3x2x2xf32, #mrvl.layout<NCHW>>
}

// CHECK:      %[[X:.*]] = sched.io "x" input : !sched.buffer<ddr, 1x2x2x3xf32>
// CHECK:      %[[Y:.*]] = sched.io "y" input : !sched.buffer<ddr, 1x2x2x3xi8>
// CHECK:      %[[T:.*]] = sched.io "output0" output : !sched.buffer<ddr, 1x2x2x3xi8>
// CHECK:      %[[OUT:.*]] = sched.io "output1" output : !sched.buffer<ddr, 1x3x2x2xf32>
// CHECK-NOT:  sched.convert
// CHECK:      sched.quantize tile 0 %[[X]] -> %[[T]] perm [0, 1, 2, 3] quant <0.5, -3> : !sched.buffer<ddr, 1x2x2x3xf32>, !sched.buffer<ddr, 1x2x2x3xi8> loc("x_QuantizeLinear")
// CHECK-NOT:  sched.convert
// CHECK:      sched.dequantize tile 0 %[[Y]] -> %[[OUT]] perm [0, 3, 1, 2] quant <0.25, 0>
// CHECK-SAME: loc("y_DequantizeLinear")
// CHECK-NOT:  sched.convert
