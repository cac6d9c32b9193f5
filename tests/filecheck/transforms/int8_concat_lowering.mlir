// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s --check-prefix=SCHED
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-fuse-converts,sched-allocate,sched-insert-sync,convert-sched-to-mlip' --print-debuginfo | filecheck %s --check-prefix=MLIP

// An int8 concat: the input at the result's scale is copied by DMA as it is; the one at its
// own scale (0.25 -> 0.5: the pair (2^30, 0), zero points -2 -> 1) is requantized first, in
// chunks over the tiles, each a `sched.requant` and then one `requant` instruction.

func.func @concat(%x: tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>, %z: tensor<1x2x2x3xf32, #mrvl.layout<NHWC>>) -> tensor<1x2x2x5xf32, #mrvl.layout<NHWC>> {
  %a = mrvl.quantize %x quant <0.5, 1> : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>
  %b = mrvl.quantize %z quant <0.25, -2> : tensor<1x2x2x3xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x3xi8, #mrvl.layout<NHWC>>
  %r = mrvl.requantize %b from [#mrvl.quant<0.25, -2>] to <0.5, 1> : tensor<1x2x2x3xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x3xi8, #mrvl.layout<NHWC>> loc("/cat/Concat")
  %c = mrvl.concat %a, %r : tensor<1x2x2x2xi8, #mrvl.layout<NHWC>>, tensor<1x2x2x3xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x5xi8, #mrvl.layout<NHWC>> loc("/cat/Concat")
  %y = mrvl.dequantize %c quant <0.5, 1> : tensor<1x2x2x5xi8, #mrvl.layout<NHWC>> -> tensor<1x2x2x5xf32, #mrvl.layout<NHWC>>
  func.return %y : tensor<1x2x2x5xf32, #mrvl.layout<NHWC>>
}

// SCHED:      sched.requant tile 0 %{{.*}} -> %{{.*}} rq [1073741824, 0] in_zp -2 out_zp 1 clamp [-128, 127] after(%{{.*}}) : !sched.buffer<ocm, 6xi8> -> !sched.buffer<ocm, 6xi8> loc("/cat/Concat")
// SCHED:      sched.requant tile 1 %{{.*}} -> %{{.*}} rq [1073741824, 0] in_zp -2 out_zp 1 clamp [-128, 127] after(%{{.*}}) : !sched.buffer<ocm, 6xi8> -> !sched.buffer<ocm, 6xi8> loc("/cat/Concat")
// SCHED:      sched.dma tile 0 %{{.*}} [0, 0, 0, 0] -> %[[C:.*]] [0, 0, 0, 0] box [1, 2, 2, 2] after(%{{.*}}) : !sched.buffer<ddr, 1x2x2x2xi8>, !sched.buffer<ddr, 1x2x2x5xi8>
// SCHED:      sched.dma tile 1 %{{.*}} [0, 0, 0, 0] -> %[[C]] [0, 0, 0, 2] box [1, 2, 2, 3] after(%{{.*}}, %{{.*}}) : !sched.buffer<ddr, 1x2x2x3xi8>, !sched.buffer<ddr, 1x2x2x5xi8>

// MLIP:       mlip.requant tile 0 {{.*}}count 6, in_zp -2, out_zp 1, rq [1073741824, 0], clamp [-128, 127], lut_addr -1 loc("/cat/Concat")
// MLIP:       mlip.requant tile 1 {{.*}}count 6, in_zp -2, out_zp 1, rq [1073741824, 0], clamp [-128, 127], lut_addr -1 loc("/cat/Concat")
