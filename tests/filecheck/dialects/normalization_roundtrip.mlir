// RUN: mrvl-opt %s --print-debuginfo --split-input-file | mrvl-opt --print-debuginfo --split-input-file | filecheck %s

// The normalization layers at every level print and parse back unchanged: mrvl.softmax over
// one axis and over a run of trailing axes, sched.softmax on an [outer, length, inner] block,
// and mlip.softmax with its fields.

func.func @softmax(%x: tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>, %h: tensor<2x4x4x8xf16, #mrvl.layout<NHWC>>) -> tensor<1x3x5x7xf16, #mrvl.layout<NCHW>> {
  %a = mrvl.softmax %x axes [1] : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>> loc("/sm/Softmax")
  %b = mrvl.softmax %a axes [2, 3] : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>> loc("/sm11/Softmax")
  %c = mrvl.softmax %h axes [3] : tensor<2x4x4x8xf16, #mrvl.layout<NHWC>>
  func.return %b : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>>
}
// CHECK:      %a = mrvl.softmax %x axes [1] : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>> loc("/sm/Softmax")
// CHECK-NEXT: %b = mrvl.softmax %a axes [2, 3] : tensor<1x3x5x7xf16, #mrvl.layout<NCHW>> loc("/sm11/Softmax")
// CHECK-NEXT: %c = mrvl.softmax %h axes [3] : tensor<2x4x4x8xf16, #mrvl.layout<NHWC>>

// -----

builtin.module {
  %x = sched.alloc tile(1) : !sched.buffer<ocm, 2x8x3xf16>
  %y = sched.alloc tile(1) : !sched.buffer<ocm, 2x8x3xf16>
  %t = sched.dma tile 1 %x [0, 0, 0] -> %y [0, 0, 0] box [2, 8, 3] : !sched.buffer<ocm, 2x8x3xf16>, !sched.buffer<ocm, 2x8x3xf16>
  %s = sched.softmax tile 1 %x -> %y after(%t) : !sched.buffer<ocm, 2x8x3xf16> -> !sched.buffer<ocm, 2x8x3xf16> loc("/sm/Softmax")
}
// CHECK: %s = sched.softmax tile 1 %x -> %y after(%t) : !sched.buffer<ocm, 2x8x3xf16> -> !sched.buffer<ocm, 2x8x3xf16> loc("/sm/Softmax")

// -----

builtin.module attributes {mlip.program = #mlip.program<target = "cn10ka", tiles = 1, ddr_size = 4096, const_base = 4096>} {
  mlip.dma tile 0 signal 1 : src_space ddr, src_addr 0, src_strides [0, 0, 0, 2], dst_space ocm, dst_addr 0, dst_strides [0, 0, 0, 2], box [1, 1, 1, 48], elem_bytes 2
  mlip.softmax tile 0 signal 2 wait [1] : in_addr 0, out_addr 128, outer 6, length 8, inner 1 loc("/sm/Softmax")
  mlip.end tile 0
}
// CHECK: mlip.softmax tile 0 signal 2 wait [1] : in_addr 0, out_addr 128, outer 6, length 8, inner 1 loc("/sm/Softmax")

// -----

