// RUN: mrvl-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Each int8 task verifier names the problem.

sched.program mcpu("cn10ka") tiles(1) {
  %x = sched.io "x" input : !sched.buffer<ddr, 1x4xf32>
  %q = sched.alloc : !sched.buffer<ddr, 1x4xf16>
  %t = sched.quantize tile 0 %x -> %q perm [0, 1] quant <0.5, 0> : !sched.buffer<ddr, 1x4xf32>, !sched.buffer<ddr, 1x4xf16>
}
// CHECK: sched.quantize: the int8 side is i8

// -----

sched.program mcpu("cn10ka") tiles(1) {
  %x = sched.io "x" input : !sched.buffer<ddr, 1x4xi8>
  %q = sched.alloc : !sched.buffer<ddr, 4x1xf32>
  %t = sched.dequantize tile 0 %x -> %q perm [0, 1] quant <0.5, 0> : !sched.buffer<ddr, 1x4xi8>, !sched.buffer<ddr, 4x1xf32>
}
// CHECK: sched.dequantize: destination shape is not the permuted source

// -----

sched.program mcpu("cn10ka") tiles(1) {
  %win = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x4x2xi8>
  %w = sched.alloc tile(0) : !sched.buffer<ocm, 4x1x1x2xi8>
  %rq = sched.alloc tile(0) : !sched.buffer<ocm, 2x2xi32>
  %o = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x4x4xi8>
  %t = sched.qconv2d tile 0 %win, %w requant %rq -> %o in_row 0 out_row 0 channels 0 of 4 kernel [1, 1] strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 in_zp 0 out_zp 0 clamp [-128, 127] : !sched.buffer<ocm, 1x4x4x2xi8>, !sched.buffer<ocm, 4x1x1x2xi8>, !sched.buffer<ocm, 2x2xi32> -> !sched.buffer<ocm, 1x4x4x4xi8>
}
// CHECK: sched.qconv2d: requant holds a pair per output channel

// -----

sched.program mcpu("cn10ka") tiles(1) {
  %win = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x4x2xi8>
  %w = sched.alloc tile(0) : !sched.buffer<ocm, 4x1x1x2xf16>
  %rq = sched.alloc tile(0) : !sched.buffer<ocm, 4x2xi32>
  %o = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x4x4xi8>
  %t = sched.qconv2d tile 0 %win, %w requant %rq -> %o in_row 0 out_row 0 channels 0 of 4 kernel [1, 1] strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 in_zp 0 out_zp 0 clamp [-128, 127] : !sched.buffer<ocm, 1x4x4x2xi8>, !sched.buffer<ocm, 4x1x1x2xf16>, !sched.buffer<ocm, 4x2xi32> -> !sched.buffer<ocm, 1x4x4x4xi8>
}
// CHECK: sched.qconv2d: the weight is i8

// -----

sched.program mcpu("cn10ka") tiles(1) {
  %x = sched.alloc tile(0) : !sched.buffer<ocm, 1x4xi8>
  %w = sched.alloc tile(0) : !sched.buffer<ocm, 4x4xi8>
  %rq = sched.alloc tile(0) : !sched.buffer<ocm, 4x2xi32>
  %o = sched.alloc tile(0) : !sched.buffer<ocm, 1x4xi8>
  %t = sched.qfc tile 0 %x, %w requant %rq -> %o in_zp 0 out_zp 0 clamp [10, -10] : !sched.buffer<ocm, 1x4xi8>, !sched.buffer<ocm, 4x4xi8>, !sched.buffer<ocm, 4x2xi32> -> !sched.buffer<ocm, 1x4xi8>
}
// CHECK: sched.qfc: zero points [0, 0] and clamp [10, -10] must lie in [-128, 127], lo <= hi

// -----

sched.program mcpu("cn10ka") tiles(1) {
  %x = sched.alloc tile(0) : !sched.buffer<ocm, 1x2x3x2xi8>
  %yt = sched.alloc tile(0) : !sched.buffer<ocm, 4x4xi32>
  %xt = sched.alloc tile(0) : !sched.buffer<ocm, 6x3xi32>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x6x2xi8>
  %t = sched.qresize tile 0 %x, %yt, %xt -> %y in_row 0 rq [1073741824, -21] in_zp 0 out_zp 0 clamp [-128, 127] : !sched.buffer<ocm, 1x2x3x2xi8>, !sched.buffer<ocm, 4x4xi32>, !sched.buffer<ocm, 6x3xi32> -> !sched.buffer<ocm, 1x4x6x2xi8>
}
// CHECK: sched.qresize: the row table must be [OH, 3] and the column table [OW, 3]

// -----

sched.program mcpu("cn10ka") tiles(1) {
  %x = sched.alloc tile(0) : !sched.buffer<ocm, 1x2x3x2xi8>
  %yt = sched.alloc tile(0) : !sched.buffer<ocm, 4x3xf32>
  %xt = sched.alloc tile(0) : !sched.buffer<ocm, 6x3xi32>
  %y = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x6x2xi8>
  %t = sched.qresize tile 0 %x, %yt, %xt -> %y in_row 0 rq [1073741824, -21] in_zp 0 out_zp 0 clamp [-128, 127] : !sched.buffer<ocm, 1x2x3x2xi8>, !sched.buffer<ocm, 4x3xf32>, !sched.buffer<ocm, 6x3xi32> -> !sched.buffer<ocm, 1x4x6x2xi8>
}
// CHECK: sched.qresize: the row table is i32
