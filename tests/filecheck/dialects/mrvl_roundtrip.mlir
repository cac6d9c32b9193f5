// RUN: mrvl-opt %s --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s --print-op-generic | mrvl-opt | filecheck %s --check-prefix=CUSTOM

// Every mrvl op prints in its custom form and parses back to the same op, ONNX location included.

func.func @region(%x: tensor<1x1x8x8xf32, #mrvl.layout<NCHW>>) -> tensor<1x10xf32, #mrvl.layout<NC>> {
  %0 = mrvl.cast %x : tensor<1x1x8x8xf32, #mrvl.layout<NCHW>> -> tensor<1x1x8x8xf16, #mrvl.layout<NCHW>> loc("/conv1/Conv")
  %1 = mrvl.layout_convert %0 : tensor<1x1x8x8xf16, #mrvl.layout<NCHW>> -> tensor<1x8x8x1xf16, #mrvl.layout<NHWC>> loc("/conv1/Conv")
  %w = mrvl.constant "region_mrvl_const_0" = dense<1.0> : tensor<4x3x3x1xf16> -> tensor<4x3x3x1xf16, #mrvl.layout<OHWI>> loc("/conv1/Conv")
  %b = mrvl.constant "region_mrvl_const_1" = dense<[0.5, -0.5, 1.0, 2.0]> : tensor<4xf32> -> tensor<4xf32, #mrvl.layout<O>>
  %2 = mrvl.conv2d %1, %w bias %b strides [2, 2] pads [1, 0, 1, 2] dilations [1, 1] act clip min 0.0 max 6.0 : (tensor<1x8x8x1xf16, #mrvl.layout<NHWC>>, tensor<4x3x3x1xf16, #mrvl.layout<OHWI>>, tensor<4xf32, #mrvl.layout<O>>) -> tensor<1x4x4x4xf16, #mrvl.layout<NHWC>> loc("/conv1/Conv")
  %3 = mrvl.maxpool2d %2 kernel [2, 2] strides [2, 2] : tensor<1x4x4x4xf16, #mrvl.layout<NHWC>> -> tensor<1x2x2x4xf16, #mrvl.layout<NHWC>> loc("/pool1/MaxPool")
  %4 = mrvl.avgpool2d %2 kernel [3, 3] pads [1, 1, 1, 1] count_include_pad : tensor<1x4x4x4xf16, #mrvl.layout<NHWC>> -> tensor<1x4x4x4xf16, #mrvl.layout<NHWC>> loc("/pool2/AveragePool")
  %5 = mrvl.layout_convert %3 : tensor<1x2x2x4xf16, #mrvl.layout<NHWC>> -> tensor<1x4x2x2xf16, #mrvl.layout<NCHW>> loc("/flatten/Flatten")
  %6 = mrvl.reshape %5 : tensor<1x4x2x2xf16, #mrvl.layout<NCHW>> -> tensor<1x16xf16, #mrvl.layout<NC>> loc("/flatten/Flatten")
  %fw = mrvl.constant "region_mrvl_const_2" = dense<0.25> : tensor<10x16xf16> -> tensor<10x16xf16, #mrvl.layout<OI>>
  %7 = mrvl.fc %6, %fw act leaky_relu alpha 0.1 : (tensor<1x16xf16, #mrvl.layout<NC>>, tensor<10x16xf16, #mrvl.layout<OI>>) -> tensor<1x10xf16, #mrvl.layout<NC>> loc("/fc1/Gemm")
  %8 = mrvl.cast %7 : tensor<1x10xf16, #mrvl.layout<NC>> -> tensor<1x10xf32, #mrvl.layout<NC>> loc("/fc1/Gemm")
  func.return %8 : tensor<1x10xf32, #mrvl.layout<NC>>
}

// CHECK:      %0 = mrvl.cast %x : tensor<1x1x8x8xf32, #mrvl.layout<NCHW>> -> tensor<1x1x8x8xf16, #mrvl.layout<NCHW>> loc("/conv1/Conv")
// CHECK-NEXT: %1 = mrvl.layout_convert %0 : tensor<1x1x8x8xf16, #mrvl.layout<NCHW>> -> tensor<1x8x8x1xf16, #mrvl.layout<NHWC>> loc("/conv1/Conv")
// CHECK-NEXT: %w = mrvl.constant "region_mrvl_const_0" = dense<1.000000e+00> : tensor<4x3x3x1xf16> -> tensor<4x3x3x1xf16, #mrvl.layout<OHWI>> loc("/conv1/Conv")
// CHECK-NEXT: %b = mrvl.constant "region_mrvl_const_1" = dense<[5.000000e-01, -5.000000e-01, 1.000000e+00, 2.000000e+00]> : tensor<4xf32> -> tensor<4xf32, #mrvl.layout<O>>
// CHECK-NEXT: %2 = mrvl.conv2d %1, %w bias %b strides [2, 2] pads [1, 0, 1, 2] act clip min 0.000000e+00 max 6.000000e+00 : {{.*}} loc("/conv1/Conv")
// CHECK-NEXT: %3 = mrvl.maxpool2d %2 kernel [2, 2] strides [2, 2] : {{.*}} loc("/pool1/MaxPool")
// CHECK-NEXT: %4 = mrvl.avgpool2d %2 kernel [3, 3] pads [1, 1, 1, 1] count_include_pad : {{.*}} loc("/pool2/AveragePool")
// CHECK-NEXT: %5 = mrvl.layout_convert %3 : tensor<1x2x2x4xf16, #mrvl.layout<NHWC>> -> tensor<1x4x2x2xf16, #mrvl.layout<NCHW>> loc("/flatten/Flatten")
// CHECK-NEXT: %6 = mrvl.reshape %5 : {{.*}} -> tensor<1x16xf16, #mrvl.layout<NC>> loc("/flatten/Flatten")
// CHECK-NEXT: %fw = mrvl.constant "region_mrvl_const_2"
// CHECK-NEXT: %7 = mrvl.fc %6, %fw act leaky_relu alpha 1.000000e-01 : {{.*}} loc("/fc1/Gemm")
// CHECK-NEXT: %8 = mrvl.cast %7

// CUSTOM: mrvl.conv2d %1, %w bias %b strides [2, 2] pads [1, 0, 1, 2] act clip
// CUSTOM: mrvl.fc %6, %fw act leaky_relu