func.func @layernorm(%x: tensor<1x197x192xf16, #mrvl.layout<NCW>>, %g: tensor<192xf32, #mrvl.layout<O>>, %b: tensor<192xf32, #mrvl.layout<O>>) -> tensor<1x197x192xf16, #mrvl.layout<NCW>> {
  %y = mrvl.layernorm %x, %g, %b axes [2] epsilon 1.000000e-05 : (tensor<1x197x192xf16, #mrvl.layout<NCW>>, tensor<192xf32, #mrvl.layout<O>>, tensor<192xf32, #mrvl.layout<O>>) -> tensor<1x197x192xf16, #mrvl.layout<NCW>> loc("/ln/LayerNormalization")
  func.return %y : tensor<1x197x192xf16, #mrvl.layout<NCW>>
}
// CHECK: %y = mrvl.layernorm %x, %g, %b axes [2] epsilon 1.000000e-05 : (tensor<1x197x192xf16, #mrvl.layout<NCW>>, tensor<192xf32, #mrvl.layout<O>>, tensor<192xf32, #mrvl.layout<O>>) -> tensor<1x197x192xf16, #mrvl.layout<NCW>> loc("/ln/LayerNormalization")

// -----

builtin.module {
  %x = sched.alloc tile(0) : !sched.buffer<ocm, 25x192xf16>
  %g = sched.alloc tile(0) : !sched.buffer<ocm, 192xf32>
  %b = sched.alloc tile(0) : !sched.buffer<ocm, 192xf32>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 25x192xf16>
  %t = sched.layernorm tile 0 %x, %g, %b -> %y epsilon 1.000000e-05 : !sched.buffer<ocm, 25x192xf16>, !sched.buffer<ocm, 192xf32>, !sched.buffer<ocm, 192xf32> -> !sched.buffer<ocm, 25x192xf16> loc("/ln/LayerNormalization")
}
// CHECK: %t = sched.layernorm tile 0 %x, %g, %b -> %y epsilon 1.000000e-05 : !sched.buffer<ocm, 25x192xf16>, !sched.buffer<ocm, 192xf32>, !sched.buffer<ocm, 192xf32> -> !sched.buffer<ocm, 25x192xf16> loc("/ln/LayerNormalization")

// -----

builtin.module attributes {mlip.program = #mlip.program<target = "cn10ka", tiles = 1, ddr_size = 4096, const_base = 4096>} {
  mlip.layernorm tile 0 : in_addr 0, out_addr 1024, rows 2, length 192, g_addr 2048, b_addr 2816, eps 1.0e-05 loc("/ln/LayerNormalization")
  mlip.end tile 0
}
// CHECK: mlip.layernorm tile 0 : in_addr 0, out_addr 1024, rows 2, length 192, g_addr 2048, b_addr 2816, eps 9.999999747378752e-06 loc("/ln/LayerNormalization")

// -----

// A long row's layernorm: sched.lnstats (f32 mean and rstd per row) and sched.lnapply (a run
// of the rows normalized with them), and their mlip instructions.
builtin.module {
  %x = sched.alloc tile(0) : !sched.buffer<ocm, 2x40960xf16>
  %s = sched.alloc tile(0) : !sched.buffer<ocm, 2x2xf32>
  %r = sched.alloc tile(0) : !sched.buffer<ocm, 2x1024xf16>
  %g = sched.alloc tile(0) : !sched.buffer<ocm, 1024xf32>
  %b = sched.alloc tile(0) : !sched.buffer<ocm, 1024xf32>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 2x1024xf16>
  %t = sched.lnstats tile 0 %x -> %s epsilon 1.000000e-05 : !sched.buffer<ocm, 2x40960xf16> -> !sched.buffer<ocm, 2x2xf32> loc("/ln")
  %u = sched.lnapply tile 0 %r, %s, %g, %b -> %y after(%t) : !sched.buffer<ocm, 2x1024xf16>, !sched.buffer<ocm, 2x2xf32>, !sched.buffer<ocm, 1024xf32>, !sched.buffer<ocm, 1024xf32> -> !sched.buffer<ocm, 2x1024xf16> loc("/ln")
}
// CHECK:      %t = sched.lnstats tile 0 %x -> %s epsilon 1.000000e-05 : !sched.buffer<ocm, 2x40960xf16> -> !sched.buffer<ocm, 2x2xf32> loc("/ln")
// CHECK-NEXT: %u = sched.lnapply tile 0 %r, %s, %g, %b -> %y after(%t) : !sched.buffer<ocm, 2x1024xf16>, !sched.buffer<ocm, 2x2xf32>, !sched.buffer<ocm, 1024xf32>, !sched.buffer<ocm, 1024xf32> -> !sched.buffer<ocm, 2x1024xf16> loc("/ln")

// -----

builtin.module attributes {mlip.program = #mlip.program<target = "cn10ka", tiles = 1, ddr_size = 4096, const_base = 4096>} {
  mlip.lnstats tile 0 signal 1 : in_addr 0, out_addr 1024, rows 2, length 192, eps 1.0e-05 loc("/ln")
  mlip.lnapply tile 0 wait [1] : in_addr 0, out_addr 2048, stats_addr 1024, rows 2, count 64, g_addr 3072, b_addr 3328 loc("/ln")
  mlip.end tile 0
}
// CHECK:      mlip.lnstats tile 0 signal 1 : in_addr 0, out_addr 1024, rows 2, length 192, eps 9.999999747378752e-06 loc("/ln")
// CHECK-NEXT: mlip.lnapply tile 0 wait [1] : in_addr 0, out_addr 2048, stats_addr 1024, rows 2, count 64, g_addr 3072, b_addr 3328 loc("/ln")
