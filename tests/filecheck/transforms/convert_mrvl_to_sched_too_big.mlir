// RUN: not mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cnf10kb num-tiles=4}' 2>&1 | filecheck %s

// A layer whose smallest piece cannot fit a tile's OCM is a compile error naming the layer: a
// grouped conv whose weights of one output channel (3x3 over 8192 channels of its group) are
// larger than a cnf10kb tile (only a conv without groups is cut into input-channel blocks).

builtin.module {
  func.func @big(%x: tensor<1x3x3x16384xf16, #mrvl.layout<NHWC>>) -> tensor<1x1x1x2xf16, #mrvl.layout<NHWC>> {
    %w = mrvl.constant "big_mrvl_const_0" = dense<0.5> : tensor<2x3x3x8192xf16> -> tensor<2x3x3x8192xf16, #mrvl.layout<OHWI>> loc("/big/Conv")
    %y = mrvl.conv2d %x, %w groups [2] : (tensor<1x3x3x16384xf16, #mrvl.layout<NHWC>>, tensor<2x3x3x8192xf16, #mrvl.layout<OHWI>>) -> tensor<1x1x1x2xf16, #mrvl.layout<NHWC>> loc("/big/Conv")
    func.return %y : tensor<1x1x1x2xf16, #mrvl.layout<NHWC>>
  }
}

// CHECK: mrvl-opt: error: layer /big/Conv: does not fit on chip: one output element needs {{[0-9]+}} bytes of OCM, a tile has 131072
