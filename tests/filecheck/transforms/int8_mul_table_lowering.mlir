// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s --check-prefix=SCHED
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-fuse-converts,sched-allocate,sched-insert-sync,convert-sched-to-mlip' --print-debuginfo | filecheck %s --check-prefix=MLIP

// An int8 table activation: the 256 entries a DDR constant, loaded once into each tile that
// runs a chunk, and each chunk one `requant` with zero points 0, the identity pair (2^30, 1),
// the full clamp and the table at lut_addr: y = T[x + 128]. Then an int8 squeeze-excitation
// product: per image, chunks of whole pixels with that image's C gate values, one `qmul`
// each with channels = C and the pair of s_t * s_g / s_y = 2^-8 * 2^-8 / 0.25 = 2^-14.

func.func @table_and_gate(%x: tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>, %g: tensor<1x1x1x4xf32, #mrvl.layout<NHWC>>) -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>> {
  %a = mrvl.quantize %x quant <0.125, 0> : tensor<1x2x2x4xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>
  %t = mrvl.int8_table "sigmoid" %a from [#mrvl.quant<0.125, 0>] to <0.00390625, -128> table <i8, "\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\80\81\81\81\81\81\81\81\81\82\82\82\82\82\83\83\84\84\85\85\86\87\88\88\8A\8B\8C\8E\8F\91\93\96\98\9B\9F\A2\A6\AA\AF\B4\B9\BF\C5\CB\D2\D9\E1\E8\F0\F8\00\08\10\18\1F'.5;AGLQVZ^aehjmoqrtuvxxyz{{||}}~~~~~\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F\7F"> : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> loc("/act/Sigmoid")
  %gq = mrvl.quantize %g quant <0.00390625, -128> : tensor<1x1x1x4xf32, #mrvl.layout<NHWC>> -> tensor<1x1x1x4xi8, #mrvl.layout<NHWC>>
  %m = mrvl.mul %t, %gq in_quant [#mrvl.quant<0.00390625, -128>, #mrvl.quant<0.00390625, -128>] out_quant <0.25, -1> : (tensor<1x2x2x4xi8, #mrvl.layout<NHWC>>, tensor<1x1x1x4xi8, #mrvl.layout<NHWC>>) -> tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> loc("/se/Mul")
  %y = mrvl.dequantize %m quant <0.25, -1> : tensor<1x2x2x4xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
  func.return %y : tensor<1x2x2x4xf32, #mrvl.layout<NHWC>>
}

// SCHED:      %[[T:.*]] = sched.const "mrvl_int8_table_0" = dense<"0x80808080{{.*}}7F7F7F"> : tensor<256xi8> : !sched.buffer<ddr, 256xi8> loc("/act/Sigmoid")
// SCHED:      sched.dma tile 0 %[[T]] [0] -> %[[T0:.*]] [0] box [256]
// SCHED:      sched.qtable tile 0 %{{.*}} table %[[T0]] -> %{{.*}} after(%{{.*}}, %{{.*}}) : !sched.buffer<ocm, 8xi8>, !sched.buffer<ocm, 256xi8> -> !sched.buffer<ocm, 8xi8> loc("/act/Sigmoid")
// SCHED:      sched.dma tile 1 %[[T]] [0] -> %[[T1:.*]] [0] box [256]
// SCHED:      sched.qtable tile 1 %{{.*}} table %[[T1]] -> %{{.*}} after(%{{.*}}, %{{.*}}) : !sched.buffer<ocm, 8xi8>, !sched.buffer<ocm, 256xi8> -> !sched.buffer<ocm, 8xi8> loc("/act/Sigmoid")
// SCHED:      sched.qmul tile 0 %{{.*}}, %{{.*}} -> %{{.*}} channels 4 rhs_zp -128 rq [1073741824, -13] in_zp -128 out_zp -1 clamp [-128, 127] after(%{{.*}}, %{{.*}}) : !sched.buffer<ocm, 8xi8>, !sched.buffer<ocm, 4xi8> -> !sched.buffer<ocm, 8xi8> loc("/se/Mul")
// SCHED:      sched.qmul tile 1 %{{.*}}, %{{.*}} -> %{{.*}} channels 4 rhs_zp -128 rq [1073741824, -13] in_zp -128 out_zp -1 clamp [-128, 127] after(%{{.*}}, %{{.*}}) : !sched.buffer<ocm, 8xi8>, !sched.buffer<ocm, 4xi8> -> !sched.buffer<ocm, 8xi8> loc("/se/Mul")

// MLIP:       mlip.requant tile 0 {{.*}}count 8, in_zp 0, out_zp 0, rq [1073741824, 1], clamp [-128, 127], lut_addr {{[0-9]+}} loc("/act/Sigmoid")
// MLIP:       mlip.requant tile 1 {{.*}}count 8, in_zp 0, out_zp 0, rq [1073741824, 1], clamp [-128, 127], lut_addr {{[0-9]+}} loc("/act/Sigmoid")
// MLIP:       mlip.qmul tile 0 {{.*}}count 8, channels 4, a_zp -128, b_zp -128, out_zp -1, rq [1073741824, -13], clamp [-128, 127], lut_addr -1 loc("/se/Mul")
// MLIP:       mlip.qmul tile 1 {{.*}}count 8, channels 4, a_zp -128, b_zp -128, out_zp -1, rq [1073741824, -13], clamp [-128, 127], lut_addr -1 loc("/se/Mul")
