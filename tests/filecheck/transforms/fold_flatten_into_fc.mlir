// RUN: mrvl-opt %s -p mrvl-fold-flatten-into-fc --print-debuginfo | filecheck %s

// NHWC -> NCHW -> flatten -> fc becomes flatten-of-NHWC -> fc with its weight columns
// reordered from (c, h, w) to (h, w, c): weight[o, c*4 + h*2 + w] moves to [o, h*4 + w*2 + c].

func.func @region(%x: tensor<1x2x2x2xf32, #mrvl.layout<NHWC>>) -> tensor<1x1xf32, #mrvl.layout<NC>> {
  %0 = mrvl.layout_convert %x : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xf32, #mrvl.layout<NCHW>> loc("/flatten/Flatten")
  %1 = mrvl.reshape %0 : tensor<1x2x2x2xf32, #mrvl.layout<NCHW>> -> tensor<1x8xf32, #mrvl.layout<NC>> loc("/flatten/Flatten")
  %w = mrvl.constant "w" = dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]]> : tensor<1x8xf32> -> tensor<1x8xf32, #mrvl.layout<OI>> loc("/fc/Gemm")
  %2 = mrvl.fc %1, %w : (tensor<1x8xf32, #mrvl.layout<NC>>, tensor<1x8xf32, #mrvl.layout<OI>>) -> tensor<1x1xf32, #mrvl.layout<NC>> loc("/fc/Gemm")
  func.return %2 : tensor<1x1xf32, #mrvl.layout<NC>>
}

// CHECK-NOT:  mrvl.layout_convert
// CHECK:      %[[FLAT:.*]] = mrvl.reshape %x : tensor<1x2x2x2xf32, #mrvl.layout<NHWC>> -> tensor<1x8xf32, #mrvl.layout<NC>> loc("/flatten/Flatten")
// CHECK-NEXT: %w = mrvl.constant "w" = dense<{{\[}}[0.000000e+00, 4.000000e+00, 1.000000e+00, 5.000000e+00, 2.000000e+00, 6.000000e+00, 3.000000e+00, 7.000000e+00]]> : tensor<1x8xf32> -> tensor<1x8xf32, #mrvl.layout<OI>> loc("/fc/Gemm")
// CHECK-NEXT: mrvl.fc %[[FLAT]], %w
// CHECK-NOT:  mrvl.layout_convert
