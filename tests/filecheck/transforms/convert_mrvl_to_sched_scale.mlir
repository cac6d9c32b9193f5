// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' --print-debuginfo | filecheck %s

// A standalone per-channel scale/shift runs in chunks of whole pixels (a multiple of the 4
// channels), one per tile, each loading the scales and shifts; it selects `scale`.

builtin.module {
  func.func @bn(%x: tensor<1x3x3x4xf32, #mrvl.layout<NHWC>>) -> tensor<1x3x3x4xf32, #mrvl.layout<NHWC>> {
    %0 = mrvl.cast %x : tensor<1x3x3x4xf32, #mrvl.layout<NHWC>> -> tensor<1x3x3x4xf16, #mrvl.layout<NHWC>>
    %s = mrvl.constant "s" = dense<2.0> : tensor<4xf32> -> tensor<4xf32, #mrvl.layout<O>>
    %b = mrvl.constant "b" = dense<1.0> : tensor<4xf32> -> tensor<4xf32, #mrvl.layout<O>>
    %1 = mrvl.scale_shift %0, %s, %b act relu : (tensor<1x3x3x4xf16, #mrvl.layout<NHWC>>, tensor<4xf32, #mrvl.layout<O>>, tensor<4xf32, #mrvl.layout<O>>) -> tensor<1x3x3x4xf16, #mrvl.layout<NHWC>> loc("/bn/BatchNormalization")
    %2 = mrvl.cast %1 : tensor<1x3x3x4xf16, #mrvl.layout<NHWC>> -> tensor<1x3x3x4xf32, #mrvl.layout<NHWC>>
    func.return %2 : tensor<1x3x3x4xf32, #mrvl.layout<NHWC>>
  }
}

// 36 elements over 2 tiles: chunks of 16 (4 pixels), 16 and 4 elements.
// CHECK:      mlip.scale tile 0 {{.*}}: in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, count 16, channels 4, {{.*}} act relu, act_a 0.0, act_b 0.0, act_addr -1 loc("/bn/BatchNormalization")
// CHECK:      mlip.scale tile 1 {{.*}}: in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, count 16, channels 4,
// CHECK:      mlip.scale tile 0 {{.*}}: in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, count 4, channels 4,
