// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1},sched-fuse-converts,sched-allocate,sched-insert-sync,convert-sched-to-mlip' --print-debuginfo | filecheck %s

// The int8 tasks select the int8 instructions with every field: quant / dequant with their
// permutation, scale and zero point, qconv with its requantization pairs' OCM address and clamp,
// qadd with its rescale pairs, qpool, qfc.

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

// CHECK:      mlip.io "x" input [1, 2, 4, 4] f32 at 0
// CHECK:      mlip.quant tile 0 signal {{[0-9]+}} : src_addr 0, src_dtype f32, src_shape [1, 2, 4, 4], dst_addr {{[0-9]+}}, perm [0, 2, 3, 1], scale 0.5, zp -3 loc("x_QuantizeLinear")
// CHECK:      mlip.qconv tile 0 {{.*}} : in_addr {{[0-9]+}}, in_shape [1, 4, 4, 2], row0 0, out_addr {{[0-9]+}}, out_shape [1, 4, 4, 2], orow0 0, kernel [1, 1], stride [1, 1], pad [0, 0], dilation [1, 1], groups 1, oc0 0, oc_total 2, w_addr {{[0-9]+}}, b_addr {{[0-9]+}}, in_zp -3, out_zp -128, rq_addr {{[0-9]+}}, clamp [-128, 127], lut_addr -1, acc_addr -1, acc_out 0 loc("/conv/Conv")
// CHECK:      mlip.qadd tile 0 {{.*}} count 32, a_zp -128, b_zp -3, out_zp 0, a_rq [1073741824, -1], b_rq [1073741824, 0], out_rq [1073741824, -18], clamp [-128, 127], lut_addr -1 loc("/add/Add")
// CHECK:      mlip.qpool tile 0 {{.*}} mode max, in_hw [4, 4], pad_end [0, 0], count_include_pad 0, in_zp 0, out_zp 0, rq [1073741824, 1] loc("/pool/MaxPool")
// CHECK:      mlip.qfc tile 0 {{.*}} : in_addr {{[0-9]+}}, n 1, k 2, o 3, w_addr {{[0-9]+}}, b_addr -1, out_addr {{[0-9]+}}, in_zp 0, out_zp 5, rq_addr {{[0-9]+}}, clamp [-128, 127], lut_addr -1 loc("/fc/Gemm")
// CHECK:      mlip.dequant tile 0 {{.*}} : src_addr {{[0-9]+}}, src_shape [1, 1, 1, 3], dst_addr 128, dst_dtype f32, perm [0, 1, 2, 3], scale 0.125, zp 5 loc("y_DequantizeLinear")
// CHECK-NEXT: mlip.end tile 0
