// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1}' | filecheck %s

// Swin's shifted-window mask at rank 5: scores [2, 3, 2, 5, 5] (batch, windows, heads, T, T)
// plus a constant mask [1, 3, 1, 5, 5]. Merged, the result is [2, 3, 2, 25]: the mask repeats
// over the batch and the heads (stride 0), four dimensions, one binary per piece.

func.func @mask(%x: tensor<2x3x2x5x5xf16, #mrvl.layout<NCDHW>>) -> tensor<2x3x2x5x5xf16, #mrvl.layout<NCDHW>> {
  %m = mrvl.constant "mask_mrvl_const_0" = dense<-1.0e+02> : tensor<1x3x1x5x5xf16> -> tensor<1x3x1x5x5xf16, #mrvl.layout<NCDHW>> loc("/attn/Add_11")
  %0 = mrvl.binary "add" %x, %m : tensor<2x3x2x5x5xf16, #mrvl.layout<NCDHW>>, tensor<1x3x1x5x5xf16, #mrvl.layout<NCDHW>> -> tensor<2x3x2x5x5xf16, #mrvl.layout<NCDHW>> loc("/attn/Add_11")
  %1 = mrvl.layout_convert %0 : tensor<2x3x2x5x5xf16, #mrvl.layout<NCDHW>> -> tensor<2x3x2x5x5xf16, #mrvl.layout<NCDHW>> loc("/out")
  func.return %1 : tensor<2x3x2x5x5xf16, #mrvl.layout<NCDHW>>
}

// CHECK:      %[[M:.*]] = sched.const "mask_mrvl_const_0" {{.*}} : !sched.buffer<ddr, 1x3x1x5x5xf16>
// CHECK:      sched.view %{{.*}} : !sched.buffer<ddr, 2x3x2x5x5xf16> -> !sched.buffer<ddr, 2x3x2x25xf16>
// CHECK:      sched.view %[[M]] : !sched.buffer<ddr, 1x3x1x5x5xf16> -> !sched.buffer<ddr, 1x3x1x25xf16>
// CHECK:      sched.binary tile 0 {{.*}} mode "add" strides [150, 50, 25, 1], [0, 25, 0, 1]
