// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1},sched-fuse-converts' --print-debuginfo | filecheck %s

// An int8 region: the input quantized with its NCHW -> NHWC reorder as the permutation, an
// int8 conv whose (multiplier, shift) per output channel (s_x s_w / s_y = 1: 2^30, shift 1)
// is a constant loaded like its bias, its ReLU a clamp (zero point -128: [-128, 127]), an
// int8 add with its three rescale pairs, a max pool, an fc and the dequantized output.

func.func @int8(%x: tensor<1x2x4x4xf32, #mrvl.layout<NCHW>>) -> tensor<1x3xf32, #mrvl.layout<NC>> {
  %n = mrvl.layout_convert %x : tensor<1x2x4x4xf32, #mrvl.layout<NCHW>> -> tensor<1x4x4x2xf32, #mrvl.layout<NHWC>>
  %q = mrvl.quantize %n quant <0.5, -3> : tensor<1x4x4x2xf32, #mrvl.layout<NHWC>> -> tensor<1x4x4x2xi8, #mrvl.layout<NHWC>> loc("x_QuantizeLinear")
  %w = mrvl.constant "w" = dense<[[[[1, -2]]], [[[3, 4]]]]> : tensor<2x1x1x2xi8> -> tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>
  %b = mrvl.constant "b" = dense<[4, -8]> : tensor<2xi32> -> tensor<2xi32, #mrvl.layout<O>>
  %c = mrvl.conv2d %q, %w bias %b act relu in_quant [#mrvl.quant<0.5, -3>] out_quant <0.25, -128> weight_scales [0.5, 0.25] : (tensor<1x4x4x2xi8, #mrvl.layout<NHWC>>, tensor<2x1x1x2xi8, #mrvl.layout<OHWI>>, tensor<2xi32, #mrvl.layout<O>>) -> tensor<1x4x4x2xi8, #mrvl.layout<NHWC>> loc("/conv/Conv")
  %s = mrvl.add %c, %q in_quant [#mrvl.quant<0.25, -128>, #mrvl.quant<0.5, -3>] out_quant <0.5, 0> : tensor<1x4x4x2xi8, #mrvl.layout<NHWC>> loc("/add/Add")
  %p = mrvl.maxpool2d %s kernel [4, 4] in_quant [#mrvl.quant<0.5, 0>] out_quant <0.5, 0> : tensor<1x4x4x2xi8, #mrvl.layout<NHWC>> -> tensor<1x1x1x2xi8, #mrvl.layout<NHWC>> loc("/pool/MaxPool")
  %f = mrvl.reshape %p : tensor<1x1x1x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2xi8, #mrvl.layout<NC>>
  %fw = mrvl.constant "fw" = dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi8> -> tensor<3x2xi8, #mrvl.layout<OI>>
  %y = mrvl.fc %f, %fw in_quant [#mrvl.quant<0.5, 0>] out_quant <0.125, 5> weight_scales [0.25, 0.25, 0.25] : (tensor<1x2xi8, #mrvl.layout<NC>>, tensor<3x2xi8, #mrvl.layout<OI>>) -> tensor<1x3xi8, #mrvl.layout<NC>> loc("/fc/Gemm")
  %d = mrvl.dequantize %y quant <0.125, 5> : tensor<1x3xi8, #mrvl.layout<NC>> -> tensor<1x3xf32, #mrvl.layout<NC>> loc("y_DequantizeLinear")
  func.return %d : tensor<1x3xf32, #mrvl.layout<NC>>
}

// CHECK:      sched.quantize tile 0 %0 -> %[[Q:.*]] perm [0, 2, 3, 1] quant <0.5, -3> : !sched.buffer<ddr, 1x2x4x4xf32>, !sched.buffer<ddr, 1x4x4x2xi8> loc("x_QuantizeLinear")
// CHECK:      %[[RQ:.*]] = sched.const "mrvl_requant_0" = dense<{{\[\[}}1073741824, 1], [1073741824, 0]]> : tensor<2x2xi32> : !sched.buffer<ddr, 2x2xi32>
// CHECK:      sched.dma tile 0 %[[RQ]] [0, 0] -> %[[RQO:.*]] [0, 0] box [2, 2]
// CHECK:      sched.qconv2d tile 0 %{{.*}}, %{{.*}} bias %{{.*}} requant %[[RQO]] -> %{{.*}} in_row 0 out_row 0 channels 0 of 2 kernel [1, 1] strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 in_zp -3 out_zp -128 clamp [-128, 127] {{.*}} loc("/conv/Conv")
// CHECK:      sched.qadd tile 0 %{{.*}}, %{{.*}} -> %{{.*}} zp(-128, -3, 0) rq([1073741824, -1], [1073741824, 0], [1073741824, -18]) clamp [-128, 127] {{.*}} loc("/add/Add")
// CHECK:      sched.qpool2d tile 0 max %{{.*}} -> %{{.*}} in_row 0 out_row 0 of [4, 4] kernel [4, 4] strides [1, 1] pads [0, 0, 0, 0] in_zp 0 out_zp 0 rq [1073741824, 1] {{.*}} loc("/pool/MaxPool")
// CHECK:      sched.const "mrvl_requant_1" = dense<{{\[\[}}1073741824, 1], [1073741824, 1], [1073741824, 1]]>
// CHECK:      sched.qfc tile 0 %{{.*}}, %{{.*}} requant %{{.*}} -> %{{.*}} in_zp 0 out_zp 5 clamp [-128, 127] {{.*}} loc("/fc/Gemm")
// CHECK:      sched.dequantize tile 0 %{{.*}} -> %1 perm [0, 1] quant <0.125, 5> {{.*}} loc("y_DequantizeLinear")
