// RUN: mrvl-opt %s -p 'mrvl-fold-qdq' | filecheck %s --check-prefix=FOLD
// RUN: mrvl-opt %s -p 'mrvl-fold-qdq,convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s --check-prefix=SCHED
// RUN: mrvl-opt %s -p 'mrvl-fold-qdq,convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' | mrvl-opt | filecheck %s --check-prefix=MLIP

// A QDQ model's bilinear Resize (half_pixel, 2x3 -> 4x6) between a dequantize and a quantize
// of one scale and zero point: mrvl-fold-qdq makes it the resize on i8 with in_quant and
// out_quant, keeping its f32 tables. The lowering cuts it into bands of output rows as the
// fp16 resize, with qresize's int32 tables made from the f32 ones (i0, i1, w1 in 2^-11
// units: 0.25 -> 512, 0.75 -> 1536) and the pair of s_in * 2^-22 / s_out = 2^-22
// (multiplier 2^30, shift -21); each band is one mlip.qresize.

builtin.module {
  func.func @region(%x: tensor<1x2x3x2xf32, #mrvl.layout<NHWC>>) -> tensor<1x4x6x2xf32, #mrvl.layout<NHWC>> {
    %yt = mrvl.constant "rows" = dense<[0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.75, 0.25, 0.0, 1.0, 0.25, 0.75, 1.0, 1.0, 1.0, 0.0]> : tensor<16xf32> -> tensor<16xf32, #mrvl.layout<O>>
    %xt = mrvl.constant "cols" = dense<[0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.75, 0.25, 0.0, 1.0, 0.25, 0.75, 1.0, 2.0, 0.75, 0.25, 1.0, 2.0, 0.25, 0.75, 2.0, 2.0, 1.0, 0.0]> : tensor<24xf32> -> tensor<24xf32, #mrvl.layout<O>>
    %q = mrvl.quantize %x quant <0.5, 3> : tensor<1x2x3x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x3x2xi8, #mrvl.layout<NHWC>>
    %d = mrvl.dequantize %q quant <0.5, 3> : tensor<1x2x3x2xi8, #mrvl.layout<NHWC>> -> tensor<1x2x3x2xf32, #mrvl.layout<NHWC>>
    %r = mrvl.resize %d, %yt, %xt mode half_pixel : (tensor<1x2x3x2xf32, #mrvl.layout<NHWC>>, tensor<16xf32, #mrvl.layout<O>>, tensor<24xf32, #mrvl.layout<O>>) -> tensor<1x4x6x2xf32, #mrvl.layout<NHWC>> loc("/up/Resize")
    %rq = mrvl.quantize %r quant <0.5, 3> : tensor<1x4x6x2xf32, #mrvl.layout<NHWC>> -> tensor<1x4x6x2xi8, #mrvl.layout<NHWC>>
    %y = mrvl.dequantize %rq quant <0.5, 3> : tensor<1x4x6x2xi8, #mrvl.layout<NHWC>> -> tensor<1x4x6x2xf32, #mrvl.layout<NHWC>>
    func.return %y : tensor<1x4x6x2xf32, #mrvl.layout<NHWC>>
  }
}

// FOLD:      %[[Q:.*]] = mrvl.quantize %x quant <0.5, 3>
// FOLD-NEXT: %[[YT:.*]] = mrvl.constant "rows" = dense<[0, 0, 0, 0, 1, 512, 0, 1, 1536, 1, 1, 0]> : tensor<12xi32> -> tensor<12xi32, #mrvl.layout<O>>
// FOLD-NEXT: %[[XT:.*]] = mrvl.constant "cols" = dense<[0, 0, 0, 0, 1, 512, 0, 1, 1536, 1, 2, 512, 1, 2, 1536, 2, 2, 0]> : tensor<18xi32> -> tensor<18xi32, #mrvl.layout<O>>
// FOLD-NEXT: %[[R:.*]] = mrvl.resize %[[Q]], %[[YT]], %[[XT]] mode half_pixel in_quant [#mrvl.quant<0.5, 3>] out_quant <0.5, 3> : (tensor<1x2x3x2xi8, #mrvl.layout<NHWC>>, tensor<12xi32, #mrvl.layout<O>>, tensor<18xi32, #mrvl.layout<O>>) -> tensor<1x4x6x2xi8, #mrvl.layout<NHWC>>
// FOLD-NEXT: mrvl.dequantize %[[R]] quant <0.5, 3>

// SCHED:      %[[YT:.*]] = sched.const "rows" = dense<[0, 0, 0, 0, 1, 512, 0, 1, 1536, 1, 1, 0]> : tensor<12xi32> : !sched.buffer<ddr, 12xi32>
// SCHED:      %[[XT:.*]] = sched.const "cols" = {{.*}} : !sched.buffer<ddr, 18xi32>
// SCHED:      sched.dma tile 0 %[[YT]] [0] strides [3, 1] -> %{{.*}} [0, 0] box [2, 3] : !sched.buffer<ddr, 12xi32>, !sched.buffer<ocm, 2x3xi32>
// SCHED:      sched.dma tile 0 %[[XT]] [0] strides [3, 1] -> %{{.*}} [0, 0] box [6, 3] : !sched.buffer<ddr, 18xi32>, !sched.buffer<ocm, 6x3xi32>
// SCHED:      sched.qresize tile 0 %{{.*}}, %{{.*}}, %{{.*}} -> %[[T0:.*]] in_row 0 rq [1073741824, -21] in_zp 3 out_zp 3 clamp [-128, 127] after(%{{.*}}, %{{.*}}, %{{.*}}) : !sched.buffer<ocm, 1x2x3x2xi8>, !sched.buffer<ocm, 2x3xi32>, !sched.buffer<ocm, 6x3xi32> -> !sched.buffer<ocm, 1x2x6x2xi8> loc("/up/Resize")
// SCHED-NEXT: sched.dma tile 0 %[[T0]] [0, 0, 0, 0] -> %{{.*}} [0, 0, 0, 0] box [1, 2, 6, 2]
// SCHED:      sched.dma tile 1 %[[YT]] [6] strides [3, 1] -> %{{.*}} [0, 0] box [2, 3]
// SCHED:      sched.qresize tile 1 {{.*}} in_row 0 rq [1073741824, -21] in_zp 3 out_zp 3
// SCHED-NEXT: sched.dma tile 1 %{{.*}} [0, 0, 0, 0] -> %{{.*}} [0, 2, 0, 0] box [1, 2, 6, 2]

// MLIP:       mlip.qresize tile 0 {{.*}}: in_addr {{[0-9]+}}, in_shape [1, 2, 3, 2], row0 0, out_addr {{[0-9]+}}, out_shape [1, 2, 6, 2], ytab_addr {{[0-9]+}}, xtab_addr {{[0-9]+}}, in_zp 3, out_zp 3, rq [1073741824, -21], clamp [-128, 127], lut_addr -1
// MLIP:       mlip.qresize tile 1 {{.*}}: in_addr {{[0-9]+}}, in_shape [1, 2, 3, 2], row0 0
