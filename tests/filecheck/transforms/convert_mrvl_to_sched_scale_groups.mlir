// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' --print-debuginfo | filecheck %s

// A scale/shift whose one pixel does not fit a tile with every channel's f32 scale and shift
// (23040 channels: 92 KB of f16 data in and out, 184 KB of parameters, a 256 KB tile) is cut
// into channel groups of one pixel each, each loading its slice of the scales and shifts:
// (262144 - 5 * 64) // (2 + 2 + 4 + 4) = 21818 channels, then the other 1222.

builtin.module {
  func.func @bn(%x: tensor<2x1x1x23040xf32, #mrvl.layout<NHWC>>) -> tensor<2x1x1x23040xf32, #mrvl.layout<NHWC>> {
    %0 = mrvl.cast %x : tensor<2x1x1x23040xf32, #mrvl.layout<NHWC>> -> tensor<2x1x1x23040xf16, #mrvl.layout<NHWC>>
    %s = mrvl.constant "s" = dense<2.0> : tensor<23040xf32> -> tensor<23040xf32, #mrvl.layout<O>>
    %b = mrvl.constant "b" = dense<1.0> : tensor<23040xf32> -> tensor<23040xf32, #mrvl.layout<O>>
    %1 = mrvl.scale_shift %0, %s, %b : (tensor<2x1x1x23040xf16, #mrvl.layout<NHWC>>, tensor<23040xf32, #mrvl.layout<O>>, tensor<23040xf32, #mrvl.layout<O>>) -> tensor<2x1x1x23040xf16, #mrvl.layout<NHWC>> loc("/bn/BatchNormalization")
    %2 = mrvl.cast %1 : tensor<2x1x1x23040xf16, #mrvl.layout<NHWC>> -> tensor<2x1x1x23040xf32, #mrvl.layout<NHWC>>
    func.return %2 : tensor<2x1x1x23040xf32, #mrvl.layout<NHWC>>
  }
}

// CHECK:      mlip.scale tile 0 {{.*}}count 21818, channels 21818,
// CHECK:      mlip.scale tile 1 {{.*}}count 1222, channels 1222,
// CHECK:      mlip.scale tile 0 {{.*}}count 21818, channels 21818,
// CHECK:      mlip.scale tile 1 {{.*}}count 1222, channels 1222,
// CHECK-NOT:  mlip.scale
